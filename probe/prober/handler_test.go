package prober

import (
	"fmt"
	"math"
	"net/http"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/infer-exporter/infer_exporter/internal/config"
	"github.com/infer-exporter/infer_exporter/internal/simulator"
	"github.com/infer-exporter/infer_exporter/probe/observation"
)

// simConfig has one configured target, the simulator at {{URL}} with a
// token, and modules for the handler tests.
var simConfig = `targets:
  - name: sim
    url: {{URL}}
    model: sim-model
    bearer_token_file: token
modules:
  chat:
    requests: 3
    concurrency: 2
    prompt:
      input_tokens: {dist: fixed, mean: 16}
      output_tokens: {dist: fixed, mean: 8}
    sampling: {ignore_eos: true}
  one:
    prompt:
      output_tokens: {dist: fixed, mean: 4}
    sampling: {ignore_eos: true}
  wrong_model:
    model: nope
  slo:
    slo: {ttft: 50ms}
    prompt:
      output_tokens: {dist: fixed, mean: 4}
    sampling: {ignore_eos: true}
  capped:
    timeout: 1500ms
  answers:
    known_answers:
      - prompt: "Say some words."
        expect: '^( (` + simWords + `))+$'
      - prompt: "What is six times seven?"
        expect: '\b42\b'
  right_answers:
    known_answers:
      - prompt: "Say some words."
        expect: '^( (` + simWords + `))+$'
probe:
  max_requests_per_second: 1000
  max_concurrent_probes: 100
`

// simWords is the simulator's output vocabulary as a regexp alternation:
// the simulator answers with filler words, so a known-answer pattern that
// matches them passes and any real answer (42) fails.
var simWords = strings.Join(simulator.OutputVocabulary[:], "|")

func TestProbeSuccess(t *testing.T) {
	url, sim, rec := startSim(t, instantSim())
	e := newEnv(t, loadConfig(t, simConfig, url), nil)
	code, body := e.scrape(t, "chat", url, "10", false)
	if code != http.StatusOK {
		t.Fatalf("status %d: %s", code, body)
	}
	m := parseMetrics(t, body)
	if m.must(t, "probe_success") != 1 || m.failedReason(t) != "" {
		t.Fatalf("probe failed:\n%s", body)
	}
	if got := m.must(t, `probe_requests{outcome="success"}`); got != 3 {
		t.Errorf("successful requests = %v, want 3", got)
	}
	for _, oc := range observation.Outcomes {
		if oc != observation.Success && m.must(t, fmt.Sprintf("probe_requests{outcome=%q}", oc)) != 0 {
			t.Errorf("outcome %s counted", oc)
		}
	}
	if got := rec.count(); got != 3 {
		t.Errorf("simulator saw %d requests, want 3", got)
	}
	if m.must(t, "probe_http_status_code") != 200 || m.must(t, "probe_goodput_requests") != 3 {
		t.Errorf("status/goodput wrong:\n%s", body)
	}
	// ignore_eos makes the simulator generate exactly max_tokens.
	if got := m.must(t, "probe_output_tokens"); got != 24 {
		t.Errorf("output tokens = %v, want 3 x 8", got)
	}
	var maxTTFT, maxE2E, sumTTFT float64
	for i := range 3 {
		req := fmt.Sprintf(`{request="%d"}`, i)
		ttft := m.must(t, "probe_request_time_to_first_token_seconds"+req)
		e2e := m.must(t, "probe_request_e2e_latency_seconds"+req)
		m.must(t, "probe_request_time_per_output_token_seconds"+req)
		if m.must(t, "probe_request_output_tokens"+req) != 8 || m.must(t, "probe_request_success"+req) != 1 {
			t.Errorf("request %d tokens/success wrong", i)
		}
		if !(ttft > 0 && ttft <= e2e) {
			t.Errorf("request %d: ttft %v, e2e %v", i, ttft, e2e)
		}
		maxTTFT, maxE2E, sumTTFT = math.Max(maxTTFT, ttft), math.Max(maxE2E, e2e), sumTTFT+ttft
	}
	// The summaries are computed from the same observations.
	if m.must(t, `probe_time_to_first_token_seconds{quantile="1"}`) != maxTTFT ||
		m.must(t, `probe_e2e_latency_seconds{quantile="1"}`) != maxE2E ||
		m.must(t, `probe_time_to_first_token_seconds{quantile="0.99"}`) != maxTTFT {
		t.Errorf("summary maxima disagree with the per-request values:\n%s", body)
	}
	if got := m.must(t, "probe_time_to_first_token_seconds_count"); got != 3 {
		t.Errorf("ttft count = %v", got)
	}
	if got := m.must(t, "probe_time_to_first_token_seconds_sum"); math.Abs(got-sumTTFT) > 1e-12 {
		t.Errorf("ttft sum = %v, want %v", got, sumTTFT)
	}
	if got := m.must(t, "probe_inter_token_latency_seconds_count"); got != 3*7 {
		t.Errorf("itl count = %v, want 3 requests x 7 gaps", got)
	}
	if m.must(t, "probe_output_tokens_per_second") <= 0 {
		t.Error("no throughput")
	}
	if got := m.must(t, "probe_timeout_seconds"); got != 9.5 {
		t.Errorf("timeout = %v, want 10 - 0.5", got)
	}
	if _, ok := m["probe_known_answer_success"]; ok {
		t.Error("known-answer metric present for a module without checks")
	}
	// The server counted what the probe says it sent.
	if got := simCounter(t, sim, "vllm:request_success_total"); got != 3 {
		t.Errorf("vllm:request_success_total = %v, want 3", got)
	}
}

