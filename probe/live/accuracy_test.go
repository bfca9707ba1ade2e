package live

import (
	"bytes"
	"context"
	"fmt"
	"net/http"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/infer-exporter/infer_exporter/internal/config"
	"github.com/infer-exporter/infer_exporter/internal/groundtruth"
	"github.com/infer-exporter/infer_exporter/internal/simulator"
	"github.com/infer-exporter/infer_exporter/internal/simulator/simulatortest"
	"github.com/infer-exporter/infer_exporter/internal/testenv"
	"github.com/infer-exporter/infer_exporter/probe/client"
	"github.com/infer-exporter/infer_exporter/probe/observation"
	"github.com/infer-exporter/infer_exporter/probe/plan"
	"github.com/infer-exporter/infer_exporter/probe/prompt"
	"github.com/infer-exporter/infer_exporter/probe/workload"
)

// The timing-accuracy tests compare what the client measured with the
// simulator's ground truth: every streamed chunk carries the instant the
// server wrote it (sim_emit_unix_nano). The client's read instant of the
// same event minus that emit instant is the measurement error: loopback
// transfer, the kernel, the Go scheduler, parsing. Both clocks are this
// process's wall clock.
//
// They run without the race detector (make test-timing), whose slowdown is
// not the exporter's.

// groundTruthDoer sends through the real client and pairs each observation
// with the server's emit instants of its content events.
type groundTruthDoer struct {
	client *client.Client
	mu     sync.Mutex
	pairs  []truthPair
}

type truthPair struct {
	obs   observation.Request
	emits []int64 // Unix ns of each content event, in order
}

func (d *groundTruthDoer) Do(ctx context.Context, t *client.Target, r *client.Request, o *observation.Request) {
	var buf bytes.Buffer
	d.client.Do(groundtruth.WithCapture(ctx, &buf), t, r, o)
	emits := groundtruth.ContentEmits(buf.Bytes())
	d.mu.Lock()
	d.pairs = append(d.pairs, truthPair{obs: *o, emits: emits})
	d.mu.Unlock()
}

type accuracy struct {
	tokenErr []time.Duration // client read instant - server emit instant, every content event
	ttftErr  []time.Duration // the same, first content event only
	itlErr   []time.Duration // client gap - server gap
	requests int
}

func measureAccuracy(t *testing.T, streams, requests, tokens int) accuracy {
	t.Helper()
	cfg := simulator.DefaultConfig()
	cfg.MaxNumSeqs = max(cfg.MaxNumSeqs, streams)
	baseURL, _ := simulatortest.StartTest(t, cfg)

	cl := client.New(client.Options{MaxConnsPerHost: streams, Transport: groundtruth.Transport{Inner: http.DefaultTransport.(*http.Transport).Clone()}})
	defer cl.Close()
	doer := &groundTruthDoer{client: cl}
	// With one stream, requests follow one another with a gap; with many,
	// all are scheduled within the first 100 ms, so they overlap.
	offsets := make([]time.Duration, requests)
	for i := range offsets {
		if streams == 1 {
			offsets[i] = time.Duration(i) * (time.Duration(tokens)*cfg.DecodeStep*2 + 50*time.Millisecond)
		} else {
			offsets[i] = time.Duration(i) * 100 * time.Millisecond / time.Duration(requests)
		}
	}
	reg := prometheus.NewRegistry()
	r := workload.Plan{
		Name: "accuracy", Target: &client.Target{Name: "sim", BaseURL: baseURL, Model: cfg.Model, Flavor: client.OpenAIChat},
		Source: workload.OpenLoop{Schedule: &listSchedule{offsets: offsets}, Prompts: prompt.New(config.Distribution{Dist: "fixed", Mean: 64}, config.Distribution{Dist: "fixed", Mean: float64(tokens)}, 1)},
		Client: doer, Limits: workload.Limits{MaxInFlight: streams},
		Monitor:  NewMetrics(reg).Series("sim", cfg.Model, "accuracy", config.SLO{}),
		Template: plan.Template{Sampling: config.Sampling{IgnoreEOS: true}, Timeout: time.Minute},
	}.Runner()
	r.Observer = liveSeries(r)
	r.Run(context.Background())

	var a accuracy
	for _, p := range doer.pairs {
		if p.obs.Outcome != observation.Success {
			t.Fatalf("request failed: %s: %v", p.obs.Outcome, p.obs.Err)
		}
		if len(p.emits) != len(p.obs.TokenTimes) || len(p.emits) != tokens {
			t.Fatalf("client saw %d content events, server emitted %d, want %d", len(p.obs.TokenTimes), len(p.emits), tokens)
		}
		a.requests++
		for i, e := range p.emits {
			a.tokenErr = append(a.tokenErr, time.Duration(p.obs.TokenTimes[i].UnixNano()-e))
			if i > 0 {
				client := p.obs.TokenTimes[i].Sub(p.obs.TokenTimes[i-1])
				server := time.Duration(e - p.emits[i-1])
				a.itlErr = append(a.itlErr, client-server)
			}
		}
		a.ttftErr = append(a.ttftErr, time.Duration(p.obs.FirstToken.UnixNano()-p.emits[0]))
	}
	return a
}

