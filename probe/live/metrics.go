package live

import (
	"runtime"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/infer-exporter/infer_exporter/internal/config"
	"github.com/infer-exporter/infer_exporter/probe/client"
	"github.com/infer-exporter/infer_exporter/probe/observation"
	"github.com/infer-exporter/infer_exporter/probe/plan"
	"github.com/infer-exporter/infer_exporter/probe/slo"
	"github.com/infer-exporter/infer_exporter/probe/workload"
)

const namespace = "infer_probe"

// Label names. The set is fixed and small: target, model and workload come
// from the config, so cardinality is bounded by what the operator wrote.
var labels = []string{"target", "model", "workload"}

// Classic buckets fitted to LLM latencies, from about 1 ms to 2 min. Native
// histograms are exposed beside them for servers that scrape them.
var (
	// Time to first token and end-to-end latency: queueing and prefill of
	// long prompts reach seconds, full generations minutes.
	latencyBuckets = []float64{.001, .0025, .005, .01, .025, .05, .075, .1, .15, .2, .3, .5, .75, 1, 1.5, 2, 3, 5, 7.5, 10, 15, 20, 30, 45, 60, 90, 120}
	// Per-token gaps: decode steps take milliseconds to a few hundred.
	tokenBuckets = []float64{.001, .002, .003, .005, .0075, .01, .0125, .015, .02, .025, .03, .04, .05, .075, .1, .15, .2, .3, .5, 1, 2.5, 5, 10, 30, 120}
	// Schedule lag: the client's own delay, microseconds when healthy.
	lagBuckets = []float64{.00001, .000025, .00005, .0001, .00025, .0005, .001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10}
)

// histogram is a workload's histogram of name, classic and native, whose
// observations carry exemplars.
func histogram(name, help string, buckets []float64) *prometheus.HistogramVec {
	opts := nativeHistogram(prometheus.HistogramOpts{Namespace: namespace, Name: name, Help: help, Buckets: buckets})
	// The native histogram's exemplars are kept apart from the classic
	// buckets', spread by value (client_golang replaces the oldest past
	// its 5 min TTL, else one of the closest pair): as many as the
	// classic buckets hold, so that a scrape of either kind finds as
	// many, and bounded as they are.
	opts.NativeHistogramMaxExemplars = len(buckets) + 1
	return prometheus.NewHistogramVec(opts, labels)
}

// nativeHistogram is opts with a native histogram beside its classic
// buckets, for the servers that scrape them.
func nativeHistogram(opts prometheus.HistogramOpts) prometheus.HistogramOpts {
	opts.NativeHistogramBucketFactor = 1.1
	opts.NativeHistogramMaxBucketNumber = 160
	opts.NativeHistogramMinResetDuration = time.Hour
	return opts
}

// counterVec and gaugeVec are vectors of infer_probe_<name>, labelled lv.
func counterVec(name, help string, lv []string) *prometheus.CounterVec {
	return prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: namespace, Name: name, Help: help}, lv)
}

func gaugeVec(name, help string, lv []string) *prometheus.GaugeVec {
	return prometheus.NewGaugeVec(prometheus.GaugeOpts{Namespace: namespace, Name: name, Help: help}, lv)
}

// with is base and then extra, in a slice of its own: the label names
// of a vector beyond the workload's, the values of one of its series.
// base is never written to.
func with(base []string, extra ...string) []string {
	return append(base[:len(base):len(base)], extra...)
}

// deleter is a vector a workload's series are deleted from.
type deleter interface {
	DeletePartialMatch(prometheus.Labels) int
}

// deleteMatching deletes the series that match from every one of vecs.
func deleteMatching(match prometheus.Labels, vecs ...deleter) {
	for _, v := range vecs {
		v.DeletePartialMatch(match)
	}
}

