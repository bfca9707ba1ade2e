package bench

import (
	"bytes"
	"context"
	"encoding/csv"
	"io"
	"math"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/infer-exporter/infer_exporter/bench/merge"
	"github.com/infer-exporter/infer_exporter/bench/render"
	"github.com/infer-exporter/infer_exporter/bench/report"
	"github.com/infer-exporter/infer_exporter/collector"
	"github.com/infer-exporter/infer_exporter/internal/config"
)

// setEnergy gives a fake GPU an energy counter reading (NVML's total
// energy, in joules) taken at at; a negative joules leaves the counter
// unsupported.
func (f *fakeGPUs) setEnergy(gpu int, joules, watts float64, at time.Time) {
	f.mu.Lock()
	defer f.mu.Unlock()
	g := &f.gpus[gpu]
	g.At = at
	g.EnergyJoules = collector.Reading{Value: joules, OK: joules >= 0}
	g.PowerWatts = collector.Reading{Value: watts, OK: watts >= 0}
}

func near(a, b float64) bool { return math.Abs(a-b) <= 1e-9*math.Max(1, math.Abs(b)) }

// TestEfficiencyFromEnergyCounter: the fake NVML devices' counters are
// known at every reading, so the energy over a span is exact: GPU 0 runs
// at 250 W, GPU 1 at 100 W, read every second; the span [2.5 s, 6.5 s]
// lies between readings (interpolated) and holds 4 s: 1000 J and 400 J.
// Over 700 output tokens (560 of them good), 2 J a token and 2.5 J a good
// token; at 3 USD per GPU-hour, the span costs 2 × 3 × 4/3600 USD.
func TestEfficiencyFromEnergyCounter(t *testing.T) {
	f := newFakeGPUs()
	t0 := time.Unix(5000, 0)
	g := newGPUSampler(f, t0, time.Second)
	for s := 0; s <= 8; s++ {
		at := t0.Add(time.Duration(s) * time.Second)
		f.setEnergy(0, 1e6+250*float64(s), 250, at)
		f.setEnergy(1, 2e6+100*float64(s), 100, at)
		g.sample(at.Add(30 * time.Millisecond)) // the sampler reads a little after the collector
		g.sample(at.Add(60 * time.Millisecond)) // the same reading again: kept once
	}
	if len(g.energy) != 18 {
		t.Fatalf("%d energy readings, want 18 (9 per GPU, each once)", len(g.energy))
	}
	from := t0.Add(2500 * time.Millisecond)
	devs := g.gpuEnergy(from, from.Add(4*time.Second))
	if len(devs) != 2 || devs[0].Source != report.EnergyCounter || !near(float64(devs[0].Joules), 1000) || !near(float64(devs[1].Joules), 400) ||
		devs[0].UUID != "GPU-0" || devs[1].Name != "NVIDIA H200" {
		t.Fatalf("devices %+v", devs)
	}
	price := 3.0
	st := report.Stats{WindowSeconds: 4, OutputTokens: 700, GoodOutputTokens: 560}
	e := efficiencyOf(&st, devs, &CostSpec{GPUHourUSD: &price})
	want := map[string][2]float64{
		"energy":   {float64(e.EnergyJoules), 1400},
		"J/token":  {float64(e.JoulesPerOutputToken), 2},
		"J/good":   {float64(e.JoulesPerGoodOutputToken), 2.5},
		"hourly":   {float64(e.GPUHourUSD), 6},
		"cost":     {float64(e.CostUSD), 6 * 4 / 3600.0},
		"$/M":      {float64(e.CostPerMillionOutputTokens), 6 * 4 / 3600.0 / 700 * 1e6},
		"$/M good": {float64(e.CostPerMillionGoodOutputTokens), 6 * 4 / 3600.0 / 560 * 1e6},
	}
	for name, v := range want {
		if !near(v[0], v[1]) {
			t.Errorf("%s: %v, want %v", name, v[0], v[1])
		}
	}
	if e.Source != report.EnergyCounter || e.GPUs != 2 || e.Note != "" {
		t.Errorf("source %q, %d GPUs, note %q", e.Source, e.GPUs, e.Note)
	}
}

