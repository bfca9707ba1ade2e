package render

import (
	"fmt"
	"io"
	"strconv"

	"github.com/infer-exporter/infer_exporter/bench/report"
)

// A rate sweep runs for minutes, point after point: the progress says each
// point as it ends (its rate, passed or failed, and why) and the result,
// and the console's summary says them again at the end, from report.json's
// sweeps.

// sweepName is a sweep for people: target/model/shape, as CellName has
// it without the load.
func sweepName(target, model, shape string) string {
	name := target
	if model != "" {
		name += "/" + model
	}
	return name + "/" + shape
}

// SweepPointLine is a point's line: "sweep vllm/m/chat: 8 req/s passed
// (80 requests, success 1, goodput 0.98)", or "... failed: why".
func SweepPointLine(target, model, shape string, pt report.SweepPoint) string {
	return fmt.Sprintf("sweep %s: %s", sweepName(target, model, shape), sweepPointText(pt))
}

// sweepPointText is a point's rate, verdict and figures.
func sweepPointText(pt report.SweepPoint) string {
	verdict := "passed"
	switch {
	case pt.Degraded:
		verdict = "not judged (the client's limit)"
	case !pt.Pass:
		verdict = "failed"
	}
	text := fmt.Sprintf("%s req/s %s (%d requests, success %s, goodput %s)", rate(pt.Rate), verdict, pt.Requests,
		strconv.FormatFloat(pt.SuccessRatio, 'f', 3, 64), strconv.FormatFloat(pt.GoodputRatio, 'f', 3, 64))
	if pt.Note != "" {
		text += ": " + pt.Note
	}
	return text
}

// SweepResultLine is a sweep's result: its highest passing rate, the
// first failing one, and its note.
func SweepResultLine(model string, s *report.SweepResult) string {
	line := fmt.Sprintf("sweep %s: max rate %s req/s (%s)", sweepName(s.Target, model, s.Shape), rate(s.MaxRate), s.Rule)
	switch {
	case s.ClientLimitedRate > 0:
		line += fmt.Sprintf(", stopped at %s req/s by the client", rate(s.ClientLimitedRate))
	case s.FirstFailingRate > 0:
		line += fmt.Sprintf(", first failing %s req/s", rate(s.FirstFailingRate))
	}
	if s.Note != "" {
		line += ": " + s.Note
	}
	return line
}

// WriteSweeps writes every sweep of r, its points and its result, after
// the result blocks.
func WriteSweeps(w io.Writer, r *report.Report) {
	for i := range r.Sweeps {
		s := &r.Sweeps[i]
		fmt.Fprintln(w, blockHeading("=", "Rate sweep "+sweepName(s.Target, modelOf(r, s.Target), s.Shape)))
		for _, pt := range s.Points {
			blockLine(w, "Point:", sweepPointText(pt))
		}
		blockLine(w, "Max rate (req/s):", rate(s.MaxRate))
		if s.FirstFailingRate > 0 {
			blockLine(w, "First failing rate (req/s):", rate(s.FirstFailingRate))
		}
		if s.ClientLimitedRate > 0 {
			blockLine(w, "Client's limit (req/s):", rate(s.ClientLimitedRate))
		}
		if s.Note != "" {
			blockLine(w, "Note:", s.Note)
		}
		fmt.Fprintln(w, BlockRule)
	}
}

// rate is a rate as the configuration would write it: 4, 2.5, 13.75.
func rate(v float64) string { return strconv.FormatFloat(v, 'g', -1, 64) }