// Metrics holds the continuous probe's metric vectors. One Metrics serves
// every workload; each workload writes through its own Series.
type Metrics struct {
	ttft, tpot, itl, e2e, lag *prometheus.HistogramVec
	ttfa                      *prometheus.HistogramVec
	reasoningTokens           *prometheus.CounterVec
	hiddenReasoning           *prometheus.CounterVec

	promptTokens, completionTokens *prometheus.CounterVec
	cachedPromptTokens             *prometheus.CounterVec
	requests, dropped, goodput     *prometheus.CounterVec
	httpErrors                     *prometheus.CounterVec
	tokenSource, clamped           *prometheus.CounterVec
	usageNotBelieved               *prometheus.CounterVec
	checks                         *prometheus.CounterVec
	inFlight, rate, maxRate        *prometheus.GaugeVec
	maxInFlight, degraded          *prometheus.GaugeVec
	lagP99                         *prometheus.GaugeVec
	state                          *prometheus.GaugeVec
	clientInfo                     *prometheus.GaugeVec
	streamed, stalls               *prometheus.CounterVec
	sloThreshold                   *prometheus.GaugeVec
	sloRequests                    *prometheus.CounterVec
	stalled, oldestAge             *prometheus.GaugeVec
	replay                         *replayMetrics // replay.go

	// sessions are the sessions workloads' series (sessions_metrics.go).
	sessions *sessionMetrics
	// agents are the agent workloads' series (agent_metrics.go).
	agents   *agentMetrics
	validity *validityMetrics // validity.go
	// server are the engine's own timings of each request
	// (server_timings.go).
	server *serverTimingMetrics

	// prefixCache are the server's and the best prefix-cache hit ratios
	// of the workloads with a declared rate (prefixcache.go).
	prefixCache *prefixCacheMetrics

	// prompts describes each workload's prompt set (calibration, hash);
	// calibrator builds the prompt sets.
	prompts    *PromptMetrics
	calibrator *Calibrator

	// models says once per target, across workloads and reloads, that its
	// server does not serve the configured model (models.go).
	models *client.ModelWatch

	// checkSlots bound the answers' checks that run at once in the
	// exporter, across workloads and reloads: GOMAXPROCS of them
	// (plan.CheckSlots says why).
	checkSlots *plan.CheckSlots
}

