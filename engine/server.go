package engine

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"mime"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"

	"github.com/infer-exporter/infer_exporter/internal/config"
	"github.com/infer-exporter/infer_exporter/internal/textcut"
)

// Scraper reads each configured target's own /metrics in the background
// and exposes it normalised as infer_server_*: one schema for every engine
// (engines.go maps the names). A Prometheus scrape never waits for a
// target: it is served the latest values, with their age in
// infer_server_scrape_age_seconds.
//
// What an engine does not report stays absent; nothing is estimated.
// Counters keep the engine's cumulative value and type, so an engine restart
// shows as a counter reset, which rate() handles.
//
// Collect renders the same typed snapshots that Snapshot and Snapshots
// return, so the series and a reader of the snapshots (bench) cannot
// disagree.
type Scraper struct {
	logger *slog.Logger
	client *http.Client
	now    func() time.Time
	polls  PollObserver // nil: none (readiness.go)

	mu       sync.Mutex
	scrapers map[string]*targetScraper // by target name

	upDesc, kvDesc, runningDesc, waitingDesc *prometheus.Desc
	hitsDesc, queriesDesc, preemptDesc       *prometheus.Desc
	infoDesc, durationDesc, ageDesc          *prometheus.Desc
	loadedDesc                               *prometheus.Desc
	promptTokensDesc, generationTokensDesc   *prometheus.Desc
	loraDesc                                 *prometheus.Desc
	histDesc                                 [numHistQuantities]*prometheus.Desc
	finishedDesc                             *prometheus.Desc
}

// NewScraper returns a scraper with no targets; ApplyConfig starts them.
func NewScraper(logger *slog.Logger, opts ...Option) *Scraper {
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	labels := []string{"target", "engine", "model"}
	d := func(name, help string, l []string) *prometheus.Desc {
		return prometheus.NewDesc("infer_server_"+name, help, l, nil)
	}
	s := &Scraper{
		logger: logger,
		client: &http.Client{
			Transport: &http.Transport{Proxy: nil, MaxIdleConnsPerHost: 2, IdleConnTimeout: time.Minute, DisableCompression: false},
			// Follow no redirect: the configured URL is the one read.
			CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
		},
		now:      time.Now,
		scrapers: map[string]*targetScraper{},
		upDesc: d("up", "1 if the last background scrape of the target's metrics (for Ollama, which serves none, its /api/version and /api/ps) succeeded, else 0.",
			labels),
		kvDesc: d("kv_cache_usage_ratio", "Fraction of the engine's KV cache in use, 0..1, as the engine reports it (docs/metrics.md gives each engine's source).",
			labels),
		runningDesc: d("requests_running", "Requests the engine is running (in its batch) now.", labels),
		waitingDesc: d("requests_waiting", "Requests queued in the engine, waiting to be scheduled.", labels),
		hitsDesc: d("prefix_cache_hits_total", "Prefix-cache hits, cumulative, in the engine's unit (tokens for vLLM and SGLang; docs/metrics.md gives each source). Reset when the engine restarts.",
			labels),
		queriesDesc: d("prefix_cache_queries_total", "Prefix-cache lookups, cumulative, in the same unit as infer_server_prefix_cache_hits_total. Reset when the engine restarts.",
			labels),
		preemptDesc: d("preemptions_total", "Requests the engine preempted (SGLang: retracted), cumulative. Reset when the engine restarts.", labels),
		promptTokensDesc: d("prompt_tokens_total", "Prompt tokens the engine processed for every client, cumulative, as it counts them (docs/metrics.md: each engine's source). Reset on restart.",
			labels),
		generationTokensDesc: d("generation_tokens_total", "Output tokens the engine generated for every client, cumulative, as it counts them (docs/metrics.md: each engine's source). Reset on restart.",
			labels),
		loraDesc: d("lora_adapters", "LoRA adapters with requests in the engine's batch (state=running) or waiting for it (state=waiting), as its latest LoRA report lists them.",
			[]string{"target", "engine", "model", "state"}),
		infoDesc: d("info", "The engine behind the target, as its info endpoints say; max_context_length and max_lora (adapters per batch) are empty when not reported.",
			[]string{"target", "engine", "version", "model", "max_context_length", "max_lora"}),
		loadedDesc: d("loaded_model_bytes", "Memory taken by each model the engine reports loaded (Ollama's /api/ps), in all (memory=total) and on GPUs (memory=vram).",
			[]string{"target", "engine", "loaded_model", "memory"}),
		durationDesc: d("scrape_duration_seconds", "How long the last background scrape of the target's metrics took, info and slot endpoints included.",
			[]string{"target"}),
		ageDesc: d("scrape_age_seconds", "Time since the last background scrape of the target's metrics finished.",
			[]string{"target"}),
	}
	for h, nh := range histogramSeries {
		s.histDesc[h] = d(nh.name, nh.help, labels)
	}
	s.finishedDesc = d("requests_finished_total", "Requests the engine finished, by normalised reason (stop, length, abort, error, other), cumulative. Reset when the engine restarts.",
		[]string{"target", "engine", "model", "reason"})
	for _, o := range opts {
		o(s)
	}
	return s
}

