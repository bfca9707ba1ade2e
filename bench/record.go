package bench

import (
	"cmp"
	"fmt"
	"maps"
	"math"
	"math/rand/v2"
	"slices"
	"sync"
	"time"

	"github.com/infer-exporter/infer_exporter/bench/report"
	"github.com/infer-exporter/infer_exporter/bench/stability"
	"github.com/infer-exporter/infer_exporter/internal/config"
	"github.com/infer-exporter/infer_exporter/probe/observation"
	"github.com/infer-exporter/infer_exporter/probe/slo"
	"github.com/infer-exporter/infer_exporter/probe/workload"
)

// A repeat's clock: t0 is taken just before the runner starts; the measured
// part begins at warmupEnd (t0 + warmup, or later: until the pipeline is
// full, see recorder) and is cut into windows of equal
// length from there. A request is measured when it was scheduled at or
// after warmupEnd. The repeat stops scheduling at the end of a window, so a
// measured request was always scheduled within the measured windows.
//
// Figures:
//   - latencies (TTFT, TTFA, TPOT, ITL, E2E, schedule lag) of measured
//     requests, defined as in the exporter (observation.Request); TTFA, the
//     time to the first answer token, differs from TTFT only for a model
//     that reasons first;
//   - reasoning tokens of measured successful requests: the server's usage
//     count of them, else the request's reasoning-only content events;
//   - output throughput: output tokens of successful requests delivered
//     within the measured windows (each content event weighted by the
//     request's output tokens / content events), over the windows' length.
//     Tokens of warm-up requests that arrive within the windows count;
//     tokens after the last window do not. This is the rate the server
//     delivered tokens at, without the ramp-up or the drain;
//   - request throughput: successful requests that ended within the
//     windows, warm-up requests included (the same rule as the tokens: what
//     the server delivered within the windows), over their length;
//   - goodput ratio: measured requests that succeeded and met every SLO
//     threshold, over measured requests (dropped and failed included);
//   - good output tokens: the output throughput's tokens of the requests
//     that met every SLO threshold (warm-up ones included, as the
//     throughput counts theirs): joules and cost per good token divide by
//     them (efficiency.go).

// recorder collects a repeat's observations. Done (it is the runner's Observer) runs on the runner's
// request goroutines, so it locks.
type recorder struct {
	// The warm-up lasts at least minWarmup from t0, and until the pipeline
	// is full (see pipelineFull): until it has lasted 1.5 times the p90
	// E2E of the requests sent first, so that the requests in flight have
	// reached their level whatever the lengths. warmupEnd is decided then,
	// or at t0 + maxWarmup (decided, and noCompletion, say which; endedBy
	// says what ended it); observations that end before are held and
	// recorded then.
	t0                   time.Time
	minWarmup, maxWarmup time.Duration
	decided              bool
	noCompletion         bool
	pending              []observation.Request
	warmupEnd            time.Time
	endedBy              string
	// cohort are the requests sent during the warm-up, in the order sent,
	// with when each ended (zero while in flight): what pipelineFull
	// reads; sentAt finds a request's entry. lastCheck throttles it.
	cohort    []warmupRequest
	sentAt    map[*observation.Request]int
	lastCheck time.Time
	// floorChecked: the pipeline was judged as it stood at the end of the
	// configured warm-up (fullAt).
	floorChecked bool
	// now is the clock the warm-up's decisions read (time.Now; a test's
	// own in a model of a server).
	now     func() time.Time
	window  time.Duration
	slo     config.SLO
	maxRecs int
	maxITL  int
	// windowCap bounds the E2E values kept per window for the stability
	// check (the first ones of the window).
	windowCap int

	mu       sync.Mutex
	rng      *rand.Rand
	recs     []report.Record
	recsSeen int
	itl      []float64
	itlSeen  int
	outcomes map[observation.Outcome]int
	measured int
	goodput  int

	// httpErrors counts the measured requests answered with a non-2xx
	// status, by observation.StatusCode.
	httpErrors map[string]int
	// structuredChecks and toolCallChecks count the measured successful
	// requests' validity results (observation.ValidityResults), for a
	// shape with a response format or tools.
	structuredChecks, toolCallChecks map[string]int

	// Reasoning of measured successful requests, exact whatever the
	// sampling: tokens, and requests that reasoned.
	reasoningTokens   int
	reasoningRequests int
	// clientArrivals are the measured arrivals sent, or refused by the
	// wire ceiling as overdue; clientLate of them were sent over lateAfter
	// late, or refused: exact, the client's verdict's evidence
	// (client.go).
	clientArrivals, clientLate int
	// lateArrivals are the late arrivals' sequence numbers (their
	// schedule order) and scheduled instants, up to maxLateArrivals: the
	// runs they came in.
	lateArrivals []lateArrival
	// usageNotBelieved counts the measured requests whose usage count
	// was not believed (observation.Request.UsageNotBelieved).
	usageNotBelieved int
	// firstSent are the E2E of the first successful requests sent (warm-up
	// included), up to firstSentKept, earliest first: the server's latency
	// before any queue formed, which says whether a full in-flight cap was
	// the client's doing or the server's (capNote).
	firstSent []sentE2E
	// Exact per-window aggregates, whatever the sampling.
	winTokens []float64
	// winGoodTokens are winTokens of the requests that met the SLO
	// (warm-up ones included, as winTokens counts them).
	winGoodTokens []float64
	winSuccesses  []int
	// winCompletions counts every successful request that ended in each
	// window, warm-up requests included: the same rule as winTokens, so
	// that requests/s and tokens/s describe the same deliveries.
	winCompletions []int
	// winInputTokens are the prompt tokens (the server's usage count) of
	// those same completions.
	winInputTokens []int
	// Arrivals by the window of their scheduled instant: all of them, and
	// those dropped.
	winOffered, winDropped []int
	// Requests sent, and sent requests that ended, by window, shifted by
	// one: index 0 holds the warm-up's.
	winSent, winEnded []int
	winE2E            [][]float64
	// droppedAll counts every dropped request, measured or not.
	droppedAll int
	// winCapDropped are the arrivals of each window the in-flight cap
	// dropped (not those a rate ceiling dropped by design): the client
	// could not send what it was asked to, so the server kept up with less.
	winCapDropped []int
	// inFlightCap is the client's in-flight cap (max_in_flight; in a
	// merged report the shards' caps added up), for the overload note of
	// arrivals it dropped; 0 when not known.
	inFlightCap int
	// points are the successful measured requests the stability rule
	// judges: all of them up to maxStabilityPoints, a uniform reservoir of
	// pointsSeen beyond.
	points     []report.StabilityPoint
	pointsSeen int
	// scheduled are the instants, in seconds from t0, of every arrival
	// offered (sent or dropped), warm-up and in flight included: the
	// offered load around each judged request (offeredLoad).
	scheduled     []float64
	scheduledFull bool
}

