package main

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/prometheus/common/version"
	"github.com/prometheus/exporter-toolkit/web"

	"github.com/infer-exporter/infer_exporter/collector"
	"github.com/infer-exporter/infer_exporter/engine"
	"github.com/infer-exporter/infer_exporter/internal/config"
	"github.com/infer-exporter/infer_exporter/probe/coldstart"
	"github.com/infer-exporter/infer_exporter/probe/live"
	"github.com/infer-exporter/infer_exporter/probe/otlp"
	"github.com/infer-exporter/infer_exporter/probe/prober"
	"github.com/infer-exporter/infer_exporter/probe/quality"
	"github.com/infer-exporter/infer_exporter/probe/workload"
)

// exporter is what serve starts, held between the steps that start it: the
// reloader applies the configuration to the parts, the web server and the
// landing page read them.
type exporter struct {
	flags  *flags
	logger *slog.Logger
	reg    *prometheus.Registry

	cols          *collector.Set
	starts        *coldstart.Tracker
	serverMetrics *engine.Scraper
	perplexity    *quality.Monitor
	recent        *recentStats
	manager       *live.Manager
	reloader      *config.Reloader
	// probeSpans gives the /probe requests' spans, or their trace
	// contexts alone; nil: none.
	probeSpans func(*config.Target, string, config.Sampling) prober.Spans

	// closers stop what was started, last started first, as the defers
	// of a single function would.
	closers []func()
}

func serve(ctx context.Context, f *flags, logger *slog.Logger) int {
	logger.Info("starting "+exporterName, "version", version.Info(), "build_context", version.BuildContext())
	if f.demo && f.configFile != "" {
		logger.Error("--demo and --config.file exclude each other: --demo brings its own configuration")
		return 2
	}
	if !f.demo && f.configFile == "" {
		logger.Warn("no --config.file: no workloads run; only collectors are served (try --demo)")
	}

	e := &exporter{flags: f, logger: logger, reg: newRegistry()}
	defer e.close()
	if err := e.startCollectors(ctx); err != nil {
		logger.Error("collectors", "err", err)
		return 1
	}
	opts, err := e.workloadOptions(ctx)
	if err != nil {
		logger.Error("otlp", "err", err)
		return 1
	}
	e.startWorkloads(opts)
	if err := e.newReloader(ctx); err != nil {
		logger.Error("demo simulator", "err", err)
		return 1
	}
	// Catch SIGHUP before the first load, which can take a while (a
	// configuration file that blocks): its default action would end the
	// process.
	hup := make(chan os.Signal, 1)
	signal.Notify(hup, syscall.SIGHUP)
	defer signal.Stop(hup)

	firstLoad, reloadCh := e.startReloads(ctx, hup)
	handler, err := e.handler(reloadCh)
	if err != nil {
		logger.Error("landing page", "err", err)
		return 1
	}
	return e.serveHTTP(ctx, handler, firstLoad)
}

// onClose has close call stop.
func (e *exporter) onClose(stop func()) { e.closers = append(e.closers, stop) }

// close stops what serve started, in the reverse order of its start.
func (e *exporter) close() {
	for i := len(e.closers) - 1; i >= 0; i-- {
		e.closers[i]()
	}
}

// startCollectors starts the metrics that are collected whatever the
// workloads: the host and GPU collectors, and each target's engine
// metrics, cold starts and quality.
func (e *exporter) startCollectors(ctx context.Context) error {
	cols, err := collector.New(ctx, e.flags.collectors, e.logger)
	if err != nil {
		return err
	}
	e.cols = cols
	e.onClose(func() { _ = cols.Close() })
	e.reg.MustRegister(cols)
	// Engine metrics: each target's own /metrics, scraped in the background
	// and normalised to infer_server_*. Each poll also tells the cold-start
	// tracker whether the server is up and ready, and its process start.
	e.starts = coldstart.New(e.logger.With("component", "coldstart"))
	e.reg.MustRegister(e.starts)
	e.serverMetrics = engine.NewScraper(e.logger.With("component", "engine_scraper"), engine.WithPollObserver(e.starts))
	e.onClose(e.serverMetrics.Close)
	e.reg.MustRegister(e.serverMetrics)
	// The quality probe: each target's perplexity over the reference text,
	// scored in the background at its quality.interval.
	e.perplexity = quality.NewMonitor(quality.MonitorOptions{Logger: e.logger.With("component", "quality")})
	e.onClose(e.perplexity.Close)
	e.reg.MustRegister(e.perplexity)
	return nil
}