// histogramSeries names each normalised histogram and says what it
// measures (docs/metrics.md gives each engine's source).
var histogramSeries = [numHistQuantities]struct{ name, help string }{
	hTTFT:             {"time_to_first_token_seconds", "The engine's own time to first token per request, from its receipt of the request, in the engine's buckets."},
	hQueueTime:        {"request_queue_time_seconds", "Time each request waited in the engine's queue before it was first scheduled, in the engine's buckets."},
	hPrefillTime:      {"request_prefill_time_seconds", "Time from a request's first scheduling to its first token (prefill), observed when it finishes, in the engine's buckets."},
	hDecodeTime:       {"request_decode_time_seconds", "Time from a request's first token to its last (decode), observed when it finishes, in the engine's buckets."},
	hPromptTokens:     {"request_prompt_tokens", "Prompt tokens per request as the engine counted them, in the engine's buckets."},
	hGenerationTokens: {"request_generation_tokens", "Generated tokens per request as the engine counted them, in the engine's buckets."},
}

// Describe sends every descriptor.
func (s *Scraper) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{s.upDesc, s.kvDesc, s.runningDesc, s.waitingDesc, s.hitsDesc,
		s.queriesDesc, s.preemptDesc, s.infoDesc, s.durationDesc, s.ageDesc, s.loadedDesc, s.finishedDesc,
		s.promptTokensDesc, s.generationTokensDesc, s.loraDesc} {
		ch <- d
	}
	for _, d := range s.histDesc {
		ch <- d
	}
}

// Reading is one normalised quantity: OK is false when the engine does not
// report it, and then its series is absent (never zero).
type Reading struct {
	Value float64
	OK    bool
}

// Unknown is the engine of a target recognised neither from its metric
// names nor from its info endpoints: it has only infer_server_up and the
// scrape series.
const Unknown = engineUnknown

// Info is the latest finished background scrape of one target, in the
// normalised schema: what Collect renders as infer_server_*.
type Info struct {
	// Target is the target's name, the target label.
	Target string
	// Engine is the configured or detected engine, the engine label;
	// Unknown when it was not recognised.
	Engine string
	// Model is the target's configured model, the model label.
	Model string
	// Up is whether the target's metrics (or, for an engine that serves
	// none, such as Ollama, its info endpoint) answered: infer_server_up.
	Up bool
	// At is when the scrape finished; Duration is how long it took, info
	// and slot endpoints included.
	At       time.Time
	Duration time.Duration

	// HasInfo is whether the engine's info endpoints have answered; then
	// Version, ServedModel and MaxContextLength are what they said
	// (infer_server_info). ServedModel is the configured model where the
	// endpoints name none; MaxContextLength is 0 when they report none.
	HasInfo          bool
	Version          string
	ServedModel      string
	MaxContextLength int

	// LoadedModels are the models the engine reports loaded in memory
	// (Ollama's /api/ps), at most MaxLoadedModels of them, by name; nil
	// for an engine that reports none.
	LoadedModels []LoadedModel

	// The engine's gauges (requests running and waiting, the KV cache
	// usage ratio 0..1) and counters (prefix-cache hits and queries in the
	// engine's unit, preemptions), as normalised by engines.go.
	Running, Waiting, KVCacheUsage                   Reading
	PrefixCacheHits, PrefixCacheQueries, Preemptions Reading
	// The engine's own token counters, every client's requests (not only
	// the probe's): prompt tokens processed and output tokens generated.
	PromptTokensTotal, GenerationTokensTotal Reading

	// LoRARunning and LoRAWaiting are the LoRA adapters with requests
	// running and waiting (vLLM's lora_requests_info); MaxLoRA the
	// adapters one batch may hold, 0 when the engine reports none.
	LoRARunning, LoRAWaiting Reading
	MaxLoRA                  int

	// KVCache is the engine's KV cache as it describes it (vLLM's
	// cache_config_info): zero where it describes none.
	KVCache KVCache

	// The engine's per-request histograms, its buckets passed through
	// (engines.go, histogram.go): its own TTFT, queue, prefill and decode
	// times in seconds, prompt and generated lengths in tokens.
	TTFT, QueueTime, PrefillTime, DecodeTime Histogram
	PromptTokens, GenerationTokens           Histogram
	// Finished is the engine's count of finished requests by normalised
	// reason, indexed as Reasons(); a reason the engine did not report is
	// not OK.
	Finished [numReasons]Reading
}

// LoadedModel is one model an engine reports loaded: Ollama's /api/ps
// entry.
type LoadedModel struct {
	Name string
	// Bytes is the memory it takes in all (size), VRAMBytes the part of
	// it in GPU memory (size_vram): 0 for a model on the CPU.
	Bytes, VRAMBytes int64
}

// MaxLoadedModels bounds Info.LoadedModels, and so the series of
// infer_server_loaded_model_bytes a target has: an Ollama keeps a few
// models loaded (OLLAMA_MAX_LOADED_MODELS, 3 per GPU by default), and a
// server that lists more is not to be believed past this many.
const MaxLoadedModels = 64

// export is the snapshot's public form.
func (snap *serverSnapshot) export() Info {
	r := func(q quantity) Reading { return Reading{Value: snap.values.v[q], OK: snap.values.has[q]} }
	i := Info{
		Target: snap.target, Engine: snap.engine, Model: snap.model, Up: snap.up,
		At: snap.at, Duration: snap.duration,
		Running: r(qRunning), Waiting: r(qWaiting), KVCacheUsage: r(qKVUsage),
		PrefixCacheHits: r(qPrefixHits), PrefixCacheQueries: r(qPrefixQueries), Preemptions: r(qPreemptions),
		PromptTokensTotal: r(qPromptTokens), GenerationTokensTotal: r(qGenerationTokens),
		LoRARunning: Reading{Value: float64(snap.values.loraRunning), OK: snap.values.hasLoRA},
		LoRAWaiting: Reading{Value: float64(snap.values.loraWaiting), OK: snap.values.hasLoRA},
		MaxLoRA:     snap.values.maxLoRA, KVCache: snap.values.kvCache,
		TTFT: snap.values.hist[hTTFT].clone(), QueueTime: snap.values.hist[hQueueTime].clone(),
		PrefillTime: snap.values.hist[hPrefillTime].clone(), DecodeTime: snap.values.hist[hDecodeTime].clone(),
		PromptTokens: snap.values.hist[hPromptTokens].clone(), GenerationTokens: snap.values.hist[hGenerationTokens].clone(),
	}
	for j := range reasons {
		i.Finished[j] = Reading{Value: snap.values.finished[j], OK: snap.values.hasFinished[j]}
	}
	if snap.info != nil {
		i.HasInfo, i.Version, i.ServedModel = true, snap.info.version, snap.info.model
		i.MaxContextLength = max(snap.info.maxContext, 0)
		i.LoadedModels = snap.info.loaded
	}
	return i
}

