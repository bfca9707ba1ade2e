package prober

import (
	"math"
	"slices"
	"strconv"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/infer-exporter/infer_exporter/internal/config"
	"github.com/infer-exporter/infer_exporter/probe/observation"
	"github.com/infer-exporter/infer_exporter/probe/slo"
)

// summaryQuantiles are the quantiles of every probe_*_seconds summary:
// median, p90, p99 and the maximum (quantile 1). They are exact over the
// probe's requests, by nearest rank: the q-quantile of n values is the
// ceil(q*n)-th smallest. With fewer than 100 requests p99 is the maximum,
// which is what a p99 alert on a small sample should see.
var summaryQuantiles = []float64{0.5, 0.9, 0.99, 1}

// result is everything a probe found; its collector turns it into the
// probe_* metrics.
type result struct {
	success  bool
	reason   string // one of Reasons; "" on success
	timeout  time.Duration
	duration time.Duration
	slo      config.SLO
	// requests are the module's requests, in order (dropped ones included).
	requests []observation.Request
	// checks are the known-answer checks, in order; nil when the module
	// has none.
	checks []checkResult
	// perplexity is a perplexity module's score (perplexity.go); nil for
	// a generation module, whose requests are the above.
	perplexity *perplexityResult
}

type checkResult struct {
	obs  observation.Request
	pass bool
}

// countOutcomes counts requests by outcome, every outcome from zero.
func countOutcomes(requests []observation.Request) observation.ByOutcome[int] {
	var counts observation.ByOutcome[int]
	for i := range requests {
		if n := counts.At(requests[i].Outcome); n != nil {
			*n++
		}
	}
	return counts
}

// nearestRank returns the q-quantile of sorted xs by nearest rank.
func nearestRank(sorted []float64, q float64) float64 {
	n := len(sorted)
	i := int(math.Ceil(q*float64(n))) - 1
	return sorted[min(max(i, 0), n-1)]
}

// httpStatus is the status of the first request that failed, else of the
// last request; 0 when that request got no response.
func (res *result) httpStatus() int {
	if res.perplexity != nil {
		return res.perplexity.status
	}
	all := make([]*observation.Request, 0, len(res.requests)+len(res.checks))
	for i := range res.requests {
		all = append(all, &res.requests[i])
	}
	for i := range res.checks {
		all = append(all, &res.checks[i].obs)
	}
	for _, o := range all {
		if o.Outcome != observation.Success {
			return o.HTTPStatus
		}
	}
	if len(all) == 0 {
		return 0
	}
	return all[len(all)-1].HTTPStatus
}

// throughput is output tokens of successful requests over the span from
// the first of them sent to the last of them finished.
func (res *result) throughput() (tokens int, perSecond float64, ok bool) {
	var first, last time.Time
	for i := range res.requests {
		o := &res.requests[i]
		if o.Outcome != observation.Success {
			continue
		}
		tokens += o.OutputTokens
		if first.IsZero() || o.Sent.Before(first) {
			first = o.Sent
		}
		if o.End.After(last) {
			last = o.End
		}
	}
	span := last.Sub(first)
	if first.IsZero() || span <= 0 {
		return tokens, 0, false
	}
	return tokens, float64(tokens) / span.Seconds(), true
}