// NewMetrics creates the vectors and registers them with reg.
func NewMetrics(reg prometheus.Registerer) *Metrics {
	m := &Metrics{
		ttft: histogram("time_to_first_token_seconds",
			"Time from a request's scheduled send instant to the first content or reasoning token read by the client.", latencyBuckets),
		ttfa: histogram("time_to_first_answer_token_seconds",
			"Time from a request's scheduled send instant to its first answer (not reasoning) token, observed when it arrives.", latencyBuckets),
		reasoningTokens: counterVec("reasoning_tokens_total",
			"Reasoning tokens of successful requests: the server's usage count, else content events of reasoning only.", labels),
		hiddenReasoning: counterVec("hidden_reasoning_tokens_total",
			"Reasoning tokens of successful requests that the server counted but did not stream; TPOT leaves them out.", labels),
		tpot: histogram("time_per_output_token_seconds",
			"Per request, (last byte - first token) / (output tokens - 1); with hidden reasoning, the streamed pace of the visible tokens.", tokenBuckets),
		itl: histogram("inter_token_latency_seconds",
			"Each gap between two consecutive content-bearing stream events, as read by the client.", tokenBuckets),
		e2e: histogram("request_duration_seconds",
			"Time from a request's scheduled send instant to the last byte of its response, for successful requests.", latencyBuckets),
		lag: histogram("schedule_lag_seconds",
			"Time from a request's scheduled send instant to the moment the client began sending it.", lagBuckets),
		promptTokens: counterVec("prompt_tokens_total",
			"Prompt tokens of successful requests, as reported by the server's usage.", labels),
		cachedPromptTokens: counterVec("cached_prompt_tokens_total",
			"Prompt tokens of successful requests that the server's prefix cache served, as its usage reported them (cached_tokens).", labels),
		completionTokens: counterVec("completion_tokens_total",
			"Output tokens of successful requests: the server's usage count, else the number of content events (see infer_probe_token_count_source_total).", labels),
		requests: counterVec("requests_total",
			"Requests by outcome: success, http_4xx, http_5xx, timeout, stream_error, disconnected, dropped (never sent), cancelled (cut by a drain).", with(labels, "outcome")),
		httpErrors: counterVec("http_errors_total",
			"Requests answered with a non-2xx status (http_4xx, http_5xx), by code: 400, 401, 403, 404, 408, 413, 422, 429, 500, 502, 503, 504 or other.", with(labels, "code")),
		dropped: counterVec("dropped_requests_total",
			"Arrivals never sent, by reason: in_flight_cap, rate_ceiling (a late arrival over max_rate), target_not_ready (skipped).", with(labels, "reason")),
		goodput: counterVec("goodput_requests_total",
			"Successful requests that met every SLO threshold configured for the workload.", labels),
		tokenSource: counterVec("token_count_source_total",
			"Successful requests by where their output token count came from: usage (the server's count) or events (content events counted by the client).", with(labels, "source")),
		usageNotBelieved: counterVec("usage_not_believed_total",
			"Requests whose server usage count of output tokens could not be true (above max_tokens, or beyond what was streamed); their events were counted.", labels),
		checks: counterVec("known_answer_checks_total",
			"Known-answer checks sent in place of a synthetic prompt, by result: pass, fail (the answer did not match), error (no answer).", with(labels, "result")),
		clamped: counterVec("arrivals_clamped_total",
			"Arrivals the rate ceiling moved later because the arrival process came faster than max_rate.", labels),
		inFlight: gaugeVec("in_flight_requests",
			"Requests sent and not yet finished.", labels),
		maxInFlight: gaugeVec("max_in_flight_requests",
			"The workload's in-flight cap.", labels),
		rate: gaugeVec("configured_rate_requests_per_second",
			"The arrival process's configured mean rate at this moment.", labels),
		maxRate: gaugeVec("max_rate_requests_per_second",
			"The workload's hard rate ceiling.", labels),
		lagP99: gaugeVec("schedule_lag_p99_seconds",
			"The 99th percentile of schedule lag over the degradation window (--probe.degraded-window).", labels),
		degraded: gaugeVec("measurement_degraded",
			"1 when the client falls behind its schedule or is CPU-saturated, so its latencies include its own delay; else 0.", labels),
		streamed: counterVec("streamed_tokens_total",
			"Content events as they arrive, by kind (content, reasoning, tool_call); completion_tokens_total has the usage count at the end.", with(labels, "kind")),
		stalls: counterVec("stalls_total",
			"Requests in flight that received nothing for longer than the workload's stall_threshold (each stall counted once).", labels),
		stalled: gaugeVec("stalled_requests",
			"Requests in flight that have received nothing for longer than the workload's stall_threshold.", labels),
		oldestAge: gaugeVec("oldest_request_age_seconds",
			"Age of the oldest request in flight, from its scheduled instant; 0 with none in flight.", labels),
		sloThreshold: gaugeVec("slo_threshold_seconds",
			"The workload's SLO threshold per metric (slo: ttft, tpot, e2e), as configured; only the thresholds set exist.", with(labels, "slo")),
		sloRequests: counterVec("slo_requests_total",
			"Requests judged against each SLO threshold set, by slo (ttft: with a first token; tpot, e2e: successes) and result (met, missed).", with(labels, "slo", "result")),
		state: gaugeVec("workload_state",
			"1 for the workload's current state: calibrating, running, finished or failed; 0 for the others.", with(labels, "state")),
		clientInfo: gaugeVec("client_info",
			"1; transport: the HTTP client that sends the workload's requests, h1 (the minimal HTTP/1.1 client) or net/http.", with(labels, "transport")),
	}
	reg.MustRegister(exemplarVec{m.ttft}, exemplarVec{m.tpot}, exemplarVec{m.itl}, exemplarVec{m.e2e}, m.lag,
		m.promptTokens, m.cachedPromptTokens, m.completionTokens, m.requests, m.dropped, m.goodput, m.tokenSource, m.clamped, m.checks,
		m.inFlight, m.maxInFlight, m.rate, m.maxRate, m.lagP99, m.degraded, m.state, m.clientInfo,
		m.streamed, m.stalls, m.stalled, m.oldestAge, m.ttfa, m.reasoningTokens, m.hiddenReasoning, m.httpErrors,
		m.sloThreshold, m.sloRequests, m.usageNotBelieved)
	m.replay = newReplayMetrics(reg)
	m.sessions = newSessionMetrics(reg)
	m.agents = newAgentMetrics(reg)
	m.validity = newValidityMetrics(reg)
	m.server = newServerTimingMetrics(reg)
	m.prefixCache = newPrefixCacheMetrics(reg)
	m.prompts = NewPromptMetrics(reg)
	m.calibrator = NewCalibrator(m.prompts)
	m.models = &client.ModelWatch{}
	m.checkSlots = plan.NewCheckSlots(runtime.GOMAXPROCS(0))
	return m
}