// histograms lists the snapshot's histograms by histQuantity.
func (i *Info) histograms() [numHistQuantities]Histogram {
	return [numHistQuantities]Histogram{hTTFT: i.TTFT, hQueueTime: i.QueueTime, hPrefillTime: i.PrefillTime,
		hDecodeTime: i.DecodeTime, hPromptTokens: i.PromptTokens, hGenerationTokens: i.GenerationTokens}
}

// constHistogram renders h as a classic histogram with the engine's bounds.
func constHistogram(desc *prometheus.Desc, h Histogram, lv []string) prometheus.Metric {
	buckets := make(map[float64]uint64, len(h.Buckets))
	for _, b := range h.Buckets {
		buckets[b.UpperBound] = b.Count
	}
	return prometheus.MustNewConstHistogram(desc, h.Count, h.Sum, buckets, lv...)
}

// Snapshot returns the latest finished scrape of the named target; false
// when the target is not scraped or its first scrape has not finished.
func (s *Scraper) Snapshot(target string) (Info, bool) {
	s.mu.Lock()
	sc := s.scrapers[target]
	s.mu.Unlock()
	if sc == nil {
		return Info{}, false
	}
	snap := sc.snap.Load()
	if snap == nil {
		return Info{}, false
	}
	return snap.export(), true
}

// Snapshots returns the latest finished scrape of every target that has
// one, sorted by target name.
func (s *Scraper) Snapshots() []Info {
	s.mu.Lock()
	out := make([]Info, 0, len(s.scrapers))
	for _, sc := range s.scrapers {
		if snap := sc.snap.Load(); snap != nil {
			out = append(out, snap.export())
		}
	}
	s.mu.Unlock()
	slices.SortFunc(out, func(a, b Info) int { return strings.Compare(a.Target, b.Target) })
	return out
}

// Collect serves the latest background scrape of every target: it renders
// Snapshots.
func (s *Scraper) Collect(ch chan<- prometheus.Metric) {
	now := s.now()
	for _, i := range s.Snapshots() {
		lv := []string{i.Target, i.Engine, i.Model}
		up := 0.0
		if i.Up {
			up = 1
		}
		ch <- prometheus.MustNewConstMetric(s.upDesc, prometheus.GaugeValue, up, lv...)
		ch <- prometheus.MustNewConstMetric(s.durationDesc, prometheus.GaugeValue, i.Duration.Seconds(), i.Target)
		ch <- prometheus.MustNewConstMetric(s.ageDesc, prometheus.GaugeValue, now.Sub(i.At).Seconds(), i.Target)
		for _, q := range []struct {
			r    Reading
			desc *prometheus.Desc
			typ  prometheus.ValueType
		}{
			{i.Running, s.runningDesc, prometheus.GaugeValue},
			{i.Waiting, s.waitingDesc, prometheus.GaugeValue},
			{i.KVCacheUsage, s.kvDesc, prometheus.GaugeValue},
			{i.PrefixCacheHits, s.hitsDesc, prometheus.CounterValue},
			{i.PrefixCacheQueries, s.queriesDesc, prometheus.CounterValue},
			{i.Preemptions, s.preemptDesc, prometheus.CounterValue},
			{i.PromptTokensTotal, s.promptTokensDesc, prometheus.CounterValue},
			{i.GenerationTokensTotal, s.generationTokensDesc, prometheus.CounterValue},
		} {
			if q.r.OK {
				ch <- prometheus.MustNewConstMetric(q.desc, q.typ, q.r.Value, lv...)
			}
		}
		for h, hv := range i.histograms() {
			if hv.OK {
				ch <- constHistogram(s.histDesc[h], hv, lv)
			}
		}
		for j, r := range i.Finished {
			if r.OK {
				ch <- prometheus.MustNewConstMetric(s.finishedDesc, prometheus.CounterValue, r.Value, i.Target, i.Engine, i.Model, reasons[j])
			}
		}
		if i.LoRARunning.OK {
			ch <- prometheus.MustNewConstMetric(s.loraDesc, prometheus.GaugeValue, i.LoRARunning.Value, i.Target, i.Engine, i.Model, "running")
		}
		if i.LoRAWaiting.OK {
			ch <- prometheus.MustNewConstMetric(s.loraDesc, prometheus.GaugeValue, i.LoRAWaiting.Value, i.Target, i.Engine, i.Model, "waiting")
		}
		if i.HasInfo {
			ctxLen, maxLoRA := "", ""
			if i.MaxContextLength > 0 {
				ctxLen = strconv.Itoa(i.MaxContextLength)
			}
			if i.MaxLoRA > 0 {
				maxLoRA = strconv.Itoa(i.MaxLoRA)
			}
			ch <- prometheus.MustNewConstMetric(s.infoDesc, prometheus.GaugeValue, 1, i.Target, i.Engine, i.Version, i.ServedModel, ctxLen, maxLoRA)
		}
		for _, m := range i.LoadedModels {
			ch <- prometheus.MustNewConstMetric(s.loadedDesc, prometheus.GaugeValue, float64(m.Bytes), i.Target, i.Engine, m.Name, "total")
			ch <- prometheus.MustNewConstMetric(s.loadedDesc, prometheus.GaugeValue, float64(m.VRAMBytes), i.Target, i.Engine, m.Name, "vram")
		}
	}
}

