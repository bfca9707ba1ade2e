package prober

import (
	"bytes"
	"fmt"
	"math"
	"net/http"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/common/expfmt"

	"github.com/infer-exporter/infer_exporter/probe/observation"
)

// TestReasoningMetrics: the time to the first answer token beside TTFT, per
// request and as a summary, and the reasoning tokens of the successful
// requests: the server's count where it sent one, else reasoning events.
func TestReasoningMetrics(t *testing.T) {
	base := time.Unix(1000, 0)
	at := func(ms int) time.Time { return base.Add(time.Duration(ms) * time.Millisecond) }
	res := &result{requests: []observation.Request{
		// Reasoned for 2 events (usage says 5 tokens), answered at 300 ms.
		{Scheduled: at(0), Sent: at(1), FirstToken: at(100), FirstAnswer: at(300), TokenTimes: []time.Time{at(100), at(200), at(300)},
			End: at(300), Outcome: observation.Success, OutputTokens: 6, ReasoningTokens: 5, ReasoningEvents: 2, ContentEvents: 3},
		// Reasoned for 3 events, no usage count of them; answered at 1500 ms.
		{Scheduled: at(1000), Sent: at(1001), FirstToken: at(1100), FirstAnswer: at(1500),
			TokenTimes: []time.Time{at(1100), at(1200), at(1300), at(1500)},
			End:        at(1500), Outcome: observation.Success, OutputTokens: 4, ReasoningEvents: 3, ContentEvents: 4},
		// No reasoning: the first answer is the first token.
		{Scheduled: at(2000), Sent: at(2001), FirstToken: at(2050), FirstAnswer: at(2050), TokenTimes: []time.Time{at(2050), at(2100)},
			End: at(2100), Outcome: observation.Success, OutputTokens: 2, ContentEvents: 2},
		// Cut while reasoning: a TTFT, no answer; its reasoning does not
		// count (not successful).
		{Scheduled: at(3000), Sent: at(3001), FirstToken: at(3200), TokenTimes: []time.Time{at(3200)},
			End: at(3300), Outcome: observation.Disconnected, OutputTokens: 1, ReasoningEvents: 1, ContentEvents: 1},
	}}
	reg := prometheus.NewPedanticRegistry()
	reg.MustRegister(resultCollector{res})
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	for _, mf := range mfs {
		if _, err := expfmt.MetricFamilyToText(&buf, mf); err != nil {
			t.Fatal(err)
		}
	}
	m := parseMetrics(t, buf.String())
	for k, v := range map[string]float64{
		"probe_reasoning_tokens": 5 + 3,
		`probe_request_time_to_first_answer_token_seconds{request="0"}`: 0.3,
		`probe_request_time_to_first_answer_token_seconds{request="1"}`: 0.5,
		`probe_request_time_to_first_answer_token_seconds{request="2"}`: 0.05,
		`probe_time_to_first_answer_token_seconds{quantile="0.5"}`:      0.3,
		`probe_time_to_first_answer_token_seconds{quantile="1"}`:        0.5,
		"probe_time_to_first_answer_token_seconds_count":                3,
		"probe_time_to_first_answer_token_seconds_sum":                  0.85,
		`probe_request_time_to_first_token_seconds{request="0"}`:        0.1,
		"probe_time_to_first_token_seconds_count":                       4,
		`probe_time_to_first_token_seconds{quantile="1"}`:               0.2,
		`probe_request_time_to_first_token_seconds{request="3"}`:        0.2,
		`probe_request_time_to_first_token_seconds{request="1"}`:        0.1,
		`probe_request_time_to_first_token_seconds{request="2"}`:        0.05,
		`probe_request_time_per_output_token_seconds{request="0"}`:      0.04,
		`probe_request_output_tokens{request="1"}`:                      4,
		`probe_requests{outcome="success"}`:                             3,
		`probe_requests{outcome="disconnected"}`:                        1,
		"probe_output_tokens":                                           12,
		`probe_time_to_first_answer_token_seconds{quantile="0.99"}`:     0.5,
		`probe_time_to_first_answer_token_seconds{quantile="0.9"}`:      0.5,
	} {
		if got := m.must(t, k); math.Abs(got-v) > 1e-9 {
			t.Errorf("%s = %v, want %v", k, got, v)
		}
	}
	if _, ok := m[`probe_request_time_to_first_answer_token_seconds{request="3"}`]; ok {
		t.Error("a request without an answer has a TTFA")
	}

	// A request whose 200 reasoning tokens were counted but hidden (20
	// visible tokens 20 ms apart): both gauges count them, by the rule of
	// the live metrics and the bench (observation.Request.Reasoning), and
	// its TPOT is its visible pace.
	hidden := observation.Request{Scheduled: at(0), Sent: at(0), FirstToken: at(1000), FirstAnswer: at(1000), End: at(1385),
		Outcome: observation.Success, OutputTokens: 220, ReasoningTokens: 200, ContentEvents: 20, TokenSource: observation.TokensFromUsage}
	for i := range 20 {
		hidden.TokenTimes = append(hidden.TokenTimes, at(1000+20*i))
	}
	res.requests = append(res.requests, hidden)
	reg = prometheus.NewPedanticRegistry()
	reg.MustRegister(resultCollector{res})
	mfs, _ = reg.Gather()
	buf.Reset()
	for _, mf := range mfs {
		expfmt.MetricFamilyToText(&buf, mf)
	}
	m = parseMetrics(t, buf.String())
	for k, v := range map[string]float64{
		"probe_reasoning_tokens":                                   5 + 3 + 200,
		"probe_hidden_reasoning_tokens":                            200,
		`probe_request_time_per_output_token_seconds{request="4"}`: 0.02,
	} {
		if got := m.must(t, k); math.Abs(got-v) > 1e-9 {
			t.Errorf("%s = %v, want %v", k, got, v)
		}
	}

	// Without any request that reasoned the gauge is 0, and present.
	res.requests = res.requests[2:3]
	reg = prometheus.NewPedanticRegistry()
	reg.MustRegister(resultCollector{res})
	mfs, _ = reg.Gather()
	buf.Reset()
	for _, mf := range mfs {
		expfmt.MetricFamilyToText(&buf, mf)
	}
	if got := parseMetrics(t, buf.String()).must(t, "probe_reasoning_tokens"); got != 0 {
		t.Errorf("probe_reasoning_tokens = %v without reasoning", got)
	}
}

