package live

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/infer-exporter/infer_exporter/internal/config"
	"github.com/infer-exporter/infer_exporter/probe/plan"
	"github.com/infer-exporter/infer_exporter/probe/prompt"
	"github.com/infer-exporter/infer_exporter/probe/workload"
)

// Calibrator builds each workload's prompts against its target's
// /tokenize and follows the server (Prompts), and remembers which
// workloads' prompts are estimates or no longer fit; it describes the
// prompt sets it builds in its PromptMetrics.
type Calibrator struct {
	metrics *PromptMetrics

	mu sync.Mutex
	// unreached: the workloads (target, model, workload) whose prompts
	// are estimates because the tokenizer did not answer; a reload
	// rebuilds them even when their configuration is unchanged.
	unreached workloadSet
	// refused: the workloads whose prompts, calibrated again after a
	// server change, no longer fit its context length; the manager
	// rebuilds them (which fails them until the server changes again).
	refused workloadSet
}

// NewCalibrator returns a calibrator that describes its prompt sets in pm.
func NewCalibrator(pm *PromptMetrics) *Calibrator { return &Calibrator{metrics: pm} }

// workloadSet is a set of workloads by (target, model, workload); the
// Calibrator's mutex guards it.
type workloadSet map[[3]string]bool

func (s *workloadSet) set(target, model, workload string, v bool) {
	if *s == nil {
		*s = workloadSet{}
	}
	if k := [3]string{target, model, workload}; v {
		(*s)[k] = true
	} else {
		delete(*s, k)
	}
}

// Unreached reports whether the workload's prompts are estimates because
// its target's /tokenize did not answer when they were built.
func (c *Calibrator) Unreached(target, model, workload string) bool {
	return c.inSet(&c.unreached, target, model, workload)
}

func (c *Calibrator) setUnreached(target, model, workload string, v bool) {
	c.putInSet(&c.unreached, target, model, workload, v)
}

// Refused reports whether the workload's prompts were found not to fit
// its server's context length when calibrated again after a server change.
func (c *Calibrator) Refused(target, model, workload string) bool {
	return c.inSet(&c.refused, target, model, workload)
}

func (c *Calibrator) setRefused(target, model, workload string, v bool) {
	c.putInSet(&c.refused, target, model, workload, v)
}

// inSet reports, under the calibrator's lock, whether the workload is in s
// (one of its sets: the pointer, since set may replace a nil map).
func (c *Calibrator) inSet(s *workloadSet, target, model, workload string) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return (*s)[[3]string{target, model, workload}]
}

// putInSet puts the workload in s (v) or takes it out, under the lock.
func (c *Calibrator) putInSet(s *workloadSet, target, model, workload string, v bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	s.set(target, model, workload, v)
}

// calibrationTimeout bounds a workload's calibration at start.
const calibrationTimeout = time.Minute

// How a workload's prompts follow its server (followedPrompts):
// followInterval is how often the follower looks at the server's epoch;
// unreachedRetry how often it asks a /tokenize that did not answer again
// when no engine scraper says when the server is ready.
const (
	followInterval = time.Second
	unreachedRetry = 30 * time.Second
)

// Prompts builds the workload's prompt source: exact-length prompts
// calibrated against the target's tokenizer endpoint when it has one,
// estimates otherwise, and sets the info metric. A calibration that cannot
// work (lengths at or below the template overhead, a failing tokenizer) is
// an error for the workload. ctx bounds the tokenizer calls of the whole
// run.
//
// The prompts follow the server for as long as ctx runs: epoch, when set,
// is the server's epoch (coldstart.Tracker.Epoch); each time it moves (the
// server became ready, or started again) they are calibrated again and
// replace the ones in use without a pause, so that a sidecar that started
// before its engine sends exact lengths from the engine's readiness on,
// and a restart that loaded another tokenizer is followed. A tokenizer
// that did not answer, on a target without an epoch, is asked again every
// unreachedRetry.
func (c *Calibrator) Prompts(ctx context.Context, t *config.Target, w *config.Workload, logger *slog.Logger, epoch func() uint64) (workload.Prompts, error) {
	at := uint64(0)
	if epoch != nil {
		at = epoch()
	}
	c.setRefused(t.Name, t.Model, w.Name, false)
	gen, unreached, err := c.calibrate(ctx, t, w, logger, "start")
	if err != nil {
		return nil, err
	}
	f := &followedPrompts{}
	f.cur.Store(gen)
	if !unreached && at == 0 {
		// Calibrated against a server that answered before its first
		// readiness was polled: that readiness is this server's.
		at = 1
	}
	go c.follow(ctx, f, t, w, logger, epoch, at, unreached)
	return f, nil
}

// followedPrompts is a workload's prompt source whose generator a
// follower replaces; Next is called from the runner's one preparing
// goroutine, the store from the follower's, so no generator is used by
// two goroutines.
type followedPrompts struct {
	cur atomic.Pointer[prompt.Calibrated]
}

func (f *followedPrompts) Next() prompt.Prompt { return f.cur.Load().Next() }