// ApplyConfig starts a background scraper for every target whose metrics
// engine is not "none", keeps those whose settings did not change, and
// stops the others. ctx bounds the scrapers, as Close does.
func (s *Scraper) ApplyConfig(ctx context.Context, c *config.Config) error {
	want := map[string]serverTarget{}
	for i := range c.Targets {
		t := &c.Targets[i]
		if t.Metrics.Engine == config.ServerEngineNone {
			continue
		}
		st := serverTarget{
			name: t.Name, model: t.Model, targetURL: t.URL, root: t.Root(), metricsURL: t.Metrics.URL,
			urlDefaulted: t.Metrics.URLDefaulted(), interval: t.Metrics.Interval, timeout: t.Metrics.Timeout,
			engine: t.Metrics.Engine, token: string(t.BearerToken), headers: fmt.Sprint(t.Headers),
		}
		if st.interval <= 0 {
			st.interval = config.DefaultServerMetricsInterval
		}
		// A configuration's timeout is at most its interval (the config
		// refuses more). The bench's prefix-cache watch asks for more: a
		// 100 ms poll whose scrape may take a second on a loaded machine
		// (a race-detector run beside busy loops timed out every scrape
		// of a simulator at 100 ms); such scrapes run back to back.
		if st.timeout <= 0 {
			st.timeout = min(config.DefaultServerMetricsTimeout, st.interval)
		}
		if st.metricsURL == "" {
			return fmt.Errorf("target %q: no metrics URL", t.Name)
		}
		want[t.Name] = st
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	for name, sc := range s.scrapers {
		if st, ok := want[name]; !ok || st != sc.t {
			sc.stop()
			delete(s.scrapers, name)
		}
	}
	for name, st := range want {
		if _, ok := s.scrapers[name]; ok {
			continue
		}
		t, _ := c.Target(name)
		sc := &targetScraper{t: st, headers: t.Headers, parent: s, logger: s.logger.With("target", name)}
		sc.start(ctx)
		s.scrapers[name] = sc
	}
	return nil
}

// Apply is ApplyConfig, so that the Scraper can sit behind the config
// reloader as an Applier.
func (s *Scraper) Apply(ctx context.Context, c *config.Config) error {
	return s.ApplyConfig(ctx, c)
}

// Close stops every scraper and waits for them.
func (s *Scraper) Close() {
	s.mu.Lock()
	defer s.mu.Unlock()
	for name, sc := range s.scrapers {
		sc.stop()
		delete(s.scrapers, name)
	}
	s.client.CloseIdleConnections()
}

// serverTarget is what a scraper needs of a target.
type serverTarget struct {
	name, model, targetURL, metricsURL string
	root                               string // the target's server root (config.Target.Root)
	urlDefaulted                       bool
	interval, timeout                  time.Duration
	engine                             string // auto or an engine name
	token, headers                     string // headers: the map printed, sorted, to compare
}

// serverSnapshot is one finished background scrape.
type serverSnapshot struct {
	target, engine, model string
	up                    bool
	values                values
	info                  *serverInfo
	at                    time.Time
	duration              time.Duration
}

// serverInfo is what the engine's info endpoints say.
type serverInfo struct {
	version, model string
	maxContext     int
	loaded         []LoadedModel // sorted by name, unique, at most MaxLoadedModels
}

type targetScraper struct {
	t       serverTarget
	headers map[string]string
	parent  *Scraper
	logger  *slog.Logger
	snap    atomic.Pointer[serverSnapshot]

	cancel context.CancelFunc
	done   chan struct{}

	// Owned by the scraper goroutine.
	metricsURL    string // the URL that answered (a defaulted URL may move to NIM's path)
	engine        string // detected or configured
	info          *serverInfo
	infoAge       int // scrapes since info was read
	loggedUnknown bool
	// warnedAbsent: the configured engine's families were absent from
	// the last successful scrape and that was logged; cleared when they
	// come back, so each change into absence is told once.
	warnedAbsent bool
	// warnedFailed: a failed scrape was logged; cleared by a scrape
	// that succeeds.
	warnedFailed bool
	// warnedLong: a label value of the server's was cut (capLabel), by
	// label; warnedLoaded: loaded models were left out. Each once.
	warnedLong   map[string]bool
	warnedLoaded bool
}

// infoRefresh is how many scrapes an info reading is reused for: versions
// and context lengths change only when the server restarts.
const infoRefresh = 20

// maxMetricsBytes bounds a metrics body; parse.go bounds what is kept of
// it.
const maxMetricsBytes = 16 << 20

func (sc *targetScraper) start(ctx context.Context) {
	ctx, sc.cancel = context.WithCancel(ctx)
	sc.done = make(chan struct{})
	sc.metricsURL = sc.t.metricsURL
	go func() {
		defer close(sc.done)
		for {
			next := time.Now().Add(sc.t.interval)
			r := sc.scrape(ctx)
			if !sc.waitNext(ctx, next, r) {
				return
			}
		}
	}()
}

func (sc *targetScraper) stop() {
	sc.cancel()
	<-sc.done
}

// scrape reads the metrics (and, when due, the info endpoints) and the
// readiness once, and reports the poll; it returns the readiness.
func (sc *targetScraper) scrape(ctx context.Context) Readiness {
	start := sc.parent.now()
	ctx, cancel := context.WithTimeout(ctx, sc.t.timeout)
	defer cancel()

	pm, status, err := sc.readMetrics(ctx)
	if err != nil && status == http.StatusNotFound && sc.t.urlDefaulted && sc.metricsURL == sc.t.metricsURL {
		// NIM serves its metrics under /v1.
		alt := strings.TrimSuffix(sc.t.metricsURL, "/metrics") + "/v1/metrics"
		if p, _, err2 := sc.readURL(ctx, alt); err2 == nil {
			pm, err, sc.metricsURL = p, nil, alt
		}
	}
	if pm == nil {
		pm = &parsedMetrics{}
	}
	fams := pm.fams
	if ctx.Err() != nil && errors.Is(err, context.Canceled) {
		return Unreachable // stopped: nothing is reported
	}
	engine := sc.t.engine
	configured := engine != config.ServerEngineAuto
	detectedFrom := "metric names"
	if !configured {
		engine = pm.engine // detectEngine over every family of the body
		if engine == "" && (sc.engine == "" || sc.engine == engineUnknown || sc.infoAge >= infoRefresh) {
			engine, detectedFrom = sc.probeEngine(ctx), "info endpoints"
		} else if engine == "" {
			engine = sc.engine // detected earlier from the info endpoints
		}
	}
	if engine == "" {
		engine = engineUnknown
	}
	if engine != sc.engine {
		sc.info, sc.infoAge = nil, 0
		switch {
		case engine == engineUnknown:
			if !sc.loggedUnknown {
				sc.logger.Info("server metrics: engine not recognised from its metric names or info endpoints; only infer_server_up is exposed for this target (set metrics.engine to choose one)",
					"url", sc.metricsURL, "err", err)
				sc.loggedUnknown = true
			}
		case configured:
			sc.logger.Info("server metrics: engine configured", "engine", engine, "url", sc.metricsURL)
		default:
			sc.logger.Info("server metrics: engine detected", "engine", engine, "from", detectedFrom, "url", sc.metricsURL)
		}
		sc.engine = engine
	}
	if configured && err == nil {
		sc.checkFamilies(engine, pm)
	}
	up := err == nil
	var vs values
	if up {
		vs = normalize(engine, fams, sc.t.model)
	}
	if engine == engineLlamaCpp && (!vs.has[qKVUsage] || !vs.has[qRunning]) {
		sc.readSlots(ctx, &vs)
	}
	// Ollama serves no /metrics: it is up when its info endpoint answers,
	// so that endpoint is read on every scrape.
	infoAnswered := false
	var infoErr error
	if engine != engineUnknown && (sc.info == nil || sc.infoAge >= infoRefresh || engine == engineOllama) {
		var info *serverInfo
		var ok bool
		if info, ok, infoErr = sc.readInfo(ctx, engine); ok {
			sc.info, sc.infoAge, infoAnswered = info, 0, true
		}
	}
	sc.infoAge++
	failure := err
	if engine == engineOllama {
		// Ollama's up is both answers: an /api/ps that fails (an error
		// page, the wrong types, a body over 1 MiB) would otherwise leave
		// infer_server_up at 1 with its loaded models silently gone.
		up, failure = infoAnswered && infoErr == nil, infoErr
		if !up && failure == nil {
			failure = errors.New("no answer from /api/version")
		}
	}
	if failure != nil {
		sc.logger.Debug("server metrics scrape failed", "url", sc.metricsURL, "err", failure)
	}
	if ctx.Err() == nil || !errors.Is(ctx.Err(), context.Canceled) {
		sc.warnFailed(failure)
	}
	readiness := sc.readiness(ctx, engine, status, err)
	if ctx.Err() != nil && errors.Is(ctx.Err(), context.Canceled) {
		return readiness // stopped while asking: nothing is reported
	}
	end := sc.parent.now()
	sc.snap.Store(&serverSnapshot{target: sc.t.name, engine: engine, model: sc.t.model, up: up, values: vs,
		info: sc.info, at: end, duration: end.Sub(start)})
	sc.report(Poll{Target: sc.t.name, At: end, Readiness: readiness, Full: true, ProcessStart: processStart(fams)})
	return readiness
}

// checkFamilies warns when a successful scrape carries none of the
// configured engine's metric families: the target would otherwise show only
// infer_server_up 1, silently. It warns once, and again only after the
// families have been seen in between.
func (sc *targetScraper) checkFamilies(engine string, pm *parsedMetrics) {
	expected := engineFamilies(engine)
	if len(expected) == 0 {
		return // an engine that serves no metrics (Ollama)
	}
	for _, f := range expected {
		if pm.fams[f] != nil {
			sc.warnedAbsent = false
			return
		}
	}
	if sc.warnedAbsent {
		return
	}
	sc.warnedAbsent = true
	// Only the mapped families are kept (parse.go), so the scrape's size
	// is told in samples, counted as they were read.
	sc.logger.Warn("server metrics: engine configured but none of its metric families are in the scrape; only infer_server_up is exposed for this target (check metrics.url or metrics.engine)",
		"engine", engine, "url", sc.metricsURL, "expected", strings.Join(expected, ","), "scraped_samples", pm.samples)
}

// warnFailed tells a failed read (infer_server_up 0) at warning level with
// its reason: the server down, an error status, a body refused for its
// shape (a family over maxSeriesPerFamily, duplicate series, the mapped
// families over maxKeptBytes: parse.go), a syntax error, and for Ollama its
// /api/version or /api/ps. Once per change of state, not per scrape: when
// the reads start failing, and (at info level) when they recover.
func (sc *targetScraper) warnFailed(err error) {
	switch {
	case err == nil && sc.warnedFailed:
		sc.warnedFailed = false
		sc.logger.Info("server metrics: scrape recovered", "url", sc.metricsURL)
	case err != nil && !sc.warnedFailed:
		sc.warnedFailed = true
		msg := "server metrics: scrape failed; infer_server_up is 0 for this target"
		if errors.Is(err, errRefused) {
			msg = "server metrics: scrape refused; infer_server_up is 0 for this target"
		}
		sc.logger.Warn(msg, "url", sc.metricsURL, "err", err)
	}
}

func (sc *targetScraper) readMetrics(ctx context.Context) (*parsedMetrics, int, error) {
	return sc.readURL(ctx, sc.metricsURL)
}

// readURL reads and parses a text-format metrics body, keeping only the
// families the mapping reads (parse.go).
func (sc *targetScraper) readURL(ctx context.Context, u string) (*parsedMetrics, int, error) {
	resp, err := sc.get(ctx, u, "text/plain;version=0.0.4;q=1,*/*;q=0.1")
	if err != nil {
		return nil, 0, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		io.Copy(io.Discard, io.LimitReader(resp.Body, 4096))
		return nil, resp.StatusCode, fmt.Errorf("GET %s: HTTP %d", u, resp.StatusCode)
	}
	pm, err := parseMetricsBody(ctx, resp.Body)
	if err != nil {
		return nil, resp.StatusCode, fmt.Errorf("reading %s: %w", u, err)
	}
	return pm, resp.StatusCode, nil
}

// parseMetrics parses a whole body as a scrape does (parseMetricsBody),
// returning the kept families.
func parseMetrics(body []byte) (map[string]*dto.MetricFamily, error) {
	pm, err := parseMetricsBody(context.Background(), bytes.NewReader(body))
	if err != nil {
		return nil, err
	}
	return pm.fams, nil
}

// get sends a GET with the target's headers, and its bearer token when the
// URL is on the target's own host (a token is never sent elsewhere).
func (sc *targetScraper) get(ctx context.Context, u, accept string) (*http.Response, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return nil, err
	}
	req.Header.Set("Accept", accept)
	req.Header.Set("User-Agent", "infer_exporter")
	// The target's headers may carry credentials (an X-Api-Key), like its
	// token: both go only to the target's own host.
	if sameHost(u, sc.t.targetURL) {
		config.SetTargetHeaders(req, sc.headers, sc.t.token)
	}
	return sc.parent.client.Do(req)
}

