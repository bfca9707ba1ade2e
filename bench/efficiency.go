package bench

import (
	"cmp"
	"fmt"
	"math"
	"slices"
	"strings"
	"time"

	"github.com/infer-exporter/infer_exporter/bench/report"
)

// A repeat's efficiency: the GPUs' energy over its measured span, per
// output token delivered in that span, and the span's price per million of
// those tokens.
//
//   - The span starts when the warm-up ends (the recorder's warmupEnd: the
//     instant its windows count from) and lasts the repeat's
//     window_seconds: the windows the throughput is measured over.
//   - Energy: each GPU's NVML total energy counter
//     (nvmlDeviceGetTotalEnergyConsumption, read by the collector in the
//     background at its poll interval), linearly interpolated between the
//     two readings around each end of the span, its change between them;
//     a GPU whose counter is not supported gets its sampled power
//     integrated over the span (trapezoids between readings) instead.
//     Summed over every GPU the bench reads. The figures are computed
//     once the run's GPU sampling has stopped, when a reading after every
//     span's end exists.
//   - Tokens: Stats.OutputTokens (the throughput's numerator: the output
//     tokens successful requests delivered within the windows) and
//     Stats.GoodOutputTokens (those of the requests that met the SLO).
//   - Cost: the GPUs' price per hour (bench.cost) × the span in hours,
//     over the tokens, × 10^6.

// measuredSpan is where a repeat's measured windows lie in time.
type measuredSpan struct {
	from time.Time
	secs float64
}

// spanKey names a repeat of a cell.
type spanKey struct {
	cell   string
	repeat int
}

// gpuEnergy is each GPU's energy over [from, to], from the readings kept:
// its counter's change, else its power integrated, else null.
func (g *gpuSampler) gpuEnergy(from, to time.Time) []report.GPUEnergy {
	g.mu.Lock()
	defer g.mu.Unlock()
	type series struct {
		dev     report.GPUEnergy
		counter []timed
		power   []timed
	}
	byGPU := map[string]*series{}
	var order []string
	for _, r := range g.energy {
		s := byGPU[r.gpu]
		if s == nil {
			s = &series{}
			byGPU[r.gpu] = s
			order = append(order, r.gpu)
		}
		s.dev = report.GPUEnergy{GPU: r.gpu, UUID: r.uuid, Name: r.name, Joules: report.NaN()}
		if r.joules.Valid() {
			s.counter = append(s.counter, timed{r.at, float64(r.joules)})
		}
		if r.watts.Valid() {
			s.power = append(s.power, timed{r.at, float64(r.watts)})
		}
	}
	sortGPUs(order)
	out := make([]report.GPUEnergy, 0, len(order))
	for _, gpu := range order {
		s := byGPU[gpu]
		e0, ok0 := interpolate(s.counter, from)
		e1, ok1 := interpolate(s.counter, to)
		if ok0 && ok1 && e1 >= e0 {
			s.dev.Joules, s.dev.Source = report.Num(e1-e0), report.EnergyCounter
		} else if j, ok := integrate(s.power, from, to); ok {
			s.dev.Joules, s.dev.Source = report.Num(j), report.EnergyPower
		}
		out = append(out, s.dev)
	}
	return out
}

// timed is a reading and its instant.
type timed struct {
	at time.Time
	v  float64
}

// interpolate is the value at t of the readings (in time order), linear
// between the two around it; false when t is outside them.
func interpolate(rs []timed, t time.Time) (float64, bool) {
	i, found := slices.BinarySearchFunc(rs, t, func(r timed, t time.Time) int { return r.at.Compare(t) })
	switch {
	case found:
		return rs[i].v, true
	case i == 0 || i == len(rs):
		return 0, false
	}
	a, b := rs[i-1], rs[i]
	f := float64(t.Sub(a.at)) / float64(b.at.Sub(a.at))
	return a.v + f*(b.v-a.v), true
}