// Descriptors of the probe_* metrics. Labels: reason, outcome, code, request
// and check take values from closed sets or bounded indexes (request < 100,
// check < 20).
var (
	descSuccess  = prometheus.NewDesc("probe_success", "1 if every request succeeded, met the SLO, answered validly and matched its known answer (perplexity modules: scored, within max); else 0.", nil, nil)
	descDuration = prometheus.NewDesc("probe_duration_seconds", "How long the probe took, from the scrape's arrival to the end of its last request.", nil, nil)
	descTimeout  = prometheus.NewDesc("probe_timeout_seconds", "The probe's deadline: the scrape timeout (X-Prometheus-Scrape-Timeout-Seconds, else 120s) minus --timeout-offset, capped by the module's timeout.", nil, nil)
	descFailed   = prometheus.NewDesc("probe_failed_due_to", "1 for why the probe failed, else 0 (bad_target, not_allowed, *_ceiling, request_failed, slo_missed, wrong_answer, perplexity_exceeded, invalid_answer)", []string{"reason"}, nil)
	descStatus   = prometheus.NewDesc("probe_http_status_code", "HTTP status of the first request that failed, else of the last request; 0 when it got no response.", nil, nil)
	descRequests = prometheus.NewDesc("probe_requests", "The module's requests in this probe, by outcome (dropped: never sent); they sum to the module's request count.", []string{"outcome"}, nil)
	descHTTPErrs = prometheus.NewDesc("probe_http_errors", "The module's requests answered with a non-2xx status, by code: 400, 401, 403, 404, 408, 413, 422, 429, 500, 502, 503, 504 or other.", []string{"code"}, nil)
	descGood     = prometheus.NewDesc("probe_goodput_requests", "The module's requests that succeeded and met every SLO threshold of the module.", nil, nil)
	descTokens   = prometheus.NewDesc("probe_output_tokens", "Output tokens of the successful requests (the server's usage count, else content events).", nil, nil)
	descReason   = prometheus.NewDesc("probe_reasoning_tokens", "Reasoning tokens of the successful requests: the server's usage count (reasoning_tokens), else content events of reasoning only.", nil, nil)
	descHidden   = prometheus.NewDesc("probe_hidden_reasoning_tokens", "Reasoning tokens of the successful requests that the server counted but did not stream; TPOT leaves them out.", nil, nil)
	descTPS      = prometheus.NewDesc("probe_output_tokens_per_second", "Output tokens of the successful requests divided by the time from the first of them sent to the last of them finished: the probe's output throughput.", nil, nil)

	descTTFT = prometheus.NewDesc("probe_time_to_first_token_seconds", "Time to first token over the probe's requests that got one (exact nearest-rank quantiles; quantile 1 is the maximum).", nil, nil)
	descTTFA = prometheus.NewDesc("probe_time_to_first_answer_token_seconds", "Time to the first answer token, after any reasoning, over the probe's requests that got one (exact quantiles; 1 is the maximum).", nil, nil)
	descTPOT = prometheus.NewDesc("probe_time_per_output_token_seconds", "Time per output token after the first, over the probe's successful streamed requests (exact quantiles; 1 is the maximum).", nil, nil)
	descE2E  = prometheus.NewDesc("probe_e2e_latency_seconds", "End-to-end latency, from the send instant to the last byte, over the successful requests (exact nearest-rank quantiles; quantile 1 is the maximum).", nil, nil)
	descITL  = prometheus.NewDesc("probe_inter_token_latency_seconds", "Gaps between consecutive content events, over every request (exact nearest-rank quantiles; quantile 1 is the maximum).", nil, nil)

	descReqSuccess = prometheus.NewDesc("probe_request_success", "1 if this request of the probe succeeded, else 0.", []string{"request"}, nil)
	descReqTTFT    = prometheus.NewDesc("probe_request_time_to_first_token_seconds", "This request's time to first token, from its send instant; absent when no token came.", []string{"request"}, nil)
	descReqTTFA    = prometheus.NewDesc("probe_request_time_to_first_answer_token_seconds", "This request's time to its first answer token, after any reasoning, from its send instant; absent when no answer came.", []string{"request"}, nil)
	descReqTPOT    = prometheus.NewDesc("probe_request_time_per_output_token_seconds", "This request's time per output token after the first; present for successful requests with 2 or more output tokens.", []string{"request"}, nil)
	descReqE2E     = prometheus.NewDesc("probe_request_e2e_latency_seconds", "This request's end-to-end latency, from its send instant to its last byte; present for successful requests.", []string{"request"}, nil)
	descReqTokens  = prometheus.NewDesc("probe_request_output_tokens", "This request's output tokens; present for successful requests.", []string{"request"}, nil)

	descKA      = prometheus.NewDesc("probe_known_answer_success", "1 if every known-answer check of the module got a successful answer matching its pattern, else 0; present only for modules with checks.", nil, nil)
	descKACheck = prometheus.NewDesc("probe_known_answer_check_success", "1 if this known-answer check got a successful answer matching its pattern, else 0.", []string{"check"}, nil)
)

// resultCollector exposes one result. It is registered in the probe's own
// registry, gathered once, and dropped.
type resultCollector struct{ res *result }

func (c resultCollector) Describe(ch chan<- *prometheus.Desc) { prometheus.DescribeByCollect(c, ch) }