// TestEfficiencyFromPower: a GPU without the energy counter has its power
// integrated: 100 W rising linearly to 300 W over 10 s, read every 2 s,
// holds 1200 J over [2 s, 8 s] (6 s at a mean 200 W); the source says
// so. A span beyond the readings has no energy, and says why.
func TestEfficiencyFromPower(t *testing.T) {
	f := newFakeGPUs()
	f.gpus = f.gpus[:1]
	t0 := time.Unix(5000, 0)
	g := newGPUSampler(f, t0, time.Second)
	for s := 0; s <= 10; s += 2 {
		at := t0.Add(time.Duration(s) * time.Second)
		f.setEnergy(0, -1, 100+20*float64(s), at)
		g.sample(at)
	}
	devs := g.gpuEnergy(t0.Add(2*time.Second), t0.Add(8*time.Second))
	if len(devs) != 1 || devs[0].Source != report.EnergyPower || !near(float64(devs[0].Joules), 1200) {
		t.Fatalf("devices %+v", devs)
	}
	e := efficiencyOf(&report.Stats{WindowSeconds: 6, OutputTokens: 600}, devs, nil)
	if e.Source != report.EnergyPower || !near(float64(e.JoulesPerOutputToken), 2) || e.CostPerMillionOutputTokens.Valid() {
		t.Errorf("efficiency %+v", e)
	}
	// Past the last reading: no energy, and the note names the GPU.
	devs = g.gpuEnergy(t0.Add(8*time.Second), t0.Add(12*time.Second))
	e = efficiencyOf(&report.Stats{WindowSeconds: 4, OutputTokens: 600}, devs, nil)
	if devs[0].Joules.Valid() || devs[0].Source != "" || e.EnergyJoules.Valid() || e.JoulesPerOutputToken.Valid() || !strings.Contains(e.Note, "GPU 0") {
		t.Errorf("a span the readings do not cover: %+v, %+v", devs, e)
	}
	// No GPU and no price: no efficiency at all.
	if e := efficiencyOf(&report.Stats{WindowSeconds: 4, OutputTokens: 600}, nil, nil); e != nil {
		t.Errorf("without a GPU or a price: %+v", e)
	}
}

// TestEfficiencyCost: GPUs priced by their model, else at gpu_hour_usd;
// bench.cost.gpus prices GPUs this host does not read; a model without a
// price leaves the cost null, and says so.
func TestEfficiencyCost(t *testing.T) {
	two := 2.0
	devs := []report.GPUEnergy{{GPU: "0", Name: "A", Joules: 10, Source: report.EnergyCounter}, {GPU: "1", Name: "B", Joules: 10, Source: report.EnergyCounter}}
	st := report.Stats{WindowSeconds: 1800, OutputTokens: 1e6, GoodOutputTokens: 5e5}
	for _, tc := range []struct {
		name   string
		cost   CostSpec
		devs   []report.GPUEnergy
		hourly float64 // NaN: no cost
		gpus   int
	}{
		{"by model", CostSpec{GPUHourUSDByModel: map[string]float64{"A": 4, "B": 1}}, devs, 5, 2},
		{"model else default", CostSpec{GPUHourUSD: &two, GPUHourUSDByModel: map[string]float64{"A": 4}}, devs, 6, 2},
		{"a model without a price", CostSpec{GPUHourUSDByModel: map[string]float64{"A": 4}}, devs, math.NaN(), 2},
		{"configured GPUs, none read", CostSpec{GPUHourUSD: &two, GPUs: 8}, nil, 16, 8},
		{"configured GPUs beside those read", CostSpec{GPUHourUSD: &two, GPUs: 8}, devs, 16, 8},
		{"no GPU read, none configured", CostSpec{GPUHourUSD: &two}, nil, math.NaN(), 0},
	} {
		e := efficiencyOf(&st, tc.devs, &tc.cost)
		if math.IsNaN(tc.hourly) {
			if e.CostUSD.Valid() || e.CostPerMillionOutputTokens.Valid() || !strings.Contains(e.Note, "no cost") {
				t.Errorf("%s: %+v, want no cost and a note", tc.name, e)
			}
			continue
		}
		// Half an hour over a million tokens: half the hourly price per
		// million, twice that per million good tokens.
		if !near(float64(e.GPUHourUSD), tc.hourly) || !near(float64(e.CostPerMillionOutputTokens), tc.hourly/2) ||
			!near(float64(e.CostPerMillionGoodOutputTokens), tc.hourly) || e.GPUs != tc.gpus {
			t.Errorf("%s: %+v, want %v USD an hour over %d GPUs", tc.name, e, tc.hourly, tc.gpus)
		}
	}
}