// integrate is the integral over [from, to], in value × seconds, of the
// readings (in time order) joined by straight lines; false when they do
// not cover the span.
func integrate(rs []timed, from, to time.Time) (float64, bool) {
	v0, ok0 := interpolate(rs, from)
	v1, ok1 := interpolate(rs, to)
	if !ok0 || !ok1 || to.Before(from) {
		return 0, false
	}
	pts := []timed{{from, v0}}
	for _, r := range rs {
		if r.at.After(from) && r.at.Before(to) {
			pts = append(pts, r)
		}
	}
	pts = append(pts, timed{to, v1})
	var sum float64
	for i := 1; i < len(pts); i++ {
		sum += (pts[i].v + pts[i-1].v) / 2 * pts[i].at.Sub(pts[i-1].at).Seconds()
	}
	return sum, true
}

// efficiencyOf is a repeat's efficiency from its figures, its GPUs'
// energies over its measured span (nil: no GPU read) and the prices (nil:
// none configured); nil when there is neither a GPU nor a price.
func efficiencyOf(st *report.Stats, devices []report.GPUEnergy, cost *CostSpec) *report.Efficiency {
	if len(devices) == 0 && cost == nil {
		return nil
	}
	e := &report.Efficiency{EnergyJoules: report.NaN(), JoulesPerOutputToken: report.NaN(), JoulesPerGoodOutputToken: report.NaN(),
		GPUHourUSD: report.NaN(), CostUSD: report.NaN(), CostPerMillionOutputTokens: report.NaN(), CostPerMillionGoodOutputTokens: report.NaN(),
		GPUs: len(devices), Devices: devices}
	var notes []string
	if len(devices) > 0 {
		var sum float64
		var missing []string
		e.Source = report.EnergyCounter
		for _, d := range devices {
			if !d.Joules.Valid() {
				missing = append(missing, d.GPU)
				continue
			}
			sum += float64(d.Joules)
			if d.Source == report.EnergyPower {
				e.Source = report.EnergyPower
			}
		}
		if len(missing) == 0 {
			e.EnergyJoules = report.Num(sum)
		} else {
			notes = append(notes, fmt.Sprintf("no energy: the readings of GPU %s do not cover the measured span", strings.Join(missing, ", ")))
		}
	}
	per := func(v report.Num, tokens, scale float64) report.Num {
		if !v.Valid() || !(tokens > 0) {
			return report.NaN()
		}
		return report.Num(float64(v) / tokens * scale)
	}
	e.JoulesPerOutputToken = per(e.EnergyJoules, st.OutputTokens, 1)
	e.JoulesPerGoodOutputToken = per(e.EnergyJoules, st.GoodOutputTokens, 1)
	if cost != nil {
		hourly, note := hourlyPrice(cost, devices)
		if cost.GPUs > 0 {
			e.GPUs = cost.GPUs
		}
		if note != "" {
			notes = append(notes, note)
		} else {
			e.GPUHourUSD = report.Num(hourly)
			e.CostUSD = report.Num(hourly * st.WindowSeconds / 3600)
			e.CostPerMillionOutputTokens = per(e.CostUSD, st.OutputTokens, 1e6)
			e.CostPerMillionGoodOutputTokens = per(e.CostUSD, st.GoodOutputTokens, 1e6)
		}
	}
	e.Note = strings.Join(notes, "; ")
	return e
}

// hourlyPrice is the price of the GPUs together for an hour: bench.cost's
// gpus at gpu_hour_usd, else each GPU read at its model's price or
// gpu_hour_usd; or why there is none.
func hourlyPrice(cost *CostSpec, devices []report.GPUEnergy) (float64, string) {
	if cost.GPUs > 0 {
		return float64(cost.GPUs) * *cost.GPUHourUSD, ""
	}
	if len(devices) == 0 {
		return 0, "no cost: no GPU was read, and bench.cost.gpus is not set"
	}
	var sum float64
	for _, d := range devices {
		p, ok := cost.GPUHourUSDByModel[d.Name]
		if !ok && cost.GPUHourUSD == nil {
			return 0, fmt.Sprintf("no cost: no price for GPU %s's model %q (bench.cost.gpu_hour_usd_by_model, or gpu_hour_usd for every model)", d.GPU, d.Name)
		}
		if !ok {
			p = *cost.GPUHourUSD
		}
		sum += p
	}
	return sum, ""
}

