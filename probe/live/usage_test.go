package live

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/infer-exporter/infer_exporter/internal/config"
	"github.com/infer-exporter/infer_exporter/probe/client"
	"github.com/infer-exporter/infer_exporter/probe/observation"
)

// TestUsageNotBelievedCounted: a server that streams 4 tokens and claims
// 1e9 in its usage adds 4 to completion_tokens_total, not 1e9, and one
// to infer_probe_usage_not_believed_total, which exists at 0 from the
// workload's start with its HELP.
func TestUsageNotBelievedCounted(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		for _, tok := range []string{"a", " b", " c", " d"} {
			io.WriteString(w, `data: {"choices":[{"index":0,"delta":{"content":"`+tok+`"}}]}`+"\n\n")
			w.(http.Flusher).Flush()
			time.Sleep(time.Millisecond)
		}
		io.WriteString(w, `data: {"choices":[],"usage":{"prompt_tokens":3,"completion_tokens":1000000000,"total_tokens":1000000003}}`+"\n\ndata: [DONE]\n\n")
	}))
	defer srv.Close()
	reg := prometheus.NewRegistry()
	s := NewMetrics(reg).Series("t", "m", "w", config.SLO{})
	const name = "infer_probe_usage_not_believed_total"
	if n, err := testutil.GatherAndCount(reg, name); err != nil || n != 1 {
		t.Fatalf("%s: %d series (%v), want 1 at 0 from the start", name, n, err)
	}
	c := client.New(client.Options{})
	defer c.Close()
	obs := observation.Request{Scheduled: time.Now()}
	c.Do(context.Background(), &client.Target{BaseURL: srv.URL}, &client.Request{Prompt: "p", MaxTokens: 16}, &obs)
	if obs.Outcome != observation.Success {
		t.Fatalf("outcome %s: %v", obs.Outcome, obs.Err)
	}
	s.Observe(&obs)
	if got := testutil.ToFloat64(s.usageNotBelieved); got != 1 {
		t.Errorf("%s = %v, want 1", name, got)
	}
	if got := testutil.ToFloat64(s.completionTokens); got != 4 {
		t.Errorf("completion_tokens_total = %v, want the 4 streamed", got)
	}
	if d, ok := obs.TPOT(); !ok || d <= 0 {
		t.Errorf("TPOT %v %v, want the events' own", d, ok)
	}
	want := `# HELP ` + name + ` Requests whose server usage count of output tokens could not be true (above max_tokens, or beyond what was streamed); their events were counted.
# TYPE ` + name + ` counter
` + name + `{model="m",target="t",workload="w"} 1
`
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want), name); err != nil {
		t.Error(err)
	}
}

// claimServer speaks the OpenAI chat API: it streams n tokens a
// millisecond apart, then a usage that claims claim of them; its other
// endpoints (/tokenize) answer 404.
func claimServer(t *testing.T, n, claim int) *httptest.Server {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/v1/chat/completions" {
			http.NotFound(w, r)
			return
		}
		_, _ = io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", "text/event-stream")
		for range n {
			time.Sleep(time.Millisecond)
			_, _ = io.WriteString(w, `data: {"choices":[{"index":0,"delta":{"content":" w"}}]}`+"\n\n")
			w.(http.Flusher).Flush()
		}
		_, _ = fmt.Fprintf(w, "data: {\"choices\":[],\"usage\":{\"prompt_tokens\":16,\"completion_tokens\":%d,\"total_tokens\":%d}}\n\ndata: [DONE]\n\n", claim, claim+16)
	}))
	t.Cleanup(srv.Close)
	return srv
}

// TestUsageNotBelievedInMetrics: a workload run by the manager against a
// server whose usage cannot be true, as /metrics shows it: no more than
// max_tokens (16) a successful request in completion_tokens_total, each
// counted in usage_not_believed_total, and a TPOT of the events' time over
// the tokens credited (they came a millisecond apart at least), not 0; a
// count that can be true is taken as it is.
func TestUsageNotBelievedInMetrics(t *testing.T) {
	const maxTokens = 16
	for _, tc := range []struct {
		name            string
		streamed, claim int
		perRequest      int
		lied            bool
	}{
		{"1e9 for 4 streamed", 4, 1e9, 4, true},
		{"20 of max_tokens 16, 16 streamed", 16, 20, 16, true},
		{"20 of max_tokens 16, 20 streamed", 20, 20, 16, true},
		{"16 for 4 streamed: can be true", 4, 16, 16, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srv := claimServer(t, tc.streamed, tc.claim)
			c, err := config.Parse([]byte(fmt.Sprintf(`targets:
  - {name: liar, url: %q, model: m, metrics: {engine: none}}
workloads:
  - name: w
    target: liar
    arrival: {process: constant, rate: 50}
    max_in_flight: 8
    prompt:
      input_tokens: {dist: fixed, mean: 16}
      output_tokens: {dist: fixed, mean: %d}
`, srv.URL, maxTokens)), "c.yml")
			if err != nil {
				t.Fatal(err)
			}
			reg := prometheus.NewRegistry()
			m := NewManager(NewMetrics(reg), Options{}, slog.New(slog.DiscardHandler))
			if err := m.Apply(context.Background(), c); err != nil {
				t.Fatal(err)
			}
			// Until 10 requests succeeded (a bound only so that a
			// broken build fails rather than hangs), then stop: every
			// request has ended and been counted.
			for deadline := time.Now().Add(30 * time.Second); value(t, reg, "infer_probe_requests_total", "outcome", "success") < 10; {
				if time.Now().After(deadline) {
					t.Fatal("10 requests did not succeed within 30s")
				}
				time.Sleep(10 * time.Millisecond)
			}
			m.Stop()
			successes := value(t, reg, "infer_probe_requests_total", "outcome", "success")
			if got, want := value(t, reg, "infer_probe_completion_tokens_total", "", ""), successes*float64(tc.perRequest); got != want {
				t.Errorf("completion_tokens_total %v for %v successes, want %v", got, successes, want)
			}
			notBelieved := value(t, reg, "infer_probe_usage_not_believed_total", "", "")
			if tc.lied && notBelieved < successes || !tc.lied && notBelieved != 0 {
				t.Errorf("usage_not_believed_total %v for %v successes", notBelieved, successes)
			}
			// The events came at least a millisecond apart: a TPOT of
			// (streamed - 1) ms at least over the tokens credited.
			least := 0.001 * float64(tc.streamed-1) / float64(tc.perRequest-1)
			sum, count := histogramOf(t, reg, "infer_probe_time_per_output_token_seconds")
			if count != successes || sum/count < least {
				t.Errorf("TPOT: %v observations for %v successes, mean %v s, want %v s at least", count, successes, sum/count, least)
			}
		})
	}
}

// value is the sum of the gathered series of name whose label (when
// given) has that value.
func value(t *testing.T, reg *prometheus.Registry, name, label, want string) float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	v := 0.0
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
		for _, mt := range mf.GetMetric() {
			match := label == ""
			for _, l := range mt.GetLabel() {
				if l.GetName() == label && l.GetValue() == want {
					match = true
				}
			}
			if match {
				v += mt.GetCounter().GetValue()
			}
		}
	}
	return v
}

// histogramOf is the sum and count of the gathered histogram name.
func histogramOf(t *testing.T, reg *prometheus.Registry, name string) (sum, count float64) {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() == name {
			for _, mt := range mf.GetMetric() {
				sum += mt.GetHistogram().GetSampleSum()
				count += float64(mt.GetHistogram().GetSampleCount())
			}
		}
	}
	return sum, count
}