func sameHost(a, b string) bool {
	ua, err1 := url.Parse(a)
	ub, err2 := url.Parse(b)
	return err1 == nil && err2 == nil && ua.Host == ub.Host && ua.Scheme == ub.Scheme
}

// root is the target's server root, for the info endpoints.
func (sc *targetScraper) root() string { return sc.t.root }

// maxInfoBytes bounds an info endpoint's JSON document.
const maxInfoBytes = 1 << 20

// getJSON reads a small JSON document (at most maxInfoBytes) from the
// server root; the error says why it could not (the status, the content
// type, the size, the decoder's complaint), for the log.
func (sc *targetScraper) getJSON(ctx context.Context, path string, v any) error {
	u := sc.root() + path
	resp, err := sc.get(ctx, u, "application/json")
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		io.Copy(io.Discard, io.LimitReader(resp.Body, 4096))
		return fmt.Errorf("GET %s: HTTP %d", u, resp.StatusCode)
	}
	ct := resp.Header.Get("Content-Type")
	if mt, _, _ := mime.ParseMediaType(ct); mt != "application/json" && mt != "" {
		io.Copy(io.Discard, io.LimitReader(resp.Body, 4096))
		return fmt.Errorf("GET %s: Content-Type %q, want application/json", u, textcut.Cut(ct, 64))
	}
	body, err := io.ReadAll(io.LimitReader(resp.Body, maxInfoBytes+1))
	if err != nil {
		return fmt.Errorf("GET %s: %w", u, err)
	}
	if len(body) > maxInfoBytes {
		return fmt.Errorf("GET %s: body larger than %d bytes", u, maxInfoBytes)
	}
	if err := json.NewDecoder(bytes.NewReader(body)).Decode(v); err != nil {
		return fmt.Errorf("GET %s: %w", u, err)
	}
	return nil
}