// maxStabilityPoints bounds the requests a repeat keeps for the stability
// rule: 32 bytes each, 640 KB a repeat at most. The rule itself tests at
// most 3,000 (an even subsample in time order beyond).
const maxStabilityPoints = 20000

// droppedRows is the number of requests dropped, warm-up included.
func (rc *recorder) droppedRows() int {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	return rc.droppedAll
}

// recorder is a workload.Observer of the ends of requests.
var _ workload.Observer = (*recorder)(nil)

// Sent implements workload.Observer: during the warm-up, the request
// joins the cohort whose E2E say when the pipeline is full.
func (rc *recorder) Sent(o *observation.Request) {
	rc.mu.Lock()
	rc.addScheduled(o)
	if rc.decided || len(rc.cohort) >= maxPending || o.Scheduled.Before(rc.t0) {
		rc.mu.Unlock()
		return
	}
	rc.sentAt[o] = len(rc.cohort)
	rc.cohort = append(rc.cohort, warmupRequest{sched: o.Scheduled})
	var held []observation.Request
	if now := rc.now(); now.Sub(rc.lastCheck) >= warmupCheckEvery {
		rc.lastCheck = now
		if end, ok := rc.fullAt(now); ok {
			held = rc.decideLocked(end, false)
			rc.endedBy = report.WarmupPipelineFull
		}
	}
	rc.mu.Unlock()
	for i := range held {
		rc.record(&held[i])
	}
}

// warmupRequest is one request sent during the warm-up: when it was
// scheduled, and when it ended (zero while in flight).
type warmupRequest struct {
	sched, end time.Time
	// pace is a successful request's time per output token (its TPOT when
	// streamed, else E2E over its tokens); 0 otherwise.
	pace time.Duration
}

// warmupCheckEvery throttles the warm-up's check: it reads the whole
// cohort.
const warmupCheckEvery = 50 * time.Millisecond

// warmupQuantile and warmupFactor: the warm-up lasts warmupFactor times
// the warmupQuantile E2E of the cohort (the first requests ran beside
// fewer others than later ones will, so faster: 1.25 left the warm-up
// below the measured p90 E2E in a fifth of the modelled cells, 1.5 in
// none); warmupMinCohort is the fewest requests that estimate may stand
// on.
const (
	warmupQuantile  = 0.9
	warmupFactor    = 1.5
	warmupMinCohort = 8
	// warmupLevel is the share of the level the count in flight must reach.
	warmupLevel = 0.9
)

// pipelineFull says whether the warm-up, now, has lasted long enough for
// the requests in flight to have reached their level: Little's law puts
// the level at rate × mean E2E, and the count in flight a time T after the
// start at rate × ∫₀ᵀ P(E2E > u) du, so the pipeline is full once T is
// beyond nearly every E2E. It is, when for the warm-up so far, T, and u =
// T/warmupFactor (or u = T/2, for a cohort too small at the first), the
// requests scheduled by now − u (every one of them has had u to end)
// number at least warmupMinCohort and at most a tenth of them took longer
// than u: u is then at least their p90 E2E, learned from the requests
// themselves (long ones still in flight count as long), whatever the mix
// of lengths. A first completion says nothing of the long requests of a
// mixed shape: the short ones end first. And the count in flight now must
// be at least 90% of its mean over the last u/2: the count wanders around
// its level (Poisson arrivals: by its square root), and a span that
// starts in a dip starts with the pipeline part empty. rc.mu is held.
func (rc *recorder) pipelineFull(now time.Time) bool {
	T := now.Sub(rc.t0)
	if T < rc.minWarmup || T <= 0 {
		return false
	}
	// The cohort as it stood at now: a request that ended later was in
	// flight then, one scheduled later not yet there.
	endAt := func(c warmupRequest) (time.Time, bool) {
		if c.end.IsZero() || c.end.After(now) {
			return now, false
		}
		return c.end, true
	}
	for _, f := range []float64{warmupFactor, 2} {
		u := time.Duration(float64(T) / f)
		by := now.Add(-u)
		var n, long int
		var e2e time.Duration
		for _, c := range rc.cohort {
			if c.sched.After(by) {
				break
			}
			n++
			end, _ := endAt(c)
			d := end.Sub(c.sched)
			e2e += d
			if d > u {
				long++
			}
		}
		if n < warmupMinCohort || float64(long) > (1-warmupQuantile)*float64(n) {
			continue
		}
		// The level: the mean count in flight over the last u/2, when the
		// pipeline was already as full as it gets.
		w := u / 2
		from := now.Add(-w)
		inFlight, sent := 0, 0
		var busy time.Duration
		for _, c := range rc.cohort {
			if c.sched.After(now) {
				continue
			}
			sent++
			end, ended := endAt(c)
			if !ended {
				inFlight++
			}
			if s := later(c.sched, from); end.After(s) {
				busy += end.Sub(s)
			}
		}
		// Little's law's, from the rate so far and the cohort's mean E2E,
		// when higher: the mean over a stretch in a dip is low too.
		level := max(busy.Seconds()/w.Seconds(), float64(sent)/T.Seconds()*e2e.Seconds()/float64(n))
		return float64(inFlight) >= warmupLevel*level && !rc.paceRising(now, w) && rc.recentShort(now, w, u)
	}
	return false
}

// paceRising says whether the time per output token of the requests that
// ended in the last w is still above that of those that ended in the w
// before by more than warmupPaceRise (each with at least warmupMinCohort):
// on an engine whose decode step grows with its batch, the first requests
// run in a small batch, their E2E (so the p90 above) is short, and the
// batch, their pace and the count in flight keep growing for several
// E2E (an H100 engine at 1.5 req/s: the span's window medians 5.4, 7.9,
// 11.2 s after a warm-up the p90 alone ended). rc.mu is held.
func (rc *recorder) paceRising(now time.Time, w time.Duration) bool {
	var recent, before []float64
	for _, c := range rc.cohort {
		if c.pace <= 0 || c.end.After(now) {
			continue
		}
		switch age := now.Sub(c.end); {
		case age < w:
			recent = append(recent, c.pace.Seconds())
		case age < 2*w:
			before = append(before, c.pace.Seconds())
		}
	}
	if len(recent) < warmupMinCohort || len(before) < warmupMinCohort {
		return false
	}
	return median(recent) > (1+warmupPaceRise)*median(before)
}

