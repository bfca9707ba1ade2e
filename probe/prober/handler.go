package prober

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"math"
	"net"
	"net/http"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/prometheus/common/expfmt"
	yaml "go.yaml.in/yaml/v3"

	"github.com/infer-exporter/infer_exporter/internal/config"
	"github.com/infer-exporter/infer_exporter/internal/textcut"
	"github.com/infer-exporter/infer_exporter/probe/client"
	"github.com/infer-exporter/infer_exporter/probe/observation"
	"github.com/infer-exporter/infer_exporter/probe/plan"
)

// Options configure a Handler.
type Options struct {
	// Config returns the configuration in force (config.Reloader.Current);
	// nil before the first load, when /probe answers 503.
	Config func() *config.Config
	// Logger receives every probe's log lines at debug level, scrubbed of
	// credentials.
	Logger *slog.Logger
	// Registerer receives the exporter's own counters of bad and refused
	// probe requests; nil registers nothing.
	Registerer prometheus.Registerer
	// TimeoutOffset is subtracted from the scrape timeout that Prometheus
	// sends (--timeout-offset), leaving time to answer.
	TimeoutOffset time.Duration
	// History keeps recent probes for the landing page; nil keeps none.
	History *History
	// Resolver resolves target host names; nil is net.DefaultResolver.
	Resolver Resolver
	// Spans, when set, gives the requests of a probe of module against t
	// their trace contexts and records their spans (the OTLP push,
	// probe/otlp); it may return nil (none).
	Spans func(t *config.Target, module string, sampling config.Sampling) Spans
	// Transport is the probe client's transport (client.Options.Wire),
	// the live workloads' (--probe.transport), so that both measure a
	// request through the same one; empty: the client's default.
	Transport string

	// beforeConnect, for tests, runs right before each connect(), after
	// the allow list passed the address.
	beforeConnect func(address string) error
}

// Spans records a probe's requests as spans: each is given a trace context
// before it is sent (the client sends it as traceparent) and is told when
// it ended.
type Spans interface {
	Trace() observation.Trace
	Done(o *observation.Request)
}

// Reasons of infer_exporter_probe_requests_invalid_total.
const (
	InvalidMissingModule = "missing_module"
	InvalidUnknownModule = "unknown_module"
	InvalidMissingTarget = "missing_target"
	InvalidBadTimeout    = "bad_timeout"
	InvalidBadTarget     = ReasonBadTarget
	InvalidNotAllowed    = ReasonNotAllowed
)

var invalidReasons = []string{InvalidMissingModule, InvalidUnknownModule, InvalidMissingTarget, InvalidBadTimeout, InvalidBadTarget, InvalidNotAllowed}

// Handler serves GET /probe?target=URL&module=NAME[&debug=true]: it runs
// one probe with the module against the target, into a registry of its
// own, and answers with that probe's metrics only.
type Handler struct {
	opts     Options
	ceilings *ceilings
	invalid  *prometheus.CounterVec
	refused  *prometheus.CounterVec
	probes   atomic.Int64 // probes started, for prompt seeds
	// models says once per target that its server does not serve the
	// probe's model (run.go, sayModel).
	models client.ModelWatch

	mu        sync.Mutex
	policyCfg *config.Config
	policy    *policy
	// kinds are the modules' request kinds of kindsCfg, each built at
	// its first probe and shared by every later one (kindsFor).
	kindsCfg *config.Config
	kinds    map[string]*moduleKinds
	// images keeps the modules' images encoded across configurations
	// while a probe or a module's kinds hold them: a reload that keeps a
	// module's images does not encode them again.
	images plan.ImageCache
}

