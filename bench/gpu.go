package bench

import (
	"context"
	"sort"
	"strconv"
	"sync"
	"time"

	"github.com/infer-exporter/infer_exporter/bench/report"
	"github.com/infer-exporter/infer_exporter/collector"
)

// GPUReader is where bench reads the GPUs: the NVML collector's typed
// snapshots (a *collector.Set), the same ones its infer_gpu_* series are
// rendered from, so the report and the exporter agree.
type GPUReader interface {
	GPUs() []collector.GPUSnapshot
}

// gpuSampler reads the NVML collector's GPU snapshots at an interval.
type gpuSampler struct {
	src        GPUReader
	start      time.Time
	interval   time.Duration
	maxSamples int

	mu      sync.Mutex
	devices map[string]report.GPUDevice
	samples []report.GPUSample
	rounds  int
	// energy are the GPUs' energy counter and power readings, each at the
	// instant the collector took it (efficiency.go reads them).
	energy    []energyReading
	maxEnergy int
}

// energyReading is one GPU's energy counter and power, as the collector
// read them at at (NaN when absent).
type energyReading struct {
	gpu, uuid, name string
	at              time.Time
	joules, watts   report.Num
}

func newGPUSampler(src GPUReader, start time.Time, interval time.Duration) *gpuSampler {
	return &gpuSampler{src: src, start: start, interval: interval, maxSamples: 100000, maxEnergy: 400000, devices: map[string]report.GPUDevice{}}
}

// run samples until ctx is done.
func (g *gpuSampler) run(ctx context.Context) {
	g.sample(time.Now())
	t := time.NewTicker(g.interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			// The run's last repeat ended before: a last reading of the
			// counters, so that its span ends within their readings.
			g.readEnergy(g.src.GPUs(), time.Now())
			return
		case now := <-t.C:
			if g.sample(now) {
				t.Reset(g.interval)
			}
		}
	}
}

// num is a reading as a Num: NaN when absent.
func num(r collector.Reading) report.Num {
	if !r.OK {
		return report.NaN()
	}
	return report.Num(r.Value)
}

// sample takes one reading; it reports whether the interval changed.
func (g *gpuSampler) sample(now time.Time) (decimated bool) {
	snaps := g.src.GPUs()
	g.readEnergy(snaps, now)
	g.mu.Lock()
	defer g.mu.Unlock()
	type reading struct{ used, temp, power report.Num }
	readings := map[string]reading{}
	for _, s := range snaps {
		gpu := strconv.Itoa(s.Index)
		d, seen := g.devices[gpu]
		d.GPU, d.UUID, d.Name = gpu, s.UUID, s.Name
		d.DriverVersion, d.CUDAVersion = s.DriverVersion, s.CUDAVersion
		switch {
		case s.MemoryTotalBytes.OK:
			d.MemoryTotalBytes = report.Num(s.MemoryTotalBytes.Value)
		case !seen:
			d.MemoryTotalBytes = report.NaN()
		}
		g.devices[gpu] = d
		// A GPU with none of these readings (lost) has no sample.
		if s.MemoryUsedBytes.OK || s.TemperatureCelsius.OK || s.PowerWatts.OK {
			readings[gpu] = reading{num(s.MemoryUsedBytes), num(s.TemperatureCelsius), num(s.PowerWatts)}
		}
	}
	if len(readings) == 0 {
		return false
	}
	gpus := make([]string, 0, len(readings))
	for k := range readings {
		gpus = append(gpus, k)
	}
	sortGPUs(gpus)
	t := now.Sub(g.start).Seconds()
	for _, k := range gpus {
		r := readings[k]
		g.samples = append(g.samples, report.GPUSample{T: t, GPU: k, MemoryUsedBytes: r.used, TemperatureCelsius: r.temp, PowerWatts: r.power, Round: g.rounds})
	}
	g.rounds++
	if len(g.samples) < g.maxSamples {
		return false
	}
	// Full: keep every other round and sample half as often.
	kept := g.samples[:0]
	for _, s := range g.samples {
		if s.Round%2 == 0 {
			s.Round /= 2
			kept = append(kept, s)
		}
	}
	g.samples = kept
	g.rounds = (g.rounds + 1) / 2
	g.interval *= 2
	return true
}

// sortGPUs orders GPU index labels numerically where they are numbers.
func sortGPUs(gpus []string) {
	sort.Slice(gpus, func(i, j int) bool {
		a, ea := strconv.Atoi(gpus[i])
		b, eb := strconv.Atoi(gpus[j])
		if ea == nil && eb == nil {
			return a < b
		}
		return gpus[i] < gpus[j]
	})
}

