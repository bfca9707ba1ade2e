package bench

import (
	"cmp"
	"context"
	"fmt"
	"log/slog"
	"math"
	"reflect"
	"slices"
	"sync"
	"time"

	"github.com/infer-exporter/infer_exporter/bench/report"
	"github.com/infer-exporter/infer_exporter/engine"
	"github.com/infer-exporter/infer_exporter/internal/config"
	"github.com/infer-exporter/infer_exporter/probe/observation"
	"github.com/infer-exporter/infer_exporter/probe/prompt"
)

// A shape with a cache_hit_rate sends prompts that open with a prefix from
// a seeded pool (prompt.Calibrated.SharePrefixes), and each repeat of its
// cells sees the prefix cache three ways over its measured windows: the
// client's (the answers' cached tokens over their prompt tokens), the
// server's (its prefix-cache counters read through the repeat, their
// increase over the windows) and the best the prompts sent allow. Their
// gap, the exporter's eviction rule over them, and what the cache bought
// against the same target and load at rate 0 are report.PrefixCache.

// prefixPrompt is the shape as a workload's prompt block, for the prompt
// set's prefixes and their validation. Each shape's pool is its own (the
// run's seed mixed with the shape's name), so that one shape's cells do
// not warm another's prefixes.
func (sh *Shape) prefixPrompt(seed int64) *config.Prompt {
	return &config.Prompt{
		InputTokens: sh.InputTokens.Distribution, OutputTokens: sh.OutputTokens.Distribution,
		Seed:         seed ^ int64(hashString(sh.Name)),
		CacheHitRate: sh.CacheHitRate, PrefixPool: sh.PrefixPool, BlockSize: sh.BlockSize,
	}
}

// prefixHashed is what the prompt set's hash adds for the shape: its
// prefix options, none for a shape without a rate (its prompts are those
// of before the options).
func (sh *Shape) prefixHashed() string {
	if sh.CacheHitRate <= 0 {
		return ""
	}
	return fmt.Sprintf(" cache_hit_rate=%g prefix_pool=%d block_size=%d", sh.CacheHitRate, sh.PrefixPool, sh.BlockSize)
}

// prefixShapes says whether any shape declares a cache_hit_rate: then
// every prompt cell reads the server's counters, so that a cell at rate 0
// has its views to be compared with.
func prefixShapes(shapes []Shape) bool {
	for i := range shapes {
		if shapes[i].CacheHitRate > 0 {
			return true
		}
	}
	return false
}

// promptCursor is the cursor a prompt load draws from.
func (l *promptLoad) promptCursor() *PromptCursor { return l.cursor }

// Bounds of a prefix watch: the requests it keeps, and its readings of the
// server's counters.
const (
	maxPrefixRequests = 1 << 20
	maxPrefixReadings = 1 << 16
)

// prefixWatch follows one repeat's prefix cache: its requests' ends (a
// workload.Observer) and, when sampling, the target's prefix-cache
// counters through an engine scraper of its own.
type prefixWatch struct {
	shape *Shape
	pool  int
	// list, first and stride are the cursor's prompts and its draws: the
	// runner numbers arrivals in the order it draws their prompts (Seq),
	// so request n's prompt is list[(first + n×stride) mod len].
	list          []prompt.Prompt
	first, stride int

	scraper        *engine.Scraper
	target         string
	every, timeout time.Duration
	logger         *slog.Logger
	stop           context.CancelFunc
	done           chan struct{}

	mu       sync.Mutex
	requests []prefixRequest
	readings []counterReading
}

// prefixRequest is a request that ended.
type prefixRequest struct {
	seq            uint64
	sent, end      time.Time
	success        bool
	prompt, cached int
}

// counterReading is the server's prefix-cache counters at an instant.
type counterReading struct {
	at            time.Time
	hits, queries float64
}

