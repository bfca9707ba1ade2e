package live

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"strings"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/infer-exporter/infer_exporter/internal/config"
	"github.com/infer-exporter/infer_exporter/internal/textcut"
	"github.com/infer-exporter/infer_exporter/probe/client"
	"github.com/infer-exporter/infer_exporter/probe/observation"
	"github.com/infer-exporter/infer_exporter/probe/plan"
	"github.com/infer-exporter/infer_exporter/probe/replay"
	"github.com/infer-exporter/infer_exporter/probe/workload"
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
			"Per replayed request, its send instant minus its instant in the trace: the rate ceiling's delay plus the client's schedule lag.", driftBuckets),
		progress: gaugeVec("replay_progress_ratio",
			"Fraction, 0..1, of the current pass over the trace window whose requests have been replayed (finished or dropped).", labels),
		requests: counterVec("replay_requests_total",
			"Trace records replayed: their requests finished, whatever the outcome, or were dropped.", labels),
		skipped: counterVec("replay_skipped_records_total",
			"Trace lines left out when the trace was loaded (on_malformed: skip), because they were malformed or could not be replayed exactly.", labels),
	}
	reg.MustRegister(m.drift, m.progress, m.requests, m.skipped)
	return m
}

func (m *replayMetrics) delete(match prometheus.Labels) {
	deleteMatching(match, m.drift, m.progress, m.requests, m.skipped)
}

// replayRecorder is a replay's replay.Recorder: its metrics, and a window of
// drift whose p99 marks the measurement degraded like the schedule lag's.
type replayRecorder struct {
	window   *workload.Window
	drift    prometheus.Observer
	progress prometheus.Gauge
	requests prometheus.Counter
	skipped  float64 // trace lines skipped at load, counted at bind

	// The first refusal of a replayed request is logged, once per run.
	logger     *slog.Logger
	contextLen int // the target's context length, 0 when unknown
	refused    atomic.Bool
}

// Refused logs the first replayed request the target refused with a client
// error, with the server's message: a trace row longer than the target's
// context, a body the target cannot serve. Later ones are only counted,
// under outcome http_4xx. A 429 is the target's load, not a refusal of
// the request, and is not logged.
func (r *replayRecorder) Refused(rec *replay.Record, obs *observation.Request) {
	if r.logger == nil || obs.HTTPStatus == http.StatusTooManyRequests || !r.refused.CompareAndSwap(false, true) {
		return
	}
	attrs := []any{"record", fmt.Sprintf("%s:%d", rec.File, rec.Line), "status", obs.HTTPStatus}
	if rec.Body == nil {
		attrs = append(attrs, "prompt_tokens", rec.InputTokens, "output_tokens", rec.OutputTokens)
	}
	if r.contextLen > 0 {
		attrs = append(attrs, "context_length", r.contextLen)
	}
	attrs = append(attrs, "server", serverMessage(obs.Err))
	r.logger.Warn(`replay: the target refused a replayed request (later refusals are not logged; they count in infer_probe_requests_total{outcome="http_4xx"})`, attrs...)
}

// maxServerMessage bounds the server's message in the refusal log line.
const maxServerMessage = 512

// serverMessage is the message of a refused request's error body: the
// "message" of an OpenAI-style {"error": {"message"}} or a vLLM-style
// {"message"}, else the body (or the error) as it is, at most
// maxServerMessage bytes.
func serverMessage(err error) string {
	if err == nil {
		return ""
	}
	msg := err.Error()
	var he *client.HTTPError
	if errors.As(err, &he) {
		msg = strings.TrimSpace(he.Body)
		var body struct {
			Message string          `json:"message"`
			Error   json.RawMessage `json:"error"`
		}
		if json.Unmarshal([]byte(msg), &body) == nil {
			var inner struct {
				Message string `json:"message"`
			}
			var text string
			switch {
			case body.Message != "":
				msg = body.Message
			case json.Unmarshal(body.Error, &inner) == nil && inner.Message != "":
				msg = inner.Message
			case json.Unmarshal(body.Error, &text) == nil && text != "":
				msg = text
			}
		}
		if msg == "" {
			msg = err.Error()
		}
	}
	if len(msg) > maxServerMessage {
		msg = fmt.Sprintf("%s (%d bytes)", textcut.Cut(msg, maxServerMessage), len(msg))
	}
	return msg
}

func (r *replayRecorder) Drift(at time.Time, d time.Duration) {
	r.drift.Observe(d.Seconds())
	r.window.Observe(at, d)
}

func (r *replayRecorder) Replayed(progress float64) {
	r.requests.Inc()
	r.progress.Set(progress)
}

// P99 is the drift's p99 over the degradation window, in seconds: a replay
// that cannot keep up with its trace (the client is late, or the ceiling
// holds it back) is a degraded measurement.
func (r *replayRecorder) P99() float64 {
	return r.window.P99(time.Now())
}

// A replay's prompt source completes and follows its requests.
var _ workload.Requests = (*replay.Prompts)(nil)

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
func newReplay(ctx context.Context, r *config.Replay, t *config.Target, opts Options, logger *slog.Logger) (*replay.Source, *replayRecorder, error) {
	// The drift's window is the schedule lag's.
	window := opts.DegradedWindow
	if window <= 0 {
		window = workload.DefaultDegradedWindow
	}
	rec := &replayRecorder{window: workload.NewWindow(window), logger: logger}
	src, tr, format, err := replay.Open(r, t, rec)
	if err != nil {
		return nil, nil, fmt.Errorf("replay: %w", err)
	}
	if n := tr.Skipped + src.Skipped(); n > 0 {
		logger.Warn("replay: trace lines skipped", "path", r.Path, "skipped", n,
			"first", errors.Join(append(append([]error(nil), tr.Errors...), src.Errors()...)...))
	}
	logger.Info("replay: trace loaded", "path", r.Path, "source", r.Source, "records", src.Records(), "max_rate", src.MaxRate())
	rec.skipped = float64(tr.Skipped + src.Skipped())
	if format != replay.FormatJSONL {
		// Token-only records: their lengths can be held against the
		// target's context length, where it says what it is. (A recorded
		// body's prompt length is not known here.)
		if n, err := contextLength(ctx, t); err != nil {
			logger.Debug("replay: the target's context length is unknown; trace records are not checked against it", "err", err)
		} else {
			rec.contextLen = n
			if rows, largest, at := src.OverContext(n); rows > 0 {
				logger.Warn("replay: trace records longer than the target's context length (prompt plus output tokens); the target will refuse them (http_4xx)",
					"path", r.Path, "records", rows, "of", src.Records(), "context_length", n, "largest", largest, "largest_at", at)
			}
		}
	}
	return src, rec, nil
}

// contextTimeout bounds the context length query at load.
const contextTimeout = 5 * time.Second

// contextLength asks the target for its context length: max_model_len in
// its answer to POST /tokenize, as vLLM and the embedded simulator give it,
// through the tokenizer probe that prompt calibration uses. An error when
// the target does not say (another server, no answer within
// contextTimeout).
func contextLength(ctx context.Context, t *config.Target) (int, error) {
	ctx, cancel := context.WithTimeout(ctx, contextTimeout)
	defer cancel()
	tok, err := plan.Tokenizer(ctx, t)
	if err != nil {
		return 0, err
	}
	if tok == nil || tok.MaxModelLen() <= 0 {
		return 0, errors.New("POST /tokenize: no max_model_len in the answer")
	}
	return tok.MaxModelLen(), nil
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
