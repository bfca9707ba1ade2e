package render

import (
	"fmt"
	"io"
	"math"
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

// An agents search runs for minutes too: each point's line as it ends,
// its result's, and the summary's block at the end, from report.json's
// agents.

// AgentPointLine is an agents point's line: "agents vllm/m: 8 agents
// passed (412 turns, success 1, TTFT p90 0.21s, TPOT p90 0.031s, 96 jobs,
// 720 jobs/h per agent, job 4.9s)", or "... failed: why".
func AgentPointLine(target, model string, quantile float64, pt report.AgentPoint) string {
	return fmt.Sprintf("agents %s: %s", agentsName(target, model), agentPointText(quantile, pt))
}

// agentPointText is a point's agents, verdict and figures.
func agentPointText(quantile float64, pt report.AgentPoint) string {
	q := QuantileName(quantile)
	verdict := "passed"
	switch {
	case pt.Degraded:
		verdict = "not judged (the client's limit)"
	case !pt.Pass:
		verdict = "failed"
	}
	text := fmt.Sprintf("%d agents %s (%d turns, success %s, TTFT %s %s, TPOT %s %s, %d jobs, %s jobs/h per agent, job %s)",
		pt.Agents, verdict, pt.Turns, strconv.FormatFloat(pt.SuccessRatio, 'f', 3, 64), q, seconds(pt.TTFTSeconds),
		q, seconds(pt.TPOTSeconds), pt.JobsCompleted, strconv.FormatFloat(pt.JobsPerHourPerAgent, 'f', 1, 64), seconds(pt.MeanJobSeconds))
	if pt.Note != "" {
		text += ": " + pt.Note
	}
	return text
}

// seconds is a figure in seconds, 3 significant digits: "0.0312s", or "-"
// when there is none.
func seconds(v report.Num) string {
	if math.IsNaN(float64(v)) {
		return "-"
	}
	return strconv.FormatFloat(float64(v), 'g', 3, 64) + "s"
}

// QuantileName is a quantile as a percentile's name: 0.9 is "p90".
func QuantileName(q float64) string { return "p" + strconv.FormatFloat(q*100, 'g', 6, 64) }

// AgentResultLine is a search's result: the most agents meeting the tier,
// the first failing count, and its note.
func AgentResultLine(model string, s *report.AgentSearch) string {
	line := fmt.Sprintf("agents %s: max %d agents (%s)", agentsName(s.Target, model), s.MaxAgents, s.Tier)
	if s.MaxAgents > 0 {
		line += fmt.Sprintf(", %s jobs/h per agent there", strconv.FormatFloat(s.JobsPerHourPerAgent, 'f', 1, 64))
	}
	if s.FirstFailingAgents > 0 {
		line += fmt.Sprintf(", first failing %d agents", s.FirstFailingAgents)
	}
	if s.ClientLimitedAgents > 0 {
		line += fmt.Sprintf(", stopped at %d agents by the client", s.ClientLimitedAgents)
	}
	if s.Note != "" {
		line += ": " + s.Note
	}
	return line
}

// agentsName is a search for people: target/model.
func agentsName(target, model string) string {
	if model != "" {
		return target + "/" + model
	}
	return target
}

// WriteAgents writes every agents search of r, its points and its result,
// after the sweeps.
func WriteAgents(w io.Writer, r *report.Report) {
	for i := range r.Agents {
		s := &r.Agents[i]
		fmt.Fprintln(w, blockHeading("=", "Agents under an SLO "+agentsName(s.Target, modelOf(r, s.Target))))
		blockLine(w, "Tier:", s.Tier)
		for _, pt := range s.Points {
			blockLine(w, "Point:", agentPointText(s.Quantile, pt))
		}
		blockLine(w, "Max agents:", strconv.Itoa(s.MaxAgents))
		if s.FirstFailingAgents > 0 {
			blockLine(w, "First failing agents:", strconv.Itoa(s.FirstFailingAgents))
		}
		if s.ClientLimitedAgents > 0 {
			blockLine(w, "Client's limit (agents):", strconv.Itoa(s.ClientLimitedAgents))
		}
		if s.Note != "" {
			blockLine(w, "Note:", s.Note)
		}
		fmt.Fprintln(w, BlockRule)
	}
}