// recentShort says whether the requests that ended in the last w took no
// longer than u too, at most a tenth of them (with at least
// warmupMinCohort of them; fewer say nothing): on an engine whose latency
// grows with its batch, the requests sent first ran in a small batch and
// their p90 E2E is short, while the ones that end now, in the grown batch,
// still take longer. rc.mu is held.
func (rc *recorder) recentShort(now time.Time, w, u time.Duration) bool {
	var n, long int
	for _, c := range rc.cohort {
		if c.end.IsZero() || c.end.After(now) || now.Sub(c.end) >= w {
			continue
		}
		n++
		if c.end.Sub(c.sched) > u {
			long++
		}
	}
	return n < warmupMinCohort || float64(long) <= (1-warmupQuantile)*float64(n)
}

// warmupPaceRise is how much faster the pace of the latest requests may
// be rising when the warm-up ends: more than the noise of a median of a
// few requests' TPOT, less than a batch still filling.
const warmupPaceRise = 0.1

// pace is a successful request's time per output token: its TPOT, else
// (one content event) its E2E over its output tokens; 0 when it has none.
func pace(o *observation.Request) time.Duration {
	if o.Outcome != observation.Success {
		return 0
	}
	if d, ok := o.TPOT(); ok {
		return d
	}
	if d, ok := o.E2E(); ok && o.OutputTokens > 0 {
		return d / time.Duration(o.OutputTokens)
	}
	return 0
}

// fullAt is the end of the warm-up when the pipeline is full by now: the
// configured warm-up itself when the pipeline was full then (judged on the
// cohort as it stood, once, at the first check after it: so that every
// shard of a run, whose requests are due together, ends its warm-up at
// the same instant), else now. rc.mu is held.
func (rc *recorder) fullAt(now time.Time) (time.Time, bool) {
	floor := rc.t0.Add(rc.minWarmup)
	if now.Before(floor) {
		return time.Time{}, false
	}
	if !rc.floorChecked {
		rc.floorChecked = true
		if rc.pipelineFull(floor) {
			return floor, true
		}
	}
	if rc.pipelineFull(now) {
		return now, true
	}
	return time.Time{}, false
}

func later(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}

// FirstToken implements workload.Observer.
func (r *recorder) FirstToken(*observation.Request) {}

// Token implements workload.Observer.
func (r *recorder) Token(*observation.Request) {}

// Done implements workload.Observer.
func (r *recorder) Done(o *observation.Request) { r.observe(o) }

// Dropped implements workload.Observer: a dropped arrival was offered too.
func (r *recorder) Dropped(o *observation.Request) {
	r.mu.Lock()
	r.addScheduled(o)
	r.mu.Unlock()
	r.observe(o)
}

// addScheduled keeps a request's scheduled instant, from t0, for the
// offered load around each request (offeredLoad); at most maxScheduled.
// rc.mu is held.
func (rc *recorder) addScheduled(o *observation.Request) {
	if len(rc.scheduled) < maxScheduled {
		rc.scheduled = append(rc.scheduled, o.Scheduled.Sub(rc.t0).Seconds())
	} else {
		rc.scheduledFull = true
	}
}

// maxScheduled bounds the scheduled instants a repeat keeps: 8 bytes
// each, 4 MB. Beyond it the offered load is not used.
const maxScheduled = 500_000

func newRecorder(t0 time.Time, minWarmup, maxWarmup, window time.Duration, slo config.SLO, maxRecs, maxITL int, seed uint64) *recorder {
	return &recorder{
		t0: t0, minWarmup: minWarmup, maxWarmup: max(minWarmup, maxWarmup), window: window, slo: slo,
		maxRecs: maxRecs, maxITL: maxITL, windowCap: report.MaxWindowE2E,
		rng:              rand.New(rand.NewPCG(seed, 0x5bd1e995)),
		sentAt:           map[*observation.Request]int{},
		now:              time.Now,
		outcomes:         map[observation.Outcome]int{},
		httpErrors:       map[string]int{},
		structuredChecks: map[string]int{}, toolCallChecks: map[string]int{},
	}
}

// winOf is the window index of an instant (negative during warm-up).
func (rc *recorder) winOf(t time.Time) int {
	return int(math.Floor(float64(t.Sub(rc.warmupEnd)) / float64(rc.window)))
}

func grow[T any](s []T, n int) []T {
	for len(s) < n {
		var zero T
		s = append(s, zero)
	}
	return s
}

// maxPending bounds the observations held before the warm-up is decided.
const maxPending = 100_000

// warmup returns the warm-up in force, from t0, once it is decided; at now
// past t0 + maxWarmup it decides it there.
func (rc *recorder) warmup(now time.Time) (time.Duration, bool) {
	rc.mu.Lock()
	var held []observation.Request
	var full time.Time
	switch {
	case rc.decided:
	case func() bool { end, ok := rc.fullAt(now); full = end; return ok }():
		held = rc.decideLocked(full, false)
		rc.endedBy = report.WarmupPipelineFull
	case !now.Before(rc.t0.Add(rc.maxWarmup)):
		held = rc.decideLocked(rc.t0.Add(rc.maxWarmup), true)
	}
	decided, w := rc.decided, rc.warmupEnd.Sub(rc.t0)
	rc.mu.Unlock()
	for i := range held {
		rc.record(&held[i])
	}
	return w, decided
}

// decideLocked fixes the end of the warm-up and hands back the held
// observations, to be recorded.
func (rc *recorder) decideLocked(end time.Time, noCompletion bool) []observation.Request {
	rc.warmupEnd, rc.decided, rc.noCompletion = end, true, noCompletion
	rc.endedBy = report.WarmupBound
	held := rc.pending
	rc.pending, rc.cohort, rc.sentAt = nil, nil, nil
	return held
}

// observe records one observation; it keeps nothing of obs. During the
// warm-up it is held (recorded once the warm-up is decided), and its end
// joins the cohort pipelineFull reads.
func (rc *recorder) observe(obs *observation.Request) {
	rc.mu.Lock()
	if rc.decided {
		rc.mu.Unlock()
		rc.record(obs)
		return
	}
	if i, ok := rc.sentAt[obs]; ok {
		delete(rc.sentAt, obs)
		rc.cohort[i].end = obs.End
		if obs.End.IsZero() {
			rc.cohort[i].end = rc.now()
		}
		rc.cohort[i].pace = pace(obs)
	}
	now := rc.now()
	end, full := rc.fullAt(now)
	if !full && len(rc.pending) < maxPending {
		c := *obs
		c.TokenTimes = append([]time.Time(nil), obs.TokenTimes...)
		rc.pending = append(rc.pending, c)
		rc.mu.Unlock()
		return
	}
	// The pipeline is full, or too many are held: the warm-up ends.
	if !full {
		end = later(now, rc.t0.Add(rc.minWarmup))
	}
	held := rc.decideLocked(end, !full)
	rc.endedBy = report.WarmupPipelineFull
	if !full {
		rc.endedBy = report.WarmupBound
	}
	rc.mu.Unlock()
	for i := range held {
		rc.record(&held[i])
	}
	rc.record(obs)
}

