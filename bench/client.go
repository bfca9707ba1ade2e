package bench

import (
	"fmt"
	"math"
	"time"

	"github.com/infer-exporter/infer_exporter/bench/report"
)

// The client's own verdict on a repeat: did it keep its schedule, so that
// the latencies it measured are the server's and not its own delay?
//
// Each measured arrival is one piece of evidence: on time (sent within
// lateAfter of its scheduled instant) or late (sent later, or refused by
// the wire ceiling as overdue: the client was so late that sending it
// would have burst above the rate). The old rule, the schedule lag's p99
// above 10 ms, judged a handful of arrivals by their largest (the p99 of
// 5 values is their maximum: one late timer failed a 5 req/s sweep point)
// and flagged a client that merely shared its machine: beside two busy
// loops on 2 cores, 1.4% to 2% of the arrivals were late (lag p99 up to
// 16 ms) at 5 to 100 req/s, while the client kept its schedule.
//
// Late arrivals come in runs: one stall of the process (the OS running
// something else) makes every arrival due during it late. So the runs
// are the independent events, and:
//   - fewer than minClientArrivals arrivals: not judged;
//   - degraded when more than clientTolerance of the arrivals were late
//     and that is beyond doubt: a one-sided binomial test on the runs
//     among the arrivals they stand for (arrivals / mean run), the chance
//     that a client late for clientTolerance of its time shows as many
//     under clientAlpha; or, as late, when one run lasted minLateRun (a
//     client that falls behind for good is one run);
//   - or, once judged, when the process's goroutine scheduling latency p99
//     is above lateAfter: a client whose CPU is saturated reads its token
//     events late even while it sends on time (the dispatcher's timer is
//     run first); that p99 is over thousands of wake-ups a second, so it
//     is not a handful's maximum.
//
// The measured false-alarm and detection rates are in docs/bench.md
// (TestClientVerdictRates on seeded models, TestClientVerdictOnMeasuredRuns
// on real runs' arrivals).
const (
	// lateAfter is how late a send may be and still count as on time:
	// the exporter's --probe.degraded-lag, also the wire ceiling's
	// tolerance.
	lateAfter = degradedLag
	// minClientArrivals is the fewest arrivals the verdict is given on.
	minClientArrivals = 20
	// clientTolerance is the share of late arrivals a client that keeps
	// its schedule may show: above the 2% measured beside two busy loops.
	clientTolerance = 0.05
	// clientAlpha is the binomial test's level.
	clientAlpha = 0.01
	// minLateRun: a client late without a break for this long, and for
	// more than clientTolerance of its arrivals, is degraded however few
	// its runs: a client that falls behind for good is one run, and one
	// stall of a second is no busy machine's noise (beside two busy loops
	// the longest run lasted 80 ms).
	minLateRun = time.Second
)

// clientRemedy is what to change when the client is degraded (a sweep's
// points cannot be sharded: sweepRemedy).
const (
	clientRemedy = "lower the rate, give the bench more CPU (GOMAXPROCS, cores) or a machine of its own, or split the load across machines with --shard=i/N and bench merge"
	sweepRemedy  = "give the bench more CPU (GOMAXPROCS, cores) or a machine of its own, or end the sweep below it (sweep.max_rate)"
)

// clientCounts are a repeat's measured arrivals judged, those late of
// them, the runs of consecutive arrivals those came in, and how long the
// longest run lasted (from its first arrival's scheduled instant to its
// last's).
type clientCounts struct {
	arrivals, late, runs int
	longest              time.Duration
}

// judgeClient is the verdict on a repeat of those counts, with the
// schedule lag p99 (NaN: none) and the goroutine scheduling latency p99
// (seconds) it measured.
func judgeClient(n clientCounts, lagP99, schedP99 float64) *report.ClientCheck {
	c := &report.ClientCheck{State: report.ClientOK, Arrivals: n.arrivals, Late: n.late, LateRuns: n.runs,
		LateAfterSeconds: lateAfter.Seconds(), LagP99: report.Num(lagP99), SchedulingLatencyP99: schedP99}
	if n.arrivals > 0 {
		c.LateShare = float64(n.late) / float64(n.arrivals)
	}
	switch {
	case n.arrivals < minClientArrivals:
		c.State = report.StateNotJudged
		c.Note = fmt.Sprintf("client not judged: %d measured %s, the verdict needs %d", n.arrivals, plural(n.arrivals, "arrival", "arrivals"), minClientArrivals)
	case lateBeyondDoubt(n):
		c.State = report.ClientDegraded
		c.Note = fmt.Sprintf("client degraded: %s of %d arrivals (%d, in %d %s) sent over %s late or refused as overdue (schedule lag p99 %s), above the %.0f%% a client that keeps its schedule shows, so the latencies include the client's own delay",
			percent(c.LateShare), n.arrivals, n.late, n.runs, plural(n.runs, "run", "runs"), millis(lateAfter.Seconds()), millis(lagP99), 100*clientTolerance)
	case schedP99 > lateAfter.Seconds():
		c.State = report.ClientDegraded
		c.Note = fmt.Sprintf("client degraded: its goroutines waited %s for a CPU at the p99 (over %s), so every timestamp it took includes its own delay; %s of %d arrivals sent over %s late",
			millis(schedP99), millis(lateAfter.Seconds()), percent(c.LateShare), n.arrivals, millis(lateAfter.Seconds()))
	}
	return c
}