// newPrefixWatch starts the watch of a repeat of a prompt load; nil for
// any other load, and for a shape that neither declares a rate nor runs
// in a matrix that does, whose answers' cached tokens are still counted.
func (b *run) newPrefixWatch(ctx context.Context, l load, p repeatPlan) *prefixWatch {
	pl, ok := l.(interface{ promptCursor() *PromptCursor })
	sh := p.group.shape
	if !ok || sh == nil || pl.promptCursor() == nil || len(pl.promptCursor().list) == 0 {
		return nil
	}
	c := pl.promptCursor()
	w := &prefixWatch{shape: sh, list: c.list, first: c.i, stride: max(c.stride, 1)}
	if sh.CacheHitRate > 0 {
		w.pool = sh.prefixPrompt(b.spec.Seed).PrefixPoolOrDefault()
	}
	if prefixShapes(b.spec.Matrix.Shapes) {
		w.sample(ctx, p.target, sampleInterval(p.duration), b.logger)
	}
	return w
}

// sampleInterval is how often the server's counters are read: a thirtieth
// of the measured duration, within [100 ms, 1 s], so that the
// interpolation to the windows' ends is within a few requests.
func sampleInterval(d time.Duration) time.Duration {
	return min(max(d/30, 100*time.Millisecond), time.Second)
}

// sample reads t's counters every interval until close.
func (w *prefixWatch) sample(ctx context.Context, t *config.Target, every time.Duration, logger *slog.Logger) {
	tc := *t
	tc.Metrics.Interval, tc.Metrics.Timeout = every, min(max(tc.Metrics.Timeout, every), time.Second)
	w.scraper, w.target, w.every, w.timeout, w.logger = engine.NewScraper(logger), t.Name, every, tc.Metrics.Timeout, logger
	ctx, w.stop = context.WithCancel(ctx)
	if err := w.scraper.ApplyConfig(ctx, &config.Config{Targets: []config.Target{tc}}); err != nil {
		w.scraper.Close()
		w.scraper = nil
		return
	}
	w.done = make(chan struct{})
	go func() {
		defer close(w.done)
		tick := time.NewTicker(every / 4)
		defer tick.Stop()
		for {
			w.read()
			select {
			case <-ctx.Done():
				return
			case <-tick.C:
			}
		}
	}()
}

// read keeps the scraper's latest snapshot when it is new.
func (w *prefixWatch) read() {
	i, ok := w.scraper.Snapshot(w.target)
	if !ok || !i.Up || !i.PrefixCacheHits.OK || !i.PrefixCacheQueries.OK {
		return
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	if n := len(w.readings); (n > 0 && !i.At.After(w.readings[n-1].at)) || n == maxPrefixReadings {
		return
	}
	w.readings = append(w.readings, counterReading{at: i.At, hits: i.PrefixCacheHits.Value, queries: i.PrefixCacheQueries.Value})
}

// close stops the sampling once a reading at or after until is kept (the
// windows' end), waiting at most two polls that each time out, and a
// second: on a loaded machine a scrape can take its whole timeout (one
// second in a race-detector run beside busy loops left a repeat with no
// server view when close waited two polls and a second).
func (w *prefixWatch) close(until time.Time) {
	if w == nil || w.scraper == nil {
		return
	}
	deadline := time.Now().Add(2*(w.every+w.timeout) + time.Second)
	for time.Now().Before(deadline) && !w.readAfter(until) {
		time.Sleep(20 * time.Millisecond)
	}
	w.stop()
	<-w.done
	w.scraper.Close()
}

func (w *prefixWatch) readAfter(t time.Time) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	n := len(w.readings)
	return n > 0 && !w.readings[n-1].at.Before(t)
}

// The watch hears its repeat's requests end (workload.Observer).
func (w *prefixWatch) Sent(*observation.Request)       {}
func (w *prefixWatch) FirstToken(*observation.Request) {}
func (w *prefixWatch) Token(*observation.Request)      {}
func (w *prefixWatch) Dropped(*observation.Request)    {}
func (w *prefixWatch) Done(o *observation.Request) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if len(w.requests) < maxPrefixRequests {
		w.requests = append(w.requests, prefixRequest{seq: o.Seq, sent: o.Sent, end: o.End,
			success: o.Outcome == observation.Success, prompt: o.PromptTokens, cached: o.CachedTokens})
	}
}

// promptOf is request seq's prompt.
func (w *prefixWatch) promptOf(seq uint64) prompt.Prompt {
	return w.list[(uint64(w.first)+seq*uint64(w.stride))%uint64(len(w.list))]
}