// record adds one observation to the aggregates; the warm-up is decided.
func (rc *recorder) record(obs *observation.Request) {
	measured := !obs.Scheduled.Before(rc.warmupEnd)
	success := obs.Outcome == observation.Success
	rec := rc.newRecord(obs, measured, success)

	rc.mu.Lock()
	defer rc.mu.Unlock()
	if success {
		if d, ok := obs.E2E(); ok {
			rc.firstSent = keepFirstSent(rc.firstSent, sentE2E{obs.Scheduled, d.Seconds()})
		}
	}
	if measured {
		rc.countMeasured(obs, &rec, success)
	}
	rc.countWindows(obs, &rec, success, measured, success && slo.Met(obs, rc.slo))
	if !measured && rec.WinTokens == nil {
		return // a warm-up request that delivered nothing in the windows
	}
	// Algorithm R: a uniform sample of at most maxRecs requests.
	rc.recsSeen++
	if len(rc.recs) < rc.maxRecs {
		rc.recs = append(rc.recs, rec)
	} else if j := rc.rng.IntN(rc.recsSeen); j < rc.maxRecs {
		rc.recs[j] = rec
	}
}

// newRecord is the request's record: its latencies when it was measured,
// whether it met the SLO, and the tokens it delivered in each window.
func (rc *recorder) newRecord(obs *observation.Request, measured, success bool) report.Record {
	rec := report.Record{
		Sched: obs.Scheduled.Sub(rc.warmupEnd).Seconds(),
		TTFT:  report.NaN(), TTFA: report.NaN(), TPOT: report.NaN(), E2E: report.NaN(), Lag: report.NaN(),
		Measured: measured,
	}
	if measured {
		if d, ok := obs.TTFT(); ok {
			rec.TTFT = report.Num(d.Seconds())
		}
		if d, ok := obs.TTFA(); ok {
			rec.TTFA = report.Num(d.Seconds())
		}
		if d, ok := obs.ScheduleLag(); ok {
			rec.Lag = report.Num(d.Seconds())
		}
		if success {
			if d, ok := obs.TPOT(); ok {
				rec.TPOT = report.Num(d.Seconds())
			}
			if d, ok := obs.E2E(); ok {
				rec.E2E = report.Num(d.Seconds())
			}
			rec.Server = serverParts(obs)
		}
		rec.Goodput = slo.Met(obs, rc.slo)
	}
	// Tokens delivered per window, for successful requests.
	if success && len(obs.TokenTimes) > 0 {
		weight := 1.0
		if obs.OutputTokens > 0 && obs.ContentEvents > 0 {
			weight = float64(obs.OutputTokens) / float64(obs.ContentEvents)
		}
		first := rc.winOf(obs.TokenTimes[0])
		last := rc.winOf(obs.TokenTimes[len(obs.TokenTimes)-1])
		if last >= 0 {
			if first < 0 {
				first = 0
			}
			rec.FirstWin = int32(first)
			rec.WinTokens = make([]float32, last-first+1)
			for _, t := range obs.TokenTimes {
				if w := rc.winOf(t); w >= first {
					rec.WinTokens[w-first] += float32(weight)
				}
			}
		}
	}

	return rec
}

// countMeasured counts a measured request: its outcome, its goodput, its
// reasoning and its inter-token gaps (a reservoir). rc.mu is held.
func (rc *recorder) countMeasured(obs *observation.Request, rec *report.Record, success bool) {
	rc.measured++
	rc.outcomes[obs.Outcome]++
	if code := obs.ErrorCode(); code != "" {
		rc.httpErrors[code]++
	}
	if rec.Goodput {
		rc.goodput++
	}
	if obs.UsageNotBelieved {
		rc.usageNotBelieved++
	}
	lag, sent := obs.ScheduleLag()
	// Refused by the wire ceiling because it was overdue: the latest of
	// sends.
	overdue := !sent && obs.Outcome == observation.Dropped && obs.DropReason == workload.DropRateCeiling
	if sent || overdue {
		rc.clientArrivals++
	}
	if sent && lag > lateAfter || overdue {
		rc.clientLate++
		if len(rc.lateArrivals) < maxLateArrivals {
			rc.lateArrivals = append(rc.lateArrivals, lateArrival{obs.Seq, obs.Scheduled})
		}
	}
	if success {
		if obs.StructuredCheck != "" {
			rc.structuredChecks[obs.StructuredCheck]++
		}
		if obs.ToolCallCheck != "" {
			rc.toolCallChecks[obs.ToolCallCheck]++
		}
		// The one rule of the live metrics and /probe
		// (observation.Request.Reasoning): a request whose reasoning
		// was hidden reasoned too.
		rc.reasoningTokens += obs.Reasoning()
		if obs.Reasoning() > 0 {
			rc.reasoningRequests++
		}
	}
	obs.ITLs(func(d time.Duration) {
		rc.itlSeen++
		if len(rc.itl) < rc.maxITL {
			rc.itl = append(rc.itl, d.Seconds())
		} else if j := rc.rng.IntN(rc.itlSeen); j < rc.maxITL {
			rc.itl[j] = d.Seconds()
		}
	})
}

// countWindows counts a request in the windows: sent and ended, offered
// and dropped, its tokens, completions and successes. rc.mu is held.
func (rc *recorder) countWindows(obs *observation.Request, rec *report.Record, success, measured, good bool) {
	if obs.Outcome == observation.Dropped {
		rc.droppedAll++
	}
	if obs.Outcome != observation.Dropped && !obs.Sent.IsZero() {
		end := obs.End
		if end.IsZero() {
			end = obs.Sent
		}

		ws, we := max(rc.winOf(obs.Sent), -1)+1, max(rc.winOf(end), -1)+1
		rc.winSent = grow(rc.winSent, ws+1)
		rc.winSent[ws]++
		rc.winEnded = grow(rc.winEnded, we+1)
		rc.winEnded[we]++
	}
	if w := rc.winOf(obs.Scheduled); w >= 0 {
		rc.winOffered = grow(rc.winOffered, w+1)
		rc.winOffered[w]++
		if obs.Outcome == observation.Dropped {
			rc.winDropped = grow(rc.winDropped, w+1)
			rc.winDropped[w]++
			if obs.DropReason == workload.DropInFlightCap {
				rc.winCapDropped = grow(rc.winCapDropped, w+1)
				rc.winCapDropped[w]++
			}
		}
	}
	for k, tok := range rec.WinTokens {
		w := int(rec.FirstWin) + k
		rc.winTokens = grow(rc.winTokens, w+1)
		rc.winTokens[w] += float64(tok)
		if good {
			rc.winGoodTokens = grow(rc.winGoodTokens, w+1)
			rc.winGoodTokens[w] += float64(tok)
		}
	}
	if success {
		if w := rc.winOf(obs.End); w >= 0 {
			rc.winCompletions = grow(rc.winCompletions, w+1)
			rc.winCompletions[w]++
			rc.winInputTokens = grow(rc.winInputTokens, w+1)
			rc.winInputTokens[w] += obs.PromptTokens
		}
	}
	if success && measured {
		if w := rc.winOf(obs.End); w >= 0 {
			rc.winSuccesses = grow(rc.winSuccesses, w+1)
			rc.winSuccesses[w]++
			rc.winE2E = grow(rc.winE2E, w+1)
			if len(rc.winE2E[w]) < rc.windowCap {
				rc.winE2E[w] = append(rc.winE2E[w], float64(rec.E2E))
			}
		}
		if e2e := float64(rec.E2E); e2e > 0 {
			rc.addPoint(report.StabilityPoint{Done: obs.End.Sub(rc.warmupEnd).Seconds(), E2E: e2e,
				Input: obs.PromptTokens, Output: obs.OutputTokens})
		}
	}
}

