package report

// ClientCheck is the client's own verdict on a repeat (bench/client.go):
// whether it kept its schedule, so that the latencies it measured are the
// server's and not its own delay.
type ClientCheck struct {
	// State is ClientOK, ClientDegraded, or StateNotJudged (too few
	// arrivals to judge).
	State string `json:"state"`
	// Arrivals are the measured arrivals judged: those sent, and those
	// the wire ceiling refused as overdue; Late of them were sent more
	// than LateAfterSeconds after their scheduled instant, or refused;
	// LateShare is Late / Arrivals (0 without arrivals).
	// LateRuns are the runs of consecutive late arrivals (in schedule
	// order) the late ones came in: one stall of the process makes every
	// arrival due during it late, so the runs are the independent events.
	Arrivals         int     `json:"arrivals"`
	Late             int     `json:"late"`
	LateRuns         int     `json:"late_runs"`
	LateShare        float64 `json:"late_share"`
	LateAfterSeconds float64 `json:"late_after_seconds"`
	// LagP99 is the schedule lag's p99 (stats.schedule_lag_seconds.p99;
	// null without a send), SchedulingLatencyP99 the process's goroutine
	// scheduling latency p99 (the repeat's scheduling_latency_p99_seconds),
	// both in seconds: the figures the note quotes.
	LagP99               Num     `json:"lag_p99_seconds"`
	SchedulingLatencyP99 float64 `json:"scheduling_latency_p99_seconds"`
	// Note says, for people, how late and how often, and what to change
	// (degraded), or why the repeat was not judged; empty when ok.
	Note string `json:"note,omitempty"`
}

// The client verdict's states besides StateNotJudged.
const (
	ClientOK       = "ok"
	ClientDegraded = "degraded"
)

// ClientNotJudged reports whether a repeat of the cell had too few
// arrivals for the client's verdict (none degraded or not, the cell's
// Degraded says it).
func (c *CellResult) ClientNotJudged() bool {
	for i := range c.Repeats {
		if cc := c.Repeats[i].Client; cc != nil && cc.State == StateNotJudged {
			return true
		}
	}
	return false
}
