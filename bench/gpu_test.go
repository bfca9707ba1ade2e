package bench

import (
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// fakeGPUs serves NVML-collector-shaped series (infer_gpu_*) from gauges a
// test sets, for GPUs "0" and "1".
type fakeGPUs struct {
	reg                *prometheus.Registry
	used, temp, power  *prometheus.GaugeVec
	total, info        *prometheus.GaugeVec
	powerSupportedOnly string // the GPU that reports power; "" for both
}

func newFakeGPUs() *fakeGPUs {
	labels := []string{"gpu", "uuid", "name"}
	g := func(name string, extra ...string) *prometheus.GaugeVec {
		return prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "infer_gpu_" + name, Help: name}, append(append([]string{}, labels...), extra...))
	}
	f := &fakeGPUs{reg: prometheus.NewRegistry(), used: g("memory_used_bytes"), temp: g("temperature_celsius"),
		power: g("power_watts"), total: g("memory_total_bytes"), info: g("info", "driver_version", "cuda_version", "pci_bus_id")}
	f.reg.MustRegister(f.used, f.temp, f.power, f.total, f.info)
	for _, gpu := range []string{"0", "1"} {
		lv := []string{gpu, "GPU-" + gpu, "NVIDIA H200"}
		f.total.WithLabelValues(lv...).Set(140e9)
		f.info.WithLabelValues(append(lv, "570.1", "12.8", "0000:0"+gpu+":00.0")...).Set(1)
	}
	return f
}

func (f *fakeGPUs) set(gpu string, used, temp float64, power float64) {
	lv := []string{gpu, "GPU-" + gpu, "NVIDIA H200"}
	f.used.WithLabelValues(lv...).Set(used)
	f.temp.WithLabelValues(lv...).Set(temp)
	if power >= 0 {
		f.power.WithLabelValues(lv...).Set(power)
	}
}

func TestGPUSampler(t *testing.T) {
	f := newFakeGPUs()
	start := time.Unix(0, 0)
	g := newGPUSampler(f.reg, start, time.Second)
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
	r := g.report([]Span{{Target: "a", Start: 0, End: 2.5}, {Target: "b", Start: 3, End: 5}})
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
	g := newGPUSampler(f.reg, time.Unix(0, 0), time.Second)
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
	g := newGPUSampler(prometheus.NewRegistry(), time.Now(), time.Second)
	g.sample(time.Now())
	if r := g.report(nil); r.Available || r.Note == "" {
		t.Errorf("%+v", r)
	}
}