// simCounter sums a counter of the simulator's registry over its labels.
func simCounter(tb testing.TB, sim *simulator.Simulator, name string) float64 {
	tb.Helper()
	mfs, err := sim.Registry().Gather()
	if err != nil {
		tb.Fatal(err)
	}
	var sum float64
	for _, mf := range mfs {
		if mf.GetName() == name {
			for _, m := range mf.GetMetric() {
				sum += m.GetCounter().GetValue()
			}
		}
	}
	return sum
}

func TestProbeFailureOutcomes(t *testing.T) {
	for _, tc := range []struct {
		name    string
		faults  simulator.Faults
		module  string
		timeout string
		outcome observation.Outcome
		status  float64
		reason  string
	}{
		{"server error", simulator.Faults{ErrorRate: 1, ErrorStatus: 503}, "one", "10", observation.HTTP5xx, 503, ReasonRequestFailed},
		{"rate limited", simulator.Faults{ErrorRate: 1, ErrorStatus: 429}, "one", "10", observation.HTTP4xx, 429, ReasonRequestFailed},
		{"unknown model", simulator.NoFaults(), "wrong_model", "10", observation.HTTP4xx, 404, ReasonRequestFailed},
		{"malformed stream", simulator.Faults{MalformedAfterTokens: 2}, "one", "10", observation.StreamError, 200, ReasonRequestFailed},
		{"disconnect", simulator.Faults{DisconnectAfterTokens: 2}, "one", "10", observation.Disconnected, 200, ReasonRequestFailed},
		{"timeout", simulator.Faults{StallBeforeFirstToken: time.Minute}, "one", "1.5", observation.Timeout, 200, ReasonRequestFailed},
		{"slo missed", simulator.Faults{StallBeforeFirstToken: 100 * time.Millisecond}, "slo", "10", observation.Success, 200, ReasonSLOMissed},
	} {
		t.Run(tc.name, func(t *testing.T) {
			url, sim, _ := startSim(t, instantSim())
			if err := sim.SetFaults(tc.faults); err != nil {
				t.Fatal(err)
			}
			e := newEnv(t, loadConfig(t, simConfig, url), nil)
			code, body := e.scrape(t, tc.module, url, tc.timeout, false)
			if code != http.StatusOK {
				t.Fatalf("status %d: %s", code, body)
			}
			m := parseMetrics(t, body)
			if m.must(t, "probe_success") != 0 {
				t.Fatalf("probe succeeded:\n%s", body)
			}
			if got := m.failedReason(t); got != tc.reason {
				t.Errorf("reason = %q, want %q", got, tc.reason)
			}
			if got := m.must(t, fmt.Sprintf("probe_requests{outcome=%q}", tc.outcome)); got != 1 {
				t.Errorf("outcome %s = %v, want 1:\n%s", tc.outcome, got, body)
			}
			if got := m.must(t, "probe_http_status_code"); got != tc.status {
				t.Errorf("status code = %v, want %v", got, tc.status)
			}
			// Issue 25: the failure's code, on the bounded set; every
			// code of the set is present, at 0 but the failure's.
			for _, code := range observation.StatusCodes {
				want := 0.0
				if code == observation.StatusCode(int(tc.status)) && (tc.outcome == observation.HTTP4xx || tc.outcome == observation.HTTP5xx) {
					want = 1
				}
				if got := m.must(t, fmt.Sprintf("probe_http_errors{code=%q}", code)); got != want {
					t.Errorf("probe_http_errors{code=%q} = %v, want %v", code, got, want)
				}
			}
			if tc.outcome == observation.Timeout {
				// The deadline is 1.5s - 0.5s: the probe cannot end before it.
				if d := m.must(t, "probe_duration_seconds"); d < 1 {
					t.Errorf("timed-out probe took %vs, less than its 1s deadline", d)
				}
				if got := m.must(t, "probe_timeout_seconds"); got != 1 {
					t.Errorf("timeout = %v, want 1", got)
				}
			}
			if tc.reason == ReasonSLOMissed {
				if ttft := m.must(t, `probe_request_time_to_first_token_seconds{request="0"}`); ttft < 0.1 {
					t.Errorf("ttft %v below the 100ms stall", ttft)
				}
				if m.must(t, "probe_goodput_requests") != 0 {
					t.Error("a request over the SLO counted as goodput")
				}
			}
			// The debug output says what happened.
			_, debug := e.scrape(t, tc.module, url, tc.timeout, true)
			if !strings.Contains(debug, "outcome="+string(tc.outcome)) {
				t.Errorf("debug output lacks the outcome %s:\n%s", tc.outcome, debug)
			}
			// A failed request's line names the X-Request-Id it was sent
			// with, so that it can be found in the server's logs.
			if tc.outcome != observation.Dropped && !regexp.MustCompile(`request_id=probe-`+tc.module+`-\d+-0`).MatchString(debug) {
				t.Errorf("debug output lacks the request's id:\n%s", debug)
			}
		})
	}
}

