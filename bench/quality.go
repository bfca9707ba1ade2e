package bench

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"net/http"
	"slices"
	"time"

	"github.com/infer-exporter/infer_exporter/bench/report"
	"github.com/infer-exporter/infer_exporter/internal/config"
	"github.com/infer-exporter/infer_exporter/probe/client"
	"github.com/infer-exporter/infer_exporter/probe/quality"
)

// This file is the bench's quality figure: every target's perplexity over
// the quality package's reference text, scored before the matrix, and its
// part in the ranking's accuracy component.

// PerplexitySpec is bench.perplexity: its presence scores every target
// ("perplexity: {}" takes the defaults).
type PerplexitySpec struct {
	// Repeats is the number of scores per target (default 3): the figure
	// is their median; min and max show how much a server's batching
	// moves the log-probabilities.
	Repeats int `yaml:"repeats"`
	// Timeout bounds one score (default config.DefaultQualityTimeout).
	Timeout time.Duration `yaml:"timeout"`
}

// Defaults and limits of bench.perplexity.
const (
	DefaultPerplexityRepeats = 3
	MaxPerplexityRepeats     = 20
	MaxPerplexityTimeout     = 10 * time.Minute
)

func (s *PerplexitySpec) applyDefaults() {
	if s == nil {
		return
	}
	if s.Repeats == 0 {
		s.Repeats = DefaultPerplexityRepeats
	}
	if s.Timeout == 0 {
		s.Timeout = config.DefaultQualityTimeout
	}
}

// validatePerplexity refuses bounds out of range and a run target whose
// API cannot be scored: better at --config.check than after the matrix.
func (c *Config) validatePerplexity(v *validator) {
	s := c.Bench.Perplexity
	if s == nil {
		return
	}
	p := path{"bench", "perplexity"}
	if s.Repeats < 1 || s.Repeats > MaxPerplexityRepeats {
		v.add(p, "repeats", fmt.Sprintf("must be between 1 and %d", MaxPerplexityRepeats))
	}
	if s.Timeout <= 0 || s.Timeout > MaxPerplexityTimeout {
		v.add(p, "timeout", fmt.Sprintf("must be positive and at most %v", MaxPerplexityTimeout))
	}
	for _, t := range c.RunTargets() {
		if ok, why := config.PerplexityCapable(t.Flavor); !ok {
			v.addPath(p, fmt.Sprintf("target %q (%s) cannot be scored: %s", t.Name, t.Flavor, why))
		}
	}
}

// perplexity scores every target, Repeats times each, one request at a
// time: a score is one prefill, and scoring in parallel would put other
// requests' batching into its log-probabilities.
func perplexity(ctx context.Context, spec *PerplexitySpec, logger *slog.Logger, targets []config.Target, cts []*client.Target) []report.PerplexityResult {
	hc := &http.Client{
		Transport:     &http.Transport{Proxy: nil, MaxIdleConnsPerHost: 1},
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
	}
	defer hc.CloseIdleConnections()
	text := quality.Reference()
	out := make([]report.PerplexityResult, len(targets))
	for i := range targets {
		out[i] = scoreTarget(ctx, hc, cts[i], text, spec.Repeats, spec.Timeout)
		r := &out[i]
		logger.Info("perplexity", "target", r.Target, "perplexity", float64(r.Perplexity), "tokens", r.Tokens,
			"scores", r.Scores, "repeats", r.Repeats, "error", r.Error)
	}
	return out
}

