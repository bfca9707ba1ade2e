package bench

import (
	"bytes"
	"encoding/csv"
	"math"
	"strconv"
	"testing"
	"time"

	"github.com/infer-exporter/infer_exporter/bench/render"
	"github.com/infer-exporter/infer_exporter/bench/report"
	"github.com/infer-exporter/infer_exporter/internal/config"
	"github.com/infer-exporter/infer_exporter/probe/observation"
)

// TestRecorderReasoning: a cell's TTFA percentiles sit beside TTFT's, over
// the measured requests that got an answer, and its reasoning tokens are
// the server's count, else the reasoning events, of the measured successful
// requests.
func TestRecorderReasoning(t *testing.T) {
	w0 := time.Unix(1000, 0)
	at := func(s float64) time.Time { return w0.Add(time.Duration(s * float64(time.Second))) }
	rc := newRecorderAt(w0, time.Second, config.SLO{}, 100, 100, 1)
	req := func(sched, first, answer, end float64, out observation.Outcome, reasoningTokens, reasoningEvents int) *observation.Request {
		o := &observation.Request{Scheduled: at(sched), Sent: at(sched), FirstToken: at(first), End: at(end), Outcome: out,
			TokenTimes: []time.Time{at(first), at(end)}, ContentEvents: 2, OutputTokens: 2,
			ReasoningTokens: reasoningTokens, ReasoningEvents: reasoningEvents}
		if answer > 0 {
			o.FirstAnswer = at(answer)
		}
		return o
	}
	rc.observe(req(0.1, 0.2, 0.5, 0.6, observation.Success, 30, 1))    // TTFA 0.4; the server counted 30
	rc.observe(req(0.2, 0.3, 0.4, 0.5, observation.Success, 0, 1))     // TTFA 0.2; 1 reasoning event, no count
	rc.observe(req(0.3, 0.35, 0.35, 0.5, observation.Success, 0, 0))   // no reasoning: TTFA = TTFT = 0.05
	rc.observe(req(0.4, 0.5, 0, 0.7, observation.Disconnected, 0, 1))  // cut while reasoning: a TTFT, no TTFA, not counted
	rc.observe(req(-0.5, -0.4, -0.3, -0.2, observation.Success, 9, 1)) // warm-up: not measured
	// Hidden reasoning: 200 tokens counted, none streamed; 20 visible
	// tokens 20 ms apart. It reasoned, by the rule of the live metrics
	// and /probe (observation.Request.Reasoning), and its TPOT is its
	// visible pace.
	hidden := &observation.Request{Scheduled: at(0.5), Sent: at(0.5), FirstToken: at(0.6), FirstAnswer: at(0.6), End: at(0.985),
		Outcome: observation.Success, OutputTokens: 220, ReasoningTokens: 200, ContentEvents: 20, TokenSource: observation.TokensFromUsage}
	for i := range 20 {
		hidden.TokenTimes = append(hidden.TokenTimes, at(0.6+0.02*float64(i)))
	}
	rc.observe(hidden)
	st, _ := rc.finish(1, 0)

	if st.TTFT.Count != 5 || st.TTFA.Count != 4 {
		t.Fatalf("TTFT %d values, TTFA %d; want 5 and 4", st.TTFT.Count, st.TTFA.Count)
	}
	if math.Abs(st.TTFA.Min-0.05) > 1e-9 || math.Abs(st.TTFA.Max-0.4) > 1e-9 {
		t.Errorf("TTFA %+v, want min 0.05, max 0.4", st.TTFA)
	}
	if st.ReasoningTokens != 231 || st.ReasoningRequests != 3 {
		t.Errorf("reasoning %d tokens over %d requests, want 30 + 1 + 200 over 3", st.ReasoningTokens, st.ReasoningRequests)
	}
	if math.Abs(st.TPOT.Max-0.4) > 1e-9 || math.Abs(st.TPOT.Min-0.02) > 1e-9 {
		t.Errorf("TPOT %+v, want min the hidden request's 0.02, max 0.4", st.TPOT)
	}

	// Over repeats: medians, as for every figure.
	other := st
	other.ReasoningTokens, other.TTFA.P50 = 41, 0.3
	m := medianStats([]report.Stats{st, other, other})
	if m.ReasoningTokens != 41 || m.TTFA.P50 != 0.3 || m.ReasoningRequests != 3 {
		t.Errorf("median: %d reasoning tokens, %d requests, TTFA p50 %v", m.ReasoningTokens, m.ReasoningRequests, m.TTFA.P50)
	}
}

// TestReportCSVReasoningColumns: the TTFA and reasoning columns follow the
// existing ones, which keep their places.
func TestReportCSVReasoningColumns(t *testing.T) {
	r := &report.Report{Cells: []report.CellResult{{Key: "k", Summary: report.Stats{
		TTFT:            report.Dist{Count: 2, P50: 0.1},
		TTFA:            report.Dist{Count: 2, P50: 0.7, Max: 0.9},
		ReasoningTokens: 60, ReasoningRequests: 2,
	}}}}
	var buf bytes.Buffer
	if err := render.WriteCSV(&buf, r); err != nil {
		t.Fatal(err)
	}
	rows, err := csv.NewReader(&buf).ReadAll()
	if err != nil {
		t.Fatal(err)
	}
	col := map[string]int{}
	for i, h := range rows[0] {
		col[h] = i
	}
	// Added columns go after the existing ones, which keep their places.
	if col["ttfa_mean_seconds"] != col["e2e_p99_ci_hi"]+1 || col["reasoning_requests"] != col["reasoning_tokens"]+1 ||
		col["offered_per_second"] != col["reasoning_requests"]+1 || col["in_flight_at_end"] != col["overloaded"]+1 ||
		col["in_flight_expected"] != col["in_flight_at_end"]+1 || col["draining"] != col["in_flight_at_start"]+1 {
		t.Errorf("header %v", rows[0])
	}
	for name, want := range map[string]string{
		"ttft_p50_seconds": "0.1", "ttfa_p50_seconds": "0.7", "ttfa_max_seconds": "0.9",
		"reasoning_tokens": "60", "reasoning_requests": strconv.Itoa(2),
	} {
		if got := rows[1][col[name]]; got != want {
			t.Errorf("%s = %q, want %q", name, got, want)
		}
	}
}
