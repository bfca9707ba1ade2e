package bench

import (
	"context"
	"fmt"
	"math"
	"strings"

	"github.com/infer-exporter/infer_exporter/bench/render"
	"github.com/infer-exporter/infer_exporter/bench/report"
	"github.com/infer-exporter/infer_exporter/internal/config"
	"github.com/infer-exporter/infer_exporter/probe/client"
)

// sweeper runs the rate sweeps after the matrix: for every target and
// shape, the highest open-loop rate meeting the sweep's pass rule
// (SweepSpec), each point one repeat of the run's (repeat).
type sweeper struct {
	spec     *SweepSpec
	shapes   []Shape
	progress *progress
	repeat   func(ctx context.Context, p repeatPlan) (report.RepeatResult, *sample, error)
}

// run runs the rate sweep of every target and shape; an interrupt
// leaves out the sweep that ran and marks the report interrupted.
func (s *sweeper) run(ctx context.Context, targets []config.Target, cts []*client.Target, rep *report.Report) error {
	for ti := range targets {
		for i := range s.shapes {
			res, err := s.sweep(ctx, &targets[ti], cts[ti], &s.shapes[i])
			if err != nil && ctx.Err() != nil {
				// The sweeps that finished stay; the one that ran is
				// left out.
				rep.Interrupted = true
				return nil
			}
			if err != nil {
				return err
			}
			rep.Sweeps = append(rep.Sweeps, res)
		}
	}
	return nil
}

// gpuReport is what the GPU sampler saw over the run, or why there is

// sweep finds the highest open-loop rate meeting the SLO for one target and
// shape (see SweepSpec). Each point is one repeat without the stability
// check.
func (s *sweeper) sweep(ctx context.Context, t *config.Target, ct *client.Target, sh *Shape) (report.SweepResult, error) {
	sw := s.spec
	res := report.SweepResult{Target: t.Name, Shape: sh.Name, Rule: fmt.Sprintf("goodput >= %g", sw.MinGoodput)}
	if sw.Pass == SweepPassSuccess {
		res.Rule = fmt.Sprintf("success >= %g", sw.MinSuccess)
	}
	try := func(rate float64) (report.SweepPoint, error) {
		l := report.Load{Kind: report.LoadRate, Value: rate}
		key := "sweep/" + report.CellKey(t.Name, l, sh.Name)
		watch := s.progress.begin("sweep "+render.CellName(t.Name, t.Model, l, sh.Name), sw.Warmup+sw.Duration)
		r, _, err := s.repeat(ctx, repeatPlan{target: t, ct: ct, group: group{name: sh.Name, load: l, shape: sh}, cell: key,
			warmup: sw.Warmup, duration: sw.Duration, watch: watch, trendWindows: sweepTrendWindows})
		if err != nil {
			return report.SweepPoint{}, err
		}
		pt := sweepPoint(sw, res.Rule, rate, &r)
		// Each point as it ends: a sweep runs for minutes.
		s.progress.say(render.SweepPointLine(t.Name, t.Model, sh.Name, pt))
		return pt, nil
	}
	err := searchSweep(sw, &res, try)
	if err == nil {
		s.progress.say(render.SweepResultLine(t.Model, &res))
	}
	return res, err
}

// sweepPoint judges one point of the sweep from its repeat: its pass
// rule (rule, the sweep's), in steady state, of a client that kept up.
func sweepPoint(sw *SweepSpec, rule string, rate float64, r *report.RepeatResult) report.SweepPoint {
	s := r.Stats
	pt := report.SweepPoint{Rate: rate, GoodputRatio: s.GoodputRatio, GoodputPerSecond: s.GoodputPerSecond,
		OutputTokensPerSecond: s.OutputTokensPerSecond, E2EP99: report.NaN(), Requests: s.Requests}
	if s.Requests > 0 {
		pt.SuccessRatio = float64(s.Successes) / float64(s.Requests)
	}
	if sw.Pass == SweepPassSuccess {
		pt.Pass = s.Requests > 0 && pt.SuccessRatio >= sw.MinSuccess
	} else {
		pt.Pass = s.Requests > 0 && s.GoodputRatio >= sw.MinGoodput
	}
	// Capacity is what the server sustains: a point passes only in
	// steady state, for either rule.
	pt.Overloaded = s.Overloaded
	pt.Degraded = r.Client != nil && r.Client.State == report.ClientDegraded
	// The stability rule's verdict on the point: a drift of the
	// length-normalised latency that is significant and at least
	// the tolerance means a queue was building; one merely not
	// judged (too few requests) does not fail the point.
	grew := r.Stability.State == report.StateUnstable && float64(r.Stability.Growth) > 0
	switch {
	case pt.Degraded:
		// First: whatever else the point shows, the client's delay is
		// in it, so it says nothing of the server either way.
		pt.Pass, pt.Note = false, r.Client.Note+"; the point measured the client, not the server"
	case pt.Pass && pt.Overloaded:
		pt.Pass, pt.Note = false, "failed for growth: "+s.OverloadNote
	case pt.Pass && grew:
		pt.Pass, pt.Note = false, "failed for growth: "+r.Stability.Note+"; a queue was building: the server does not sustain this rate"
	case !pt.Pass:
		pt.Note = "failed " + rule
	}
	if s.E2E.Count > 0 {
		pt.E2EP99 = report.Num(s.E2E.P99)
	}
	return pt
}

