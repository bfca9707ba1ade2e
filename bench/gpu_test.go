package bench

import (
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/infer-exporter/infer_exporter/bench/report"
	"github.com/infer-exporter/infer_exporter/collector"
)

// fakeGPUs serves NVML-collector-shaped snapshots from readings a test
// sets, for GPUs "0" and "1".
type fakeGPUs struct {
	mu   sync.Mutex
	gpus []collector.GPUSnapshot
}

func newFakeGPUs() *fakeGPUs {
	f := &fakeGPUs{}
	for i := range 2 {
		f.gpus = append(f.gpus, collector.GPUSnapshot{
			Index: i, UUID: "GPU-" + strconv.Itoa(i), Name: "NVIDIA H200", PCIBusID: "0000:0" + strconv.Itoa(i) + ":00.0",
			DriverVersion: "570.1", CUDAVersion: "12.8", Polled: true, Up: true,
			MemoryTotalBytes: collector.Reading{Value: 140e9, OK: true},
		})
	}
	return f
}

// set gives a GPU its readings; a negative power leaves power absent.
func (f *fakeGPUs) set(gpu string, used, temp float64, power float64) {
	f.mu.Lock()
	defer f.mu.Unlock()
	i, _ := strconv.Atoi(gpu)
	g := &f.gpus[i]
	g.MemoryUsedBytes = collector.Reading{Value: used, OK: true}
	g.TemperatureCelsius = collector.Reading{Value: temp, OK: true}
	if power >= 0 {
		g.PowerWatts = collector.Reading{Value: power, OK: true}
	}
}

// GPUs implements GPUReader.
func (f *fakeGPUs) GPUs() []collector.GPUSnapshot {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]collector.GPUSnapshot(nil), f.gpus...)
}

func TestGPUSampler(t *testing.T) {
	f := newFakeGPUs()
	start := time.Unix(0, 0)
	g := newGPUSampler(f, start, time.Second)
	at := func(s int) time.Time { return start.Add(time.Duration(s) * time.Second) }
	// Target a runs from 0 to 2 s, b from 3 to 5 s.
	f.set("0", 10e9, 40, 100)
	f.set("1", 5e9, 41, -1) // power not supported on GPU 1: absent
	g.sample(at(1))
	f.set("0", 30e9, 50, 300)
	g.sample(at(2))
	f.set("0", 20e9, 60, 200)
	f.set("1", 50e9, 61, -1)
	g.sample(at(4))
	r := g.report([]report.Span{{Target: "a", Start: 0, End: 2.5}, {Target: "b", Start: 3, End: 5}})
	if !r.Available || len(r.Devices) != 2 || r.Devices[0].Name != "NVIDIA H200" || r.Devices[1].DriverVersion != "570.1" || r.Devices[0].CUDAVersion != "12.8" {
		t.Fatalf("devices %+v", r.Devices)
	}
	if len(r.Samples) != 6 {
		t.Errorf("%d samples, want 6", len(r.Samples))
	}
	// Peaks: a sees 10+5 and 30+5; b sees 20+50.
	if r.PeakMemoryBytes["a"] != 35e9 || r.PeakMemoryBytes["b"] != 70e9 {
		t.Errorf("peaks %v", r.PeakMemoryBytes)
	}
	c0, c1 := r.Covariates[0], r.Covariates[1]
	if c0.Temperature.Min != 40 || c0.Temperature.Max != 60 || c0.Temperature.Mean != 50 || c0.Power.Mean != 200 {
		t.Errorf("GPU 0 covariates %+v", c0)
	}
	// Series in the GPU 1 vector exist only once set: power never was.
	if c1.Power.Mean.Valid() || c1.Temperature.Max != 61 {
		t.Errorf("GPU 1 covariates %+v", c1)
	}
}

func TestGPUSamplerBounded(t *testing.T) {
	f := newFakeGPUs()
	f.set("0", 1, 1, 1)
	f.set("1", 1, 1, 1)
	g := newGPUSampler(f, time.Unix(0, 0), time.Second)
	g.maxSamples = 10
	for i := 0; i < 40; i++ {
		g.sample(time.Unix(int64(i), 0))
	}
	if len(g.samples) >= 10 || g.interval <= time.Second {
		t.Errorf("%d samples kept, interval %v: not bounded", len(g.samples), g.interval)
	}
	// What is kept still spans the run.
	if first, last := g.samples[0].T, g.samples[len(g.samples)-1].T; first != 0 || last < 30 {
		t.Errorf("kept samples span %v..%v", first, last)
	}
}

func TestNoGPU(t *testing.T) {
	g := newGPUSampler(&fakeGPUs{}, time.Now(), time.Second)
	g.sample(time.Now())
	if r := g.report(nil); r.Available || r.Note == "" {
		t.Errorf("%+v", r)
	}
}

// TestGPUSamplerLostGPU: a GPU with no readings (lost) is listed but has no
// samples; a memory total never read is unknown, not zero, and one read
// before the GPU was lost is kept.
func TestGPUSamplerLostGPU(t *testing.T) {
	f := newFakeGPUs()
	f.set("0", 10e9, 40, 100)
	f.gpus[1] = collector.GPUSnapshot{Index: 1, UUID: "GPU-1", Name: "NVIDIA H200", Polled: true}
	g := newGPUSampler(f, time.Unix(0, 0), time.Second)
	g.sample(time.Unix(1, 0))
	f.gpus[0].Up, f.gpus[0].MemoryTotalBytes, f.gpus[0].MemoryUsedBytes = false, collector.Reading{}, collector.Reading{}
	f.gpus[0].TemperatureCelsius, f.gpus[0].PowerWatts = collector.Reading{}, collector.Reading{}
	g.sample(time.Unix(2, 0))
	r := g.report(nil)
	if len(r.Devices) != 2 || r.Devices[0].MemoryTotalBytes != 140e9 || r.Devices[1].MemoryTotalBytes.Valid() {
		t.Errorf("devices %+v", r.Devices)
	}
	if len(r.Samples) != 1 || r.Samples[0].GPU != "0" || r.Samples[0].T != 1 {
		t.Errorf("samples %+v, want GPU 0's first reading only", r.Samples)
	}
}
