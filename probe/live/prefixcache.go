package live

import (
	"context"
	"log/slog"
	"sort"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/infer-exporter/infer_exporter/internal/config"
	"github.com/infer-exporter/infer_exporter/probe/observation"
	"github.com/infer-exporter/infer_exporter/probe/prompt"
	"github.com/infer-exporter/infer_exporter/probe/workload"
)

// A workload with a declared cache-hit rate (prompt.cache_hit_rate) is seen
// three ways. The client's: each answer's usage cached_tokens, counted in
// infer_probe_cached_prompt_tokens_total beside prompt_tokens_total
// (metrics.go). The server's: its prefix-cache hits over its queries since
// the workload started, from the engine scraper's counters
// (infer_probe_server_prefix_cache_hit_ratio). And the best the workload
// allows: of the prompt tokens sent, those whose prefix an earlier prompt
// sent, the hits of a cache that holds the whole pool
// (infer_probe_prefix_cache_best_hit_ratio). The last two are ratios over
// the same span, the workload's, so that an SRE reads them side by side;
// a windowed rate is PromQL's over the counters (docs/kinds.md).

// ServerPrefixCache is a target's prefix-cache counters as its engine
// scraper last read them (infer_server_prefix_cache_hits_total and
// queries_total), and when; ok is false where it has none.
type ServerPrefixCache func(target string) (hits, queries float64, at time.Time, ok bool)

// ServerKVCache is a target's KV cache as its engine describes it, in
// tokens and tokens per block (engine.Scraper.KVCache); ok is false where
// it describes none.
type ServerKVCache func(ctx context.Context, target string) (tokens, blockSize int, ok bool)

// serverKVCacheTimeout bounds the read of a target's KV cache at a
// workload's start: where the engine scraper has not described it yet,
// the read is a scrape of its own.
const serverKVCacheTimeout = 5 * time.Second

// sizedToServer is w with its prefix pool and block size, where the
// configuration leaves them unset, sized to its target's KV cache
// (config.Prompt.SizedToServer) when the server describes it, the
// documented defaults otherwise; it logs which, and the sizes. The sizes
// hold for the workload's run: a server that restarts with another cache
// is followed at the next reload.
func sizedToServer(ctx context.Context, t *config.Target, w *config.Workload, read ServerKVCache, logger *slog.Logger) *config.Workload {
	if w.Prompt.CacheHitRate <= 0 || (w.Prompt.PrefixPool > 0 && w.Prompt.BlockSize > 0) {
		return w
	}
	var tokens, blockSize int
	var ok bool
	if read != nil {
		rctx, cancel := context.WithTimeout(ctx, serverKVCacheTimeout)
		tokens, blockSize, ok = read(rctx, t.Name)
		cancel()
	}
	sized := *w
	from := "defaults"
	if ok {
		sized.Prompt = w.Prompt.SizedToServer(tokens, blockSize)
		from = "server kv cache"
	}
	if logger != nil {
		logger.Info("prefix pool sized", "workload", w.Name, "from", from, "prefix_pool", sized.Prompt.PrefixPoolOrDefault(),
			"block_size", sized.Prompt.BlockSizeOrDefault(), "server_kv_cache_tokens", tokens)
	}
	return &sized
}

// prefixCacheMetrics renders each tracked workload's server, best and
// eviction gauges when scraped.
type prefixCacheMetrics struct {
	server, best, eviction *prometheus.Desc

	mu        sync.Mutex
	workloads map[[3]string]*prefixTracker
}

func newPrefixCacheMetrics(reg prometheus.Registerer) *prefixCacheMetrics {
	d := func(name, help string) *prometheus.Desc {
		return prometheus.NewDesc(prometheus.BuildFQName(namespace, "", name), help, labels, nil)
	}
	m := &prefixCacheMetrics{
		server: d("server_prefix_cache_hit_ratio",
			"The target's prefix-cache hits over its queries since the workload started (every client's traffic on the target)."),
		best: d("prefix_cache_best_hit_ratio",
			"Hit ratio of a cache that holds the workload's prefix pool: prompt tokens whose prefix an earlier prompt sent, over those sent."),
		eviction: d("prefix_cache_eviction",
			"1 when the server's prefix-cache hit ratio is below half the best the workload allows (its cache does not keep the pool), else 0."),
		workloads: map[[3]string]*prefixTracker{},
	}
	reg.MustRegister(m)
	return m
}