// searchSweep runs the sweep's rates through try, which measures and
// judges one point: Start, ×Factor, ... up to MaxRate until one fails,
// then Refine bisections between the last passing and the first failing
// rate; and fills res with the points, the result and its note. A point
// whose client was degraded counts for neither side: it ends the sweep
// there, as the client's limit, not the server's.
func searchSweep(sw *SweepSpec, res *report.SweepResult, try func(rate float64) (report.SweepPoint, error)) error {
	var pass, fail, client float64
	var passPt, clientPt report.SweepPoint
	// judge runs one point: false when the sweep ends on its client.
	judge := func(rate float64) (report.SweepPoint, bool, error) {
		pt, err := try(rate)
		if err != nil {
			return pt, false, err
		}
		res.Points = append(res.Points, pt)
		if pt.Degraded {
			client, clientPt = rate, pt
			return pt, false, nil
		}
		return pt, true, nil
	}
	for rate := sw.Start; ; {
		pt, judged, err := judge(rate)
		if err != nil {
			return err
		}
		if !judged {
			break
		}
		if !pt.Pass {
			fail = rate
			break
		}
		pass, passPt = rate, pt
		if rate >= sw.MaxRate {
			break
		}
		rate = min(rate*sw.Factor, sw.MaxRate)
	}
	for i := 0; client == 0 && i < *sw.Refine && pass > 0 && fail > 0; i++ {
		mid := (pass + fail) / 2
		pt, judged, err := judge(mid)
		if err != nil {
			return err
		}
		switch {
		case !judged:
		case pt.Pass:
			pass, passPt = mid, pt
		default:
			fail = mid
		}
	}
	res.MaxRate, res.GoodputPerSecond, res.SuccessRatio, res.FirstFailingRate = pass, passPt.GoodputPerSecond, passPt.SuccessRatio, fail
	res.ClientLimitedRate = client
	switch {
	case client > 0:
		// Only the first rate can end the sweep on its client before
		// one passed: a failing rate ends it first.
		server := "it was the first rate tried, so no rate was judged (lower sweep.start)"
		switch {
		case pass > 0 && fail > 0:
			server = fmt.Sprintf("the server passed %s at %g req/s and failed it at %g req/s", res.Rule, pass, fail)
		case pass > 0:
			server = fmt.Sprintf("the server passed %s up to %g req/s", res.Rule, pass)
		}
		res.Note = fmt.Sprintf("the sweep stopped at %g req/s, the client's limit, not the server's (%s); %s, so the server's capacity may be higher: %s",
			client, clientPt.Note, server, sweepRemedy)
	case pass == 0:
		res.Note = fmt.Sprintf("even %g req/s failed %s", sw.Start, res.Rule)
	case fail == 0:
		res.Note = fmt.Sprintf("passed %s up to max_rate %g req/s", res.Rule, sw.MaxRate)
	}
	// A ratio is only as fine as its count: 99.9% needs 1,000 requests
	// to tell one failure from none.
	if need := int(math.Ceil(1 / (1 - min(sw.MinSuccess, 1-1e-9)))); sw.Pass == SweepPassSuccess && pass > 0 && passPt.Requests < need {
		if res.Note != "" {
			res.Note += ";"
		}
		res.Note = strings.TrimSpace(res.Note + fmt.Sprintf(" the passing rate measured %d requests: a ratio of %g needs at least %d to resolve one failure; lengthen sweep.duration",
			passPt.Requests, sw.MinSuccess, need))
	}
	return nil
}

// sweepTrendWindows is how many windows a sweep point's measured time is
// split into to see its latency's trend.
const sweepTrendWindows = 3