// Series is one workload's view of the metrics, with its labels bound.
type Series struct {
	m  *Metrics
	lv []string
	// The latencies whose observations carry their request's trace ids
	// as exemplars (exemplars.go).
	ttft, tpot, itl, e2e            *exemplarHistogram
	lag                             prometheus.Observer
	promptTokens, completionTokens  prometheus.Counter
	cachedPromptTokens              prometheus.Counter
	goodput, clamped                prometheus.Counter
	requests                        observation.ByOutcome[prometheus.Counter]
	httpErrors                      map[string]prometheus.Counter // by observation.StatusCodes
	tokenSource                     map[observation.TokenSource]prometheus.Counter
	usageNotBelieved                prometheus.Counter
	checks                          map[string]prometheus.Counter // by result; nil without checks
	inFlight, rate, maxRate         prometheus.Gauge
	maxInFlight, degraded, lagP99   prometheus.Gauge
	streamedContent, streamedReason prometheus.Counter
	streamedToolCall                prometheus.Counter
	stalls, reasoningTokens         prometheus.Counter
	hiddenReasoning                 prometheus.Counter
	stalled, oldestAge              prometheus.Gauge
	ttfa                            prometheus.Observer
	slo                             config.SLO
	// sloMet and sloMissed count each configured threshold's judgements,
	// by slo name; absent for a threshold not set.
	sloMet, sloMissed map[string]prometheus.Counter
	validity          validitySeries     // validity.go
	server            serverTimingSeries // server_timings.go
}

// The kind label's values of streamed_tokens_total: one per event, bounded.
// An event that carries a tool call is a tool_call even beside answer text.
const (
	kindContent   = "content"
	kindReasoning = "reasoning"
	kindToolCall  = "tool_call"
)

// The slo label's values, the metrics an SLO threshold can bound.
const (
	sloTTFT = "ttft"
	sloTPOT = "tpot"
	sloE2E  = "e2e"
)