// probeEngine recognises an engine from its info endpoints, for a target
// whose metrics did not name it (Ollama has none; a server may have metrics
// disabled). Each probe is a GET that the other engines answer 404.
func (sc *targetScraper) probeEngine(ctx context.Context) string {
	var ollama struct {
		Version *string `json:"version"`
	}
	if sc.getJSON(ctx, "/api/version", &ollama) == nil && ollama.Version != nil {
		return engineOllama
	}
	var triton struct {
		Name string `json:"name"`
	}
	if sc.getJSON(ctx, "/v2", &triton) == nil && triton.Name == "triton" {
		return engineTriton
	}
	var tgi struct {
		ModelID *string `json:"model_id"`
	}
	if sc.getJSON(ctx, "/info", &tgi) == nil && tgi.ModelID != nil {
		return engineTGI
	}
	var props struct {
		Settings map[string]any `json:"default_generation_settings"`
	}
	if sc.getJSON(ctx, "/props", &props) == nil && props.Settings != nil {
		return engineLlamaCpp
	}
	var sgl struct {
		Version *string `json:"version"`
	}
	if sc.getJSON(ctx, "/get_server_info", &sgl) == nil && sgl.Version != nil {
		return engineSGLang
	}
	return ""
}

// openAIModels reads /v1/models: the served model (the target's, when
// listed, else the first) and its max_model_len where the server gives it.
func (sc *targetScraper) openAIModels(ctx context.Context) (string, int, bool) {
	var list struct {
		Data []struct {
			ID          string `json:"id"`
			MaxModelLen int    `json:"max_model_len"`
			Meta        struct {
				NCtxTrain int `json:"n_ctx_train"`
			} `json:"meta"`
		} `json:"data"`
	}
	if sc.getJSON(ctx, "/v1/models", &list) != nil || len(list.Data) == 0 {
		return "", 0, false
	}
	pick := list.Data[0]
	for _, d := range list.Data {
		if d.ID == sc.t.model {
			pick = d
		}
	}
	return pick.ID, pick.MaxModelLen, true
}

