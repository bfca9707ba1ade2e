package live

import (
	"context"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/infer-exporter/infer_exporter/internal/config"
	"github.com/infer-exporter/infer_exporter/probe/client"
	"github.com/infer-exporter/infer_exporter/probe/plan"
	"github.com/infer-exporter/infer_exporter/probe/sessions"
	"github.com/infer-exporter/infer_exporter/probe/workload"
)

// Options are the exporter-wide settings for every workload.
type Options struct {
	DegradedLag    time.Duration
	DegradedWindow time.Duration
	Saturation     *workload.SchedulingLatency // may be nil
	// Observe, when set, gives each workload an observer beside its live
	// metrics (the OTLP push, probe/otlp), told every request as the
	// series is; one that also has Stalls(StallScan) hears the stall
	// scans. It may return nil.
	Observe func(t *config.Target, w *config.Workload) workload.Observer
}

// stallsTee is the Monitor of a workload whose extra observer counts
// stalls too: the series hears everything, the observer the stall scans.
type stallsTee struct {
	*Series
	extra interface{ Stalls(workload.StallScan) }
}

func (m stallsTee) Stalls(s workload.StallScan) { m.Series.Stalls(s); m.extra.Stalls(s) }

// seriesOf is the live series behind a runner's Monitor.
func seriesOf(m workload.Monitor) *Series {
	if t, ok := m.(stallsTee); ok {
		return t.Series
	}
	return m.(*Series)
}

// Manager runs the workloads of the current configuration and replaces them
// when the configuration is reloaded.
type Manager struct {
	opts    Options
	metrics *Metrics
	logger  *slog.Logger

	mu      sync.Mutex
	cancel  context.CancelFunc
	done    chan struct{}
	series  map[string]*Series // by workload name
	clients []*client.Client
	runners []*workload.Runner
}

// NewManager returns a manager that records into metrics.
func NewManager(metrics *Metrics, opts Options, logger *slog.Logger) *Manager {
	return &Manager{opts: opts, metrics: metrics, logger: logger, series: map[string]*Series{}}
}

// Build turns a configuration into runners without starting them, so that a
// configuration that cannot run is refused before the old one stops. On
// error it also returns what it had built, for the caller to discard.
func Build(ctx context.Context, c *config.Config, metrics *Metrics, opts Options, logger *slog.Logger) ([]*workload.Runner, []*client.Client, error) {
	var runners []*workload.Runner
	var clients []*client.Client
	for i := range c.Workloads {
		w := &c.Workloads[i]
		t, ok := c.Target(w.Target)
		if !ok {
			return runners, clients, fmt.Errorf("workload %q: unknown target %q", w.Name, w.Target)
		}
		target, err := client.TargetOf(t)
		if err != nil {
			return runners, clients, fmt.Errorf("workload %q: %w", w.Name, err)
		}
		var (
			source     workload.Source
			maxRate    float64
			saturation interface{ P99() float64 } = opts.Saturation
			replayed   *replayRecorder
			sess       *sessions.Sessions // a sessions workload's
			prepare    func(context.Context) (workload.Source, error)
			burst      = 1 // sends at one instant the ceiling must allow
		)
		if w.Replay != nil {
			src, rec, err := newReplay(ctx, w.Replay, t, opts, logger.With("workload", w.Name))
			if err != nil {
				return runners, clients, fmt.Errorf("workload %q: %w", w.Name, err)
			}
			source, maxRate, replayed, burst = workload.Lockstep{Schedule: src.Schedule(), Requests: src.Prompts()}, src.MaxRate(), rec, src.Burst()
			saturation = maxP99{opts.Saturation, rec}
		} else if w.Sessions != nil {
			sess, err = newSessions(w, t, target.Flavor != nil && target.Flavor.Chat(), metrics, opts, logger)
			if err != nil {
				return runners, clients, fmt.Errorf("workload %q: %w", w.Name, err)
			}
			prepare = func(ctx context.Context) (workload.Source, error) {
				p, err := sess.Prepare(ctx)
				if err != nil {
					return nil, fmt.Errorf("workload %q: %w", w.Name, err)
				}
				return p, nil
			}
			maxRate = sess.MaxRate()
		} else {
			ol, err := plan.Open(w.Arrival, w.Prompt.Seed, opts.DegradedLag)
			if err != nil {
				return runners, clients, fmt.Errorf("workload %q: %w", w.Name, err)
			}
			// Prompts of exact length, calibrated against the target's
			// tokenizer endpoint where it has one, when the runner starts:
			// a stalled tokenizer delays its own workload only, never the
			// others, the listener or a reload.
			prepare = func(ctx context.Context) (workload.Source, error) {
				p, err := metrics.prompts.Prompts(ctx, t, w, logger)
				if err != nil {
					return nil, fmt.Errorf("workload %q: %w", w.Name, err)
				}
				return workload.OpenLoop{Schedule: ol.Schedule, Prompts: p}, nil
			}
			maxRate = ol.MaxRate
		}
		series := metrics.Series(t.Name, t.Model, w.Name, w.SLO)
		if replayed != nil {
			replayed.bind(series)
		}
		if sess != nil {
			sess.Bind(metrics.sessions.series(series.lv))
		}
		var observer workload.Observer = series
		var monitor workload.Monitor = series
		if opts.Observe != nil {
			if extra := opts.Observe(t, w); extra != nil {
				observer = workload.Observers{series, extra}
				if s, ok := extra.(interface{ Stalls(workload.StallScan) }); ok {
					monitor = stallsTee{series, s}
				}
			}
		}
		// One client per workload: its connection pool is sized to the
		// workload's in-flight cap.
		cl := client.New(client.Options{MaxConnsPerHost: w.MaxInFlight})
		clients = append(clients, cl)
		runners = append(runners, workload.Plan{
			Name:       w.Name,
			Target:     target,
			Source:     source,
			Prepare:    prepare,
			Client:     cl,
			Observer:   observer,
			Monitor:    monitor,
			Template:   plan.Template{Sampling: w.Sampling, Timeout: t.Timeout},
			Checks:     w.Checks,
			Saturation: saturation,
			Logger:     logger,
			Limits: workload.Limits{
				MaxInFlight: w.MaxInFlight,
				MaxRate:     maxRate,
				Burst:       burst,
				// The ceiling is the session arrivals' (probe/sessions); turns
				// follow replies, not the arrival process.
				Unceiled:       sess != nil,
				Duration:       w.Duration,
				StallThreshold: w.StallThreshold,
				DegradedLag:    opts.DegradedLag,
				DegradedWindow: opts.DegradedWindow,
				// The live series, the OTLP push and the stall scan read
				// each gap as it closes: the last two instants.
				TokenWindow: 2,
			},
		}.Runner())
	}
	return runners, clients, nil
}