// workloadOptions are the workloads' settings from the flags, with the
// scheduling latency it starts measuring, and the OTLP pusher or the trace
// contexts it starts. An error is the OTLP setup's.
func (e *exporter) workloadOptions(ctx context.Context) (live.Options, error) {
	f := e.flags
	saturation := workload.NewSchedulingLatency(e.reg, f.degradedWindow)
	go saturation.Run(ctx)
	opts := live.Options{DegradedLag: f.degradedLag, DegradedWindow: f.degradedWindow, Saturation: saturation, DrainTimeout: f.drainTimeout, Transport: f.transport}
	if f.drainTimeout == 0 {
		opts.DrainTimeout = -1 // 0 on the command line: cancel at once
	}
	if otlp.Enabled(f.otlpEndpoint, os.Getenv) {
		if err := e.startOTLP(ctx, &opts); err != nil {
			return opts, err
		}
	}
	// Without spans pushed, every request still gets a trace context, sent
	// as traceparent: the server may trace, and the exemplars name it.
	if opts.Tracer == nil && f.traceparent {
		if err := e.useTraceContexts(&opts); err != nil {
			return opts, err
		}
	}
	return opts, nil
}

// sampleRatio is the OTLP options' sample ratio: the flag's where it was
// given, else nil for the environment's or the default.
func (f *flags) sampleRatio() *float64 {
	if f.otlpRatioSet {
		return &f.otlpSampleRatio
	}
	return nil
}

// startOTLP starts the pusher of the same observations as OTLP metrics,
// beside /metrics, and of the workloads' and /probe requests' spans.
func (e *exporter) startOTLP(ctx context.Context, opts *live.Options) error {
	f := e.flags
	o := otlp.Options{
		Endpoint: f.otlpEndpoint, Histograms: otlp.Histograms(f.otlpHistograms), Protocol: otlp.Protocol(f.otlpProtocol),
		Version: version.Version, Registerer: e.reg, Logger: e.logger.With("component", "otlp"),
		SampleRatio: f.sampleRatio(),
	}
	pusher, err := otlp.New(ctx, o)
	if err != nil {
		return err
	}
	e.onClose(func() {
		// The last push: what was observed since the previous one.
		shutdownCtx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = pusher.Shutdown(shutdownCtx)
	})
	opts.Observe = func(t *config.Target, w *config.Workload) workload.Observer { return pusher.Workload(t, w) }
	// Each request's trace context, sent as traceparent (nil when no
	// spans are pushed: see useTraceContexts).
	opts.Tracer = pusher.Tracer()
	e.probeSpans = func(t *config.Target, module string, sampling config.Sampling) prober.Spans {
		if ps := pusher.Probe(t, module, sampling); ps != nil {
			return ps
		}
		if f.traceparent {
			return otlp.ProbeTraceContexts{}
		}
		return nil // no spans: a nil interface, not a nil *ProbeSpans
	}
	return nil
}

// useTraceContexts gives the workloads' and the /probe requests trace
// contexts, sent as traceparent, where no spans are pushed.
func (e *exporter) useTraceContexts(opts *live.Options) error {
	tracer, err := otlp.TraceContexts(otlp.Options{SampleRatio: e.flags.sampleRatio()})
	if err != nil {
		return err
	}
	opts.Tracer = tracer
	if e.probeSpans == nil {
		e.probeSpans = func(*config.Target, string, config.Sampling) prober.Spans { return otlp.ProbeTraceContexts{} }
	}
	return nil
}