// TestCostConfig: bench.cost's prices are bounded and its GPU count needs a
// price; a valid block loads.
func TestCostConfig(t *testing.T) {
	base := "targets: [{name: a, url: 'http://127.0.0.1:1', model: m}]\nbench:\n  matrix: {rates: [1]}\n"
	for _, tc := range []struct{ cost, want string }{
		{`{gpu_hour_usd: 2.5}`, ""},
		{`{gpu_hour_usd_by_model: {"NVIDIA H100 80GB HBM3": 2.49, "NVIDIA H200": 3.5}, gpu_hour_usd: 2}`, ""},
		{`{gpu_hour_usd: 2, gpus: 8}`, ""},
		{`{gpu_hour_usd: -1}`, "gpu_hour_usd"},
		{`{gpu_hour_usd: 1e9}`, "gpu_hour_usd"},
		{`{gpu_hour_usd: .nan}`, "gpu_hour_usd"},
		{`{gpu_hour_usd_by_model: {"X": -2}}`, "gpu_hour_usd_by_model"},
		{`{gpu_hour_usd_by_model: {"": 2}}`, "gpu_hour_usd_by_model"},
		{`{gpus: 4, gpu_hour_usd_by_model: {"X": 2}}`, "gpus"},
		{`{gpu_hour_usd: 1, gpus: -1}`, "gpus"},
		{`{}`, "no price"},
		{`{gpu_hour_usd: 1, price: 2}`, "price"},
	} {
		_, err := Parse([]byte(base+"  cost: "+tc.cost+"\n"), "b.yml")
		switch {
		case tc.want == "" && err != nil:
			t.Errorf("cost %s: %v", tc.cost, err)
		case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
			t.Errorf("cost %s: error %v, want one naming %q", tc.cost, err, tc.want)
		}
	}
	for _, w := range []string{`{latency: 1, efficiency: -1}`, `{efficiency: .inf}`} {
		if _, err := Parse([]byte(base+"  weights: "+w+"\n"), "b.yml"); err == nil || !strings.Contains(err.Error(), "weights") {
			t.Errorf("weights %s: error %v", w, err)
		}
	}
	if _, err := Parse([]byte(base+"  weights: {efficiency: 1}\n"), "b.yml"); err != nil {
		t.Errorf("efficiency alone: %v", err)
	}
}

// withEfficiency gives the golden report's cells energy as a run reads it:
// a sampler of the fake NVML devices (GPU 0 at 300 W through its counter,
// GPU 1 at 150 W) around every repeat's span, one price, and the ranking
// again, with the efficiency weight given.
func withEfficiency(t testing.TB, rep *report.Report, weight float64) {
	t.Helper()
	cfg, err := Parse([]byte(goldenConfig), "golden.yml")
	if err != nil {
		t.Fatal(err)
	}
	price := 2.5
	cfg.Bench.Cost = &CostSpec{GPUHourUSD: &price}
	cfg.Bench.Weights.Efficiency = weight
	f := newFakeGPUs()
	w0 := time.Unix(1000, 0)
	g := newGPUSampler(f, w0, time.Second)
	for s := -1; s <= 5; s++ {
		at := w0.Add(time.Duration(s) * time.Second)
		f.setEnergy(0, 5000+300*float64(s), 300, at)
		f.setEnergy(1, 9000+150*float64(s), 150, at)
		g.sample(at)
	}
	b := &run{cfg: cfg, spec: &cfg.Bench}
	times := &repeatTimes{}
	for _, c := range rep.Cells {
		for _, r := range c.Repeats {
			times.measured(c.Key, r.Index, w0, r.Stats.WindowSeconds)
		}
	}
	fillEfficiency(g, rep, times, cfg.Bench.Cost)
	names := []string{"fast", "slow"}
	targets := make([]config.Target, len(names))
	for i, n := range names {
		targets[i].Name = n
	}
	groups := []group{{name: "s", load: report.Load{Kind: report.LoadRate, Value: 4}}, {name: "s", load: report.Load{Kind: report.LoadRate, Value: 8}}}
	// The point scores do not read the resamples: the golden report's
	// own ranking, with its resamples, is kept where the weight is 0.
	reps := map[string][numFigures][]float64{}
	for _, c := range rep.Cells {
		var r [numFigures][]float64
		for i := range r {
			r[i] = make([]float64, cfg.Bench.Ranking.Resamples)
			for j := range r[i] {
				r[i][j] = c.Summary.Figure(FigureNames[min(i, len(FigureNames)-1)])
			}
		}
		reps[c.Key] = r
	}
	if weight > 0 {
		rep.Ranking = rank(b.rankInput(targets, groups, reps, rep))
	}
}