func (m *prefixCacheMetrics) Describe(ch chan<- *prometheus.Desc) {
	ch <- m.server
	ch <- m.best
	ch <- m.eviction
}

func (m *prefixCacheMetrics) Collect(ch chan<- prometheus.Metric) {
	m.mu.Lock()
	trackers := make([]*prefixTracker, 0, len(m.workloads))
	for _, t := range m.workloads {
		trackers = append(trackers, t)
	}
	m.mu.Unlock()
	for _, t := range trackers {
		v := t.view()
		if v.hasBest {
			ch <- prometheus.MustNewConstMetric(m.best, prometheus.GaugeValue, v.best, t.lv...)
		}
		if v.hasServer {
			ch <- prometheus.MustNewConstMetric(m.server, prometheus.GaugeValue, v.server, t.lv...)
		}
		flag := 0.0
		if v.evicted {
			flag = 1
		}
		ch <- prometheus.MustNewConstMetric(m.eviction, prometheus.GaugeValue, flag, t.lv...)
	}
}

// track starts following workload w's prefix cache: its prompts go
// through the returned tracker's wrap, its requests' ends to the tracker
// (an Observer), and start begins its span. It replaces a tracker of the
// same workload (a reload's successor starts its own span).
func (m *prefixCacheMetrics) track(t *config.Target, w *config.Workload, server ServerPrefixCache) *prefixTracker {
	tr := &prefixTracker{lv: []string{t.Name, t.Model, w.Name}, target: t.Name, read: server,
		pool: w.Prompt.PrefixPoolOrDefault()}
	m.mu.Lock()
	m.workloads[[3]string{t.Name, t.Model, w.Name}] = tr
	m.mu.Unlock()
	return tr
}

func (m *prefixCacheMetrics) delete(match prometheus.Labels) {
	m.untrack(match["target"], match["model"], match["workload"])
}

// untrack ends a workload's ratios' series.
func (m *prefixCacheMetrics) untrack(target, model, workload string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	delete(m.workloads, [3]string{target, model, workload})
}

// prefixTracker is one workload's prompts sent and its server's counters
// at its start.
//
// A prompt is counted as sent when its request ends: the preparation draws
// prompts ahead of their instants, and those never sent (a drop, the end
// of the run) must not count. Requests end in about the order their
// prompts were drawn, so each end takes the oldest prompt drawn and not
// yet counted; the sums are exact once the requests in flight have ended.
type prefixTracker struct {
	lv     []string
	target string
	read   ServerPrefixCache
	pool   int

	mu sync.Mutex
	// drawn are the figures of the prompts drawn and not yet counted,
	// oldest first.
	drawn         []prefixFigures
	ledger        prompt.PrefixLedger // the prefixes sent, for the repeats
	sent, repeats int64               // prompt tokens sent, and those a full cache serves
	prompts       int
	// samples are the cumulative figures at each request's end, the
	// latest maxPrefixSamples, so that a server reading is compared
	// with the prompts sent by its instant.
	samples []prefixSample
	base    [2]float64 // hits, queries at the start
	hasBase bool
}

type prefixFigures struct {
	tokens int
	prompt prompt.Prompt // its prefix, for the ledger
}

type prefixSample struct {
	at            time.Time
	sent, repeats int64
	prompts       int
}

// Bounds of a tracker's memory: the samples kept, and the prompts drawn
// ahead (the look-ahead draws far fewer).
const (
	maxPrefixSamples = 4096
	maxPrefixDrawn   = 1 << 16
)