// readInfo reads the engine's version, served model and context length.
// For Ollama, which serves no metrics, its answers are its up: the error
// says why /api/version or /api/ps could not be read.
func (sc *targetScraper) readInfo(ctx context.Context, engine string) (*serverInfo, bool, error) {
	info := &serverInfo{model: sc.t.model}
	ok := false
	var failed error
	switch engine {
	case engineVLLM, engineNIM, engineTRTLLMServe:
		ok = sc.readVLLMInfo(ctx, engine, info)
	case engineSGLang:
		ok = sc.readSGLangInfo(ctx, info)
	case engineTGI:
		ok = sc.readTGIInfo(ctx, info)
	case engineLlamaCpp:
		ok = sc.readLlamaCppInfo(ctx, info)
	case engineOllama:
		// The info stands on /api/version; failed says whether /api/ps
		// answered too, which Ollama's up needs (scrape).
		ok, failed = sc.readOllamaInfo(ctx, info)
	case engineTriton:
		ok = sc.readTritonInfo(ctx, info)
	}
	info.version = sc.capLabel("version", info.version)
	info.model = sc.capLabel("model", info.model)
	return info, ok, failed
}

// readVLLMInfo reads the info of vLLM and of the servers that answer as it
// does (NIM, TensorRT-LLM's trtllm-serve): the version, and the served
// model and context length from /v1/models. It reports whether either
// answered.
func (sc *targetScraper) readVLLMInfo(ctx context.Context, engine string, info *serverInfo) bool {
	ok := false
	var v struct {
		Version string `json:"version"`
		Release string `json:"release"`
	}
	path := "/version"
	if engine == engineNIM {
		path = "/v1/version"
	}
	if sc.getJSON(ctx, path, &v) == nil {
		info.version, ok = v.Version, true
		if info.version == "" {
			info.version = v.Release
		}
	}
	if m, n, found := sc.openAIModels(ctx); found {
		info.model, info.maxContext, ok = m, n, true
	}
	return ok
}

// readSGLangInfo reads SGLang's version and context length, and its served
// model from /v1/models. It reports whether either answered.
func (sc *targetScraper) readSGLangInfo(ctx context.Context, info *serverInfo) bool {
	ok := false
	var v struct {
		Version       string `json:"version"`
		ContextLength int    `json:"context_length"`
	}
	if sc.getJSON(ctx, "/get_server_info", &v) == nil {
		info.version, info.maxContext, ok = v.Version, v.ContextLength, true
	}
	if m, n, found := sc.openAIModels(ctx); found {
		info.model, ok = m, true
		if info.maxContext == 0 {
			info.maxContext = n
		}
	}
	return ok
}

// readTGIInfo reads TGI's /info. It reports whether it answered.
func (sc *targetScraper) readTGIInfo(ctx context.Context, info *serverInfo) bool {
	var v struct {
		Version        string `json:"version"`
		ModelID        string `json:"model_id"`
		MaxTotalTokens int    `json:"max_total_tokens"`
	}
	if sc.getJSON(ctx, "/info", &v) != nil {
		return false
	}
	info.version, info.model, info.maxContext = v.Version, v.ModelID, v.MaxTotalTokens
	return true
}

// readLlamaCppInfo reads llama.cpp's /props, and its served model from
// /v1/models. It reports whether either answered.
func (sc *targetScraper) readLlamaCppInfo(ctx context.Context, info *serverInfo) bool {
	ok := false
	var v struct {
		BuildInfo string `json:"build_info"`
		ModelPath string `json:"model_path"`
		NCtx      int    `json:"n_ctx"`
		Settings  struct {
			NCtx int `json:"n_ctx"`
		} `json:"default_generation_settings"`
	}
	if sc.getJSON(ctx, "/props", &v) == nil {
		info.version, info.model, ok = v.BuildInfo, v.ModelPath, true
		info.maxContext = v.Settings.NCtx
		if info.maxContext == 0 {
			info.maxContext = v.NCtx
		}
	}
	if m, _, found := sc.openAIModels(ctx); found {
		info.model, ok = m, true
	}
	return ok
}

// ollamaModel is one model of Ollama's /api/ps.
type ollamaModel struct {
	Name          string `json:"name"`
	Size          int64  `json:"size"`
	SizeVRAM      int64  `json:"size_vram"`
	ContextLength int    `json:"context_length"`
}

// readOllamaInfo reads Ollama's /api/version, then its loaded models from
// /api/ps. It reports whether /api/version answered, and why either could
// not be read.
func (sc *targetScraper) readOllamaInfo(ctx context.Context, info *serverInfo) (bool, error) {
	var v struct {
		Version string `json:"version"`
	}
	if err := sc.getJSON(ctx, "/api/version", &v); err != nil {
		return false, err
	}
	info.version = v.Version
	var ps struct {
		Models []ollamaModel `json:"models"`
	}
	if err := sc.getJSON(ctx, "/api/ps", &ps); err != nil {
		return true, err
	}
	sc.setLoaded(info, ps.Models)
	return true, nil
}

