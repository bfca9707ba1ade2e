// Package slo judges one observed request against a workload's or a
// module's service-level objectives: the one rule behind goodput in the live
// metrics, in /probe and in the bench report.
package slo

import (
	"github.com/infer-exporter/infer_exporter/internal/config"
	"github.com/infer-exporter/infer_exporter/probe/observation"
)

// Met reports whether a request succeeded and met every threshold of s that
// is set. A TPOT threshold is met by requests that have no TPOT (fewer than
// two output tokens, or an answer in one event): nothing was slow between
// their tokens.
func Met(o *observation.Request, s config.SLO) bool {
	if o.Outcome != observation.Success {
		return false
	}
	if s.TTFT > 0 {
		if d, ok := o.TTFT(); !ok || d > s.TTFT {
			return false
		}
	}
	if s.TPOT > 0 {
		if d, ok := o.TPOT(); ok && d > s.TPOT {
			return false
		}
	}
	if s.E2E > 0 {
		if d, ok := o.E2E(); !ok || d > s.E2E {
			return false
		}
	}
	return true
}
