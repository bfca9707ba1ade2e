package prober

import (
	"math"
	"math/rand/v2"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/infer-exporter/infer_exporter/internal/simulator"
	"github.com/infer-exporter/infer_exporter/internal/testenv"
)

// TestLoadCeiling: 200 scrapes of /probe in parallel against one target
// whose ceilings are 5 requests/s and 2 concurrent probes. Measured at the
// server: no window holds more arrivals than the ceiling allows, and no
// more requests are in flight than 2 probes can have. Scrapes over a
// ceiling fail at once, with probe_success 0 and the reason, and send
// nothing.
//
// Tolerance: sends are spaced at least 200ms apart; a window of W seconds
// may then hold W*5+1 sends. Arrivals can be closer than sends by loopback
// jitter, which would have to reach 200ms to add an arrival to a window, so
// the bound W*5+1 is checked exactly. That check reads the server's arrival
// instants, which carry the way there: a send delayed by a busy machine
// (beside two busy loops and the race detector, by more than the 150 ms
// allowed) arrives closer to the next one, so it is
// TestLoadCeilingAccuracy's, alone on the machine; the admissions, the
// refusals, the requests the server saw and the in-flight bound are this
// test's, whatever the machine's speed.
func TestLoadCeiling(t *testing.T) { loadCeiling(t, false) }

// TestLoadCeilingAccuracy: the same load, and no window of the server's
// arrivals holds more than the ceiling allows (make test-timing).
func TestLoadCeilingAccuracy(t *testing.T) {
	testenv.Timing(t)
	loadCeiling(t, true)
}

func loadCeiling(t *testing.T, windows bool) {
	const (
		scrapes  = 200
		rps      = 5
		probes   = 2
		requests = 4 // per probe, 2 at a time
	)
	url, sim, rec := startSim(t, instantSim())
	// Each request lasts 300ms, so that requests of the admitted probes
	// overlap and the in-flight bound is tested.
	if err := sim.SetFaults(simulator.Faults{StallBeforeFirstToken: 300 * time.Millisecond}); err != nil {
		t.Fatal(err)
	}
	cfg := loadConfig(t, `targets:
  - {name: sim, url: {{URL}}, model: sim-model}
modules:
  four:
    requests: 4
    concurrency: 2
    prompt: {input_tokens: {dist: fixed, mean: 8}, output_tokens: {dist: fixed, mean: 4}}
probe:
  max_requests_per_second: 5
  max_concurrent_probes: 2
`, url)
	e := newEnv(t, cfg, nil)

	// The scrapes start together or spread over 2s (fixed seed), so that
	// probes keep being admitted while others run and the rate ceiling, not
	// only the concurrency ceiling, is what holds the load.
	rng := rand.New(rand.NewPCG(42, 0))
	delays := make([]time.Duration, scrapes)
	for i := range delays {
		if i%2 == 1 {
			delays[i] = time.Duration(rng.Int64N(int64(2 * time.Second)))
		}
	}
	bodies := make([]string, scrapes)
	var wg sync.WaitGroup
	for i := range scrapes {
		wg.Go(func() {
			time.Sleep(delays[i])
			_, bodies[i] = e.scrape(t, "four", url, "30", false)
		})
	}
	wg.Wait()

	admitted, refused := 0, 0
	for i, body := range bodies {
		m := parseMetrics(t, body)
		switch reason := m.failedReason(t); reason {
		case "":
			admitted++
			if m.must(t, `probe_requests{outcome="success"}`) != requests {
				t.Errorf("scrape %d: admitted probe did not complete its requests", i)
			}
		case ReasonConcurrencyCeiling, ReasonRateCeiling:
			refused++
			if m.must(t, "probe_success") != 0 || m.must(t, `probe_requests{outcome="dropped"}`) != requests {
				t.Errorf("scrape %d: refused probe reports success or sent requests:\n%s", i, body)
			}
		default:
			t.Errorf("scrape %d failed for %s:\n%s", i, reason, body)
		}
	}
	if admitted < probes || admitted+refused != scrapes {
		t.Fatalf("admitted %d, refused %d of %d", admitted, refused, scrapes)
	}

	rec.mu.Lock()
	arrivals := append([]time.Time(nil), rec.arrivals...)
	maxInFlight := rec.maxInFlight
	rec.mu.Unlock()
	if len(arrivals) != admitted*requests {
		t.Errorf("server saw %d requests; the %d admitted probes sent %d, refused ones must send none",
			len(arrivals), admitted, admitted*requests)
	}
	if maxInFlight > probes*2 || maxInFlight < 2 {
		t.Errorf("%d requests in flight at the server; want 2 or more (the requests overlap) and at most 2 probes x concurrency 2", maxInFlight)
	}
	// The ceiling spaces the sends; the server's arrival instants carry
	// the way there too (a send delayed by a busy CPU under the race
	// detector arrives closer to the next one), so windows are shortened
	// by an allowance for that delay.
	const transit = 150 * time.Millisecond
	for _, w := range []time.Duration{time.Second, 2 * time.Second, 5 * time.Second} {
		if !windows {
			break
		}
		limit := int(math.Floor(w.Seconds()*rps)) + 1
		if worst := maxInWindow(arrivals, w-transit); worst > limit {
			t.Errorf("%d arrivals within %v, above the ceiling's %d", worst, w, limit)
		}
	}
	span := arrivals[len(arrivals)-1].Sub(arrivals[0])
	t.Logf("%d scrapes: %d probes admitted, %d refused; %d requests over %v (%.2f/s, ceiling %d/s); max in flight %d",
		scrapes, admitted, refused, len(arrivals), span.Round(time.Millisecond),
		float64(len(arrivals)-1)/span.Seconds(), rps, maxInFlight)
	if !strings.Contains(e.history.HTML(), "concurrency_ceiling") {
		t.Error("refusals missing from the history")
	}
}

// maxInWindow is the largest number of sorted instants within any closed
// window of length w.
func maxInWindow(ts []time.Time, w time.Duration) int {
	worst, j := 0, 0
	for i := range ts {
		for ts[i].Sub(ts[j]) > w {
			j++
		}
		worst = max(worst, i-j+1)
	}
	return worst
}
