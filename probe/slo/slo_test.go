package slo

import (
	"testing"
	"time"

	"github.com/infer-exporter/infer_exporter/internal/config"
	"github.com/infer-exporter/infer_exporter/probe/observation"
)

func TestMet(t *testing.T) {
	base := time.Unix(0, 0)
	ok := observation.Request{Scheduled: base, FirstToken: base.Add(100 * time.Millisecond), End: base.Add(1100 * time.Millisecond), OutputTokens: 11, Outcome: observation.Success}
	for _, tc := range []struct {
		name string
		o    observation.Request
		slo  config.SLO
		want bool
	}{
		{"no thresholds", ok, config.SLO{}, true},
		{"all met", ok, config.SLO{TTFT: 100 * time.Millisecond, TPOT: 100 * time.Millisecond, E2E: 2 * time.Second}, true},
		{"ttft missed", ok, config.SLO{TTFT: 99 * time.Millisecond}, false},
		{"tpot missed", ok, config.SLO{TPOT: 99 * time.Millisecond}, false},
		{"e2e missed", ok, config.SLO{E2E: time.Second}, false},
		{"failed request", func() observation.Request { o := ok; o.Outcome = observation.HTTP5xx; return o }(), config.SLO{}, false},
		{"one event: no TPOT, met", func() observation.Request { o := ok; o.ContentEvents = 1; return o }(), config.SLO{TPOT: time.Millisecond}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := Met(&tc.o, tc.slo); got != tc.want {
				t.Errorf("Met = %v, want %v", got, tc.want)
			}
		})
	}
}