// setLoaded sets info's loaded models from Ollama's list, and its served
// model and context length from the target's model (or the only one).
func (sc *targetScraper) setLoaded(info *serverInfo, models []ollamaModel) {
	info.loaded = []LoadedModel{}
	nameBytes := 0
	for _, m := range models {
		if m.Name == sc.t.model || m.Name == sc.t.model+":latest" || len(models) == 1 {
			info.model, info.maxContext = m.Name, m.ContextLength
		}
		// The name is cut before it is compared, so that two
		// long names cut alike make one series, not a duplicate.
		name := sc.capLabel("loaded_model", m.Name)
		// One series per name: a name listed twice is counted once.
		if slices.ContainsFunc(info.loaded, func(l LoadedModel) bool { return l.Name == name }) {
			continue
		}
		if len(info.loaded) >= MaxLoadedModels || nameBytes+len(name) > MaxLoadedNameBytes {
			sc.warnOnce(&sc.warnedLoaded, "server info: more loaded models than are exposed; the rest are left out",
				"listed", len(models), "max_models", MaxLoadedModels, "max_name_bytes", MaxLoadedNameBytes)
			continue
		}
		nameBytes += len(name)
		info.loaded = append(info.loaded, LoadedModel{Name: name, Bytes: max(m.Size, 0), VRAMBytes: max(m.SizeVRAM, 0)})
	}
	slices.SortFunc(info.loaded, func(a, b LoadedModel) int { return strings.Compare(a.Name, b.Name) })
}

// readTritonInfo reads Triton's /v2. It reports whether it answered.
func (sc *targetScraper) readTritonInfo(ctx context.Context, info *serverInfo) bool {
	var v struct {
		Name    string `json:"name"`
		Version string `json:"version"`
	}
	if sc.getJSON(ctx, "/v2", &v) != nil {
		return false
	}
	info.version = v.Version
	return true
}

// MaxLabelBytes bounds a label value that a server gives (its version,
// served model, llama.cpp's build_info and model_path, a loaded model's
// name): as long as a configured model name may be
// (config.MaxModelBytes). Without it, a server's 1 MB version string would
// be a 1 MB infer_server_info line on every scrape. A longer value is cut,
// ending in textcut.Ellipsis, within the bound.
const MaxLabelBytes = config.MaxModelBytes

// MaxLoadedNameBytes bounds the loaded models' names of one target in
// all: with two series a model, 64 models of 256-byte names would be some
// 40 KB of /metrics a target; real names (llama3.2:3b-instruct-q4_K_M)
// are tens of bytes, so this still holds dozens of them.
const MaxLoadedNameBytes = 1024

// capLabel bounds a label value from the server to MaxLabelBytes, warning
// once per target and label that it was cut.
func (sc *targetScraper) capLabel(label, v string) string {
	if len(v) <= MaxLabelBytes {
		return v
	}
	if sc.warnedLong == nil {
		sc.warnedLong = map[string]bool{}
	}
	if !sc.warnedLong[label] {
		sc.warnedLong[label] = true
		sc.logger.Warn("server info: a label value longer than the bound was cut", "label", label, "bytes", len(v), "max_bytes", MaxLabelBytes,
			"value", textcut.Cut(v, 64))
	}
	return textcut.Cut(v, MaxLabelBytes-len(textcut.Ellipsis))
}

// warnOnce logs a warning the first time *flag is unset.
func (sc *targetScraper) warnOnce(flag *bool, msg string, args ...any) {
	if !*flag {
		*flag = true
		sc.logger.Warn(msg, args...)
	}
}

// readSlots fills what llama.cpp's metrics lack from GET /slots: the running
// count (slots that are processing) and, when every slot reports its prompt
// length, the KV usage as tokens held by processing slots (prompt plus
// decoded) over the slots' total context, the way vLLM counts only blocks
// referenced by running sequences.
func (sc *targetScraper) readSlots(ctx context.Context, vs *values) {
	var slots []struct {
		NCtx          int             `json:"n_ctx"`
		IsProcessing  bool            `json:"is_processing"`
		NPromptTokens *int            `json:"n_prompt_tokens"`
		NextToken     json.RawMessage `json:"next_token"`
	}
	if sc.getJSON(ctx, "/slots", &slots) != nil || len(slots) == 0 {
		return
	}
	running, used, total := 0, 0, 0
	complete := true
	for _, s := range slots {
		total += s.NCtx
		if !s.IsProcessing {
			continue
		}
		running++
		if s.NPromptTokens == nil {
			complete = false
			continue
		}
		used += *s.NPromptTokens + decoded(s.NextToken)
	}
	if !vs.has[qRunning] {
		vs.set(qRunning, float64(running))
	}
	if !vs.has[qKVUsage] && complete && total > 0 {
		vs.set(qKVUsage, float64(used)/float64(total))
	}
}

// decoded reads next_token.n_decoded, an object in older builds and an array
// of one object in newer ones.
func decoded(raw json.RawMessage) int {
	type nt struct {
		NDecoded int `json:"n_decoded"`
	}
	var one nt
	if json.Unmarshal(raw, &one) == nil {
		return one.NDecoded
	}
	var many []nt
	if json.Unmarshal(raw, &many) == nil && len(many) > 0 {
		return many[0].NDecoded
	}
	return 0
}
