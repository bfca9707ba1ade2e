package live

import (
	"strconv"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/infer-exporter/infer_exporter/probe/observation"
	"github.com/infer-exporter/infer_exporter/probe/sessions"
)

// Turn labels. A session's turns are labelled "1" to "8" and "9+": the
// prefix cache's effect shows from the second turn on, and most chat
// conversations are a few turns long (the means of public chat logs are 2
// to 4 turns), so the first eight are told apart and the rare long tail is
// pooled; nine values per histogram keep a workload's series bounded
// whatever max turns (up to config.MaxSessionTurns) says.
const lastTurnLabel = 8

// TurnLabels lists the values of the turn label, in order.
var TurnLabels = func() []string {
	out := make([]string, 0, lastTurnLabel+1)
	for i := 1; i <= lastTurnLabel; i++ {
		out = append(out, strconv.Itoa(i))
	}
	return append(out, strconv.Itoa(lastTurnLabel+1)+"+")
}()

// TurnLabel is the turn label of a session's turn (1-based).
func TurnLabel(turn int) string { return TurnLabels[turnIndex(turn)] }

// turnIndex is the index in TurnLabels of a turn (1-based).
func turnIndex(turn int) int { return min(max(turn, 1), lastTurnLabel+1) - 1 }

// Bucket layouts of the session series.
var (
	// Turns per session: one to config.MaxSessionTurns.
	sessionTurnBuckets = []float64{1, 2, 3, 4, 5, 6, 8, 10, 12, 16, 20, 25, 32, 40, 50, 64, 80, 100}
	// Think times: a reader's pause, from none to config.MaxThinkTime.
	thinkBuckets = []float64{0, .1, .25, .5, 1, 2, 3, 5, 7.5, 10, 15, 20, 30, 45, 60, 90, 120, 300, 600, 1800, 3600}
	// TTFT per prompt token: a cached prefix costs nothing, a cold prefill
	// some 10 µs to 1 ms per token, a queue more.
	perTokenBuckets = []float64{1e-7, 2.5e-7, 5e-7, 1e-6, 2.5e-6, 5e-6, 1e-5, 2.5e-5, 5e-5, 1e-4, 2.5e-4, 5e-4, 1e-3, 2.5e-3, 5e-3, .01, .025, .05, .1, .25, 1}
	// Prompt tokens of a turn: the conversation grows to MaxTokens.
	conversationBuckets = prometheus.ExponentialBuckets(16, 2, 17)
)

// sessionMetrics are the infer_probe_session* vectors. They are registered
// with the other probe metrics; only sessions workloads have series in
// them.
type sessionMetrics struct {
	started          *prometheus.CounterVec
	dropped, ended   *prometheus.CounterVec
	active           *prometheus.GaugeVec
	turns, think     *prometheus.HistogramVec
	ttft, tpot       *prometheus.HistogramVec
	prompt, perToken *prometheus.HistogramVec
}

func newSessionMetrics(reg prometheus.Registerer) *sessionMetrics {
	hist := func(name, help string, buckets []float64, native bool, lv []string) *prometheus.HistogramVec {
		opts := prometheus.HistogramOpts{Namespace: namespace, Name: name, Help: help, Buckets: buckets}
		if native {
			opts = nativeHistogram(opts)
		}
		return prometheus.NewHistogramVec(opts, lv)
	}
	m := &sessionMetrics{
		started: counterVec("sessions_started_total",
			"Sessions started: their arrival was due and neither max_active nor the rate ceiling refused it.", labels),
		dropped: counterVec("sessions_dropped_total",
			"Session arrivals never started, by reason: session_cap (max_active sessions alive) or rate_ceiling.", with(labels, "reason")),
		ended: counterVec("sessions_ended_total",
			"Sessions ended, by reason: completed, context_limit, turn_failed, turn_dropped or stopped.", with(labels, "reason")),
		active: gaugeVec("sessions_active",
			"Sessions started and not ended: with a turn in flight or thinking.", labels),
		turns: hist("session_turns", "Turns a session had answered successfully, observed when it ends.", sessionTurnBuckets, false, labels),
		think: hist("session_think_time_seconds", "Think time drawn between a reply's last byte and the next turn's scheduled instant.", thinkBuckets, true, labels),
		ttft: hist("session_turn_time_to_first_token_seconds",
			"TTFT of session turns by turn number, from the turn's scheduled instant (previous reply's end plus think time).", latencyBuckets, true, with(labels, "turn")),
		tpot: hist("session_turn_time_per_output_token_seconds",
			"TPOT of successful session turns by turn number, by the rule of time_per_output_token_seconds.", tokenBuckets, true, with(labels, "turn")),
		prompt: hist("session_turn_prompt_tokens",
			"Prompt tokens of successful session turns by turn number, as the server's usage reported them: the conversation so far.", conversationBuckets, false, with(labels, "turn")),
		perToken: hist("session_turn_time_to_first_token_per_prompt_token_seconds",
			"Per successful session turn with usage, its TTFT divided by its prompt tokens, by turn number.", perTokenBuckets, false, with(labels, "turn")),
	}
	reg.MustRegister(m.started, m.dropped, m.ended, m.active, m.turns, m.think, m.ttft, m.tpot, m.prompt, m.perToken)
	return m
}

