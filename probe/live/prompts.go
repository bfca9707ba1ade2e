package live

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/infer-exporter/infer_exporter/internal/config"
	"github.com/infer-exporter/infer_exporter/probe/observation"
	"github.com/infer-exporter/infer_exporter/probe/plan"
	"github.com/infer-exporter/infer_exporter/probe/prompt"
	"github.com/infer-exporter/infer_exporter/probe/workload"
)

// PromptMetrics describe the prompt set each workload sends:
// infer_probe_prompt_info{target,model,workload,tokenizer,sha256} and
// infer_probe_prompt_length_tokens, the prompt lengths the server reported.
type PromptMetrics struct {
	info     *prometheus.GaugeVec
	tokens   *prometheus.HistogramVec
	failures *prometheus.CounterVec

	mu sync.Mutex
	// unreached: the workloads (target, model, workload) whose prompts
	// are estimates because the tokenizer did not answer; a reload
	// rebuilds them even when their configuration is unchanged.
	unreached map[[3]string]bool
}

// Unreached reports whether the workload's prompts are estimates because
// its target's /tokenize did not answer when they were built.
func (pm *PromptMetrics) Unreached(target, model, workload string) bool {
	pm.mu.Lock()
	defer pm.mu.Unlock()
	return pm.unreached[[3]string{target, model, workload}]
}

func (pm *PromptMetrics) setUnreached(target, model, workload string, v bool) {
	pm.mu.Lock()
	defer pm.mu.Unlock()
	if pm.unreached == nil {
		pm.unreached = map[[3]string]bool{}
	}
	k := [3]string{target, model, workload}
	if v {
		pm.unreached[k] = true
	} else {
		delete(pm.unreached, k)
	}
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
		Help: "workload.Prompts sent as estimates because their calibration against the server's /tokenize failed during the run."}, labels)
	reg.MustRegister(pm.info, pm.tokens, pm.failures)
	return pm
}

// calibrationTimeout bounds a workload's calibration at start.
const calibrationTimeout = time.Minute

// Prompts builds the workload's prompt source: exact-length prompts
// calibrated against the target's tokenizer endpoint when it has one,
// estimates otherwise, and sets the info metric. A calibration that cannot
// work (lengths at or below the template overhead, a failing tokenizer) is
// an error for the workload. ctx bounds the tokenizer calls of the whole
// run.
func (pm *PromptMetrics) Prompts(ctx context.Context, t *config.Target, w *config.Workload, logger *slog.Logger) (workload.Prompts, error) {
	startCtx, cancel := context.WithTimeout(ctx, calibrationTimeout)
	defer cancel()
	tok, err := plan.Tokenizer(startCtx, t)
	pm.setUnreached(t.Name, t.Model, w.Name, errors.Is(err, prompt.ErrTokenizerUnreachable))
	if errors.Is(err, prompt.ErrTokenizerUnreachable) {
		// A sidecar often starts before its server has loaded its model.
		// The workload runs on estimated lengths rather than not at all,
		// and says so in infer_probe_prompt_info{tokenizer="estimate"}.
		if logger != nil {
			logger.Warn("target not answering /tokenize: prompt lengths are estimates until the next reload", "workload", w.Name, "err", err)
		}
		tok, err = nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("prompt calibration: %w", err)
	}
	if tok != nil {
		if err := fitsContext(w.Prompt, tok.MaxModelLen(), w.Name, logger); err != nil {
			return nil, err
		}
	}
	newGen := func(c context.Context) (*prompt.Calibrated, error) {
		return plan.Prompts(c, tok, w.Prompt.InputTokens, w.Prompt.OutputTokens, w.Prompt.Seed)
	}
	hashGen, err := newGen(startCtx)
	if err != nil {
		return nil, fmt.Errorf("prompt calibration: %w", err)
	}
	sum, err := prompt.HashPrompts(hashGen.NextExact, prompt.HashedPrompts)
	if err != nil {
		return nil, fmt.Errorf("prompt calibration: %w", err)
	}
	gen, err := newGen(ctx)
	if err != nil {
		return nil, fmt.Errorf("prompt calibration: %w", err)
	}
	lv := []string{t.Name, t.Model, w.Name}
	failures := pm.failures.WithLabelValues(lv...)
	var warned bool
	gen.OnFailure = func(err error) {
		// Called from the dispatcher goroutine only.
		failures.Inc()
		if !warned && logger != nil {
			warned = true
			logger.Warn("prompt calibration failed; such prompts go out as estimates (infer_probe_prompt_calibration_failures_total)", "workload", w.Name, "err", err)
		}
	}
	pm.info.DeletePartialMatch(prometheus.Labels{"target": t.Name, "model": t.Model, "workload": w.Name})
	pm.info.WithLabelValues(append(lv, gen.Kind(), sum)...).Set(1)
	if logger != nil {
		logger.Info("prompts calibrated", "workload", w.Name, "tokenizer", gen.Kind(), "sha256", sum)
	}
	return gen, nil
}

// fitsContext holds a workload's lengths against the target's context
// length (0: unknown): a request of the mean lengths that does not fit is an
// error, since most of the workload would be refused by the server; one
// whose largest lengths do not fit is a warning.
func fitsContext(p config.Prompt, contextLen int, workload string, logger *slog.Logger) error {
	if contextLen <= 0 {
		return nil
	}
	mean := int(p.InputTokens.Mean + p.OutputTokens.Mean)
	if p.InputTokens.Dist == "uniform" {
		mean = (p.InputTokens.Min + p.InputTokens.Max) / 2
	}
	if p.OutputTokens.Dist == "uniform" {
		mean += (p.OutputTokens.Min+p.OutputTokens.Max)/2 - int(p.OutputTokens.Mean)
	}
	if mean > contextLen {
		return fmt.Errorf("prompt lengths: a request of %d input and output tokens on average exceeds the target's context length of %d tokens (max_model_len from its /tokenize)", mean, contextLen)
	}
	upper := func(d config.Distribution) int {
		if d.Max > 0 {
			return d.Max
		}
		return int(d.Mean)
	}
	if longest := upper(p.InputTokens) + upper(p.OutputTokens); longest > contextLen && logger != nil {
		logger.Warn("the longest requests exceed the target's context length and will be refused by it", "workload", workload,
			"tokens", longest, "max_model_len", contextLen)
	}
	return nil
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
