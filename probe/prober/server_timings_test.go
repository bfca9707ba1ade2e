package prober

import (
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/infer-exporter/infer_exporter/probe/observation"
)

type serverTimingsCollector []observation.Request

func (c serverTimingsCollector) Describe(ch chan<- *prometheus.Desc) {
	prometheus.DescribeByCollect(c, ch)
}
func (c serverTimingsCollector) Collect(ch chan<- prometheus.Metric) { collectServerTimings(ch, c) }

// TestProbeServerTimings: /probe's summaries of the engine's timings hold
// the successful requests that reported them, the overhead is the
// client's TTFT less the engine's queue and TTFT, and the requests are
// counted by result.
func TestProbeServerTimings(t *testing.T) {
	at := time.Unix(100, 0)
	ms := func(v int) observation.ServerDuration {
		return observation.ServerDuration{D: time.Duration(v) * time.Millisecond, OK: true}
	}
	reqs := serverTimingsCollector{
		{Outcome: observation.Success, Scheduled: at, FirstToken: at.Add(150 * time.Millisecond),
			Server: observation.ServerTimings{Queue: ms(90), TTFT: ms(55), Generation: ms(10)}},
		{Outcome: observation.Success, Scheduled: at, FirstToken: at.Add(time.Second), Server: observation.ServerTimings{Queue: ms(3)}},
		{Outcome: observation.Success, Scheduled: at, FirstToken: at.Add(time.Second)},
		// A failure is no request of these series.
		{Outcome: observation.Timeout, Scheduled: at, FirstToken: at.Add(time.Second), Server: observation.ServerTimings{TTFT: ms(1)}},
	}
	want := `
# HELP probe_client_overhead_seconds Client TTFT less the engine's queue and own TTFT, over the probe's decomposed requests: network, gateway, server front end and client.
# TYPE probe_client_overhead_seconds summary
probe_client_overhead_seconds{quantile="0.5"} 0.005
probe_client_overhead_seconds{quantile="0.9"} 0.005
probe_client_overhead_seconds{quantile="0.99"} 0.005
probe_client_overhead_seconds{quantile="1"} 0.005
probe_client_overhead_seconds_sum 0.005
probe_client_overhead_seconds_count 1
# HELP probe_server_timings The probe's successful requests by what the engine's answer said of their time: decomposed (its TTFT), partial (some timings), absent.
# TYPE probe_server_timings gauge
probe_server_timings{result="absent"} 1
probe_server_timings{result="decomposed"} 1
probe_server_timings{result="partial"} 1
`
	if err := testutil.CollectAndCompare(reqs, strings.NewReader(want), "probe_client_overhead_seconds", "probe_server_timings"); err != nil {
		t.Error(err)
	}
	if n := testutil.CollectAndCount(reqs, "probe_server_queue_seconds"); n != 1 {
		t.Errorf("probe_server_queue_seconds: %d series, want 1", n)
	}
}
