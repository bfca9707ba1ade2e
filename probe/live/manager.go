package live

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"reflect"
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
	// Tracer, when set, gives each workload's requests their W3C trace
	// contexts (the OTLP spans' head sampler, probe/otlp), sent as
	// traceparent; nil, or a nil Tracer, sends none.
	Tracer workload.Tracer
	// DrainTimeout is how long a stopped workload's requests in flight
	// may run on (a reload that changed or removed it, Stop) before they
	// are cancelled and counted as cancelled; 0 takes DefaultDrainTimeout,
	// a negative value cancels them at once.
	DrainTimeout time.Duration
	// Ready, when set, says whether a target's server is ready (the
	// cold-start tracker's view of the engine scraper's polls,
	// coldstart.Tracker.Ready): the workloads of a target whose metrics
	// are scraped skip their arrivals while it is not. Nil: never gated.
	Ready func(target string) bool
	// Epoch, when set, counts a target's server becoming newly serving
	// (coldstart.Tracker.Epoch): its prompts are calibrated again at each
	// change, and a workload that failed (its calibration: a context
	// length too short, a tokenizer that refused) is started again.
	Epoch func(target string) uint64
	// Transport is each workload client's transport (client.Options.Wire):
	// client.WireH1 (empty: the client's default) for probe/client/h1 on
	// the http and https targets it supports, client.WireNetHTTP for
	// net/http everywhere (--probe.transport).
	Transport string
	// ClientOptions, when set, adjusts the options of each workload's
	// client before it is built, after Transport (the load harness
	// chooses its transports so).
	ClientOptions func(o *client.Options)
	// Images, when set, keeps the workloads' images encoded once for
	// every workload that asks for the same ones while one of them runs
	// (plan.ImageCache): a reload's successor of a changed workload takes
	// its predecessor's, which is still draining. NewManager gives its
	// workloads one; nil encodes each workload's own.
	Images *plan.ImageCache
	// ServerPrefixCache, when set, reads a target's prefix-cache counters
	// as the engine scraper last read them, for the server's hit ratio of
	// the workloads with a declared cache-hit rate (prefixcache.go).
	ServerPrefixCache ServerPrefixCache
	// ServerKVCache, when set, reads a target's KV cache as its engine
	// describes it: a workload with a declared cache-hit rate sizes the
	// prefix pool and block size its configuration leaves unset to it
	// when it starts (prefixcache.go).
	ServerKVCache ServerKVCache
}

// epochOf is the epoch function of target t, nil where the engine scraper
// does not poll it (no readiness, no epoch).
func (o Options) epochOf(t *config.Target) func() uint64 {
	if o.Epoch == nil || t.Metrics.Engine == config.ServerEngineNone {
		return nil
	}
	name := t.Name
	return func() uint64 { return o.Epoch(name) }
}

// DefaultDrainTimeout is the drain's grace period when Options give none
// (--workload.drain-timeout).
const DefaultDrainTimeout = 30 * time.Second