// startWorkloads starts the manager of the workloads, whose requests are
// also told to the cold-start tracker and to the landing page.
func (e *exporter) startWorkloads(opts live.Options) {
	// Every workload's requests tell the tracker of the first token served
	// after a start, beside the OTLP push when there is one.
	opts.Observe = e.starts.Observe(opts.Observe)
	// A target's workloads send only while its server is ready, as the
	// engine scraper's polls find it (docs/lifecycle.md).
	opts.Ready = e.starts.Ready
	opts.Epoch = e.starts.Epoch
	// The server's prefix-cache hit ratio of a workload with a declared
	// cache-hit rate is the scraper's counters since the workload started.
	opts.ServerPrefixCache = serverPrefixCache(e.serverMetrics)
	// Its default prefix pool and block size are the server's KV cache's,
	// as the scraper reads vLLM's cache_config_info.
	opts.ServerKVCache = func(ctx context.Context, target string) (int, int, bool) {
		kv, ok := e.serverMetrics.KVCache(ctx, target)
		return kv.Tokens(), kv.BlockSize, ok
	}
	// And the landing page's last minute of each workload.
	e.recent = newRecentStats()
	opts.Observe = e.recent.Observe(opts.Observe)
	e.manager = live.NewManager(live.NewMetrics(e.reg), opts, e.logger)
	e.onClose(e.manager.Stop)
}

// serverPrefixCache reads a target's prefix-cache counters from the engine
// scraper's latest poll of it.
func serverPrefixCache(s *engine.Scraper) live.ServerPrefixCache {
	return func(target string) (hits, queries float64, at time.Time, ok bool) {
		for _, i := range s.Snapshots() {
			if i.Target == target && i.Up && i.PrefixCacheHits.OK && i.PrefixCacheQueries.OK {
				return i.PrefixCacheHits.Value, i.PrefixCacheQueries.Value, i.At, true
			}
		}
		return 0, 0, time.Time{}, false
	}
}

// newReloader makes the reloader that applies the configuration, the
// file's or the demo's, to every part; --demo starts the embedded
// simulator that its configuration names, and an error is its start's.
func (e *exporter) newReloader(ctx context.Context) error {
	f := e.flags
	load := func() (*config.Config, error) {
		if f.configFile == "" {
			return &config.Config{}, nil
		}
		// The read honours shutdown: a FIFO with no writer, a file on a
		// stalled mount, never hold SIGTERM.
		return config.LoadFileContext(ctx, f.configFile)
	}
	if f.demo {
		sim, simURL, err := startDemoSimulator(e.logger)
		if err != nil {
			return err
		}
		e.onClose(sim)
		load = func() (*config.Config, error) { return DemoConfig(simURL) }
	}
	e.reloader = config.NewReloader(load, config.Appliers{e.manager, e.serverMetrics, e.starts, e.perplexity}, e.reg, e.logger)
	return nil
}

// startReloads loads the configuration in the background, then again on
// each SIGHUP and each request sent on reloadCh, which is answered with
// the reload's error. firstLoad has the first load's.
//
// The listener comes up first and the configuration loads behind it:
// /-/healthy answers at once and /-/ready is 503 until the configuration
// is applied, so a liveness probe never restarts an exporter that is
// waiting on its targets. Workloads calibrate their prompts concurrently
// after that, each in its own goroutine (infer_probe_workload_state).
func (e *exporter) startReloads(ctx context.Context, hup <-chan os.Signal) (firstLoad <-chan error, reloadCh chan chan error) {
	reloadCh = make(chan chan error)
	first := make(chan error, 1)
	go func() {
		first <- e.reloader.Reload(ctx)
		for {
			select {
			case <-ctx.Done():
				return
			case <-hup:
				_ = e.reloader.Reload(ctx)
			case errc := <-reloadCh:
				errc <- e.reloader.Reload(ctx)
			}
		}
	}()
	return first, reloadCh
}