// result is the views over the measured windows [from, to): the successful
// requests that ended within them, the server's counters' increase over
// them; nil when there is nothing to say (no rate, no cached tokens and
// no reading of the server).
func (w *prefixWatch) result(from, to time.Time) *report.PrefixCache {
	if w == nil {
		return nil
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	pc := &report.PrefixCache{DeclaredRate: w.shape.CacheHitRate, Pool: w.pool}
	var best, bestOf float64
	// The best is over the prompts sent, in the order they were (the
	// runner numbers them as it sends): a dropped arrival's prefix was
	// never sent, so its next use is its first.
	byOrder := slices.SortedFunc(slices.Values(w.requests), func(a, b prefixRequest) int { return cmp.Compare(a.seq, b.seq) })
	var ledger prompt.PrefixLedger
	for _, r := range byOrder {
		if r.sent.IsZero() {
			continue
		}
		if r.sent.Before(to) {
			pc.PromptsSent++
		}
		p := w.promptOf(r.seq)
		repeat := ledger.Sent(p)
		if !r.success || r.end.Before(from) || !r.end.Before(to) {
			continue
		}
		pc.PromptTokens += r.prompt
		pc.CachedTokens += r.cached
		best += float64(repeat)
		bestOf += float64(cmpOr(p.Tokens, p.InputTokens))
	}
	pc.ClientRatio, pc.BestRatio = ratio(float64(pc.CachedTokens), float64(pc.PromptTokens)), ratio(best, bestOf)
	pc.ServerHits, pc.ServerQueries, pc.ServerRatio = report.NaN(), report.NaN(), report.NaN()
	if h0, q0, ok0 := counterAt(w.readings, from); ok0 {
		if h1, q1, ok1 := counterAt(w.readings, to); ok1 && q1 >= q0 && h1 >= h0 {
			pc.ServerHits, pc.ServerQueries = report.Num(h1-h0), report.Num(q1-q0)
			pc.ServerRatio = ratio(h1-h0, q1-q0)
		}
	}
	if !pc.ServerRatio.Valid() && len(w.readings) > 0 {
		n := len(w.readings)
		w.logger.Warn("no server view of the prefix cache: its counters were not read on both sides of the measured window",
			"target", w.target, "readings", n, "first_after_start", w.readings[0].at.Sub(from), "last_after_end", w.readings[n-1].at.Sub(to))
	}
	if w.shape.CacheHitRate <= 0 && pc.CachedTokens == 0 && len(w.readings) == 0 {
		return nil
	}
	judge(pc)
	return pc
}

// judge sets the gap and the eviction flag from the ratios: the server's,
// or the client's where the server reports none.
func judge(pc *report.PrefixCache) {
	measured := pc.ServerRatio
	if !measured.Valid() {
		measured = pc.ClientRatio
	}
	pc.Gap = report.Num(float64(pc.BestRatio) - float64(measured))
	pc.Evicted = measured.Valid() && pc.BestRatio.Valid() && pc.Pool > 0 &&
		prompt.Evicted(float64(measured), float64(pc.BestRatio), pc.PromptsSent, pc.Pool)
}

func cmpOr(a, b int) int {
	if a != 0 {
		return a
	}
	return b
}

// ratio is a / b, NaN without b.
func ratio(a, b float64) report.Num {
	if b <= 0 {
		return report.NaN()
	}
	return report.Num(a / b)
}

// counterAt is the counters at t, linear between the readings around
// it; false when t is outside the readings.
func counterAt(rs []counterReading, t time.Time) (hits, queries float64, ok bool) {
	for i := 1; i < len(rs); i++ {
		a, b := rs[i-1], rs[i]
		if t.Before(a.at) || t.After(b.at) {
			continue
		}
		f := 0.0
		if span := b.at.Sub(a.at); span > 0 {
			f = float64(t.Sub(a.at)) / float64(span)
		}
		if b.queries < a.queries || b.hits < a.hits {
			return 0, 0, false // the engine started again between them
		}
		return a.hits + f*(b.hits-a.hits), a.queries + f*(b.queries-a.queries), true
	}
	return 0, 0, false
}

// cellPrefixCache is a cell's views: each figure's median over the
// repeats that have one, the flag judged again over the medians; nil when
// no repeat has any.
func cellPrefixCache(repeats []report.RepeatResult) *report.PrefixCache {
	var pcs []*report.PrefixCache
	for i := range repeats {
		if pc := repeats[i].PrefixCache; pc != nil {
			pcs = append(pcs, pc)
		}
	}
	if len(pcs) == 0 {
		return nil
	}
	med := func(f func(*report.PrefixCache) float64) float64 {
		var xs []float64
		for _, pc := range pcs {
			if v := f(pc); !math.IsNaN(v) {
				xs = append(xs, v)
			}
		}
		if len(xs) == 0 {
			return math.NaN()
		}
		return median(xs)
	}
	num := func(f func(*report.PrefixCache) report.Num) report.Num {
		return report.Num(med(func(pc *report.PrefixCache) float64 { return float64(f(pc)) }))
	}
	c := &report.PrefixCache{DeclaredRate: pcs[0].DeclaredRate, Pool: pcs[0].Pool,
		PromptTokens:  int(med(func(pc *report.PrefixCache) float64 { return float64(pc.PromptTokens) })),
		CachedTokens:  int(med(func(pc *report.PrefixCache) float64 { return float64(pc.CachedTokens) })),
		PromptsSent:   int(med(func(pc *report.PrefixCache) float64 { return float64(pc.PromptsSent) })),
		ClientRatio:   num(func(pc *report.PrefixCache) report.Num { return pc.ClientRatio }),
		ServerHits:    num(func(pc *report.PrefixCache) report.Num { return pc.ServerHits }),
		ServerQueries: num(func(pc *report.PrefixCache) report.Num { return pc.ServerQueries }),
		ServerRatio:   num(func(pc *report.PrefixCache) report.Num { return pc.ServerRatio }),
		BestRatio:     num(func(pc *report.PrefixCache) report.Num { return pc.BestRatio }),
	}
	judge(c)
	return c
}

// pairPrefixCells sets what the cache bought in each cell of a shape with a
// cache_hit_rate: against the cell of the same target and load whose shape
// has its lengths and kinds at rate 0 (the first such shape of the
// matrix), its throughput and TTFT p50 over that cell's.
func pairPrefixCells(cells []report.CellResult, shapes []Shape) {
	byKey := make(map[string]*report.CellResult, len(cells))
	for i := range cells {
		byKey[cells[i].Key] = &cells[i]
	}
	for i := range cells {
		c := &cells[i]
		sh := shapeNamed(shapes, c.Shape)
		if c.PrefixCache == nil || sh == nil || sh.CacheHitRate <= 0 {
			continue
		}
		base := uncachedShape(shapes, sh)
		if base == nil {
			continue
		}
		o := byKey[report.CellKey(c.Target, c.Load, base.Name)]
		if o == nil {
			continue
		}
		c.PrefixCache.Paired = o.Key
		c.PrefixCache.ThroughputRatio = ratio(c.Summary.OutputTokensPerSecond, o.Summary.OutputTokensPerSecond)
		c.PrefixCache.TTFTP50Ratio = ratio(float64(c.Summary.TTFT.P50), float64(o.Summary.TTFT.P50))
	}
}

func shapeNamed(shapes []Shape, name string) *Shape {
	for i := range shapes {
		if shapes[i].Name == name {
			return &shapes[i]
		}
	}
	return nil
}

// uncachedShape is the first shape with sh's lengths and kinds at rate 0.
func uncachedShape(shapes []Shape, sh *Shape) *Shape {
	for i := range shapes {
		o := &shapes[i]
		if o.CacheHitRate == 0 && o.InputTokens == sh.InputTokens && o.OutputTokens == sh.OutputTokens &&
			reflect.DeepEqual(o.RequestKinds, sh.RequestKinds) {
			return o
		}
	}
	return nil
}

// measured is the views over the repeat's measured windows (e), once its
// sampling has read past their end; nil without a watch.
func (w *prefixWatch) measured(e *repeatEnd) *report.PrefixCache {
	if w == nil {
		return nil
	}
	from := e.rec.warmupEndAt()
	to := from.Add(time.Duration(e.k) * e.window)
	if e.end.Before(to) {
		to = e.end
	}
	w.close(to)
	return w.result(from, to)
}