// drainTimeout is DrainTimeout, or its default.
func (o Options) drainTimeout() time.Duration {
	switch {
	case o.DrainTimeout < 0:
		return 0
	case o.DrainTimeout == 0:
		return DefaultDrainTimeout
	}
	return o.DrainTimeout
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

// Manager runs the workloads of the current configuration. A reload keeps
// running every workload whose effective configuration (its own and its
// target's) did not change, series and schedule intact; it drains the
// workloads it changes or removes (Runner.Drain, Options.DrainTimeout)
// before their successors start.
type Manager struct {
	opts    Options
	metrics *Metrics
	logger  *slog.Logger

	mu      sync.Mutex
	running []*running         // in configuration order
	series  map[string]*Series // by workload name
	stopped bool               // Stop was called: Apply starts nothing
	// config is the configuration last applied, which retryFailed
	// applies again; following is set once the follower runs.
	config     *config.Config
	following  bool
	stopFollow chan struct{}
}

// running is one workload the manager runs.
type running struct {
	r      *workload.Runner
	client *client.Client
	// Its effective configuration, to compare on reload.
	w config.Workload
	t config.Target
	// cancel ends its run at once; done is closed when Run returns.
	cancel context.CancelFunc
	done   chan struct{}
	// epoch is its target's server epoch when it was built: a workload
	// that failed is started again once the epoch moves.
	epoch uint64
}

// same reports whether workload w on target t is what x runs.
func (x *running) same(w *config.Workload, t *config.Target) bool {
	return reflect.DeepEqual(x.w, *w) && reflect.DeepEqual(x.t, *t)
}

// drain stops x gracefully and waits for it.
func (x *running) drain(grace time.Duration) {
	x.r.Drain(grace)
	<-x.done
	x.cancel()
	x.client.Close()
}

// NewManager returns a manager that records into metrics.
func NewManager(metrics *Metrics, opts Options, logger *slog.Logger) *Manager {
	if opts.Images == nil {
		opts.Images = &plan.ImageCache{}
	}
	return &Manager{opts: opts, metrics: metrics, logger: logger, series: map[string]*Series{}, stopFollow: make(chan struct{})}
}

// failedRetryInterval is how often the manager looks for failed workloads
// whose server has changed since (Options.Epoch).
const failedRetryInterval = time.Second

// follow applies the last configuration again whenever a workload that
// failed has a target whose server epoch moved since it was built: a
// workload refused for its context length, or whose tokenizer refused,
// while its server loaded or before a restart, is retried against the
// server that is up now. Apply keeps every other workload running.
func (m *Manager) follow() {
	tick := time.NewTicker(failedRetryInterval)
	defer tick.Stop()
	for {
		select {
		case <-m.stopFollow:
			return
		case <-tick.C:
		}
		m.mu.Lock()
		c, retry := m.config, false
		for _, x := range m.running {
			failedBefore := x.r.Status().State == workload.StateFailed && m.opts.epochOf(&x.t) != nil && m.opts.Epoch(x.t.Name) != x.epoch
			if failedBefore || m.metrics.calibrator.Refused(x.t.Name, x.t.Model, x.r.Name) {
				retry = true
			}
		}
		m.mu.Unlock()
		if retry && c != nil {
			m.logger.Info("server changed: retrying the workloads that failed")
			if err := m.Apply(context.Background(), c); err != nil {
				m.logger.Warn("retrying the failed workloads", "err", err)
			}
		}
	}
}

// Build turns a configuration into runners without starting them, so that a
// configuration that cannot run is refused before the old one stops. On
// error it also returns what it had built, for the caller to discard.
func Build(ctx context.Context, c *config.Config, metrics *Metrics, opts Options, logger *slog.Logger) ([]*workload.Runner, []*client.Client, error) {
	return build(ctx, c, metrics, opts, logger, nil)
}

// build is Build of the workloads that skip does not name (nil: all).
func build(ctx context.Context, c *config.Config, metrics *Metrics, opts Options, logger *slog.Logger, skip map[string]bool) ([]*workload.Runner, []*client.Client, error) {
	var runners []*workload.Runner
	var clients []*client.Client
	for i := range c.Workloads {
		w := &c.Workloads[i]
		if skip[w.Name] {
			continue
		}
		t, ok := c.Target(w.Target)
		if !ok {
			return runners, clients, fmt.Errorf("workload %q: unknown target %q", w.Name, w.Target)
		}
		r, cl, err := buildRunner(ctx, w, t, metrics, opts, logger)
		if err != nil {
			return runners, clients, fmt.Errorf("workload %q: %w", w.Name, err)
		}
		runners, clients = append(runners, r), append(clients, cl)
	}
	return runners, clients, nil
}

// buildRunner is the runner of workload w on target t, and the client it
// sends with. On error it has built no client.
func buildRunner(ctx context.Context, w *config.Workload, t *config.Target, metrics *Metrics, opts Options, logger *slog.Logger) (*workload.Runner, *client.Client, error) {
	target, err := client.TargetOf(t)
	if err != nil {
		return nil, nil, err
	}
	a, err := newArrivals(ctx, w, t, target, metrics, opts, logger)
	if err != nil {
		return nil, nil, err
	}
	kinds, err := opts.Images.NewKinds(&w.Kinds)
	if err != nil {
		return nil, nil, err
	}
	kinds.ShareSlots(metrics.checkSlots)
	series := metrics.Series(t.Name, t.Model, w.Name, w.SLO)
	series.InitValidity(kinds.Structured(), kinds.OffersTools())
	if a.replayed != nil {
		a.replayed.bind(series)
	}
	if a.sess != nil {
		a.sess.Bind(metrics.sessions.series(series.lv))
		if a.sess.Jobs() {
			a.sess.BindJobs(metrics.agents.series(series.lv))
		}
	}
	// One client per workload: its connection pool is sized to the
	// workload's in-flight cap.
	copts := client.Options{MaxConnsPerHost: w.MaxInFlight, Wire: opts.Transport}
	if opts.ClientOptions != nil {
		opts.ClientOptions(&copts)
	}
	cl := client.New(copts)
	observers, monitor := observersOf(series, cl, target, t, w, metrics, opts, logger)
	if a.prefix != nil {
		observers = append(observers, a.prefix)
	}
	series.Transport(cl.TransportName(target))
	return workload.Plan{
		Name:       w.Name,
		Target:     target,
		Source:     a.source,
		Prepare:    a.prepare,
		Client:     cl,
		Observer:   observers,
		Monitor:    monitor,
		Tracer:     opts.Tracer,
		Template:   plan.Template{Sampling: w.Sampling, Timeout: t.Timeout, Kinds: kinds},
		Checks:     w.Checks,
		Saturation: a.saturation,
		Logger:     logger,
		Ready:      opts.readyOf(t),
		Limits: workload.Limits{
			MaxInFlight: w.MaxInFlight,
			MaxRate:     a.maxRate,
			Burst:       a.burst,
			// The ceiling is the session arrivals' (probe/sessions); turns
			// follow replies, not the arrival process.
			Unceiled:       a.sess != nil,
			Duration:       w.Duration,
			StallThreshold: w.StallThreshold,
			DegradedLag:    opts.DegradedLag,
			DegradedWindow: opts.DegradedWindow,
			// The live series, the OTLP push and the stall scan read
			// each gap as it closes: the last two instants.
			TokenWindow: 2,
		},
	}.Runner(), cl, nil
}

// arrivals is where a workload's requests come from, and how fast they may
// come: a replay's recorded ones, sessions' turns, or an open loop of
// calibrated prompts.
type arrivals struct {
	source     workload.Source                                // known when built (a replay)
	prepare    func(context.Context) (workload.Source, error) // or made when the runner starts
	maxRate    float64
	burst      int // sends at one instant the ceiling must allow
	saturation interface{ P99() float64 }
	replayed   *replayRecorder    // a replay's
	sess       *sessions.Sessions // a sessions workload's
	prefix     *prefixTracker     // a declared cache-hit rate's
}

// newArrivals is the arrivals of workload w on target t, by its kind.
func newArrivals(ctx context.Context, w *config.Workload, t *config.Target, target *client.Target, metrics *Metrics, opts Options, logger *slog.Logger) (arrivals, error) {
	switch {
	case w.Replay != nil && w.Replay.Source == config.ReplaySourceAgentSessions:
		return agentReplayArrivals(w, opts, logger)
	case w.Replay != nil:
		return replayArrivals(ctx, w, t, opts, logger)
	case w.Sessions != nil:
		return sessionArrivals(w, t, target.Flavor != nil && target.Flavor.Chat(), metrics, opts, logger)
	}
	return openLoopArrivals(w, t, metrics, opts, logger)
}

// replayArrivals replays w's recorded requests in lockstep with their
// schedule; the replay's own lag joins the saturation that flags a
// measurement as degraded.
func replayArrivals(ctx context.Context, w *config.Workload, t *config.Target, opts Options, logger *slog.Logger) (arrivals, error) {
	src, rec, err := newReplay(ctx, w.Replay, t, opts, logger.With("workload", w.Name))
	if err != nil {
		return arrivals{}, err
	}
	return arrivals{
		source:     workload.Lockstep{Schedule: src.Schedule(), Requests: src.Prompts()},
		maxRate:    src.MaxRate(),
		burst:      src.Burst(),
		saturation: maxP99{opts.Saturation, rec},
		replayed:   rec,
	}, nil
}

// sessionArrivals sends w's sessions' turns, prepared when the runner
// starts.
func sessionArrivals(w *config.Workload, t *config.Target, chat bool, metrics *Metrics, opts Options, logger *slog.Logger) (arrivals, error) {
	sess, err := newSessions(w, t, chat, metrics, opts, logger)
	if err != nil {
		return arrivals{}, err
	}
	return sessionsArrivals(w, sess, opts), nil
}

// sessionsArrivals are the arrivals of sessions (conversations, agent
// jobs, recorded jobs): their turns, prepared when the runner starts, one
// at a time, under the session arrivals' ceiling.
func sessionsArrivals(w *config.Workload, sess *sessions.Sessions, opts Options) arrivals {
	return arrivals{
		prepare: func(ctx context.Context) (workload.Source, error) {
			p, err := sess.Prepare(ctx)
			if err != nil {
				return nil, fmt.Errorf("workload %q: %w", w.Name, err)
			}
			return p, nil
		},
		maxRate:    sess.MaxRate(),
		burst:      1,
		saturation: opts.Saturation,
		sess:       sess,
	}
}

// openLoopArrivals sends prompts on w's arrival process.
func openLoopArrivals(w *config.Workload, t *config.Target, metrics *Metrics, opts Options, logger *slog.Logger) (arrivals, error) {
	ol, err := plan.Open(w.Arrival, plan.ArrivalSeed(w.Prompt.Seed, w.Name), opts.DegradedLag)
	if err != nil {
		return arrivals{}, err
	}
	var prefix *prefixTracker
	if w.Prompt.CacheHitRate > 0 {
		prefix = metrics.prefixCache.track(t, w, opts.ServerPrefixCache)
	} else {
		// A reload that took the rate away ends the ratios' series.
		metrics.prefixCache.untrack(t.Name, t.Model, w.Name)
	}
	return arrivals{
		// Prompts of exact length, calibrated against the target's
		// tokenizer endpoint where it has one, when the runner starts: a
		// stalled tokenizer delays its own workload only, never the
		// others, the listener or a reload.
		prepare: func(ctx context.Context) (workload.Source, error) {
			sized := w
			if prefix != nil {
				sized = sizedToServer(ctx, t, w, opts.ServerKVCache, logger)
			}
			p, err := metrics.calibrator.Prompts(ctx, t, sized, logger, opts.epochOf(t))
			if err != nil {
				return nil, fmt.Errorf("workload %q: %w", w.Name, err)
			}
			if prefix != nil {
				// The span of the server's and the best hit ratios
				// starts with the workload's first prompt.
				prefix.start(sized.Prompt.PrefixPoolOrDefault())
				p = prefix.wrap(p)
			}
			return workload.OpenLoop{Schedule: ol.Schedule, Prompts: p}, nil
		},
		prefix:     prefix,
		maxRate:    ol.MaxRate,
		burst:      1,
		saturation: opts.Saturation,
	}, nil
}

// observersOf is what hears a workload's requests: its live series, the
// model watch, and Options.Observe's observer; and its Monitor, the series,
// teed to that observer when it counts stalls too.
func observersOf(series *Series, cl *client.Client, target *client.Target, t *config.Target, w *config.Workload, metrics *Metrics, opts Options, logger *slog.Logger) (workload.Observers, workload.Monitor) {
	observers := workload.Observers{series, &modelObserver{watch: metrics.models, client: cl, target: target, logger: logger}}
	var monitor workload.Monitor = series
	if opts.Observe != nil {
		if extra := opts.Observe(t, w); extra != nil {
			observers = append(observers, extra)
			if s, ok := extra.(interface{ Stalls(workload.StallScan) }); ok {
				monitor = stallsTee{series, s}
			}
		}
	}
	return observers, monitor
}

// readyOf is the readiness of target t, nil where the engine scraper does
// not poll it: only a polled target has one.
func (o Options) readyOf(t *config.Target) func() bool {
	if o.Ready == nil || t.Metrics.Engine == config.ServerEngineNone {
		return nil
	}
	name := t.Name
	return func() bool { return o.Ready(name) }
}

// Apply makes c's workloads the running ones. A workload whose effective
// configuration (its own and its target's) is unchanged keeps running, its
// runner, series and schedule untouched. The others are built first: if
// one cannot be, c is refused and everything keeps running. Then the
// workloads changed or removed drain (their requests in flight end within
// the drain timeout, or are cancelled and counted as cancelled), and the
// changed and new ones start.
func (m *Manager) Apply(ctx context.Context, c *config.Config) error {
	// The runs outlive the reload's context: a shutdown drains them
	// (Stop) rather than cutting them off.
	ctx = context.WithoutCancel(ctx)
	m.mu.Lock()
	old, stopped := m.running, m.stopped
	m.mu.Unlock()
	if stopped {
		return errors.New("the exporter is shutting down")
	}
	kept := m.unchanged(c, old)
	skip := map[string]bool{}
	for name := range kept {
		skip[name] = true
	}
	runners, clients, err := build(ctx, c, m.metrics, m.opts, m.logger, skip)
	if err != nil {
		m.discard(runners, clients)
		return err
	}
	var stopping []*running
	for _, x := range old {
		if kept[x.r.Name] != x {
			stopping = append(stopping, x)
		}
	}
	m.drainAll(stopping, "reload")

	m.mu.Lock()
	defer m.mu.Unlock()
	if m.stopped {
		// Stop came while the old workloads drained.
		for _, cl := range clients {
			cl.Close()
		}
		return errors.New("the exporter is shutting down")
	}
	m.deleteSeriesOfRemoved(c)
	fresh := m.start(ctx, c, runners, clients)
	m.config = c
	if !m.following && m.opts.Epoch != nil {
		m.following = true
		go m.follow()
	}
	m.running = m.running[:0:0]
	for i := range c.Workloads {
		name := c.Workloads[i].Name
		if x := kept[name]; x != nil {
			m.running = append(m.running, x)
		} else if x := fresh[name]; x != nil {
			m.running = append(m.running, x)
		}
	}
	if len(runners) > 0 {
		m.logger.Info("workloads started", "count", len(runners), "kept", len(kept))
	} else if len(kept) > 0 {
		m.logger.Info("workloads unchanged", "kept", len(kept))
	}
	return nil
}

// unchanged is the workloads of old that c runs as they are, by name: same
// effective configuration, and nothing to retry. A workload that failed
// (its calibration) is retried, and one whose prompts are estimates
// because its tokenizer did not answer is calibrated again.
func (m *Manager) unchanged(c *config.Config, old []*running) map[string]*running {
	kept := map[string]*running{}
	for i := range c.Workloads {
		w := &c.Workloads[i]
		t, ok := c.Target(w.Target)
		if !ok {
			continue // Build refuses it
		}
		for _, x := range old {
			if x.r.Name == w.Name && x.same(w, t) && x.r.Status().State != workload.StateFailed &&
				!m.metrics.calibrator.Unreached(t.Name, t.Model, w.Name) && !m.metrics.calibrator.Refused(t.Name, t.Model, w.Name) {
				kept[w.Name] = x
			}
		}
	}
	return kept
}

// deleteSeriesOfRemoved deletes the series of the workloads that c no
// longer has. m.mu is held.
func (m *Manager) deleteSeriesOfRemoved(c *config.Config) {
	names := map[string]bool{}
	for i := range c.Workloads {
		names[c.Workloads[i].Name] = true
	}
	for name, s := range m.series {
		if !names[name] {
			s.Delete()
			delete(m.series, name)
		}
	}
}

// start runs the runners built for c, each with its client (clients[i]),
// and returns them by name. A workload moved to another target or model
// has its old series deleted. m.mu is held.
func (m *Manager) start(ctx context.Context, c *config.Config, runners []*workload.Runner, clients []*client.Client) map[string]*running {
	fresh := map[string]*running{}
	for i, r := range runners {
		series := seriesOf(r.Monitor)
		series.SetState(workload.StateCalibrating)
		if o, ok := m.series[r.Name]; ok && o.lv[0] != series.lv[0] || ok && o.lv[1] != series.lv[1] {
			o.Delete()
		}
		m.series[r.Name] = series
		w := workloadNamed(c, r.Name)
		t, _ := c.Target(w.Target)
		runCtx, cancel := context.WithCancel(ctx)
		x := &running{r: r, client: clients[i], w: *w, t: *t, cancel: cancel, done: make(chan struct{})}
		if e := m.opts.epochOf(t); e != nil {
			x.epoch = e()
		}
		go func() {
			defer close(x.done)
			// The run's context ends with it: its prompts' follower too.
			defer cancel()
			r.Run(runCtx)
			m.logger.Info("workload finished", "workload", r.Name)
		}()
		fresh[r.Name] = x
	}
	return fresh
}

// workloadNamed is c's workload of that name.
func workloadNamed(c *config.Config, name string) *config.Workload {
	for i := range c.Workloads {
		if c.Workloads[i].Name == name {
			return &c.Workloads[i]
		}
	}
	return nil
}

// drainAll drains the workloads concurrently and waits for them all.
func (m *Manager) drainAll(xs []*running, why string) {
	if len(xs) == 0 {
		return
	}
	grace := m.opts.drainTimeout()
	var wg sync.WaitGroup
	for _, x := range xs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			inFlight := x.r.InFlight()
			begin := time.Now()
			x.drain(grace)
			m.logger.Info("workload drained", "workload", x.r.Name, "why", why, "in_flight", inFlight,
				"took", time.Since(begin).Round(time.Millisecond), "grace", grace)
		}()
	}
	wg.Wait()
}

