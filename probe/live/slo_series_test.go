package live

import (
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/infer-exporter/infer_exporter/internal/config"
	"github.com/infer-exporter/infer_exporter/probe/observation"
)

// TestSLOSeriesFromTheWorkload: a workload's SLO thresholds are on
// /metrics (infer_probe_slo_threshold_seconds, the ones set only), and
// each request is judged against each of them exactly
// (infer_probe_slo_requests_total{slo,result}): TTFT for every request
// with a first token, TPOT and E2E for successes, whatever the histogram
// buckets (0.15 s is not a bucket boundary).
func TestSLOSeriesFromTheWorkload(t *testing.T) {
	reg := prometheus.NewRegistry()
	m := NewMetrics(reg)
	s := m.Series("t", "m", "w", config.SLO{TTFT: 150 * time.Millisecond, E2E: time.Second})
	t0 := time.Unix(1000, 0)
	req := func(ttft, e2e time.Duration, outcome observation.Outcome) *observation.Request {
		o := &observation.Request{Scheduled: t0, Sent: t0, Outcome: outcome, End: t0.Add(e2e), OutputTokens: 2, ContentEvents: 2}
		if ttft > 0 {
			o.FirstToken = t0.Add(ttft)
			o.TokenTimes = []time.Time{o.FirstToken, o.End}
		}
		return o
	}
	for _, o := range []*observation.Request{
		req(100*time.Millisecond, 500*time.Millisecond, observation.Success),     // both met
		req(200*time.Millisecond, 1500*time.Millisecond, observation.Success),    // both missed
		req(140*time.Millisecond, 900*time.Millisecond, observation.Success),     // both met
		req(300*time.Millisecond, 400*time.Millisecond, observation.StreamError), // TTFT missed; no E2E
		req(0, 50*time.Millisecond, observation.HTTP5xx),                         // judged on neither
	} {
		s.Observe(o)
	}
	want := `
# HELP infer_probe_slo_requests_total Requests judged against each SLO threshold set, by slo (ttft: with a first token; tpot, e2e: successes) and result (met, missed).
# TYPE infer_probe_slo_requests_total counter
infer_probe_slo_requests_total{model="m",result="met",slo="e2e",target="t",workload="w"} 2
infer_probe_slo_requests_total{model="m",result="met",slo="ttft",target="t",workload="w"} 2
infer_probe_slo_requests_total{model="m",result="missed",slo="e2e",target="t",workload="w"} 1
infer_probe_slo_requests_total{model="m",result="missed",slo="ttft",target="t",workload="w"} 2
# HELP infer_probe_slo_threshold_seconds The workload's SLO threshold per metric (slo: ttft, tpot, e2e), as configured; only the thresholds set exist.
# TYPE infer_probe_slo_threshold_seconds gauge
infer_probe_slo_threshold_seconds{model="m",slo="e2e",target="t",workload="w"} 1
infer_probe_slo_threshold_seconds{model="m",slo="ttft",target="t",workload="w"} 0.15
`
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want), "infer_probe_slo_requests_total", "infer_probe_slo_threshold_seconds"); err != nil {
		t.Error(err)
	}
	s.Delete()
	if n, _ := testutil.GatherAndCount(reg, "infer_probe_slo_requests_total", "infer_probe_slo_threshold_seconds"); n != 0 {
		t.Errorf("%d SLO series left after Delete", n)
	}
}
