package workload

import (
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/infer-exporter/infer_exporter/internal/config"
	"github.com/infer-exporter/infer_exporter/probe/replay"
)

// Drift runs from microseconds (the client's own lag) to minutes (a ceiling
// holding a long, dense trace back).
var driftBuckets = []float64{.00001, .000025, .00005, .0001, .00025, .0005, .001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30, 60, 120, 300}

// replayMetrics are the infer_probe_replay_* vectors. They are registered
// with the other probe metrics; only replay workloads have series in them.
type replayMetrics struct {
	drift    *prometheus.HistogramVec
	progress *prometheus.GaugeVec
	requests *prometheus.CounterVec
	skipped  *prometheus.CounterVec
}

func newReplayMetrics(reg prometheus.Registerer) *replayMetrics {
	m := &replayMetrics{
		drift: histogram("replay_drift_seconds",
			"Per replayed request, its send instant minus its instant in the trace (after speed and window): the rate ceiling's delay plus the client's schedule lag.", driftBuckets),
		progress: prometheus.NewGaugeVec(prometheus.GaugeOpts{Namespace: namespace, Name: "replay_progress_ratio",
			Help: "Fraction, 0..1, of the current pass over the trace window whose requests have been replayed (finished or dropped)."}, labels),
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: namespace, Name: "replay_requests_total",
			Help: "Trace records replayed: their requests finished, whatever the outcome, or were dropped."}, labels),
		skipped: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: namespace, Name: "replay_skipped_records_total",
			Help: "Trace lines left out when the trace was loaded (on_malformed: skip), because they were malformed or could not be replayed exactly."}, labels),
	}
	reg.MustRegister(m.drift, m.progress, m.requests, m.skipped)
	return m
}

func (m *replayMetrics) delete(match prometheus.Labels) {
	m.drift.DeletePartialMatch(match)
	m.progress.DeletePartialMatch(match)
	m.requests.DeletePartialMatch(match)
	m.skipped.DeletePartialMatch(match)
}

// replayRecorder is a replay's replay.Recorder: its metrics, and a window of
// drift whose p99 marks the measurement degraded like the schedule lag's.
type replayRecorder struct {
	window   *lagWindow
	drift    prometheus.Observer
	progress prometheus.Gauge
	requests prometheus.Counter
	skipped  float64 // trace lines skipped at load, counted at bind
}

func (r *replayRecorder) Drift(at time.Time, d time.Duration) {
	r.drift.Observe(d.Seconds())
	r.window.observe(at, d)
}

func (r *replayRecorder) Replayed(progress float64) {
	r.requests.Inc()
	r.progress.Set(progress)
}

// P99 is the drift's p99 over the degradation window, in seconds: a replay
// that cannot keep up with its trace (the client is late, or the ceiling
// holds it back) is a degraded measurement.
func (r *replayRecorder) P99() float64 {
	p, _ := r.window.quantile(time.Now(), 0.99)
	return p
}

// maxP99 is the largest of several p99s.
type maxP99 []interface{ P99() float64 }

func (m maxP99) P99() float64 {
	v := 0.0
	for _, s := range m {
		v = max(v, s.P99())
	}
	return v
}

// newReplay reads a workload's trace and prepares its replay against t. The
// recorder's metrics are bound later (bind), once the workload's series
// exist.
func newReplay(r *config.Replay, t *config.Target, opts Options, logger *slog.Logger) (*replay.Source, *replayRecorder, error) {
	format, err := replay.ParseFormat(r.Source)
	if err != nil {
		return nil, nil, err
	}
	policy, err := replay.ParsePolicy(r.OnMalformed)
	if err != nil {
		return nil, nil, err
	}
	chat := t.Flavor == "openai-chat"
	if format == replay.FormatJSONL && !chat && t.Flavor != "openai-completions" {
		return nil, nil, fmt.Errorf("replaying recorded bodies needs an openai-chat or openai-completions target, not %q", t.Flavor)
	}
	tr, err := replay.ReadFile(r.Path, format, replay.ReadOptions{OnMalformed: policy})
	if err != nil {
		return nil, nil, fmt.Errorf("replay: %w", err)
	}
	window := opts.DegradedWindow
	if window <= 0 {
		window = 30 * time.Second
	}
	rec := &replayRecorder{window: newLagWindow(window, 10)}
	src, err := replay.NewSource(tr, replay.Options{
		Speed:             r.Speed,
		Start:             r.Start,
		End:               r.End,
		Loop:              r.Loop,
		Sample:            r.Sample,
		Seed:              r.Seed,
		MaxRate:           r.MaxRate,
		Chat:              chat,
		BlockSize:         r.BlockSize,
		ForceOutputTokens: r.ForceOutputTokens,
		OnUnreplayable:    policy,
		Recorder:          rec,
	})
	if err != nil {
		return nil, nil, fmt.Errorf("replay: %w", err)
	}
	if n := tr.Skipped + src.Skipped(); n > 0 {
		logger.Warn("replay: trace lines skipped", "path", r.Path, "skipped", n,
			"first", errors.Join(append(append([]error(nil), tr.Errors...), src.Errors()...)...))
	}
	logger.Info("replay: trace loaded", "path", r.Path, "source", r.Source, "records", src.Records(), "max_rate", src.MaxRate())
	rec.skipped = float64(tr.Skipped + src.Skipped())
	return src, rec, nil
}

// bind creates the recorder's series in s, and counts the skipped lines.
func (r *replayRecorder) bind(s *Series) {
	m := s.m.replay
	lv := s.lv
	r.drift = m.drift.WithLabelValues(lv...)
	r.progress = m.progress.WithLabelValues(lv...)
	r.requests = m.requests.WithLabelValues(lv...)
	m.skipped.WithLabelValues(lv...).Add(r.skipped)
}