func TestProbeTimeout(t *testing.T) {
	for _, tc := range []struct {
		header string
		module time.Duration
		offset time.Duration
		want   time.Duration
		bad    bool
	}{
		{"", 0, 500 * time.Millisecond, 119500 * time.Millisecond, false},
		{"10", 0, 500 * time.Millisecond, 9500 * time.Millisecond, false},
		{"10", 3 * time.Second, 500 * time.Millisecond, 3 * time.Second, false},
		{"10", 30 * time.Second, 500 * time.Millisecond, 9500 * time.Millisecond, false},
		{"0.4", 0, 500 * time.Millisecond, 400 * time.Millisecond, false}, // no room for the offset
		{"2.25", 0, 0, 2250 * time.Millisecond, false},
		{"", 5 * time.Second, 500 * time.Millisecond, 5 * time.Second, false},
		{"abc", 0, 0, 0, true},
		{"-1", 0, 0, 0, true},
		{"0", 0, 0, 0, true},
		{"NaN", 0, 0, 0, true},
		{"+Inf", 0, 0, 0, true},
	} {
		got, err := probeTimeout(tc.header, tc.module, tc.offset)
		if (err != nil) != tc.bad || got != tc.want {
			t.Errorf("probeTimeout(%q, %v, %v) = %v, %v; want %v, bad %v", tc.header, tc.module, tc.offset, got, err, tc.want, tc.bad)
		}
	}

	// Through the handler: the header and the module's cap.
	url, _, _ := startSim(t, instantSim())
	e := newEnv(t, loadConfig(t, simConfig, url), nil)
	for _, tc := range []struct {
		module, header string
		want           float64
	}{
		{"one", "4", 3.5},
		{"capped", "4", 1.5},
		{"capped", "1.2", 0.7},
		{"one", "", 119.5},
	} {
		_, body := e.scrape(t, tc.module, url, tc.header, false)
		if got := parseMetrics(t, body).must(t, "probe_timeout_seconds"); got != tc.want {
			t.Errorf("module %s, header %q: timeout %v, want %v", tc.module, tc.header, got, tc.want)
		}
	}
}