// addPoint keeps one request for the stability rule (Algorithm R beyond
// maxStabilityPoints). rc.mu is held.
func (rc *recorder) addPoint(p report.StabilityPoint) {
	rc.pointsSeen++
	if len(rc.points) < maxStabilityPoints {
		rc.points = append(rc.points, p)
	} else if j := rc.rng.IntN(rc.pointsSeen); j < maxStabilityPoints {
		rc.points[j] = p
	}
}

// judge is the stability rule's verdict on the measured span [0, span)
// from windows [0, k): the successful requests that ended within it, and
// the queue's counts over those windows (bench/stability).
func (rc *recorder) judge(k int, span time.Duration, rule stability.Spec) stability.Verdict {
	rc.settle()
	rc.mu.Lock()
	defer rc.mu.Unlock()
	limit := span.Seconds()
	reqs := make([]stability.Request, 0, len(rc.points))
	for _, p := range rc.points {
		if p.Done >= 0 && p.Done <= limit {
			reqs = append(reqs, stability.Request{Done: time.Duration(p.Done * float64(time.Second)), E2E: p.E2E,
				InputTokens: p.Input, OutputTokens: p.Output})
		}
	}
	rc.offeredLoad(reqs)
	return stability.Judge(reqs, span, rc.load(k), rule)
}

// offeredLoad sets each request's offered load (stability.Request.Offered):
// the arrivals scheduled from a median E2E before it was scheduled to its
// end, per second. rc.mu is held.
func (rc *recorder) offeredLoad(reqs []stability.Request) {
	if rc.scheduledFull || len(reqs) == 0 {
		return
	}
	e2e := make([]float64, len(reqs))
	for i, r := range reqs {
		e2e[i] = r.E2E
	}
	lead := median(e2e)
	sched := slices.Clone(rc.scheduled)
	slices.Sort(sched)
	shift := rc.warmupEnd.Sub(rc.t0).Seconds() // the points' clock to t0's
	for i := range reqs {
		end := reqs[i].Done.Seconds() + shift
		from := max(end-reqs[i].E2E-lead, 0)
		lo, _ := slices.BinarySearch(sched, from)
		hi, _ := slices.BinarySearch(sched, end)
		if end > from && hi > lo {
			reqs[i].Offered = float64(hi-lo) / (end - from)
		}
	}
}

// setVerdict records the stability rule's verdict in a repeat's result:
// its state, its drift with the interval, and why in words (only when not
// stable: the console lists it among the notes).
func setVerdict(res *report.StabilityResult, v stability.Verdict) {
	res.State = string(v.State)
	res.Stable = report.StableOf(res.State)
	res.Step, res.StepAtSeconds, res.EffectiveRequests = report.NaN(), report.NaN(), report.NaN()
	if !math.IsNaN(v.Growth) {
		res.Step, res.StepAtSeconds = report.Num(v.Step), report.Num(v.StepAt.Seconds())
	}
	if v.Inflation >= 1 {
		res.EffectiveRequests = report.Num(float64(v.N) / v.Inflation)
	}
	res.Growth, res.GrowthLow, res.GrowthHigh = report.Num(v.Growth), report.Num(v.GrowthLo), report.Num(v.GrowthHi)
	res.Requests, res.NeedSeconds = v.N, report.NaN()
	if v.NeedSeconds > 0 {
		res.NeedSeconds = report.Num(v.NeedSeconds)
	}
	res.Note = ""
	if v.State != stability.Stable {
		res.Note = v.Reason
	}
}

// load is what the windows [0, k) say of the queue: sent and ended within
// them, in flight at their start and end, and the arrivals the in-flight
// cap dropped. rc.mu is held.
func (rc *recorder) load(k int) stability.Load {
	l := stability.Load{InFlightStart: winAt(rc.winSent, 0) - winAt(rc.winEnded, 0)}
	l.InFlightEnd = l.InFlightStart
	for i := 1; i <= k; i++ {
		l.Sent += winAt(rc.winSent, i)
		l.Ended += winAt(rc.winEnded, i)
		l.InFlightEnd += winAt(rc.winSent, i) - winAt(rc.winEnded, i)
	}
	for w := 0; w < k; w++ {
		l.Dropped += winAt(rc.winCapDropped, w)
	}
	return l
}

// windowMedians returns the median E2E of successful measured requests that
// ended in each of windows [0, k), and their counts.
// settle decides a warm-up still undecided when the repeat ends (no request
// completed): the configured one.
func (rc *recorder) settle() {
	rc.mu.Lock()
	var held []observation.Request
	if !rc.decided {
		held = rc.decideLocked(rc.t0.Add(rc.minWarmup), true)
	}
	rc.mu.Unlock()
	for i := range held {
		rc.record(&held[i])
	}
}

// measureAll decides a warm-up still undecided when the repeat stopped
// early (its first requests all refused): at its start, so that every
// request it sent is measured and its outcomes counted.
func (rc *recorder) measureAll() {
	rc.mu.Lock()
	var held []observation.Request
	if !rc.decided {
		held = rc.decideLocked(rc.t0, true)
	}
	rc.mu.Unlock()
	for i := range held {
		rc.record(&held[i])
	}
}

// warmupEndAt is the instant the measured part begins (the warm-up is
// decided by then: settle decides one still open).
func (rc *recorder) warmupEndAt() time.Time {
	rc.settle()
	rc.mu.Lock()
	defer rc.mu.Unlock()
	return rc.warmupEnd
}

// warmupUsed is the warm-up decided, and whether it was cut off by its
// bound (max_warmup, or the repeat's end) rather than ended by a full
// pipeline.
func (rc *recorder) warmupUsed() (time.Duration, bool) {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	return rc.warmupEnd.Sub(rc.t0), rc.noCompletion
}

// warmupEndedBy says what ended the warm-up (report.Warmup*).
func (rc *recorder) warmupEndedBy() string {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	return rc.endedBy
}