// scoreTarget scores text on one target repeats times and summarises.
func scoreTarget(ctx context.Context, d quality.Doer, ct *client.Target, text quality.Text, repeats int, timeout time.Duration) report.PerplexityResult {
	r := report.PerplexityResult{Target: ct.Name, Repeats: repeats, Text: text.Name, TextSHA256: text.SHA256,
		Perplexity: report.NaN(), Min: report.NaN(), Max: report.NaN(), MeanLogprob: report.NaN()}
	var ppl []float64
	for i := range repeats {
		if ctx.Err() != nil {
			break
		}
		sctx, cancel := context.WithTimeout(ctx, timeout)
		// Every request of the bench carries its id, for the server's log.
		sc, err := quality.ScoreText(sctx, idDoer{d, fmt.Sprintf("perplexity/%s-%d", ct.Name, i)}, ct, text)
		cancel()
		if err != nil {
			reason := quality.ReasonConnection
			var e *quality.Error
			if errors.As(err, &e) {
				reason = e.Reason
			}
			if r.Failures == nil {
				r.Failures = map[string]int{}
			}
			r.Failures[reason]++
			r.Error = err.Error()
			continue
		}
		ppl = append(ppl, sc.Perplexity)
		r.Tokens, r.Dialect = sc.Tokens, sc.Dialect
	}
	r.Scores = len(ppl)
	if len(ppl) > 0 {
		slices.Sort(ppl)
		m := median(ppl)
		r.Perplexity, r.Min, r.Max, r.MeanLogprob = report.Num(m), report.Num(ppl[0]), report.Num(ppl[len(ppl)-1]), report.Num(-math.Log(m))
	}
	return r
}

// idDoer sends each request with X-Request-Id id.
type idDoer struct {
	quality.Doer
	id string
}

func (d idDoer) Do(req *http.Request) (*http.Response, error) {
	req.Header.Set("X-Request-Id", d.id)
	return d.Doer.Do(req)
}

// perplexityInput is the ranking's input: each run target's perplexity
// (NaN when it was not scored), in the targets' order; nil without
// bench.perplexity, or when no target was scored (there is then nothing to
// compare against).
func perplexityInput(rep *report.Report, targets []config.Target) []float64 {
	if len(rep.Perplexity) == 0 {
		return nil
	}
	by := map[string]float64{}
	for _, r := range rep.Perplexity {
		by[r.Target] = float64(r.Perplexity)
	}
	out := make([]float64, len(targets))
	scored := false
	for i, t := range targets {
		v, ok := by[t.Name]
		if !ok || !(v >= 1) {
			v = math.NaN()
		}
		out[i] = v
		scored = scored || !math.IsNaN(v)
	}
	if !scored {
		return nil
	}
	return out
}

// perplexityScores are the perplexity sub-scores of the accuracy
// component: the lowest perplexity of the run over each target's, so 1
// for the best target and less for a worse one (a model twice as perplexed
// scores 0.5), and 0 for a target that was not scored. nil when ppl is.
func perplexityScores(ppl []float64) []float64 {
	if ppl == nil {
		return nil
	}
	ref := math.Inf(1)
	for _, v := range ppl {
		if !math.IsNaN(v) {
			ref = min(ref, v)
		}
	}
	out := make([]float64, len(ppl))
	for i, v := range ppl {
		if !math.IsNaN(v) && !math.IsInf(ref, 1) {
			out[i] = ref / v
		}
	}
	return out
}

// accuracy is the ranking's accuracy component from the known-answer pass
// fractions (nil without checks), the targets' perplexities and their
// answers' validity (in.validity): the mean of the sub-scores that exist,
// weighing alike; nil when none exists. A target without a validity
// figure (NaN: none of its answers was checked) is scored on the others.
func (in *rankInput) accuracy(fractions []float64) []float64 {
	parts := [][]float64{fractions, perplexityScores(in.perplexity), in.validity}
	n := 0
	for _, p := range parts {
		n = max(n, len(p))
	}
	var out []float64
	for t := range n {
		sum, k := 0.0, 0
		for _, p := range parts {
			if t < len(p) && !math.IsNaN(p[t]) {
				sum, k = sum+p[t], k+1
			}
		}
		if k == 0 {
			continue
		}
		if out == nil {
			out = make([]float64, n)
		}
		out[t] = sum / float64(k)
	}
	return out
}