func TestProbeDebugOutput(t *testing.T) {
	url, _, _ := startSim(t, instantSim())
	e := newEnv(t, loadConfig(t, simConfig, url), nil)
	code, body := e.scrape(t, "chat", url, "10", true)
	if code != http.StatusOK {
		t.Fatalf("status %d", code)
	}
	for _, want := range []string{
		"Logs for the probe:",
		`msg="Beginning probe" module=chat target=` + url,
		"timeout_seconds=9.5",
		`msg="Target allowed"`, `basis="configured target"`, `credentials="target sim"`,
		`msg="Request finished"`, "request=request[2]", "outcome=success", "ttft_seconds=",
		`msg="Probe succeeded"`,
		"Metrics that would have been returned:",
		"# HELP probe_success ",
		"probe_success 1",
		"Module configuration (chat):",
		"requests: 3",
	} {
		if !strings.Contains(body, want) {
			t.Errorf("debug output lacks %q:\n%s", want, body)
		}
	}
}

func TestBadRequests(t *testing.T) {
	url, _, rec := startSim(t, instantSim())
	e := newEnv(t, loadConfig(t, simConfig, url), nil)
	reg := prometheus.NewPedanticRegistry()
	reg.MustRegister(e.h.invalid, e.h.refused)
	for _, tc := range []struct {
		name, module, target, timeout string
		reason, msg                   string
	}{
		{"missing module", "", url, "", InvalidMissingModule, "module parameter is missing"},
		{"unknown module", "nope", url, "", InvalidUnknownModule, `unknown module "nope"`},
		{"missing target", "one", "", "", InvalidMissingTarget, "target parameter is missing"},
		{"bad timeout", "one", url, "soon", InvalidBadTimeout, `X-Prometheus-Scrape-Timeout-Seconds "soon" is not a positive number`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			before := testutil.ToFloat64(e.h.invalid.WithLabelValues(tc.reason))
			code, body := e.scrape(t, tc.module, tc.target, tc.timeout, false)
			if code != http.StatusBadRequest || !strings.Contains(body, tc.msg) {
				t.Errorf("got %d %q, want 400 %q", code, body, tc.msg)
			}
			if got := testutil.ToFloat64(e.h.invalid.WithLabelValues(tc.reason)) - before; got != 1 {
				t.Errorf("invalid_total{reason=%q} grew by %v, want 1", tc.reason, got)
			}
		})
	}
	if rec.count() != 0 {
		t.Errorf("bad requests reached the server %d times", rec.count())
	}
	// A refused target is a probe that failed, and is counted too.
	_, body := e.scrape(t, "one", "file:///etc/passwd", "", false)
	if parseMetrics(t, body).must(t, "probe_success") != 0 || testutil.ToFloat64(e.h.invalid.WithLabelValues(InvalidBadTarget)) != 1 {
		t.Errorf("bad target not refused and counted:\n%s", body)
	}
	if n, err := testutil.GatherAndCount(reg); err != nil || n != len(invalidReasons)+2 {
		t.Errorf("counters: %d series, %v (every reason must exist from the start)", n, err)
	}
	// Methods other than GET, and no configuration yet.
	w := &statusRecorder{}
	e.h.ServeHTTP(w, mustRequest(t, http.MethodPost, "/probe?module=one&target="+url))
	if w.code != http.StatusMethodNotAllowed {
		t.Errorf("POST: %d", w.code)
	}
	e.cfg = nil
	w = &statusRecorder{}
	e.h.ServeHTTP(w, mustRequest(t, http.MethodGet, "/probe?module=one&target="+url))
	if w.code != http.StatusServiceUnavailable {
		t.Errorf("no config: %d", w.code)
	}
}

type statusRecorder struct {
	code int
	h    http.Header
}

func (s *statusRecorder) Header() http.Header {
	if s.h == nil {
		s.h = http.Header{}
	}
	return s.h
}
func (s *statusRecorder) Write(p []byte) (int, error) { return len(p), nil }
func (s *statusRecorder) WriteHeader(c int)           { s.code = c }

func mustRequest(tb testing.TB, method, target string) *http.Request {
	tb.Helper()
	req, err := http.NewRequest(method, target, nil)
	if err != nil {
		tb.Fatal(err)
	}
	return req
}