// medianEfficiency is a cell's efficiency over its repeats: each figure's
// median over the repeats that have it, each GPU's energy's too; the
// source says power_samples when any repeat's energy came from power.
func medianEfficiency(all []report.Stats) *report.Efficiency {
	var effs []*report.Efficiency
	for i := range all {
		if e := all[i].Efficiency; e != nil {
			effs = append(effs, e)
		}
	}
	if len(effs) == 0 {
		return nil
	}
	med := func(f func(*report.Efficiency) report.Num) report.Num {
		v := make([]float64, len(effs))
		for i, e := range effs {
			v[i] = float64(f(e))
			if !f(e).Valid() {
				v[i] = math.NaN()
			}
		}
		return report.Num(median(v))
	}
	out := &report.Efficiency{
		EnergyJoules:                   med(func(e *report.Efficiency) report.Num { return e.EnergyJoules }),
		JoulesPerOutputToken:           med(func(e *report.Efficiency) report.Num { return e.JoulesPerOutputToken }),
		JoulesPerGoodOutputToken:       med(func(e *report.Efficiency) report.Num { return e.JoulesPerGoodOutputToken }),
		GPUHourUSD:                     med(func(e *report.Efficiency) report.Num { return e.GPUHourUSD }),
		CostUSD:                        med(func(e *report.Efficiency) report.Num { return e.CostUSD }),
		CostPerMillionOutputTokens:     med(func(e *report.Efficiency) report.Num { return e.CostPerMillionOutputTokens }),
		CostPerMillionGoodOutputTokens: med(func(e *report.Efficiency) report.Num { return e.CostPerMillionGoodOutputTokens }),
	}
	devs := map[string][]report.GPUEnergy{}
	var order []string
	for _, e := range effs {
		out.GPUs = max(out.GPUs, e.GPUs)
		if out.Source == "" || e.Source == report.EnergyPower {
			out.Source = cmp.Or(e.Source, out.Source)
		}
		out.Note = cmp.Or(out.Note, e.Note)
		for _, d := range e.Devices {
			if _, ok := devs[d.UUID]; !ok {
				order = append(order, d.UUID)
			}
			devs[d.UUID] = append(devs[d.UUID], d)
		}
	}
	for _, uuid := range order {
		ds := devs[uuid]
		d := ds[0]
		v := make([]float64, len(ds))
		for i, x := range ds {
			v[i] = float64(x.Joules)
			if !x.Joules.Valid() {
				v[i] = math.NaN()
			}
			if x.Source == report.EnergyPower || d.Source == "" {
				d.Source = cmp.Or(x.Source, d.Source)
			}
		}
		d.Joules = report.Num(median(v))
		out.Devices = append(out.Devices, d)
	}
	return out
}

// fillEfficiency gives every measured repeat of the report's cells its
// efficiency, from the GPUs' readings over its measured windows (times;
// gpu nil: none) and bench.cost, and every cell the median over its
// repeats. It runs once the GPU sampling has stopped.
func fillEfficiency(gpu *gpuSampler, rep *report.Report, times *repeatTimes, cost *CostSpec) {
	for i := range rep.Cells {
		c := &rep.Cells[i]
		all := make([]report.Stats, len(c.Repeats))
		for j := range c.Repeats {
			r := &c.Repeats[j]
			var devices []report.GPUEnergy
			if sp, ok := times.windows[spanKey{c.Key, r.Index}]; ok && gpu != nil {
				to := sp.from.Add(time.Duration(sp.secs * float64(time.Second)))
				devices = gpu.gpuEnergy(sp.from, to)
			}
			r.Stats.Efficiency = efficiencyOf(&r.Stats, devices, cost)
			all[j] = r.Stats
		}
		c.Summary.Efficiency = medianEfficiency(all)
	}
}
