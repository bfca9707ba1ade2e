package live

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/infer-exporter/infer_exporter/probe/observation"
)

// PromptMetrics describe the prompt set each workload sends (the Calibrator
// builds it and sets them):
// infer_probe_prompt_info{target,model,workload,tokenizer,sha256} and
// infer_probe_prompt_length_tokens, the prompt lengths the server reported.
type PromptMetrics struct {
	info     *prometheus.GaugeVec
	tokens   *prometheus.HistogramVec
	failures *prometheus.CounterVec
}

// NewPromptMetrics creates and registers the prompt metrics.
func NewPromptMetrics(reg prometheus.Registerer) *PromptMetrics {
	pm := &PromptMetrics{
		info: prometheus.NewGaugeVec(prometheus.GaugeOpts{Namespace: namespace, Name: "prompt_info",
			Help: "Always 1: the workload's prompt set, by tokenizer (server, server_content, estimate) and sha256 of its first 64 prompts."},
			append(append([]string{}, labels...), "tokenizer", "sha256")),
		tokens: prometheus.NewHistogramVec(prometheus.HistogramOpts{Namespace: namespace, Name: "prompt_length_tokens",
			Help:    "Prompt length of successful requests as the server's usage reported it (requests whose server reports none are not observed).",
			Buckets: prometheus.ExponentialBuckets(1, 2, 18)}, labels),
	}
	pm.failures = prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: namespace, Name: "prompt_calibration_failures_total",
		Help: "Prompts sent as estimates because their calibration against the server's /tokenize failed during the run."}, labels)
	reg.MustRegister(pm.info, pm.tokens, pm.failures)
	return pm
}

// ObservePrompt records the server-reported prompt length of a successful
// request.
func (pm *PromptMetrics) ObservePrompt(target, model, workload string, o *observation.Request) {
	if o.Outcome == observation.Success && o.PromptTokens > 0 {
		pm.tokens.WithLabelValues(target, model, workload).Observe(float64(o.PromptTokens))
	}
}

// Delete removes a workload's prompt series.
func (pm *PromptMetrics) Delete(target, model, workload string) {
	match := prometheus.Labels{"target": target, "model": model, "workload": workload}
	pm.info.DeletePartialMatch(match)
	pm.tokens.DeletePartialMatch(match)
	pm.failures.DeletePartialMatch(match)
}
