package prober

import (
	"bytes"
	"math"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/common/expfmt"

	"github.com/infer-exporter/infer_exporter/internal/config"
	"github.com/infer-exporter/infer_exporter/probe/observation"
)

// TestResultMetrics feeds observations with known instants and checks
// every figure against the value computed by hand.
func TestResultMetrics(t *testing.T) {
	base := time.Unix(1000, 0)
	at := func(ms int) time.Time { return base.Add(time.Duration(ms) * time.Millisecond) }
	res := &result{
		success:  false,
		reason:   ReasonRequestFailed,
		timeout:  9500 * time.Millisecond,
		duration: 2600 * time.Millisecond,
		slo:      config.SLO{TTFT: 200 * time.Millisecond},
		requests: []observation.Request{
			// TTFT 0.1, TPOT (250-100)/3 = 0.05, E2E 0.25, ITL 3 x 0.05.
			{Scheduled: at(0), Sent: at(1), FirstToken: at(100), TokenTimes: []time.Time{at(100), at(150), at(200), at(250)},
				End: at(250), Outcome: observation.Success, HTTPStatus: 200, OutputTokens: 4},
			// TTFT 0.3, TPOT 0.1, E2E 0.4, ITL 0.1; over the TTFT SLO.
			{Scheduled: at(1000), Sent: at(1001), FirstToken: at(1300), TokenTimes: []time.Time{at(1300), at(1400)},
				End: at(1400), Outcome: observation.Success, HTTPStatus: 200, OutputTokens: 2},
			// Cut after one token: TTFT 0.2 counts, E2E and TPOT do not.
			{Scheduled: at(2000), Sent: at(2001), FirstToken: at(2200), TokenTimes: []time.Time{at(2200)},
				End: at(2500), Outcome: observation.Disconnected, HTTPStatus: 200, OutputTokens: 1},
			{Outcome: observation.Dropped, DropReason: ReasonRateCeiling},
		},
		checks: []checkResult{
			{obs: observation.Request{Outcome: observation.Success, HTTPStatus: 200}, pass: true},
			{obs: observation.Request{Outcome: observation.Success, HTTPStatus: 200}, pass: false},
		},
	}
	reg := prometheus.NewPedanticRegistry()
	reg.MustRegister(resultCollector{res})
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	for _, mf := range mfs {
		if _, err := expfmt.MetricFamilyToText(&buf, mf); err != nil {
			t.Fatal(err)
		}
	}
	m := parseMetrics(t, buf.String())
	want := map[string]float64{
		"probe_success":                                0,
		"probe_duration_seconds":                       2.6,
		"probe_timeout_seconds":                        9.5,
		`probe_failed_due_to{reason="request_failed"}`: 1,
		`probe_failed_due_to{reason="rate_ceiling"}`:   0,
		"probe_http_status_code":                       200, // the first failure, request 2
		`probe_requests{outcome="success"}`:            2,
		`probe_requests{outcome="disconnected"}`:       1,
		`probe_requests{outcome="dropped"}`:            1,
		`probe_requests{outcome="timeout"}`:            0,
		"probe_goodput_requests":                       1,
		"probe_output_tokens":                          6,
		"probe_output_tokens_per_second":               6 / 1.399, // from the first send (1ms) to the last end (1400ms)

		`probe_time_to_first_token_seconds{quantile="0.5"}`:   0.2,
		`probe_time_to_first_token_seconds{quantile="0.9"}`:   0.3,
		`probe_time_to_first_token_seconds{quantile="0.99"}`:  0.3,
		`probe_time_to_first_token_seconds{quantile="1"}`:     0.3,
		"probe_time_to_first_token_seconds_sum":               0.6,
		"probe_time_to_first_token_seconds_count":             3,
		`probe_e2e_latency_seconds{quantile="0.5"}`:           0.25,
		`probe_e2e_latency_seconds{quantile="0.9"}`:           0.4,
		"probe_e2e_latency_seconds_count":                     2,
		`probe_time_per_output_token_seconds{quantile="0.5"}`: 0.05,
		`probe_time_per_output_token_seconds{quantile="1"}`:   0.1,
		`probe_inter_token_latency_seconds{quantile="0.5"}`:   0.05,
		`probe_inter_token_latency_seconds{quantile="1"}`:     0.1,
		"probe_inter_token_latency_seconds_count":             4,

		`probe_request_success{request="0"}`:                       1,
		`probe_request_success{request="2"}`:                       0,
		`probe_request_success{request="3"}`:                       0,
		`probe_request_time_to_first_token_seconds{request="2"}`:   0.2,
		`probe_request_e2e_latency_seconds{request="1"}`:           0.4,
		`probe_request_time_per_output_token_seconds{request="0"}`: 0.05,
		`probe_request_output_tokens{request="0"}`:                 4,

		"probe_known_answer_success":                  0,
		`probe_known_answer_check_success{check="0"}`: 1,
		`probe_known_answer_check_success{check="1"}`: 0,
	}
	for k, v := range want {
		if got := m.must(t, k); math.Abs(got-v) > 1e-9 {
			t.Errorf("%s = %v, want %v", k, got, v)
		}
	}
	for _, absent := range []string{
		`probe_request_e2e_latency_seconds{request="2"}`,
		`probe_request_time_to_first_token_seconds{request="3"}`,
		`probe_request_output_tokens{request="2"}`,
	} {
		if _, ok := m[absent]; ok {
			t.Errorf("%s present", absent)
		}
	}
}

func TestHTTPStatusOfLastRequest(t *testing.T) {
	res := &result{requests: []observation.Request{
		{Outcome: observation.Success, HTTPStatus: 200},
		{Outcome: observation.Success, HTTPStatus: 203},
	}}
	if got := res.httpStatus(); got != 203 {
		t.Errorf("status = %d, want the last request's 203", got)
	}
	res.requests[0] = observation.Request{Outcome: observation.Timeout}
	if got := res.httpStatus(); got != 0 {
		t.Errorf("status = %d, want 0 for a failure without response", got)
	}
}

func TestNearestRank(t *testing.T) {
	xs := make([]float64, 200)
	for i := range xs {
		xs[i] = float64(i + 1)
	}
	for q, want := range map[float64]float64{0.5: 100, 0.9: 180, 0.99: 198, 1: 200, 0.001: 1} {
		if got := nearestRank(xs, q); got != want {
			t.Errorf("q%v = %v, want %v", q, got, want)
		}
	}
	if got := nearestRank([]float64{7}, 0.99); got != 7 {
		t.Errorf("single value: %v", got)
	}
}