// lateBeyondDoubt is the binomial test on the runs: late arrivals come in
// runs (one stall of the process makes every arrival due during it
// late), so the runs are the independent events and the arrivals stand
// for arrivals / (late / runs) of them. It reports whether the late share
// is above clientTolerance and the runs more than a client late for
// clientTolerance of its time shows but with a chance under clientAlpha
// (P(X >= runs) for X ~ Binomial(effective arrivals, clientTolerance)).
func lateBeyondDoubt(n clientCounts) bool {
	if n.late == 0 || float64(n.late) <= clientTolerance*float64(n.arrivals) {
		return false
	}
	if n.longest >= minLateRun {
		return true
	}
	runs := max(n.runs, 1)
	effective := int(math.Round(float64(n.arrivals) * float64(runs) / float64(n.late)))
	return binomialTail(effective, runs, clientTolerance) < clientAlpha
}

// binomialTail is P(X >= k) for X ~ Binomial(n, p), summed in log space
// from k up until its terms no longer count (k above the mean: they fall).
func binomialTail(n, k int, p float64) float64 {
	if k <= 0 {
		return 1
	}
	if k > n {
		return 0
	}
	lp, lq := math.Log(p), math.Log1p(-p)
	lgn, _ := math.Lgamma(float64(n + 1))
	var sum float64
	for i := k; i <= n; i++ {
		lgi, _ := math.Lgamma(float64(i + 1))
		lgr, _ := math.Lgamma(float64(n - i + 1))
		term := math.Exp(lgn - lgi - lgr + float64(i)*lp + float64(n-i)*lq)
		sum += term
		if term < sum*1e-12 {
			break
		}
	}
	return min(sum, 1)
}

// percent is a share for people: "2.5%", "37%".
func percent(share float64) string {
	if share < 0.1 {
		return fmt.Sprintf("%.1f%%", 100*share)
	}
	return fmt.Sprintf("%.0f%%", 100*share)
}

// millis is seconds for people, in milliseconds: "48 ms", "0.3 ms", "-"
// for none.
func millis(sec float64) string {
	switch {
	case math.IsNaN(sec):
		return "-"
	case sec < 0.01:
		return fmt.Sprintf("%.1f ms", 1000*sec)
	}
	return fmt.Sprintf("%.0f ms", 1000*sec)
}

// cellClient is a cell's client verdict from its repeats': degraded when
// any was (the note of the first such, with its remedy), whether any was
// judged.
func cellClient(repeats []report.RepeatResult) (degraded bool, note string) {
	for i := range repeats {
		c := repeats[i].Client
		if c == nil || c.State != report.ClientDegraded {
			continue
		}
		prefix := ""
		if len(repeats) > 1 {
			prefix = fmt.Sprintf("repeat %d: ", repeats[i].Index+1)
		}
		return true, prefix + c.Note + ": " + clientRemedy
	}
	return false, ""
}

// cellDegraded is a cell's degraded flag and its note: the client's
// verdict on its repeats (cellClient), else a replay's drift.
func cellDegraded(repeats []report.RepeatResult) (bool, string) {
	if degraded, note := cellClient(repeats); degraded {
		return true, note
	}
	for i := range repeats {
		if rp := repeats[i].Replay; rp != nil && rp.Degraded {
			prefix := ""
			if len(repeats) > 1 {
				prefix = fmt.Sprintf("repeat %d: ", repeats[i].Index+1)
			}
			return true, fmt.Sprintf("%sreplay degraded: the sends' drift from the trace's instants had a p99 of %s, over %s (the client's lag and the rate ceiling's delay), so the latencies include the client's own delay: %s",
				prefix, millis(rp.Drift.P99), millis(lateAfter.Seconds()), clientRemedy)
		}
	}
	return false, ""
}