// report builds the GPU section; spans attribute samples to targets.
func (g *gpuSampler) report(spans []report.Span) report.GPUReport {
	g.mu.Lock()
	defer g.mu.Unlock()
	r := report.GPUReport{SampleIntervalSeconds: g.interval.Seconds()}
	if len(g.samples) == 0 {
		r.Note = "no GPU series were read"
		return r
	}
	r.Available = true
	r.Samples = append([]report.GPUSample(nil), g.samples...)
	ids := make([]string, 0, len(g.devices))
	for k := range g.devices {
		ids = append(ids, k)
	}
	sortGPUs(ids)
	for _, k := range ids {
		r.Devices = append(r.Devices, g.devices[k])
	}
	// Covariates per GPU.
	type acc struct {
		t, p     report.Range
		nt, np   int
		sumT, sP float64
	}
	accs := map[string]*acc{}
	var order []string
	for _, s := range g.samples {
		a := accs[s.GPU]
		if a == nil {
			a = &acc{t: report.Range{Min: report.NaN(), Mean: report.NaN(), Max: report.NaN()}, p: report.Range{Min: report.NaN(), Mean: report.NaN(), Max: report.NaN()}}
			accs[s.GPU] = a
			order = append(order, s.GPU)
		}
		addRange(&a.t, &a.nt, &a.sumT, s.TemperatureCelsius)
		addRange(&a.p, &a.np, &a.sP, s.PowerWatts)
	}
	sortGPUs(order)
	for _, k := range order {
		a := accs[k]
		if a.nt > 0 {
			a.t.Mean = report.Num(a.sumT / float64(a.nt))
		}
		if a.np > 0 {
			a.p.Mean = report.Num(a.sP / float64(a.np))
		}
		r.Covariates = append(r.Covariates, report.Covariate{GPU: k, Temperature: a.t, Power: a.p})
	}
	// Peak memory per target: the highest per-round total within its spans.
	totals := map[int]float64{}
	times := map[int]float64{}
	for _, s := range g.samples {
		if s.MemoryUsedBytes.Valid() {
			totals[s.Round] += float64(s.MemoryUsedBytes)
			times[s.Round] = s.T
		}
	}
	r.PeakMemoryBytes = map[string]float64{}
	for _, sp := range spans {
		for round, t := range times {
			if t >= sp.Start && t <= sp.End {
				if v, ok := r.PeakMemoryBytes[sp.Target]; !ok || totals[round] > v {
					r.PeakMemoryBytes[sp.Target] = totals[round]
				}
			}
		}
	}
	return r
}

func addRange(r *report.Range, n *int, sum *float64, v report.Num) {
	if !v.Valid() {
		return
	}
	if *n == 0 || v < r.Min {
		r.Min = v
	}
	if *n == 0 || v > r.Max {
		r.Max = v
	}
	*n++
	*sum += float64(v)
}

// readEnergy keeps each GPU's energy counter and power from snaps, at the
// instant the collector read them (now when a snapshot has none), once
// per reading: a snapshot the collector has not renewed since is skipped.
func (g *gpuSampler) readEnergy(snaps []collector.GPUSnapshot, now time.Time) {
	g.mu.Lock()
	defer g.mu.Unlock()
	for _, s := range snaps {
		if !s.EnergyJoules.OK && !s.PowerWatts.OK {
			continue
		}
		at := s.At
		if at.IsZero() {
			at = now
		}
		gpu := strconv.Itoa(s.Index)
		if last := g.lastEnergy(gpu); last != nil && !at.After(last.at) {
			continue
		}
		g.energy = append(g.energy, energyReading{gpu: gpu, uuid: s.UUID, name: s.Name, at: at, joules: num(s.EnergyJoules), watts: num(s.PowerWatts)})
	}
	if len(g.energy) >= g.maxEnergy {
		// Full: keep every other reading of each GPU (the first and the
		// last kept), which halves the resolution, not the span.
		kept, n := g.energy[:0], map[string]int{}
		for i, r := range g.energy {
			if n[r.gpu]%2 == 0 || i == len(g.energy)-1 {
				kept = append(kept, r)
			}
			n[r.gpu]++
		}
		g.energy = kept
	}
}

// lastEnergy is the latest reading of gpu; g.mu is held.
func (g *gpuSampler) lastEnergy(gpu string) *energyReading {
	for i := len(g.energy) - 1; i >= 0; i-- {
		if g.energy[i].gpu == gpu {
			return &g.energy[i]
		}
	}
	return nil
}