// Series binds the labels of one workload. Every outcome's counter, and
// every code's of http_errors_total, is created at zero, so rate() works
// from the first scrape.
func (m *Metrics) Series(target, model, name string, slo config.SLO) *Series {
	lv := []string{target, model, name}
	s := &Series{
		m: m, lv: lv, slo: slo,
		ttft:               newExemplarHistogram(m.ttft.WithLabelValues(lv...), latencyBuckets),
		tpot:               newExemplarHistogram(m.tpot.WithLabelValues(lv...), tokenBuckets),
		itl:                newExemplarHistogram(m.itl.WithLabelValues(lv...), tokenBuckets),
		e2e:                newExemplarHistogram(m.e2e.WithLabelValues(lv...), latencyBuckets),
		lag:                m.lag.WithLabelValues(lv...),
		promptTokens:       m.promptTokens.WithLabelValues(lv...),
		cachedPromptTokens: m.cachedPromptTokens.WithLabelValues(lv...),
		completionTokens:   m.completionTokens.WithLabelValues(lv...),
		goodput:            m.goodput.WithLabelValues(lv...),
		clamped:            m.clamped.WithLabelValues(lv...),
		requests: observation.NewByOutcome(func(o observation.Outcome) prometheus.Counter {
			return m.requests.WithLabelValues(with(lv, string(o))...)
		}),
		httpErrors:       map[string]prometheus.Counter{},
		tokenSource:      map[observation.TokenSource]prometheus.Counter{},
		usageNotBelieved: m.usageNotBelieved.WithLabelValues(lv...),
		inFlight:         m.inFlight.WithLabelValues(lv...),
		maxInFlight:      m.maxInFlight.WithLabelValues(lv...),
		rate:             m.rate.WithLabelValues(lv...),
		maxRate:          m.maxRate.WithLabelValues(lv...),
		degraded:         m.degraded.WithLabelValues(lv...),
		lagP99:           m.lagP99.WithLabelValues(lv...),
		streamedContent:  m.streamed.WithLabelValues(with(lv, kindContent)...),
		streamedReason:   m.streamed.WithLabelValues(with(lv, kindReasoning)...),
		streamedToolCall: m.streamed.WithLabelValues(with(lv, kindToolCall)...),
		reasoningTokens:  m.reasoningTokens.WithLabelValues(lv...),
		hiddenReasoning:  m.hiddenReasoning.WithLabelValues(lv...),
		ttfa:             m.ttfa.WithLabelValues(lv...),
		stalls:           m.stalls.WithLabelValues(lv...),
		stalled:          m.stalled.WithLabelValues(lv...),
		oldestAge:        m.oldestAge.WithLabelValues(lv...),
	}
	for _, code := range observation.StatusCodes {
		s.httpErrors[code] = m.httpErrors.WithLabelValues(with(lv, code)...)
	}
	s.server = m.server.series(lv)
	for _, src := range []observation.TokenSource{observation.TokensFromUsage, observation.TokensFromEvents} {
		s.tokenSource[src] = m.tokenSource.WithLabelValues(with(lv, string(src))...)
	}
	for _, reason := range workload.DropReasons {
		m.dropped.WithLabelValues(with(lv, reason)...)
	}
	s.sloMet, s.sloMissed = map[string]prometheus.Counter{}, map[string]prometheus.Counter{}
	for _, t := range []struct {
		name string
		d    time.Duration
	}{{sloTTFT, slo.TTFT}, {sloTPOT, slo.TPOT}, {sloE2E, slo.E2E}} {
		if t.d <= 0 {
			continue
		}
		m.sloThreshold.WithLabelValues(with(lv, t.name)...).Set(t.d.Seconds())
		s.sloMet[t.name] = m.sloRequests.WithLabelValues(with(lv, t.name, "met")...)
		s.sloMissed[t.name] = m.sloRequests.WithLabelValues(with(lv, t.name, "missed")...)
	}
	return s
}

// judge counts one request against the threshold of slo name, when one is
// set.
func (s *Series) judge(name string, d, threshold time.Duration) {
	if met := s.sloMet[name]; met != nil {
		if d <= threshold {
			met.Inc()
		} else {
			s.sloMissed[name].Inc()
		}
	}
}