func (rc *recorder) windowMedians(k int) (medians []float64, counts []int) {
	rc.settle()
	rc.mu.Lock()
	defer rc.mu.Unlock()
	medians = make([]float64, k)
	counts = make([]int, k)
	for w := 0; w < k; w++ {
		medians[w] = math.NaN()
		if w < len(rc.winE2E) {
			medians[w] = median(rc.winE2E[w])
		}
		if w < len(rc.winSuccesses) {
			counts[w] = rc.winSuccesses[w]
		}
	}
	return medians, counts
}

// outcomeCounts is a report's count of every outcome: a new map, empty
// rather than nil when nothing ended.
func outcomeCounts(outcomes map[observation.Outcome]int) map[string]int {
	m := make(map[string]int, len(outcomes))
	for o, n := range outcomes {
		m[string(o)] = n
	}
	return m
}

// countsOrNil copies counts for a report, nil when there are none (the
// report leaves them out).
func countsOrNil(counts map[string]int) map[string]int {
	if len(counts) == 0 {
		return nil
	}
	return maps.Clone(counts)
}

// finish turns what was recorded over windows [0, k) into the repeat's
// statistics and its bootstrap sample. span, when positive, is the measured
// time when the run ended inside window k-1 (a trace that ran out): the
// rates are over it rather than over whole windows.
func (rc *recorder) finish(k int, span time.Duration) (report.Stats, *sample) {
	rc.settle()
	rc.mu.Lock()
	defer rc.mu.Unlock()
	windowSec := (time.Duration(k) * rc.window).Seconds()
	if span > 0 && span.Seconds() < windowSec {
		windowSec = span.Seconds()
	}
	st := report.Stats{
		Requests:         rc.measured,
		Outcomes:         outcomeCounts(rc.outcomes),
		Goodput:          rc.goodput,
		WindowSeconds:    windowSec,
		Sampled:          rc.recsSeen > len(rc.recs) || rc.itlSeen > len(rc.itl),
		HTTPErrors:       countsOrNil(rc.httpErrors),
		StructuredChecks: countsOrNil(rc.structuredChecks),
		ToolCallChecks:   countsOrNil(rc.toolCallChecks),
	}
	st.Successes = rc.outcomes[observation.Success]
	st.ReasoningTokens, st.ReasoningRequests = rc.reasoningTokens, rc.reasoningRequests
	st.UsageNotBelieved = rc.usageNotBelieved
	var tokens, good float64
	var completions, offered, dropped, input int
	for w := 0; w < k; w++ {
		if w < len(rc.winTokens) {
			tokens += rc.winTokens[w]
		}
		if w < len(rc.winGoodTokens) {
			good += rc.winGoodTokens[w]
		}
		completions += winAt(rc.winCompletions, w)
		input += winAt(rc.winInputTokens, w)
		offered += winAt(rc.winOffered, w)
		dropped += winAt(rc.winDropped, w)
	}
	// In flight at the end of window k-1: sent before it ended, not ended
	// by then (the shifted index k holds window k-1).
	for i := 0; i <= k; i++ {
		st.InFlightAtEnd += winAt(rc.winSent, i) - winAt(rc.winEnded, i)
	}
	st.InFlightAtStart = winAt(rc.winSent, 0) - winAt(rc.winEnded, 0)
	st.InputTokens, st.OutputTokens, st.GoodOutputTokens = input, tokens, good
	if windowSec > 0 {
		st.OutputTokensPerSecond = tokens / windowSec
		st.TotalTokensPerSecond = (float64(input) + tokens) / windowSec
		st.RequestsPerSecond = float64(completions) / windowSec
		st.GoodputPerSecond = float64(rc.goodput) / windowSec
		st.OfferedPerSecond = float64(offered) / windowSec
		st.DroppedPerSecond = float64(dropped) / windowSec
		st.SentPerSecond = float64(offered-dropped) / windowSec
	}
	rc.judgeSteadyState(&st, k, span)
	if rc.measured > 0 {
		st.GoodputRatio = float64(rc.goodput) / float64(rc.measured)
		st.SuccessRatio = float64(st.Successes) / float64(rc.measured)
	}

	s := rc.sample(k, windowSec, &st)
	return st, s
}

// judgeClient is the client's verdict on the repeat (client.go) from its
// exact counts, with lag the measured schedule lags' distribution and
// schedP99 the goroutine scheduling latency p99 (seconds).
func (rc *recorder) judgeClient(lag report.Dist, schedP99 float64) *report.ClientCheck {
	p99 := math.NaN()
	if lag.Count > 0 {
		p99 = lag.P99
	}
	return judgeClient(rc.clientCounts(), p99, schedP99)
}

// clientCounts are the verdict's counts of what was recorded.
func (rc *recorder) clientCounts() clientCounts {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	n := clientCounts{arrivals: rc.clientArrivals, late: rc.clientLate}
	n.runs, n.longest = lateRuns(rc.lateArrivals)
	if kept := len(rc.lateArrivals); kept < n.late {
		// Past maxLateArrivals: the runs at the kept ones' rate.
		n.runs = int(math.Ceil(float64(n.runs) * float64(n.late) / float64(kept)))
	}
	return n
}

// lateArrival is a late arrival's sequence number and scheduled instant.
type lateArrival struct {
	seq uint64
	at  time.Time
}

// maxLateArrivals bounds the late arrivals a repeat keeps: 32 MB at most.
const maxLateArrivals = 1 << 20

// lateRuns counts the runs of consecutive sequence numbers in late
// (sorted in place), and how long the longest lasted, from its first
// arrival's scheduled instant to its last's.
func lateRuns(late []lateArrival) (runs int, longest time.Duration) {
	slices.SortFunc(late, func(a, b lateArrival) int { return cmp.Compare(a.seq, b.seq) })
	var first time.Time
	for i, l := range late {
		if i == 0 || l.seq != late[i-1].seq+1 {
			runs++
			first = l.at
		}
		longest = max(longest, l.at.Sub(first))
	}
	return runs, longest
}

