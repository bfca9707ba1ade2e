package live

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/infer-exporter/infer_exporter/probe/observation"
)

// validityMetrics count the answers of workloads whose requests carry a
// response format or tools, by their validity (plan.Kinds.Check). Only
// such workloads have them, created at zero, so that a valid ratio is
// never 0/0 for a workload that asks for neither.
type validityMetrics struct {
	structured, toolCalls *prometheus.CounterVec
}

func newValidityMetrics(reg prometheus.Registerer) *validityMetrics {
	m := &validityMetrics{
		structured: counterVec("structured_output_checks_total",
			"Successful answers to a response_format, by result: valid, invalid_json, schema_mismatch.", with(labels, "result")),
		toolCalls: counterVec("tool_call_checks_total",
			"Successful answers to requests with tools, by result: valid, invalid_json, schema_mismatch, unknown_tool, no_call.", with(labels, "result")),
	}
	reg.MustRegister(m.structured, m.toolCalls)
	return m
}

func (m *validityMetrics) delete(match prometheus.Labels) {
	deleteMatching(match, m.structured, m.toolCalls)
}

// validitySeries are one workload's counters by result; nil maps for a
// kind the workload does not ask for.
type validitySeries struct {
	structured, toolCalls map[string]prometheus.Counter
}

// InitValidity creates the workload's validity counters at zero: the
// structured answers' when it sends a response format, the tool calls'
// when it offers tools.
func (s *Series) InitValidity(structured, tools bool) {
	init := func(vec *prometheus.CounterVec, results []string) map[string]prometheus.Counter {
		out := make(map[string]prometheus.Counter, len(results))
		for _, r := range results {
			out[r] = vec.WithLabelValues(with(s.lv, r)...)
		}
		return out
	}
	if structured {
		s.validity.structured = init(s.m.validity.structured, []string{observation.Valid, observation.InvalidJSON, observation.SchemaMismatch})
	}
	if tools {
		s.validity.toolCalls = init(s.m.validity.toolCalls, observation.ValidityResults)
	}
}

// observe counts a finished request's validity, where it was judged.
func (v *validitySeries) observe(o *observation.Request) {
	if c, ok := v.structured[o.StructuredCheck]; ok {
		c.Inc()
	}
	if c, ok := v.toolCalls[o.ToolCallCheck]; ok {
		c.Inc()
	}
}