// Delete removes every series of this workload, when a reload drops it.
func (s *Series) Delete() {
	match := prometheus.Labels{"target": s.lv[0], "model": s.lv[1], "workload": s.lv[2]}
	deleteMatching(match,
		s.m.ttft, s.m.tpot, s.m.itl, s.m.e2e, s.m.lag, s.m.promptTokens, s.m.cachedPromptTokens, s.m.completionTokens,
		s.m.requests, s.m.dropped, s.m.goodput, s.m.tokenSource, s.m.clamped, s.m.checks, s.m.inFlight,
		s.m.maxInFlight, s.m.rate, s.m.maxRate, s.m.degraded, s.m.lagP99, s.m.state, s.m.clientInfo,
		s.m.streamed, s.m.stalls, s.m.stalled, s.m.oldestAge, s.m.ttfa, s.m.reasoningTokens, s.m.hiddenReasoning, s.m.httpErrors,
		s.m.sloThreshold, s.m.sloRequests, s.m.usageNotBelieved)
	s.m.replay.delete(match)
	s.m.sessions.delete(match)
	s.m.agents.delete(match)
	s.m.validity.delete(match)
	s.m.server.delete(match)
	s.m.prompts.Delete(s.lv[0], s.lv[1], s.lv[2])
	s.m.prefixCache.delete(match)
}

// SetState marks the workload's current state (1) and every other (0).
func (s *Series) SetState(state string) {
	for _, st := range workload.States {
		v := 0.0
		if st == state {
			v = 1
		}
		s.m.state.WithLabelValues(with(s.lv, st)...).Set(v)
	}
}

// InitChecks creates the known-answer check counters at zero. Only workloads
// with checks have them, so that a pass ratio is never 0/0 for a workload
// that checks nothing.
func (s *Series) InitChecks() {
	s.checks = map[string]prometheus.Counter{}
	for _, r := range []string{workload.CheckPass, workload.CheckFail, workload.CheckError} {
		s.checks[r] = s.m.checks.WithLabelValues(with(s.lv, r)...)
	}
}

// ObserveCheck counts one finished known-answer check. Its latencies and
// tokens are not recorded: its prompt and answer lengths are not the
// workload's, and would distort its distributions.
// InitChecks must have been called.
func (s *Series) ObserveCheck(result string) {
	s.checks[result].Inc()
}

// countOutcome counts one request of outcome o in requests_total.
func (s *Series) countOutcome(o observation.Outcome) {
	if c, ok := s.requests.Of(o); ok {
		c.Inc()
	}
}

// Drop counts an arrival that was never sent.
func (s *Series) Drop(reason string) {
	if reason != workload.DropTargetNotReady {
		// A skipped arrival (the target not ready) is in no outcome.
		s.countOutcome(observation.Dropped)
	}
	s.m.dropped.WithLabelValues(with(s.lv, reason)...).Inc()
}

// Series is the Observer and the Monitor of a live workload.
var (
	_ workload.Observer = (*Series)(nil)
	_ workload.Monitor  = (*Series)(nil)
)

// Sent implements Observer.
func (s *Series) Sent(*observation.Request) {}

// FirstToken implements Observer: TTFT is observed when the first token
// arrives, not when the request ends, whatever its outcome then.
func (s *Series) FirstToken(o *observation.Request) {
	if d, ok := o.TTFT(); ok {
		s.ttft.observe(d.Seconds(), o.FirstToken, o.Trace)
	}
}

// Token implements Observer: each gap between two content events is
// observed as it closes, and the streamed-token counter rises with the
// stream.
func (s *Series) Token(o *observation.Request) {
	if o.LastReasoning {
		s.streamedReason.Inc()
	} else {
		if o.LastToolCall {
			s.streamedToolCall.Inc()
		} else {
			s.streamedContent.Inc()
		}
		// A tool call is an answer token: the first answer may be one.
		if o.ContentEvents-o.ReasoningEvents == 1 { // the first answer token
			if d, ok := o.TTFA(); ok {
				s.ttfa.Observe(d.Seconds())
			}
		}
	}
	if n := len(o.TokenTimes); n >= 2 {
		s.itl.observe(o.TokenTimes[n-1].Sub(o.TokenTimes[n-2]).Seconds(), o.TokenTimes[n-1], o.Trace)
	}
}

// Done implements Observer: the figures known only at the end (outcome,
// E2E, TPOT, usage tokens, goodput), and for a request that arrived in one
// event, nothing between tokens.
func (s *Series) Done(o *observation.Request) { s.Observe(o) }