// handler serves the exporter's pages: /metrics, the lifecycle endpoints,
// /probe and its logs, and the landing page.
func (e *exporter) handler(reloadCh chan<- chan error) (http.Handler, error) {
	mux := http.NewServeMux()
	mux.Handle(e.flags.metricsPath, promhttp.HandlerFor(e.reg, promhttp.HandlerOpts{
		ErrorLog:          slog.NewLogLogger(e.logger.Handler(), slog.LevelError),
		EnableOpenMetrics: true,
		Registry:          e.reg,
	}))
	mux.HandleFunc("/-/healthy", func(w http.ResponseWriter, _ *http.Request) { fmt.Fprintln(w, "Healthy") })
	mux.HandleFunc("/-/ready", e.ready)
	mux.HandleFunc("/-/reload", reloadHandler(reloadCh))
	history := prober.NewHistory(prober.DefaultHistoryLimit)
	mux.Handle("/probe", prober.NewHandler(prober.Options{
		Config:        e.reloader.Current,
		Logger:        e.logger.With("component", "prober"),
		Registerer:    e.reg,
		TimeoutOffset: time.Duration(e.flags.timeoutOffset * float64(time.Second)),
		History:       history,
		Spans:         e.probeSpans,
		Transport:     e.flags.transport,
	}))
	mux.Handle(prober.LogsPath, history)
	landing, err := landingPage(e.flags, e.cols, e.manager, history, landingSources{recent: e.recent, gather: e.reg, servers: e.serverMetrics, degradedLag: e.flags.degradedLag})
	if err != nil {
		return nil, err
	}
	mux.Handle("/", landing)
	return mux, nil
}

// ready is /-/ready: 503 until a configuration is applied.
func (e *exporter) ready(w http.ResponseWriter, _ *http.Request) {
	if e.reloader.Current() == nil {
		http.Error(w, "no configuration loaded", http.StatusServiceUnavailable)
		return
	}
	fmt.Fprintln(w, "Ready")
}

// reloadHandler is /-/reload: it asks the reloads' loop (startReloads) for
// a reload through reloadCh and answers with its result.
func reloadHandler(reloadCh chan<- chan error) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodPost && r.Method != http.MethodPut {
			w.Header().Set("Allow", "POST, PUT")
			http.Error(w, "use POST or PUT to reload", http.StatusMethodNotAllowed)
			return
		}
		errc := make(chan error, 1)
		select {
		case reloadCh <- errc:
		case <-r.Context().Done():
			return
		}
		if err := <-errc; err != nil {
			http.Error(w, fmt.Sprintf("failed to reload config: %s", err), http.StatusInternalServerError)
			return
		}
		fmt.Fprintln(w, "Reloaded")
	}
}

// serveHTTP serves handler until ctx ends, the listener fails, or the first
// configuration fails to load, then drains the workloads and stops the web
// server; it returns the exit code.
func (e *exporter) serveHTTP(ctx context.Context, handler http.Handler, firstLoad <-chan error) int {
	srv := &http.Server{Handler: handler, ReadHeaderTimeout: 10 * time.Second}
	errc := make(chan error, 1)
	go func() { errc <- web.ListenAndServe(srv, e.flags.web, e.logger) }()
	code := 0
	for done := false; !done; {
		select {
		case err := <-errc:
			e.logger.Error("http server", "err", err)
			return 1
		case err := <-firstLoad:
			if err != nil && ctx.Err() == nil {
				// A bad configuration at start is fatal: there is no old
				// one to keep.
				code, done = 1, true
			}
		case <-ctx.Done():
			done = true
		}
	}
	e.logger.Info("shutting down")
	// The workloads drain first, while /metrics still serves: their
	// requests in flight end, or are cancelled and counted, within
	// --workload.drain-timeout.
	e.manager.Stop()
	shutdownCtx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	_ = srv.Shutdown(shutdownCtx)
	return code
}
