package live

import (
	"context"
	"regexp"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/infer-exporter/infer_exporter/internal/config"
	"github.com/infer-exporter/infer_exporter/probe/client"
	"github.com/infer-exporter/infer_exporter/probe/observation"
	"github.com/infer-exporter/infer_exporter/probe/workload"
)

func check(prompt, expect string, every int, interval time.Duration) config.Check {
	return config.Check{
		KnownAnswer: config.KnownAnswer{Prompt: prompt, Expect: expect, MaxTokens: 8, Pattern: regexp.MustCompile(expect)},
		Every:       every, Interval: interval,
	}
}

// answerDoer answers every request at once: known prompts with their scripted
// outcome and text, others with a plain success.
type answerDoer struct {
	mu      sync.Mutex
	prompts []string
	answers map[string]observation.Request
}

func (d *answerDoer) Do(_ context.Context, _ *client.Target, r *client.Request, o *observation.Request) {
	d.mu.Lock()
	d.prompts = append(d.prompts, r.Prompt)
	d.mu.Unlock()
	now := time.Now()
	o.Sent, o.FirstToken, o.End = now, now, now.Add(time.Millisecond)
	o.TokenTimes = []time.Time{now, now.Add(time.Millisecond)}
	o.Outcome, o.OutputTokens, o.TokenSource = observation.Success, 2, observation.TokensFromUsage
	if a, ok := d.answers[r.Prompt]; ok {
		if !r.KeepText {
			o.Outcome = observation.StreamError // a check must ask for the text
			return
		}
		o.Outcome, o.Text = a.Outcome, a.Text
	}
}

func TestRunnerSendsChecksInPlaceOfArrivals(t *testing.T) {
	reg := prometheus.NewRegistry()
	doer := &answerDoer{answers: map[string]observation.Request{
		"capital of France?": {Outcome: observation.Success, Text: " It is Paris."},
		"2+2=":               {Outcome: observation.Success, Text: " five"},
		"down?":              {Outcome: observation.HTTP5xx},
	}}
	offsets := make([]time.Duration, 12)
	r := newTestRunner(t, reg, &listSchedule{offsets: offsets}, doer, 100)
	r.Checks = []config.Check{
		check("capital of France?", "(?i)paris", 3, 0), // arrivals 3, 6, 9, 12
		check("2+2=", `\b4\b`, 4, 0),                   // 4, 8 (12 is taken by the first)
		check("down?", "ok", 5, 0),                     // 5, 10
	}
	var results atomic.Int64
	onResult(r, func(*observation.Request) { results.Add(1) })
	r.Run(context.Background())

	counts := map[string]float64{workload.CheckPass: 4, workload.CheckFail: 2, workload.CheckError: 2}
	for result, want := range counts {
		if got := testutil.ToFloat64(liveSeries(r).m.checks.WithLabelValues("t", "m", "w", result)); got != want {
			t.Errorf("known_answer_checks_total{result=%q} = %v, want %v", result, got, want)
		}
	}
	// Checks replace arrivals: 12 arrivals, 8 checks, so 4 measured requests,
	// and none of the checks reaches the latency histograms or outcomes.
	if got := testutil.ToFloat64(liveSeries(r).m.requests.WithLabelValues("t", "m", "w", "success")); got != 4 {
		t.Errorf("requests_total{success} = %v, want 4 (checks are not workload requests)", got)
	}
	if n := results.Load(); n != 4 {
		t.Errorf("OnResult saw %d observations, want 4", n)
	}
	if n := testutil.CollectAndCount(liveSeries(r).m.ttft); n != 1 {
		t.Fatalf("ttft series = %d", n)
	}
	if len(doer.prompts) != 12 {
		t.Fatalf("sent %d requests, want 12", len(doer.prompts))
	}
}

func TestChecksCountersOnlyForWorkloadsWithChecks(t *testing.T) {
	reg := prometheus.NewRegistry()
	m := NewMetrics(reg)
	m.Series("t", "m", "plain", config.SLO{})
	s := m.Series("t", "m", "checked", config.SLO{})
	s.InitChecks()
	if n := testutil.CollectAndCount(m.checks); n != 3 {
		t.Errorf("check series = %d, want 3 (pass, fail, error of the checked workload only)", n)
	}
	s.Delete()
	if n := testutil.CollectAndCount(m.checks); n != 0 {
		t.Errorf("check series after Delete = %d, want 0", n)
	}
}
