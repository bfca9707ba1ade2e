package bench

import (
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/infer-exporter/infer_exporter/bench/report"
	"github.com/infer-exporter/infer_exporter/internal/config"
	"github.com/infer-exporter/infer_exporter/probe/observation"
)

// queueCell is one seeded cell against a modelled server: Poisson arrivals
// at rate for warmup seconds before the windows and windows seconds in
// them, served first come first served by servers slots, each request
// service seconds long (±10%); a request fails at once with probability
// failFast (an instant 503) without taking a slot. It returns what the
// recorder makes of the windows.
func queueCell(seed uint64, rate, service float64, servers int, failFast float64, warmup, windows int) report.Stats {
	rng := rand.New(rand.NewPCG(seed, 7))
	w0 := time.Unix(10_000, 0)
	at := func(s float64) time.Time { return w0.Add(time.Duration(s * float64(time.Second))) }
	free := make([]float64, servers) // when each slot is free again
	for i := range free {
		free[i] = -float64(warmup)
	}
	rc := newRecorderAt(w0, time.Second, config.SLO{}, 100_000, 1000, seed)
	for t := -float64(warmup) + rng.ExpFloat64()/rate; t < float64(windows); t += rng.ExpFloat64() / rate {
		o := &observation.Request{Scheduled: at(t), Sent: at(t)}
		if rng.Float64() < failFast {
			o.End, o.Outcome, o.HTTPStatus = at(t+0.005), observation.HTTP5xx, 503
			rc.observe(o)
			continue
		}
		i := slices.Index(free, slices.Min(free))
		start := max(t, free[i])
		end := start + service*(0.9+0.2*rng.Float64())
		free[i] = end
		o.FirstToken, o.End, o.Outcome = at(start+0.05), at(end), observation.Success
		o.TokenTimes, o.ContentEvents, o.OutputTokens = []time.Time{at(start + 0.05), at(end)}, 2, 2
		rc.observe(o)
	}
	st, _ := rc.finish(windows, 0)
	return st
}

// TestSteadyStateFalsePositives: the overloaded and draining flags hold
// their rule against Poisson noise. Over 200 seeded short cells (2 s of
// warm-up, 6 windows of 1 s) at 2 req/s against a server with spare
// capacity (0.74 s requests, 16 slots; and at 20 req/s, 64 slots), at most
// 1% are flagged either way; a server that fails half its requests at once
// (a 503 in 5 ms) is never called overloaded; and a server sent more than
// its capacity (3 times over 10 s of windows, 1.5 times over 60 s, one
// slot) is called overloaded in every seeded cell.
func TestSteadyStateFalsePositives(t *testing.T) {
	const cells = 200
	for _, tc := range []struct {
		name              string
		rate, service     float64
		servers           int
		failFast          float64
		windows           int
		maxFlagged        int  // cells flagged overloaded or draining, at most
		wantAllOverloaded bool // every cell flagged overloaded
	}{
		{name: "spare capacity", rate: 2, service: 0.74, servers: 16, windows: 6, maxFlagged: cells / 100},
		{name: "spare capacity, busier", rate: 20, service: 0.74, servers: 64, windows: 6, maxFlagged: cells / 100},
		{name: "fails half at once", rate: 2, service: 0.74, servers: 16, failFast: 0.5, windows: 6, maxFlagged: cells / 100},
		// Detection takes growth past the noise: at 3 times the capacity
		// 10 s of windows, at 1.5 times 60 s (6 s flag 3x in 92% of
		// cells, 10 s 1.5x in 52%).
		{name: "3x its capacity", rate: 6, service: 0.5, servers: 1, windows: 10, wantAllOverloaded: true},
		{name: "1.5x its capacity", rate: 3, service: 0.5, servers: 1, windows: 60, wantAllOverloaded: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			overloaded, draining := 0, 0
			for seed := range uint64(cells) {
				st := queueCell(seed, tc.rate, tc.service, tc.servers, tc.failFast, 2, tc.windows)
				if st.Overloaded {
					overloaded++
				}
				if st.Draining {
					draining++
				}
			}
			t.Logf("%s: %d of %d cells overloaded, %d draining", tc.name, overloaded, cells, draining)
			if tc.wantAllOverloaded {
				if overloaded != cells {
					t.Errorf("%d of %d cells of an overloaded server flagged overloaded, want all", overloaded, cells)
				}
				return
			}
			if overloaded+draining > tc.maxFlagged {
				t.Errorf("%d overloaded and %d draining of %d cells with spare capacity, want at most %d", overloaded, draining, cells, tc.maxFlagged)
			}
		})
	}
}