// judgeSteadyState says whether the windows were overloaded or draining
// a backlog, judged on the requests in flight against what Poisson
// arrivals allow (steadyState). rc.mu is held.
func (rc *recorder) judgeSteadyState(st *report.Stats, k int, span time.Duration) {
	sentIn, endedIn := 0, 0
	for i := 1; i <= k; i++ {
		sentIn += winAt(rc.winSent, i)
		endedIn += winAt(rc.winEnded, i)
	}
	e2e := meanOf(rc.recs)
	if e2e > 0 {
		st.InFlightExpected = st.SentPerSecond * e2e
	}
	verdict := steadyState(sentIn, endedIn, st.InFlightAtStart, st.InFlightAtEnd)
	// A replay cut by its trace's end is not judged: its last requests
	// end after the windows by construction.
	if span == 0 && verdict == growing {
		st.Overloaded = true
		st.OverloadNote = fmt.Sprintf("overloaded: %d requests ended in the windows (successes and failures) against %d sent (%.0f%%), and the requests in flight grew from %d at the start of the windows to %d in flight at the end, beyond what Poisson arrivals allow (%.1f by Little's law at the mean E2E); the rest waited in flight, so requests/s is the server's capacity, not the offered rate",
			endedIn, sentIn, 100*float64(endedIn)/float64(max(sentIn, 1)), st.InFlightAtStart, st.InFlightAtEnd, st.InFlightExpected)
	}
	if over, why := stability.Overload(stability.Load{Dropped: capDropped(rc.winCapDropped, k), Sent: sentIn}); over && !st.Overloaded {
		// The client's own cap turned arrivals away: what was sent is
		// less than what was offered.
		st.Overloaded = true
		st.OverloadNote = why + capNote(rc.inFlightCap, st.OfferedPerSecond, e2e, firstSentE2E(rc.firstSent))
	}
	if span == 0 && verdict == drainingBacklog {
		st.Draining = true
		st.DrainingNote = fmt.Sprintf("not in steady state: %d requests ended in the windows against %d sent (%.0f%%) while the warm-up's backlog drained (%d in flight at the start of the windows, %d at the end, beyond what Poisson arrivals allow), so the rates overstate the steady state: lengthen the warm-up",
			endedIn, sentIn, 100*float64(endedIn)/float64(max(sentIn, 1)), st.InFlightAtStart, st.InFlightAtEnd)
	}
}

// firstSentKept is how many of the first requests sent tell the server's
// latency before any queue.
const firstSentKept = 8

// sentE2E is a successful request's scheduled instant and E2E in seconds.
type sentE2E struct {
	at  time.Time
	e2e float64
}

// keepFirstSent adds r to first, which keeps the firstSentKept earliest
// sent, earliest first.
func keepFirstSent(first []sentE2E, r sentE2E) []sentE2E {
	i, _ := slices.BinarySearchFunc(first, r.at, func(x sentE2E, t time.Time) int { return x.at.Compare(t) })
	if i >= firstSentKept {
		return first
	}
	first = slices.Insert(first, i, r)
	return first[:min(len(first), firstSentKept)]
}

// firstSentE2E is the mean E2E of the first requests sent (0: none yet).
func firstSentE2E(first []sentE2E) float64 {
	var sum float64
	for _, r := range first {
		sum += r.e2e
	}
	if len(first) == 0 {
		return 0
	}
	return sum / float64(len(first))
}

// capNote says, after the count of arrivals the in-flight cap dropped, who
// limited the load. By Little's law the offered rate at the server's own
// latency needs rate × E2E requests in flight: a cap below that turned
// arrivals away even from a server whose latency stayed flat, so the
// client's cap limited the load, not the server; a cap above it was
// reached because the server did not keep up (its requests took longer
// and longer as its queue grew). The server's own latency is the lesser
// of the mean E2E measured and that of the run's first requests, sent
// before any queue formed: on an overloaded engine (a GPU engine offered
// 20 req/s, 7 served) the mean E2E, 45.6 s, is mostly the queue, and the
// first requests' (about 8 s) is the server's. capacity is the cap (0:
// not known), offered the offered rate, e2e the mean E2E in seconds (0:
// none measured), first the first requests' (0: none).
func capNote(capacity int, offered, e2e, first float64) string {
	which := "the mean E2E"
	if first > 0 && first < e2e {
		e2e, which = first, "the E2E of the first requests sent, before any queue,"
	}
	need := offered * e2e
	switch {
	case capacity <= 0 || !(e2e > 0):
		return fmt.Sprintf(" (the requests in flight reached the cap): the server did not keep up with the offered %.4g req/s, so requests/s is what it sustained", offered)
	case float64(capacity) < need:
		return fmt.Sprintf(" (the requests in flight reached the cap of %d): the client's cap limited the load, not the server: the offered %.4g req/s at %s of %.3g s needs about %.0f in flight (Little's law), more than the cap, so requests/s is what the cap let through, not the server's capacity: raise bench.max_in_flight above %.0f to offer the rate (should the E2E then grow, the server is what does not keep up)",
			capacity, offered, which, e2e, need, math.Ceil(need))
	}
	return fmt.Sprintf(" (the requests in flight reached the cap of %d, above the %.1f the offered %.4g req/s needs at %s of %.3g s by Little's law): the server did not keep up with the offered rate, so requests/s is what it sustained",
		capacity, need, offered, which, e2e)
}

// sample is the repeat's bootstrap sample of its records over windows
// [0, k), and sets the latency distributions of st from them. rc.mu is
// held.
func (rc *recorder) sample(k int, windowSec float64, st *report.Stats) *sample {
	s := &sample{window: windowSec, scale: 1}
	if len(rc.recs) > 0 && rc.recsSeen > len(rc.recs) {
		s.scale = float64(rc.recsSeen) / float64(len(rc.recs))
	}
	n := len(rc.recs)
	cols := [numLatencies][]float64{make([]float64, n), make([]float64, n), make([]float64, n)}
	var ttft, ttfa, tpot, e2e, lag []float64
	s.tokens = make([]float64, n)
	s.measured = make([]bool, n)
	s.goodput = make([]bool, n)
	s.success = make([]bool, n)
	// In send order (records come in the order requests ended, or a
	// reservoir's): the bootstrap's blocks are consecutive requests.
	recs := slices.Clone(rc.recs)
	slices.SortStableFunc(recs, func(a, b report.Record) int { return cmp.Compare(a.Sched, b.Sched) })
	for i, r := range recs {
		cols[latTTFT][i], cols[latTPOT][i], cols[latE2E][i] = float64(r.TTFT), float64(r.TPOT), float64(r.E2E)
		for j, tok := range r.WinTokens {
			if int(r.FirstWin)+j < k {
				s.tokens[i] += float64(tok)
			}
		}
		s.measured[i], s.goodput[i] = r.Measured, r.Goodput
		// A record keeps no outcome: a measured request has an E2E when,
		// and only when, it succeeded (newRecord).
		s.success[i] = r.Measured && !math.IsNaN(float64(r.E2E))
		for _, x := range []struct {
			v   report.Num
			dst *[]float64
		}{{r.TTFT, &ttft}, {r.TTFA, &ttfa}, {r.TPOT, &tpot}, {r.E2E, &e2e}, {r.Lag, &lag}} {
			if !math.IsNaN(float64(x.v)) {
				*x.dst = append(*x.dst, float64(x.v))
			}
		}
	}
	for l := range cols {
		s.lat[l] = newSortedIndex(cols[l])
	}
	s.block = blockLength(cols[:]...)
	s.tau = quantileTaus(cols)
	st.TTFT, st.TPOT, st.E2E, st.ScheduleLag = summarize(ttft), summarize(tpot), summarize(e2e), summarize(lag)
	st.TTFA = summarize(ttfa)
	st.ITL = summarize(append([]float64(nil), rc.itl...))
	st.ServerTimings = serverTimingsOf(recs)
	return s
}