// Apply stops the running workloads, waits for their requests, and starts
// those of c. If c cannot be built, the old workloads keep running.
func (m *Manager) Apply(ctx context.Context, c *config.Config) error {
	runners, clients, err := Build(ctx, c, m.metrics, m.opts, m.logger)
	if err != nil {
		m.discard(runners, clients)
		return err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	m.stopLocked()
	keep := map[string]bool{}
	for _, r := range runners {
		keep[r.Name] = true
	}
	for name, s := range m.series {
		if !keep[name] {
			s.Delete()
			delete(m.series, name)
		}
	}
	runCtx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	var wg sync.WaitGroup
	for _, r := range runners {
		series := seriesOf(r.Monitor)
		series.SetState(workload.StateCalibrating)
		if old, ok := m.series[r.Name]; ok && old.lv[0] != series.lv[0] || ok && old.lv[1] != series.lv[1] {
			old.Delete()
		}
		m.series[r.Name] = series
		wg.Add(1)
		go func() {
			defer wg.Done()
			r.Run(runCtx)
			m.logger.Info("workload finished", "workload", r.Name)
		}()
	}
	go func() { wg.Wait(); close(done) }()
	m.cancel, m.done, m.clients, m.runners = cancel, done, clients, runners
	m.logger.Info("workloads started", "count", len(runners))
	return nil
}

// WorkloadStatus is one running workload's state, for the landing page.
type WorkloadStatus struct {
	Name                       string
	Target, URL, Model, Flavor string
	workload.Status
}

// Workloads returns the state of the workloads of the configuration in
// force, in configuration order.
func (m *Manager) Workloads() []WorkloadStatus {
	m.mu.Lock()
	defer m.mu.Unlock()
	out := make([]WorkloadStatus, 0, len(m.runners))
	for _, r := range m.runners {
		out = append(out, WorkloadStatus{Name: r.Name, Target: r.Target.Name, URL: r.Target.BaseURL,
			Model: r.Target.Model, Flavor: r.Target.Flavor.Name(), Status: r.Status()})
	}
	return out
}

// discard undoes what a Build that failed had made: the clients, and the
// series of workloads that are not running (a refused configuration leaves
// no zero series behind).
func (m *Manager) discard(runners []*workload.Runner, clients []*client.Client) {
	for _, c := range clients {
		c.Close()
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	running := map[[3]string]bool{}
	for _, s := range m.series {
		running[[3]string(s.lv)] = true
	}
	for _, r := range runners {
		if s := seriesOf(r.Monitor); !running[[3]string(s.lv)] {
			s.Delete()
		}
	}
}

// Stop ends every workload and waits for it.
func (m *Manager) Stop() {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.stopLocked()
}

func (m *Manager) stopLocked() {
	if m.cancel == nil {
		return
	}
	m.cancel()
	<-m.done
	for _, c := range m.clients {
		c.Close()
	}
	m.cancel, m.done, m.clients, m.runners = nil, nil, nil, nil
}

// newSessions builds the sessions of workload w against target t (its
// flavor says whether turns are chat messages). Their user messages are a
// workload's prompts of user_tokens and output_tokens, calibrated the same
// way, with the same info metric, when the runner starts.
func newSessions(w *config.Workload, t *config.Target, chat bool, metrics *Metrics, opts Options, logger *slog.Logger) (*sessions.Sessions, error) {
	shadow := *w
	shadow.Prompt = config.Prompt{InputTokens: w.Sessions.UserTokens, OutputTokens: w.Sessions.OutputTokens, Seed: w.Sessions.Seed}
	return sessions.New(sessions.Options{
		Config: *w.Sessions, Arrival: w.Arrival, Duration: w.Duration, Chat: chat, DegradedLag: opts.DegradedLag,
		Logger: logger.With("workload", w.Name),
		Build: func(ctx context.Context) (workload.Prompts, int, error) {
			gen, err := metrics.prompts.Prompts(ctx, t, &shadow, logger)
			if err != nil {
				return nil, 0, err
			}
			n, err := contextLength(ctx, t)
			if err != nil {
				n = 0 // unknown: max_conversation_tokens alone bounds a session
			}
			return gen, n, nil
		},
	})
}