// NewHandler returns a /probe handler. It registers its counters with
// opts.Registerer and panics if they are registered already, as
// MustRegister does.
func NewHandler(opts Options) *Handler {
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	if opts.Resolver == nil {
		opts.Resolver = net.DefaultResolver
	}
	h := &Handler{
		opts:     opts,
		ceilings: newCeilings(),
		invalid: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "infer_exporter_probe_requests_invalid_total",
			Help: "/probe requests refused before probing, by reason: missing_module, unknown_module, missing_target, bad_timeout, bad_target, not_allowed.",
		}, []string{"reason"}),
		refused: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "infer_exporter_probes_refused_total",
			Help: "Probes refused by a per-target ceiling, without sending (concurrency_ceiling) or before sending all their requests (rate_ceiling).",
		}, []string{"reason"}),
	}
	for _, r := range invalidReasons {
		h.invalid.WithLabelValues(r)
	}
	for _, r := range []string{ReasonConcurrencyCeiling, ReasonRateCeiling} {
		h.refused.WithLabelValues(r)
	}
	if opts.Registerer != nil {
		opts.Registerer.MustRegister(h.invalid, h.refused)
	}
	return h
}

// policyFor returns the allow list of c, built once per configuration.
func (h *Handler) policyFor(c *config.Config) *policy {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.policyCfg != c {
		h.policyCfg, h.policy = c, newPolicy(c)
	}
	return h.policy
}

// moduleKinds is one module's request kinds, built once.
type moduleKinds struct {
	once  sync.Once
	kinds *plan.Kinds
	err   error
}

// kindsFor returns the request kinds of c's module name (m), built once per
// configuration: a module's images are encoded once, and every probe's
// requests share their bytes, however many probes run at once (each
// target origin has its own probe.max_concurrent_probes). Built per probe,
// each probe held its own copy: some 37 MB for a module at
// config.MaxImagePixelBytes, and as many again for its PNGs while they
// were encoded. A reload's new configuration builds its own kinds, with
// the images of the old one where they are the same (h.images).
func (h *Handler) kindsFor(c *config.Config, name string, m *config.Module, logger *slog.Logger) (*plan.Kinds, error) {
	h.mu.Lock()
	if h.kindsCfg != c {
		h.kindsCfg, h.kinds = c, map[string]*moduleKinds{}
	}
	mk := h.kinds[name]
	if mk == nil {
		mk = &moduleKinds{}
		h.kinds[name] = mk
	}
	h.mu.Unlock()
	mk.once.Do(func() {
		logger.Debug("Building the module's request kinds, once for this configuration", "module", name)
		mk.kinds, mk.err = h.images.NewKinds(&m.Kinds)
	})
	return mk.kinds, mk.err
}

// maxEcho bounds the part of a bad parameter quoted back in an error.
const maxEcho = 100

func (h *Handler) badRequest(w http.ResponseWriter, reason, msg string) {
	h.invalid.WithLabelValues(reason).Inc()
	h.opts.Logger.Debug("Bad probe request", "reason", reason, "msg", msg)
	http.Error(w, msg, http.StatusBadRequest)
}

