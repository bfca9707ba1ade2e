package prober

import (
	"context"
	"errors"
	"log/slog"
	"net/http"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/infer-exporter/infer_exporter/probe/client"
	"github.com/infer-exporter/infer_exporter/probe/quality"
)

// A module of kind perplexity scores the quality package's reference text
// once per probe, through the same allow list, dialer and per-target
// ceilings as a generation module (it counts as one request), and answers
// with the probe_perplexity* series beside the common probe_* ones.

// perplexityResult is what a perplexity probe found.
type perplexityResult struct {
	max   float64 // the module's max_perplexity; 0: none
	score *quality.Score
	// reason is the quality package's failure reason, "" when scored or
	// never sent.
	reason string
	status int // the answer's HTTP status; 0 without one
}

// Descriptors of a perplexity probe's own series.
var (
	descPPL       = prometheus.NewDesc("probe_perplexity", "Perplexity of the target's model over the reference text (text: its SHA-256 prefix), from its prompt log-probabilities; absent when not scored.", []string{"text"}, nil)
	descPPLTokens = prometheus.NewDesc("probe_perplexity_tokens", "Tokens of the reference text scored: its tokens as the server counts them, less the first; absent when not scored.", []string{"text"}, nil)
	descPPLMax    = prometheus.NewDesc("probe_perplexity_max", "The module's max_perplexity: a perplexity above it fails the probe (reason perplexity_exceeded); absent when the module sets none.", nil, nil)
	descPPLFailed = prometheus.NewDesc("probe_perplexity_failed_due_to", "1 for the reason the score failed, 0 for the others (unsupported, timeout, connection, http_status, bad_response, no_logprobs, incomplete).", []string{"reason"}, nil)
)

// scorePerplexity waits for the target's rate ceiling, scores the text and
// judges the result against the module's threshold.
func (h *Handler) scorePerplexity(ctx context.Context, res *result, tc *targetCeiling, g *guard, ct *client.Target, logger *slog.Logger) {
	pr := res.perplexity
	if err := tc.wait(ctx); err != nil {
		res.reason = ReasonRateCeiling
		if ctx.Err() != nil {
			res.reason = ReasonRequestFailed
		}
		logger.Warn("Perplexity request not sent", "err", err)
		return
	}
	tr := newScoreTransport(g)
	defer tr.CloseIdleConnections()
	cl := &http.Client{Transport: tr, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	sc, err := quality.ScoreText(ctx, cl, ct, quality.Reference())
	switch {
	case g.refused.Load():
		res.reason = ReasonNotAllowed
		h.invalid.WithLabelValues(ReasonNotAllowed).Inc()
	case err != nil:
		pr.reason = quality.ReasonConnection
		var e *quality.Error
		if errors.As(err, &e) {
			pr.reason, pr.status = e.Reason, e.HTTPStatus
		}
		res.reason = ReasonRequestFailed
		logger.Warn("Perplexity score failed", "reason", pr.reason, "err", err)
	default:
		pr.score, pr.status = &sc, sc.HTTPStatus
		logger.Info("Perplexity scored", "perplexity", sc.Perplexity, "tokens", sc.Tokens, "dialect", sc.Dialect,
			"text_sha256", sc.Text.SHA256, "duration_seconds", sc.Duration.Seconds(), "max_perplexity", pr.max)
		if pr.max > 0 && sc.Perplexity > pr.max {
			res.reason = ReasonPerplexityExceeded
			logger.Warn("Perplexity above the module's max_perplexity", "perplexity", sc.Perplexity, "max_perplexity", pr.max)
			return
		}
		res.success = true
	}
}

// collectPerplexity sends a perplexity probe's own series.
func collectPerplexity(ch chan<- prometheus.Metric, pr *perplexityResult) {
	gauge := func(d *prometheus.Desc, v float64, lv ...string) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.GaugeValue, v, lv...)
	}
	if sc := pr.score; sc != nil {
		gauge(descPPL, sc.Perplexity, sc.Text.Label())
		gauge(descPPLTokens, float64(sc.Tokens), sc.Text.Label())
	}
	if pr.max > 0 {
		gauge(descPPLMax, pr.max)
	}
	for _, r := range quality.Reasons {
		gauge(descPPLFailed, b2f(r == pr.reason), r)
	}
}