// Stalls implements Monitor.
func (s *Series) Stalls(sc workload.StallScan) {
	s.stalled.Set(float64(sc.Stalled))
	s.oldestAge.Set(sc.OldestAge.Seconds())
	s.stalls.Add(float64(sc.New))
}

// Dropped implements Observer.
func (s *Series) Dropped(o *observation.Request) { s.Drop(o.DropReason) }

// Limits implements Monitor.
func (s *Series) Limits(maxInFlight int, maxRate float64, checks bool) {
	s.maxInFlight.Set(float64(maxInFlight))
	s.maxRate.Set(maxRate)
	if checks && s.checks == nil {
		s.InitChecks()
	}
}

// Rate implements Monitor.
func (s *Series) Rate(rate float64) { s.rate.Set(rate) }

// InFlight implements Monitor.
func (s *Series) InFlight(delta int) { s.inFlight.Add(float64(delta)) }

// Clamped implements Monitor.
func (s *Series) Clamped(n uint64) { s.clamped.Add(float64(n)) }

// Lag implements Monitor.
func (s *Series) Lag(p99 float64, degraded bool) {
	s.lagP99.Set(p99)
	if degraded {
		s.degraded.Set(1)
	} else {
		s.degraded.Set(0)
	}
}

// Check implements Monitor. Limits must have been told of the checks.
func (s *Series) Check(result string) { s.ObserveCheck(result) }

// State implements Monitor.
func (s *Series) State(state string) { s.SetState(state) }

// Observe records what is known of a request only when it ends: its
// outcome, schedule lag, and for a success its E2E, TPOT, tokens and goodput.
func (s *Series) Observe(o *observation.Request) {
	s.countOutcome(o.Outcome)
	s.validity.observe(o)
	if code := o.ErrorCode(); code != "" {
		s.httpErrors[code].Inc()
	}
	if d, ok := o.ScheduleLag(); ok {
		s.lag.Observe(d.Seconds())
	}
	if o.UsageNotBelieved {
		s.usageNotBelieved.Inc()
	}
	// TTFT and the gaps between tokens were observed as they happened
	// (FirstToken, Token).
	s.m.prompts.ObservePrompt(s.lv[0], s.lv[1], s.lv[2], o)
	if d, ok := o.TTFT(); ok {
		s.judge(sloTTFT, d, s.slo.TTFT)
	}
	if o.Outcome != observation.Success {
		return
	}
	// TPOT, E2E and tokens describe completed generations only: a request
	// cut short would report a shorter latency than the server gives.
	e2e, _ := o.E2E()
	s.e2e.observe(e2e.Seconds(), o.End, o.Trace)
	s.judge(sloE2E, e2e, s.slo.E2E)
	tpot, hasTPOT := o.TPOT()
	if hasTPOT {
		s.tpot.observe(tpot.Seconds(), o.End, o.Trace)
		s.judge(sloTPOT, tpot, s.slo.TPOT)
	}
	s.promptTokens.Add(float64(o.PromptTokens))
	s.cachedPromptTokens.Add(float64(o.CachedTokens))
	s.reasoningTokens.Add(float64(o.Reasoning()))
	s.hiddenReasoning.Add(float64(o.HiddenReasoning()))
	s.completionTokens.Add(float64(o.OutputTokens))
	s.server.observe(o)
	if c := s.tokenSource[o.TokenSource]; c != nil {
		c.Inc()
	}
	if slo.Met(o, s.slo) {
		s.goodput.Inc()
	}
}

// Transport says which HTTP client sends the workload's requests
// (infer_probe_client_info).
func (s *Series) Transport(name string) {
	match := prometheus.Labels{"target": s.lv[0], "model": s.lv[1], "workload": s.lv[2]}
	s.m.clientInfo.DeletePartialMatch(match)
	s.m.clientInfo.WithLabelValues(append(append([]string{}, s.lv...), name)...).Set(1)
}