// start begins the span, of a workload whose pool has pool prefixes: the
// server's counters now are its base.
func (t *prefixTracker) start(pool int) {
	t.mu.Lock()
	t.pool = pool
	t.mu.Unlock()
	if t.read == nil {
		return
	}
	if h, q, _, ok := t.read(t.target); ok {
		t.mu.Lock()
		t.base, t.hasBase = [2]float64{h, q}, true
		t.mu.Unlock()
	}
}

// add records one prompt as drawn.
func (t *prefixTracker) add(p prompt.Prompt) {
	n := p.Tokens
	if n == 0 {
		n = p.InputTokens
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if len(t.drawn) == maxPrefixDrawn {
		t.drawn = t.drawn[1:]
	}
	// The text is not kept: the ledger needs the prefix's place and length.
	p.Text = ""
	t.drawn = append(t.drawn, prefixFigures{tokens: n, prompt: p})
}

// ended takes the oldest prompt drawn; sent counts it.
func (t *prefixTracker) ended(sent bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if len(t.drawn) == 0 {
		return
	}
	f := t.drawn[0]
	t.drawn = t.drawn[1:]
	if !sent {
		return
	}
	t.sent += int64(f.tokens)
	// Over what was sent: a prompt drawn and never sent (its arrival
	// dropped) left its prefix's next use the first.
	t.repeats += int64(t.ledger.Sent(f.prompt))
	t.prompts++
	if len(t.samples) == maxPrefixSamples {
		t.samples = append(t.samples[:0], t.samples[maxPrefixSamples/2:]...)
	}
	t.samples = append(t.samples, prefixSample{at: time.Now(), sent: t.sent, repeats: t.repeats, prompts: t.prompts})
}

// The tracker hears its workload's requests end (workload.Observer).
func (t *prefixTracker) Sent(*observation.Request)       {}
func (t *prefixTracker) FirstToken(*observation.Request) {}
func (t *prefixTracker) Token(*observation.Request)      {}
func (t *prefixTracker) Done(*observation.Request)       { t.ended(true) }
func (t *prefixTracker) Dropped(*observation.Request)    { t.ended(false) }

// at is the cumulative figures of the prompts sent by instant at.
func (t *prefixTracker) at(at time.Time) prefixSample {
	i := sort.Search(len(t.samples), func(i int) bool { return t.samples[i].at.After(at) })
	if i == 0 {
		return prefixSample{}
	}
	return t.samples[i-1]
}

// prefixView is what a scrape reports of a tracker.
type prefixView struct {
	best, server       float64
	hasBest, hasServer bool
	evicted            bool
}

func (t *prefixTracker) view() prefixView {
	var v prefixView
	var hits, queries float64
	var readAt time.Time
	var ok bool
	if t.read != nil {
		hits, queries, readAt, ok = t.read(t.target)
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.sent > 0 {
		v.best, v.hasBest = float64(t.repeats)/float64(t.sent), true
	}
	if !ok {
		return v
	}
	if !t.hasBase {
		t.base, t.hasBase = [2]float64{hits, queries}, true
	}
	if queries < t.base[1] || hits < t.base[0] {
		// The engine started again: its counters count from 0.
		t.base = [2]float64{}
	}
	dq := queries - t.base[1]
	if dq <= 0 {
		return v
	}
	v.server, v.hasServer = (hits-t.base[0])/dq, true
	if s := t.at(readAt); s.sent > 0 {
		v.evicted = prompt.Evicted(v.server, float64(s.repeats)/float64(s.sent), s.prompts, t.pool)
	}
	return v
}

// wrap is p, each prompt recorded as it is drawn.
func (t *prefixTracker) wrap(p workload.Prompts) workload.Prompts {
	return trackedPrompts{p: p, t: t}
}

type trackedPrompts struct {
	p workload.Prompts
	t *prefixTracker
}

func (s trackedPrompts) Next() prompt.Prompt {
	p := s.p.Next()
	s.t.add(p)
	return p
}