// TestEfficiencyInEveryOutput: each cell's efficiency, from the fake
// NVML devices, is report.json's in the CSV's columns, the Markdown
// efficiency table, the HTML efficiency section (data-value) and the
// console's result block, read back.
func TestEfficiencyInEveryOutput(t *testing.T) {
	rep := goldenReport(t)
	withEfficiency(t, rep, 0)
	for _, c := range rep.Cells {
		// Each repeat: 450 W over its windows, over its tokens; the cell
		// the median of its repeats' figures.
		var perToken []float64
		for _, r := range c.Repeats {
			e, st := r.Stats.Efficiency, &r.Stats
			if e == nil || e.Source != report.EnergyCounter || !near(float64(e.EnergyJoules), 450*st.WindowSeconds) ||
				!near(float64(e.JoulesPerOutputToken), 450*st.WindowSeconds/st.OutputTokens) ||
				st.GoodOutputTokens > 0 && !near(float64(e.CostPerMillionGoodOutputTokens), 5*st.WindowSeconds/3600/st.GoodOutputTokens*1e6) ||
				st.GoodOutputTokens == 0 && (e.CostPerMillionGoodOutputTokens.Valid() || e.JoulesPerGoodOutputToken.Valid()) {
				t.Fatalf("%s repeat %d: efficiency %+v (stats %+v)", c.Key, r.Index, e, st)
			}
			perToken = append(perToken, float64(e.JoulesPerOutputToken))
		}
		if e := c.Summary.Efficiency; e == nil || !near(float64(e.JoulesPerOutputToken), median(perToken)) || e.GPUs != 2 {
			t.Fatalf("%s: summary efficiency %+v, want the median of %v", c.Key, e, perToken)
		}
	}
	var js, cs, md, html, console bytes.Buffer
	for _, w := range []struct {
		b *bytes.Buffer
		f func(*bytes.Buffer, *report.Report) error
	}{
		{&js, func(b *bytes.Buffer, r *report.Report) error { return render.WriteJSON(b, r) }},
		{&cs, func(b *bytes.Buffer, r *report.Report) error { return render.WriteCSV(b, r) }},
		{&md, func(b *bytes.Buffer, r *report.Report) error { return render.WriteMarkdown(b, r) }},
		{&html, func(b *bytes.Buffer, r *report.Report) error { return render.WriteHTML(b, r) }},
		{&console, func(b *bytes.Buffer, r *report.Report) error { render.WriteResultBlocks(b, r); return nil }},
	} {
		if err := w.f(w.b, rep); err != nil {
			t.Fatal(err)
		}
	}
	back, err := report.Decode(js.Bytes())
	if err != nil {
		t.Fatal(err)
	}
	rows, err := csv.NewReader(&cs).ReadAll()
	if err != nil {
		t.Fatal(err)
	}
	col := map[string]int{}
	for i, h := range rows[0] {
		col[h] = i
	}
	blocks := parseBlocks(t, console.String())
	figures := []struct {
		column, console string
		get             func(*report.Efficiency) report.Num
		mdDigits        int
	}{
		{"energy_joules", "Energy (J)", func(e *report.Efficiency) report.Num { return e.EnergyJoules }, 1},
		{"joules_per_output_token", "Energy per output token (J)", func(e *report.Efficiency) report.Num { return e.JoulesPerOutputToken }, 4},
		{"joules_per_good_output_token", "Energy per good output token (J)", func(e *report.Efficiency) report.Num { return e.JoulesPerGoodOutputToken }, 4},
		{"cost_per_million_output_tokens_usd", "Cost per 1M output tokens (USD)", func(e *report.Efficiency) report.Num { return e.CostPerMillionOutputTokens }, 4},
		{"cost_per_million_good_output_tokens_usd", "Cost per 1M good output tokens (USD)", func(e *report.Efficiency) report.Num { return e.CostPerMillionGoodOutputTokens }, 4},
	}
	mdRow := regexp.MustCompile(`(?m)^\| (\S+) \| (energy_counter|power_samples|no GPU read) \| (\d+) \|(.*)\|$`)
	mdRows := map[string][]string{}
	for _, m := range mdRow.FindAllStringSubmatch(md.String(), -1) {
		cells := strings.Split(m[4], "|")
		mdRows[m[1]] = append([]string{m[2], m[3]}, cells...)
	}
	nulls := 0
	for i, c := range back.Cells {
		e := c.Summary.Efficiency
		row := rows[i+1]
		if row[col["cell"]] != c.Key || row[col["energy_source"]] != e.Source || row[col["good_output_tokens"]] != report.FormatFloat(c.Summary.GoodOutputTokens) {
			t.Errorf("%s: CSV row %v", c.Key, row)
		}
		mr := mdRows[c.Key]
		if len(mr) < 8 || mr[0] != e.Source || mr[1] != "2" {
			t.Fatalf("%s: Markdown row %q in\n%s", c.Key, mr, md.String())
		}
		b := blocks[c.Key]
		if got := b["Energy source"]; len(got) != 1 || got[0] != e.Source+" (2 GPUs)" {
			t.Errorf("%s: console energy source %q", c.Key, got)
		}
		for k, f := range figures {
			v := float64(f.get(e))
			if math.IsNaN(v) {
				// No good tokens (the slow target's cells miss the SLO):
				// null in report.json, empty or a dash elsewhere.
				nulls++
				re := regexp.MustCompile(`<tr data-cell="` + regexp.QuoteMeta(c.Key) + `">.*?data-q="` + f.column + `" data-value="null"`)
				if row[col[f.column]] != "" || strings.TrimSpace(mr[2+k]) != "–" || b[f.console][0] != "-" || !re.MatchString(html.String()) {
					t.Errorf("%s: null %s: CSV %q, Markdown %q, console %q", c.Key, f.column, row[col[f.column]], mr[2+k], b[f.console])
				}
				continue
			}
			if got, _ := strconv.ParseFloat(row[col[f.column]], 64); !near(got, v) {
				t.Errorf("%s: CSV %s %q, report.json %v", c.Key, f.column, row[col[f.column]], v)
			}
			if got := strings.TrimSpace(mr[2+k]); got != strconv.FormatFloat(v, 'f', f.mdDigits, 64) {
				t.Errorf("%s: Markdown %s %q, report.json %v", c.Key, f.column, got, v)
			}
			prec := 4
			if k == 0 {
				prec = 2
			}
			if got := b[f.console]; len(got) != 1 || got[0] != strconv.FormatFloat(v, 'f', prec, 64) {
				t.Errorf("%s: console %s %q, report.json %v", c.Key, f.console, got, v)
			}
			re := regexp.MustCompile(`<tr data-cell="` + regexp.QuoteMeta(c.Key) + `">.*?data-q="` + f.column + `" data-value="([^"]+)"`)
			m := re.FindStringSubmatch(html.String())
			if m == nil {
				t.Fatalf("%s: no HTML %s", c.Key, f.column)
			}
			if got, _ := strconv.ParseFloat(m[1], 64); got != v {
				t.Errorf("%s: HTML %s %s, report.json %v", c.Key, f.column, m[1], v)
			}
		}
	}
	if nulls == 0 {
		t.Error("no null figure: the outputs' dashes are not tested")
	}
}