func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	start := time.Now()
	if r.Method != http.MethodGet {
		w.Header().Set("Allow", http.MethodGet)
		http.Error(w, "use GET", http.StatusMethodNotAllowed)
		return
	}
	cfg := h.opts.Config()
	if cfg == nil {
		http.Error(w, "no configuration loaded", http.StatusServiceUnavailable)
		return
	}
	params := r.URL.Query()
	moduleName := params.Get("module")
	if moduleName == "" {
		h.badRequest(w, InvalidMissingModule, "module parameter is missing")
		return
	}
	module, ok := cfg.Module(moduleName)
	if !ok {
		h.badRequest(w, InvalidUnknownModule, fmt.Sprintf("unknown module %q", textcut.Cut(moduleName, maxEcho)))
		return
	}
	rawTarget := params.Get("target")
	if rawTarget == "" {
		h.badRequest(w, InvalidMissingTarget, "target parameter is missing")
		return
	}
	timeout, err := probeTimeout(r.Header.Get("X-Prometheus-Scrape-Timeout-Seconds"), module.Timeout, h.opts.TimeoutOffset)
	if err != nil {
		h.badRequest(w, InvalidBadTimeout, err.Error())
		return
	}
	ctx, cancel := context.WithTimeout(r.Context(), timeout)
	defer cancel()

	pol := h.policyFor(cfg)
	var logs bytes.Buffer
	shown := displayTarget(rawTarget)
	logger := newProbeLogger(h.opts.Logger, &logs, pol.secrets).With("module", moduleName, "target", shown)
	res := h.probe(ctx, &probeRun{cfg: cfg, policy: pol, moduleName: moduleName, module: module,
		rawTarget: rawTarget, timeout: timeout, logger: logger})
	res.duration = time.Since(start)
	if res.success {
		logger.Info("Probe succeeded", "duration_seconds", res.duration.Seconds())
	} else {
		logger.Error("Probe failed", "reason", res.reason, "duration_seconds", res.duration.Seconds())
	}

	reg := prometheus.NewRegistry()
	reg.MustRegister(resultCollector{res})
	debug := debugOutput(&logs, reg, moduleName, module, pol.secrets)
	if h.opts.History != nil {
		h.opts.History.add(historyEntry{at: start, module: moduleName, target: shown,
			success: res.success, reason: res.reason, duration: res.duration, debug: debug})
	}
	if params.Get("debug") == "true" {
		writeText(w, debug)
		return
	}
	// OpenMetrics when the scraper asks for it (Prometheus does): the
	// text format that carries the exemplars of a traced probe's
	// histograms (exemplars.go).
	promhttp.HandlerFor(reg, promhttp.HandlerOpts{EnableOpenMetrics: true}).ServeHTTP(w, r)
}

// defaultScrapeTimeout applies when a scrape sends no timeout header, as in
// blackbox_exporter.
const defaultScrapeTimeout = 120 * time.Second

// probeTimeout is the probe's deadline: the scrape's timeout minus offset
// (the whole scrape timeout when it is not longer than the offset), capped
// by the module's timeout when that is set and shorter.
func probeTimeout(header string, module, offset time.Duration) (time.Duration, error) {
	scrape := defaultScrapeTimeout
	if header != "" {
		s, err := strconv.ParseFloat(header, 64)
		if err != nil || math.IsNaN(s) || math.IsInf(s, 0) || s <= 0 || s > 1e6 {
			return 0, fmt.Errorf("X-Prometheus-Scrape-Timeout-Seconds %q is not a positive number of seconds", textcut.Cut(header, maxEcho))
		}
		scrape = time.Duration(s * float64(time.Second))
	}
	t := scrape - offset
	if t <= 0 {
		t = scrape
	}
	if module > 0 && module < t {
		t = module
	}
	return t, nil
}

// debugOutput is what debug=true returns and the history keeps: the probe's
// log, the metrics the scrape would have got, and the module's
// configuration, scrubbed of secrets.
func debugOutput(logs *bytes.Buffer, reg *prometheus.Registry, name string, m *config.Module, secrets []string) string {
	var b bytes.Buffer
	b.WriteString("Logs for the probe:\n")
	b.Write(logs.Bytes())
	b.WriteString("\n\n\nMetrics that would have been returned:\n")
	mfs, err := reg.Gather()
	if err != nil {
		fmt.Fprintf(&b, "Error gathering metrics: %v\n", err)
	}
	for _, mf := range mfs {
		_, _ = expfmt.MetricFamilyToText(&b, mf)
	}
	fmt.Fprintf(&b, "\n\n\nModule configuration (%s):\n", name)
	shown := *m
	// Header values may be keys (X-Api-Key); show only their names.
	if len(m.Headers) > 0 {
		shown.Headers = make(map[string]string, len(m.Headers))
		for k := range m.Headers {
			shown.Headers[k] = "<hidden>"
		}
	}
	out, err := yaml.Marshal(&shown)
	if err != nil {
		fmt.Fprintf(&b, "Error marshalling the module: %v\n", err)
	}
	b.Write(out)
	return scrub(b.String(), secrets)
}

// truncate is textcut.Cut, under the name run.go calls it by.