func quantile(ds []time.Duration, q float64) time.Duration {
	s := slices.Clone(ds)
	slices.Sort(s)
	return s[int(q*float64(len(s)-1))]
}

func absQuantile(ds []time.Duration, q float64) time.Duration {
	abs := make([]time.Duration, len(ds))
	for i, d := range ds {
		abs[i] = max(d, -d)
	}
	return quantile(abs, q)
}

// TestAccuracyAgainstGroundTruth states the tolerances of the client's
// timing, at 1 and at 500 concurrent streams, on this 2-core machine with
// the simulator in the same process (so it competes for the same cores).
func TestAccuracyAgainstGroundTruth(t *testing.T) {
	testenv.Timing(t)
	for _, tc := range []struct {
		streams, requests, tokens int
		// Tolerances on the p99 of |client - server|: the first token's
		// read instant, every token's read instant, and each ITL gap; and
		// on the median of the token's.
		ttftP99, tokenP50, tokenP99, itlP99 time.Duration
	}{
		// One stream: the client's own path, loopback and one wake-up,
		// bounded against a bare reader's floor of the same run
		// (floor_test.go).
		{streams: 1, requests: 8, tokens: 32},
		// 500 streams with the simulator in the same process: each decode
		// step emits 500 events at once, and both sides' goroutines queue
		// for the same 2 cores, so an event waits for those ahead of it.
		// Measured here: token error p99 12-16 ms in November 2026; in
		// December, on the same kind of machine with nothing else running,
		// 15-29 ms, alike at the commit before the live observers and
		// after them (ITL error p99 12-23 ms, TTFT error p99 8-10 ms); on
		// 1 December 21-46 ms at p99 and 5.9-7.2 ms at p50, alike at the
		// commit before the grouped sends and after them. The p99 follows
		// the machine's scheduling, not the client, so its bound leaves
		// room above that spread; the median is steadier, and its bound
		// fails a client that read events a decode step (20 ms) late. The
		// load harness (README) measures the client alone, with the server
		// in another process.
		{streams: 500, requests: 500, tokens: 32, ttftP99: 40 * time.Millisecond, tokenP50: 12 * time.Millisecond, tokenP99: 70 * time.Millisecond, itlP99: 70 * time.Millisecond},
	} {
		t.Run(fmt.Sprintf("streams=%d", tc.streams), func(t *testing.T) {
			var floor readFloor
			if tc.streams == 1 {
				floor = measureFloor(t, simulator.DefaultConfig().DecodeStep)
			}
			a := measureAccuracy(t, tc.streams, tc.requests, tc.tokens)
			for _, d := range a.tokenErr {
				// The client cannot read an event before the server wrote it.
				if d < 0 {
					t.Fatalf("client read an event %v before the server emitted it", d)
				}
			}
			t.Logf("%d requests: token error p50 %v p99 %v max %v; TTFT error p50 %v p99 %v; ITL |error| p50 %v p99 %v",
				a.requests, quantile(a.tokenErr, .5), quantile(a.tokenErr, .99), quantile(a.tokenErr, 1),
				quantile(a.ttftErr, .5), quantile(a.ttftErr, .99), absQuantile(a.itlErr, .5), absQuantile(a.itlErr, .99))
			if tc.streams == 1 {
				floor.checkRead(t, "TTFT error", a.ttftErr)
				floor.checkRead(t, "token error", a.tokenErr)
				floor.checkITL(t, "ITL |error|", a.itlErr)
				return
			}
			if got := quantile(a.ttftErr, .99); got > tc.ttftP99 {
				t.Errorf("TTFT error p99 %v > %v", got, tc.ttftP99)
			}
			if got := quantile(a.tokenErr, .5); got > tc.tokenP50 {
				t.Errorf("token error p50 %v > %v", got, tc.tokenP50)
			}
			if got := quantile(a.tokenErr, .99); got > tc.tokenP99 {
				t.Errorf("token error p99 %v > %v", got, tc.tokenP99)
			}
			if got := absQuantile(a.itlErr, .99); got > tc.itlP99 {
				t.Errorf("ITL error p99 %v > %v", got, tc.itlP99)
			}
		})
	}
}