// TestEfficiencyRanking: the efficiency weight defaults to 0, which
// leaves the scores as they were while the component is shown; weighed,
// it ranks the target with fewer joules per token higher.
func TestEfficiencyRanking(t *testing.T) {
	rep := goldenReport(t)
	before := rep.Ranking
	withEfficiency(t, rep, 0)
	if DefaultWeights.Efficiency != 0 || rep.Ranking.Entries[0].Score != before.Entries[0].Score {
		t.Fatalf("weight 0 changed the ranking")
	}
	withEfficiency(t, rep, 1)
	rk := rep.Ranking
	if !strings.Contains(strings.Join(rk.Components, ","), "efficiency") {
		t.Fatalf("components %v", rk.Components)
	}
	// Per group, the lowest joules per token over the target's, averaged
	// over the groups.
	want := map[string]float64{}
	for _, load := range []float64{4, 8} {
		j := map[string]float64{}
		for _, c := range rep.Cells {
			if c.Load.Value == load {
				j[c.Target] = float64(c.Summary.Efficiency.JoulesPerOutputToken)
			}
		}
		best := min(j["fast"], j["slow"])
		for tg, v := range j {
			want[tg] += best / v / 2
		}
	}
	var fast, slow report.RankEntry
	for _, e := range rk.Entries {
		if e.Target == "fast" {
			fast = e
		} else {
			slow = e
		}
	}
	if !near(float64(fast.Efficiency), want["fast"]) || !near(float64(slow.Efficiency), want["slow"]) || want["fast"] == want["slow"] {
		t.Errorf("efficiency scores fast %v, slow %v; want %v", fast.Efficiency, slow.Efficiency, want)
	}
	with0 := func(e report.RankEntry) float64 {
		w := DefaultWeights
		return (w.Latency*float64(e.Latency) + w.Throughput*float64(e.Throughput) + 1*float64(e.Efficiency)) / (w.Latency + w.Throughput + 1)
	}
	if !near(fast.Score, with0(fast)) || !near(slow.Score, with0(slow)) {
		t.Errorf("scores %v, %v; want %v, %v", fast.Score, slow.Score, with0(fast), with0(slow))
	}
}