// TestProbeReasoningModel probes the simulator in reasoning mode: each
// request reasons for 5 tokens, then answers with 3; the usage count
// reports the reasoning tokens, and the first answer comes after the 5
// reasoning decode steps.
func TestProbeReasoningModel(t *testing.T) {
	cfg := instantSim()
	cfg.ReasoningTokens = 5
	cfg.TimeScale = 0.25 // decode steps of a quarter of the default
	url, _, _ := startSim(t, cfg)
	e := newEnv(t, loadConfig(t, simConfig, url), nil)
	code, body := e.scrape(t, "chat", url, "10", false)
	if code != http.StatusOK {
		t.Fatalf("status %d: %s", code, body)
	}
	m := parseMetrics(t, body)
	if m.must(t, "probe_success") != 1 {
		t.Fatalf("probe failed:\n%s", body)
	}
	// The chat module: 3 requests of 8 output tokens (ignore_eos).
	if got := m.must(t, "probe_reasoning_tokens"); got != 3*5 {
		t.Errorf("probe_reasoning_tokens = %v, want 3 x 5", got)
	}
	if got := m.must(t, "probe_output_tokens"); got != 3*8 {
		t.Errorf("probe_output_tokens = %v, want 3 x 8 (reasoning included)", got)
	}
	for i := range 3 {
		req := fmt.Sprintf(`{request="%d"}`, i)
		ttft := m.must(t, "probe_request_time_to_first_token_seconds"+req)
		ttfa := m.must(t, "probe_request_time_to_first_answer_token_seconds"+req)
		// The answer's first token is the sixth: the server spends at
		// least 5 decode steps after the first token on the other five (a
		// step is never shorter than its configured time). Both figures
		// run from the scheduled send, so the client's delays on a busy
		// machine only lengthen them: TTFA is at least those 5 steps,
		// and after TTFT. (Their difference is not bounded below: a late
		// read of the first token shortens it.)
		step := (time.Duration(float64(cfg.DecodeStep) * cfg.TimeScale)).Seconds()
		if !(ttfa >= 5*step && ttfa > ttft) {
			t.Errorf("request %d: TTFA %v not 5 steps (%v s) from the send and after TTFT %v", i, ttfa, 5*step, ttft)
		}
	}
	if got := m.must(t, "probe_time_to_first_answer_token_seconds_count"); got != 3 {
		t.Errorf("TTFA count %v", got)
	}
}