// WorkloadStatus is one running workload's state, for the landing page.
type WorkloadStatus struct {
	Name                       string
	Target, URL, Model, Flavor string
	// ModelNote is what the log said of the target's model when the server
	// refused it as not found (what the server serves instead); empty
	// once a request of the target succeeded since, or when none was refused.
	ModelNote string
	workload.Status
}

// Workloads returns the state of the workloads of the configuration in
// force, in configuration order.
func (m *Manager) Workloads() []WorkloadStatus {
	m.mu.Lock()
	defer m.mu.Unlock()
	out := make([]WorkloadStatus, 0, len(m.running))
	for _, x := range m.running {
		r := x.r
		out = append(out, WorkloadStatus{Name: r.Name, Target: r.Target.Name, URL: r.Target.BaseURL,
			Model: r.Target.Model, Flavor: r.Target.Flavor.Name(), ModelNote: m.metrics.models.Said(r.Target), Status: r.Status()})
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

// Stop drains every workload (its requests in flight end within the
// drain timeout, or are cancelled and counted as cancelled) and waits for
// them: the shutdown's path.
func (m *Manager) Stop() {
	m.mu.Lock()
	xs := m.running
	m.running, m.stopped = nil, true
	if m.following {
		m.following = false
		close(m.stopFollow)
	}
	m.mu.Unlock()
	m.drainAll(xs, "shutdown")
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
			gen, err := metrics.calibrator.Prompts(ctx, t, &shadow, logger, opts.epochOf(t))
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