func TestKnownAnswers(t *testing.T) {
	url, _, _ := startSim(t, instantSim())
	e := newEnv(t, loadConfig(t, simConfig, url), nil)

	_, body := e.scrape(t, "right_answers", url, "10", false)
	m := parseMetrics(t, body)
	if m.must(t, "probe_success") != 1 || m.must(t, "probe_known_answer_success") != 1 ||
		m.must(t, `probe_known_answer_check_success{check="0"}`) != 1 {
		t.Errorf("filler words did not match the filler-word pattern:\n%s", body)
	}

	_, body = e.scrape(t, "answers", url, "10", true)
	if !strings.Contains(body, "probe_known_answer_success 0") ||
		!strings.Contains(body, `probe_known_answer_check_success{check="0"} 1`) ||
		!strings.Contains(body, `probe_known_answer_check_success{check="1"} 0`) ||
		!strings.Contains(body, `probe_failed_due_to{reason="wrong_answer"} 1`) {
		t.Errorf("wrong answer not reported:\n%s", body)
	}
	// The debug line shows the answer that failed, which is filler words.
	line := regexp.MustCompile(`msg="Known-answer check" .*request=known_answer\[1\] pass=false expect=.*answer="( [a-z]+)+"`)
	if !line.MatchString(body) {
		t.Errorf("debug output lacks the failed check and its answer:\n%s", body)
	}
}

func TestConcurrencyCeiling(t *testing.T) {
	url, sim, rec := startSim(t, instantSim())
	rec.arrived = make(chan struct{}, 1)
	if err := sim.SetFaults(simulator.Faults{StallBeforeFirstToken: time.Second}); err != nil {
		t.Fatal(err)
	}
	cfg := loadConfig(t, strings.Replace(simConfig, "max_concurrent_probes: 100", "max_concurrent_probes: 1", 1), url)
	e := newEnv(t, cfg, nil)
	first := make(chan string)
	go func() {
		_, body := e.scrape(t, "one", url, "10", false)
		first <- body
	}()
	<-rec.arrived // the first probe is in flight at the server
	_, body := e.scrape(t, "one", url, "10", true)
	if !strings.Contains(body, "probe_success 0") || !strings.Contains(body, `probe_failed_due_to{reason="concurrency_ceiling"} 1`) ||
		!strings.Contains(body, "already has 1 probes running (probe.max_concurrent_probes is 1); refused without sending") ||
		!strings.Contains(body, `probe_requests{outcome="dropped"} 1`) {
		t.Errorf("second probe not refused by the concurrency ceiling:\n%s", body)
	}
	if m := parseMetrics(t, <-first); m.must(t, "probe_success") != 1 {
		t.Errorf("the admitted probe failed")
	}
	if got := rec.count(); got != 1 {
		t.Errorf("server saw %d requests, want only the admitted probe's 1", got)
	}
	if got := testutil.ToFloat64(e.h.refused.WithLabelValues(ReasonConcurrencyCeiling)); got != 1 {
		t.Errorf("refused_total{concurrency_ceiling} = %v", got)
	}
	// The slot is released: a later probe is admitted.
	if err := sim.SetFaults(simulator.NoFaults()); err != nil {
		t.Fatal(err)
	}
	if _, body := e.scrape(t, "one", url, "10", false); !strings.Contains(body, "probe_success 1") {
		t.Errorf("probe after the first ended was not admitted:\n%s", body)
	}
}

func TestRateCeilingFailsFast(t *testing.T) {
	url, _, rec := startSim(t, instantSim())
	cfg := loadConfig(t, strings.Replace(simConfig, "max_requests_per_second: 1000", "max_requests_per_second: 1", 1), url)
	e := newEnv(t, cfg, nil)
	// 3 requests at 1/s need 2s; the deadline is 1.5s - 0.5s.
	_, body := e.scrape(t, "chat", url, "1.5", true)
	if !strings.Contains(body, `probe_failed_due_to{reason="rate_ceiling"} 1`) ||
		!strings.Contains(body, "the module's 3 requests need 2s at probe.max_requests_per_second 1") ||
		!strings.Contains(body, `probe_requests{outcome="dropped"} 3`) {
		t.Errorf("probe over the rate ceiling not refused:\n%s", body)
	}
	if rec.count() != 0 {
		t.Errorf("a probe refused for its rate sent %d requests", rec.count())
	}
	// With time enough it runs, spaced by the ceiling.
	_, body = e.scrape(t, "chat", url, "10", false)
	if !strings.Contains(body, "probe_success 1") {
		t.Errorf("probe within the ceiling failed:\n%s", body)
	}
	rec.mu.Lock()
	defer rec.mu.Unlock()
	for i := 1; i < len(rec.arrivals); i++ {
		// Sends are 1s apart; arrivals may be closer by loopback jitter,
		// never by half the spacing.
		if gap := rec.arrivals[i].Sub(rec.arrivals[i-1]); gap < 500*time.Millisecond {
			t.Errorf("arrivals %d and %d only %v apart at a 1/s ceiling", i-1, i, gap)
		}
	}
}