func (m *sessionMetrics) delete(match prometheus.Labels) {
	deleteMatching(match, m.started, m.dropped, m.ended, m.active, m.turns, m.think, m.ttft, m.tpot, m.prompt, m.perToken)
}

// sessionSeries is one sessions workload's view of the session metrics,
// every series created at zero: its sessions.Recorder.
type sessionSeries struct {
	started          prometheus.Counter
	active           prometheus.Gauge
	dropped, ended   map[string]prometheus.Counter
	turns, think     prometheus.Observer
	ttft, tpot       []prometheus.Observer // by turn label
	prompt, perToken []prometheus.Observer // by turn label
}

// series binds the labels of one workload (target, model, workload).
func (m *sessionMetrics) series(lv []string) *sessionSeries {
	s := &sessionSeries{
		started: m.started.WithLabelValues(lv...),
		active:  m.active.WithLabelValues(lv...),
		dropped: map[string]prometheus.Counter{},
		ended:   map[string]prometheus.Counter{},
		turns:   m.turns.WithLabelValues(lv...),
		think:   m.think.WithLabelValues(lv...),
	}
	for _, r := range sessions.DropReasons {
		s.dropped[r] = m.dropped.WithLabelValues(with(lv, r)...)
	}
	for _, r := range sessions.EndReasons {
		s.ended[r] = m.ended.WithLabelValues(with(lv, r)...)
	}
	for _, t := range TurnLabels {
		s.ttft = append(s.ttft, m.ttft.WithLabelValues(with(lv, t)...))
		s.tpot = append(s.tpot, m.tpot.WithLabelValues(with(lv, t)...))
		s.prompt = append(s.prompt, m.prompt.WithLabelValues(with(lv, t)...))
		s.perToken = append(s.perToken, m.perToken.WithLabelValues(with(lv, t)...))
	}
	return s
}

// Started implements sessions.Recorder.
func (s *sessionSeries) Started(active int) {
	s.started.Inc()
	s.active.Set(float64(active))
}

// Dropped implements sessions.Recorder.
func (s *sessionSeries) Dropped(reason string) { s.dropped[reason].Inc() }

// Ended implements sessions.Recorder.
func (s *sessionSeries) Ended(reason string, turns, active int) {
	s.ended[reason].Inc()
	s.turns.Observe(float64(turns))
	s.active.Set(float64(active))
}

// Think implements sessions.Recorder.
func (s *sessionSeries) Think(d time.Duration) { s.think.Observe(d.Seconds()) }

// FirstToken implements sessions.Recorder.
func (s *sessionSeries) FirstToken(turn int, d time.Duration) {
	s.ttft[turnIndex(turn)].Observe(d.Seconds())
}

// TurnDone implements sessions.Recorder: a successful turn's TPOT, by the
// rule every request's TPOT follows (a turn without one, a single content
// event or a single visible token, has none), and its prompt length and
// TTFT per prompt token, when the server reported its prompt tokens.
func (s *sessionSeries) TurnDone(turn int, o *observation.Request) {
	i := turnIndex(turn)
	if d, ok := o.TPOT(); ok {
		s.tpot[i].Observe(d.Seconds())
	}
	if o.PromptTokens <= 0 {
		return
	}
	s.prompt[i].Observe(float64(o.PromptTokens))
	if d, ok := o.TTFT(); ok {
		s.perToken[i].Observe(d.Seconds() / float64(o.PromptTokens))
	}
}