// winAt is a per-window count, 0 past the windows counted.
func winAt(a []int, w int) int {
	if w < len(a) {
		return a[w]
	}
	return 0
}

// The verdicts of steadyState.
const (
	steady = iota
	growing
	drainingBacklog
)

// steadyState judges the windows from the requests in flight at their
// start and end. With Poisson arrivals and a server that keeps up (M/G/∞),
// the number in flight at an instant is Poisson around its mean L, so two
// such counts a cell apart differ by about sqrt(2L) (one standard
// deviation): a short cell's noise alone moves them by a few requests. L
// is estimated by the smaller of the two counts: in steady state both are
// draws around L; a queue that grows starts from the steady count, and a
// backlog that drains ends at it (Little's law from the E2E would not do:
// a queue's waits inflate it). Growth (or shrinkage) is called only past
// flightSigmas of those standard deviations plus flightSlack requests, and
// only where what ended differs from what was sent by more than 10% (sent
// at least 10): a queue that grows at the rate of the excess arrivals
// passes both within seconds, noise does not
// (TestSteadyStateFalsePositives measures the rate over seeded cells). A
// request that ended, success or failure, has left the server: a server
// that fails fast is not overloaded.
func steadyState(sent, ended, startInFlight, endInFlight int) int {
	if sent < 10 {
		return steady
	}
	l := float64(max(min(startInFlight, endInFlight), 1))
	noise := flightSigmas*math.Sqrt(2*l) + flightSlack
	growth := float64(endInFlight - startInFlight)
	switch {
	case float64(ended) < 0.9*float64(sent) && growth > noise:
		return growing
	case float64(ended) > 1.1*float64(sent) && -growth > noise:
		return drainingBacklog
	}
	return steady
}

// capDropped is the arrivals the in-flight cap dropped in windows [0, k).
func capDropped(win []int, k int) int {
	n := 0
	for w := 0; w < k; w++ {
		n += winAt(win, w)
	}
	return n
}

// The noise bound of steadyState: standard deviations, and requests.
const (
	flightSigmas = 3
	flightSlack  = 2
)

// meanOf is the mean E2E of the measured successes among recs (0 when
// none).
func meanOf(recs []report.Record) float64 {
	var sum float64
	var n int
	for _, r := range recs {
		if r.Measured && !math.IsNaN(float64(r.E2E)) {
			sum += float64(r.E2E)
			n++
		}
	}
	if n == 0 {
		return 0
	}
	return sum / float64(n)
}

// newRecorderAt is a recorder whose warm-up ends at warmupEnd, decided
// already (tests of the aggregates, and callers that fix the warm-up).
// newRecorderFixed is a recorder whose warm-up is the configured one from
// t0, decided from the start: a shard's, which cannot see the other
// shards' requests and so cannot tell, as they would, when the run's
// pipeline filled; every shard then measures the same windows.
func newRecorderFixed(t0 time.Time, warmup, window time.Duration, slo config.SLO, maxRecs, maxITL int, seed uint64) *recorder {
	rc := newRecorder(t0, warmup, warmup, window, slo, maxRecs, maxITL, seed)
	rc.decided, rc.warmupEnd, rc.endedBy = true, t0.Add(warmup), report.WarmupConfigured
	return rc
}

func newRecorderAt(warmupEnd time.Time, window time.Duration, slo config.SLO, maxRecs, maxITL int, seed uint64) *recorder {
	rc := newRecorder(warmupEnd, 0, 0, window, slo, maxRecs, maxITL, seed)
	rc.decided = true
	rc.warmupEnd = warmupEnd
	return rc
}

// cdfSteps is the number of quantile steps a Distribution keeps: the
// quantiles at 0%, 1%, ..., 100% (cdfSteps+1 values per latency).
const cdfSteps = 100

// quantileSteps is the quantiles at 0, 1/cdfSteps, ..., 1 of sorted xs;
// nil when xs is empty.
func quantileSteps(xs []float64) []float64 {
	if len(xs) == 0 {
		return nil
	}
	out := make([]float64, cdfSteps+1)
	for i := range out {
		out[i] = quantileSorted(xs, float64(i)/cdfSteps)
	}
	return out
}

// distribution is the sample's latency quantiles: its sorted values are
// those Stats' TTFT, TPOT and E2E summarise.
func (s *sample) distribution() *report.Distribution {
	d := &report.Distribution{
		TTFT: quantileSteps(s.lat[latTTFT].vals),
		TPOT: quantileSteps(s.lat[latTPOT].vals),
		E2E:  quantileSteps(s.lat[latE2E].vals),
	}
	if d.TTFT == nil && d.TPOT == nil && d.E2E == nil {
		return nil
	}
	return d
}

// windows is the repeat's windows [0, k) as finish(k, ...) saw them.
func (rc *recorder) windows(k int) *report.RepeatWindows {
	rc.settle()
	rc.mu.Lock()
	defer rc.mu.Unlock()
	if k <= 0 {
		return nil
	}
	at := func(a []int, w int) int {
		if w >= 0 && w < len(a) {
			return a[w]
		}
		return 0
	}
	rw := &report.RepeatWindows{WindowSeconds: rc.window.Seconds(),
		Sent: make([]int, k), Ended: make([]int, k), Completed: make([]int, k), Dropped: make([]int, k),
		InFlight: make([]int, k), TTFTP50: make([]report.Num, k)}
	// winSent and winEnded are shifted by one: index 0 is the warm-up's.
	flight := at(rc.winSent, 0) - at(rc.winEnded, 0)
	for w := 0; w < k; w++ {
		rw.Sent[w], rw.Ended[w] = at(rc.winSent, w+1), at(rc.winEnded, w+1)
		rw.Completed[w], rw.Dropped[w] = at(rc.winCompletions, w), at(rc.winDropped, w)
		flight += rw.Sent[w] - rw.Ended[w]
		rw.InFlight[w] = flight
	}
	byWin := make([][]float64, k)
	win := rc.window.Seconds()
	for _, r := range rc.recs {
		if !r.Measured || !r.TTFT.Valid() || win <= 0 {
			continue
		}
		if w := int(math.Floor(r.Sched / win)); w >= 0 && w < k {
			byWin[w] = append(byWin[w], float64(r.TTFT))
		}
	}
	for w := range byWin {
		rw.TTFTP50[w] = report.Num(median(byWin[w]))
	}
	return rw
}