func TestHistory(t *testing.T) {
	h := NewHistory(3)
	for i := range 5 {
		h.add(historyEntry{at: time.Unix(int64(i), 0), module: fmt.Sprintf("m%d", i), target: "<script>alert(1)</script>",
			reason: `"quoted" & <b>`, debug: fmt.Sprintf("debug %d", i)})
	}
	got := h.recent()
	if len(got) != 3 || got[0].module != "m4" || got[2].module != "m2" {
		t.Fatalf("ring holds %+v, want m4, m3, m2", got)
	}
	page := h.HTML()
	if strings.Contains(page, "<script>") || strings.Contains(page, "<b>") || !strings.Contains(page, "&lt;script&gt;") ||
		!strings.Contains(page, "Failure: &#34;quoted&#34; &amp; &lt;b&gt;") {
		t.Errorf("landing page not escaped:\n%s", page)
	}
	if !strings.Contains(page, `<a href="probe/logs?id=4">`) || strings.Contains(page, "id=1\"") {
		t.Errorf("links wrong:\n%s", page)
	}
	for _, tc := range []struct {
		query string
		code  int
		body  string
	}{
		{"id=4", http.StatusOK, "debug 4"},
		{"id=1", http.StatusNotFound, "left the history"},
		{"id=x", http.StatusBadRequest, "id must be"},
	} {
		w := newRecorder()
		h.ServeHTTP(w, mustRequest(t, http.MethodGet, LogsPath+"?"+tc.query))
		if w.Code != tc.code || !strings.Contains(w.Body.String(), tc.body) {
			t.Errorf("%s: %d %q", tc.query, w.Code, w.Body.String())
		}
		if tc.code == http.StatusOK && w.Header().Get("X-Content-Type-Options") != "nosniff" {
			t.Errorf("debug page may be sniffed as HTML")
		}
	}
	if !strings.Contains(NewHistory(0).HTML(), "No probes yet") {
		t.Error("empty history")
	}
	// The landing page's "Recent probes" link, without an id: the list,
	// escaped, its links on this page (it answered 400 before).
	w := newRecorder()
	h.ServeHTTP(w, mustRequest(t, http.MethodGet, LogsPath))
	if body := w.Body.String(); w.Code != http.StatusOK || !strings.Contains(body, `<a href="?id=4">`) || strings.Contains(body, "<script>") {
		t.Errorf("%s without an id: %d\n%s", LogsPath, w.Code, body)
	}
}

// TestPromptsChangePerProbe: two probes of one module send different
// prompts, so the second is not served from the first one's prefix cache.
func TestPromptsChangePerProbe(t *testing.T) {
	url, sim, _ := startSim(t, instantSim())
	e := newEnv(t, loadConfig(t, simConfig, url), nil)
	hits := func() float64 { return simCounter(t, sim, "vllm:prefix_cache_hits_total") }
	for i := range 3 {
		if _, body := e.scrape(t, "one", url, "10", false); !strings.Contains(body, "probe_success 1") {
			t.Fatalf("probe %d failed:\n%s", i, body)
		}
	}
	// 64-token prompts hold 4 full blocks of 16: a repeated prompt would
	// hit the cache.
	if got := hits(); got != 0 {
		t.Errorf("prefix cache hits = %v: probes repeated a prompt", got)
	}
	if got := simCounter(t, sim, "vllm:prefix_cache_queries_total"); got == 0 {
		t.Error("no prefix cache queries counted: the check above proves nothing")
	}
}

// TestModuleBuiltInCode: a module that did not go through config.Parse
// (zero requests and concurrency) still runs one request.
func TestModuleBuiltInCode(t *testing.T) {
	url, _, rec := startSim(t, instantSim())
	cfg := loadConfig(t, simConfig, url)
	cfg.Modules["raw"] = config.Module{}
	e := newEnv(t, cfg, nil)
	_, body := e.scrape(t, "raw", url, "10", false)
	if !strings.Contains(body, "probe_success 1") || !strings.Contains(body, `probe_requests{outcome="success"} 1`) || rec.count() != 1 {
		t.Errorf("zero-valued module did not send one request:\n%s", body)
	}
}