// TestMergeEfficiency: a merged repeat's energy counts each GPU once by
// its UUID (two shards beside one server read the same GPU), and adds
// the GPUs of shards on other hosts; it is over the pooled tokens.
func TestMergeEfficiency(t *testing.T) {
	for _, tc := range []struct {
		name   string
		uuids  [2]string
		joules float64
		gpus   int
	}{
		{"one host", [2]string{"GPU-A", "GPU-A"}, 1000, 1},
		{"two hosts", [2]string{"GPU-A", "GPU-B"}, 1000 + 1500, 2},
	} {
		raw := testShardJSON(t, 40)
		var shards []merge.ShardFile
		for i, b := range raw {
			r, err := report.Decode(b)
			if err != nil {
				t.Fatal(err)
			}
			for ci := range r.Cells {
				for ri := range r.Cells[ci].Repeats {
					r.Cells[ci].Repeats[ri].Stats.Efficiency = &report.Efficiency{Source: report.EnergyCounter,
						Devices: []report.GPUEnergy{{GPU: "0", UUID: tc.uuids[i], Name: "H", Joules: report.Num(1000 + 500*float64(i)), Source: report.EnergyCounter}}}
				}
			}
			shards = append(shards, merge.ShardFile{File: "shard-" + strconv.Itoa(i) + ".json", Report: r})
		}
		merged, err := Merge(context.Background(), shards)
		if err != nil {
			t.Fatal(err)
		}
		for _, c := range merged.Cells {
			for _, r := range c.Repeats {
				e := r.Stats.Efficiency
				if e == nil || e.GPUs != tc.gpus || !near(float64(e.EnergyJoules), tc.joules) {
					t.Fatalf("%s: %s: %+v", tc.name, c.Key, e)
				}
				if r.Stats.OutputTokens > 0 && !near(float64(e.JoulesPerOutputToken), tc.joules/r.Stats.OutputTokens) {
					t.Errorf("%s: %s: %v J/token over %v pooled tokens", tc.name, c.Key, e.JoulesPerOutputToken, r.Stats.OutputTokens)
				}
			}
			if c.Summary.Efficiency == nil || !near(float64(c.Summary.Efficiency.EnergyJoules), tc.joules) {
				t.Errorf("%s: %s: summary %+v", tc.name, c.Key, c.Summary.Efficiency)
			}
		}
	}
}

// TestGoldenEfficiency pins the Markdown and the CSV of the golden report
// with its cells' efficiency (withEfficiency), byte for byte: go test -run
// Golden ./bench/ -update rewrites them.
func TestGoldenEfficiency(t *testing.T) {
	rep := goldenReport(t)
	withEfficiency(t, rep, 0)
	checkGolden(t, "efficiency.md", rep, render.WriteMarkdown)
	checkGolden(t, "efficiency.csv", rep, render.WriteCSV)
	checkGolden(t, "efficiency.console.txt", rep, func(w io.Writer, r *report.Report) error { render.WriteResultBlocks(w, r); return nil })
}