// follow calibrates f again when the server's epoch moves past at, or,
// without an epoch, while the tokenizer was unreached, every
// unreachedRetry; until ctx ends.
func (c *Calibrator) follow(ctx context.Context, f *followedPrompts, t *config.Target, w *config.Workload, logger *slog.Logger,
	epoch func() uint64, at uint64, unreached bool) {
	tick := time.NewTicker(followInterval)
	defer tick.Stop()
	lastTry := time.Now()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		reason := ""
		now := uint64(0)
		if epoch != nil {
			now = epoch()
		}
		switch {
		case epoch != nil && now > at && at == 0:
			reason = "server ready"
		case epoch != nil && now > at:
			reason = "server restarted"
		case epoch == nil && unreached && time.Since(lastTry) >= unreachedRetry:
			reason = "tokenizer retry"
		}
		if reason == "" {
			continue
		}
		lastTry = time.Now()
		gen, stillUnreached, err := c.calibrate(ctx, t, w, logger, reason)
		if errors.Is(err, errOverContext) {
			// The server now serves a shorter context than the workload
			// needs: the manager rebuilds the workload, whose calibration
			// then refuses it, as at a start.
			if logger != nil {
				logger.Error("the workload no longer fits its server's context length; it stops until the server changes again", "workload", w.Name, "reason", reason, "err", err)
			}
			c.setRefused(t.Name, t.Model, w.Name, true)
			return
		}
		if err != nil {
			// The prompts in use stay; the next epoch tries again.
			if logger != nil && ctx.Err() == nil {
				logger.Warn("prompt calibration after a server change failed; the prompts in use stay", "workload", w.Name, "reason", reason, "err", err)
			}
			at = now
			continue
		}
		f.cur.Store(gen)
		at, unreached = now, stillUnreached
	}
}

// calibrate builds one generator of the workload's prompts against the
// target's tokenizer as it answers now and sets the info metric; unreached
// says that the tokenizer did not answer and the prompts are estimates.
func (c *Calibrator) calibrate(ctx context.Context, t *config.Target, w *config.Workload, logger *slog.Logger, reason string) (*prompt.Calibrated, bool, error) {
	startCtx, cancel := context.WithTimeout(ctx, calibrationTimeout)
	defer cancel()
	tok, err := plan.Tokenizer(startCtx, t)
	unreached := errors.Is(err, prompt.ErrTokenizerUnreachable)
	c.setUnreached(t.Name, t.Model, w.Name, unreached)
	if unreached {
		// A sidecar often starts before its server has loaded its model.
		// The workload runs on estimated lengths rather than not at all,
		// and says so in infer_probe_prompt_info{tokenizer="estimate"},
		// until the server is ready (Prompts follows it).
		if logger != nil {
			logger.Warn("target not answering /tokenize: prompt lengths are estimates until it does", "workload", w.Name, "err", err)
		}
		tok, err = nil, nil
	}
	if err != nil {
		return nil, false, fmt.Errorf("prompt calibration: %w", err)
	}
	if tok != nil {
		if err := fitsContext(w.Prompt, tok.MaxModelLen(), w.Name, logger); err != nil {
			return nil, false, err
		}
	}
	newGen := func(c context.Context) (*prompt.Calibrated, error) {
		gen, err := plan.Prompts(c, tok, w.Prompt.InputTokens, w.Prompt.OutputTokens, w.Prompt.Seed)
		if err == nil {
			gen.SharePrefixes(w.Prompt)
		}
		return gen, err
	}
	hashGen, err := newGen(startCtx)
	if err != nil {
		return nil, false, fmt.Errorf("prompt calibration: %w", err)
	}
	sum, err := prompt.HashPrompts(hashGen.NextExact, prompt.HashedPrompts)
	if err != nil {
		return nil, false, fmt.Errorf("prompt calibration: %w", err)
	}
	gen, err := newGen(ctx)
	if err != nil {
		return nil, false, fmt.Errorf("prompt calibration: %w", err)
	}
	lv := []string{t.Name, t.Model, w.Name}
	failures := c.metrics.failures.WithLabelValues(lv...)
	var warned bool
	gen.OnFailure = func(err error) {
		// Called from the dispatcher goroutine only.
		failures.Inc()
		if !warned && logger != nil {
			warned = true
			logger.Warn("prompt calibration failed; such prompts go out as estimates (infer_probe_prompt_calibration_failures_total)", "workload", w.Name, "err", err)
		}
	}
	c.metrics.info.DeletePartialMatch(prometheus.Labels{"target": t.Name, "model": t.Model, "workload": w.Name})
	c.metrics.info.WithLabelValues(append(lv, gen.Kind(), sum)...).Set(1)
	if logger != nil {
		logger.Info("prompts calibrated", "workload", w.Name, "tokenizer", gen.Kind(), "sha256", sum, "reason", reason)
	}
	return gen, unreached, nil
}

// errOverContext is fitsContext's refusal.
var errOverContext = errors.New("prompt lengths exceed the target's context length")

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
		return fmt.Errorf("%w: a request of %d input and output tokens on average exceeds the target's context length of %d tokens (max_model_len from its /tokenize)", errOverContext, mean, contextLen)
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