func (c resultCollector) Collect(ch chan<- prometheus.Metric) {
	res := c.res
	gauge := func(d *prometheus.Desc, v float64, lv ...string) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.GaugeValue, v, lv...)
	}
	gauge(descSuccess, b2f(res.success))
	gauge(descDuration, res.duration.Seconds())
	gauge(descTimeout, res.timeout.Seconds())
	for _, r := range Reasons {
		gauge(descFailed, b2f(r == res.reason), r)
	}
	gauge(descStatus, float64(res.httpStatus()))
	if res.perplexity != nil {
		collectPerplexity(ch, res.perplexity)
		return
	}

	counts := countOutcomes(res.requests)
	codes := map[string]int{}
	good := 0
	var ttft, ttfa, tpot, e2e, itl []float64
	// The same figures with their requests' trace ids (exemplars.go).
	ttftT, tpotT, itlT, e2eT := newTracedFigure(latencyBuckets), newTracedFigure(tokenBuckets), newTracedFigure(tokenBuckets), newTracedFigure(latencyBuckets)
	reasoning, hidden := 0, 0
	for i := range res.requests {
		o := &res.requests[i]
		codes[o.ErrorCode()]++
		idx := strconv.Itoa(i)
		// traced records a figure of the request in its list, its traced
		// figure (at the instant it was known) and its own gauge.
		traced := func(xs *[]float64, tf *tracedFigure, d time.Duration, at time.Time, desc *prometheus.Desc) {
			*xs = append(*xs, d.Seconds())
			tf.add(d.Seconds(), at, o.Trace)
			gauge(desc, d.Seconds(), idx)
		}
		gauge(descReqSuccess, b2f(o.Outcome == observation.Success), idx)
		if d, ok := o.TTFT(); ok {
			traced(&ttft, ttftT, d, o.FirstToken, descReqTTFT)
		}
		if d, ok := o.TTFA(); ok {
			ttfa = append(ttfa, d.Seconds())
			gauge(descReqTTFA, d.Seconds(), idx)
		}
		// ITLs gives the gaps in order, the k-th ending at TokenTimes[k].
		k := 0
		o.ITLs(func(d time.Duration) {
			k++
			itl = append(itl, d.Seconds())
			itlT.add(d.Seconds(), o.TokenTimes[k], o.Trace)
		})
		if o.Outcome != observation.Success {
			continue
		}
		// As in the continuous probe: latency and tokens of completed
		// generations only; a request cut short would look faster.
		if d, ok := o.E2E(); ok {
			traced(&e2e, e2eT, d, o.End, descReqE2E)
		}
		if d, ok := o.TPOT(); ok {
			traced(&tpot, tpotT, d, o.End, descReqTPOT)
		}
		gauge(descReqTokens, float64(o.OutputTokens), idx)
		reasoning += o.Reasoning()
		hidden += o.HiddenReasoning()
		if slo.Met(o, res.slo) {
			good++
		}
	}
	for oc, n := range counts.All() {
		gauge(descRequests, float64(n), string(oc))
	}
	for _, code := range observation.StatusCodes {
		gauge(descHTTPErrs, float64(codes[code]), code)
	}
	gauge(descGood, float64(good))
	tokens, tps, ok := res.throughput()
	gauge(descTokens, float64(tokens))
	gauge(descReason, float64(reasoning))
	gauge(descHidden, float64(hidden))
	if ok {
		gauge(descTPS, tps)
	}
	summary(ch, descTTFT, ttft)
	summary(ch, descTTFA, ttfa)
	summary(ch, descTPOT, tpot)
	summary(ch, descE2E, e2e)
	summary(ch, descITL, itl)
	ttftT.send(ch, descTTFTTraced)
	tpotT.send(ch, descTPOTTraced)
	itlT.send(ch, descITLTraced)
	e2eT.send(ch, descE2ETraced)
	collectServerTimings(ch, res.requests)
	collectChecks(gauge, res.checks)
}

// collectChecks sends each known-answer check's result and whether all
// passed; nothing for a module without checks.
func collectChecks(gauge func(*prometheus.Desc, float64, ...string), checks []checkResult) {
	if checks == nil {
		return
	}
	all := true
	for i, cr := range checks {
		all = all && cr.pass
		gauge(descKACheck, b2f(cr.pass), strconv.Itoa(i))
	}
	gauge(descKA, b2f(all))
}

// summary sends a summary of xs with exact quantiles; nothing when xs is
// empty, so that no NaN quantile reaches an alert.
func summary(ch chan<- prometheus.Metric, d *prometheus.Desc, xs []float64) {
	if len(xs) == 0 {
		return
	}
	slices.Sort(xs)
	var sum float64
	for _, x := range xs {
		sum += x
	}
	q := make(map[float64]float64, len(summaryQuantiles))
	for _, p := range summaryQuantiles {
		q[p] = nearestRank(xs, p)
	}
	ch <- prometheus.MustNewConstSummary(d, uint64(len(xs)), sum, q)
}

func b2f(b bool) float64 {
	if b {
		return 1
	}
	return 0
}
