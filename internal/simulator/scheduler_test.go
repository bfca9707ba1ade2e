package simulator

import (
	"slices"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// The scheduler is driven here on a virtual clock: each step advances time
// by exactly its modelled cost, so every TTFT below is exact arithmetic, not
// a wall-clock measurement.

type vreq struct {
	at     time.Duration // arrival, virtual time
	ids    []int
	target int
}

type vresult struct {
	first, end time.Duration // virtual instants of the first and last token
	q          *sequence
}

type vrun struct {
	s       *scheduler
	reg     *prometheus.Registry
	res     []vresult
	maxWait int // the largest waiting count seen after admission
	maxRun  int
	steps   int
}

var vepoch = time.Unix(1_000_000_000, 0)

// drive runs reqs through a scheduler built from cfg until all finish,
// checking block accounting after every step.
func drive(t *testing.T, cfg Config, reqs []vreq) *vrun {
	t.Helper()
	reg := prometheus.NewRegistry()
	r := &vrun{s: newScheduler(&cfg, newMetrics(reg, cfg.Model, cfg.MaxModelLen)), reg: reg}
	r.res = make([]vresult, len(reqs))
	for i, rq := range reqs {
		r.res[i] = vresult{first: -1, end: -1, q: &sequence{
			st:          newStream(),
			arrival:     vepoch.Add(rq.at),
			promptLen:   len(rq.ids),
			blockHashes: blockHashes(rq.ids, cfg.BlockSize),
			target:      rq.target,
			reason:      finishLength,
		}}
	}
	var now time.Duration
	next := 0 // reqs are sorted by arrival
	for done := 0; done < len(reqs); {
		for next < len(reqs) && reqs[next].at <= now {
			r.s.add(r.res[next].q)
			next++
		}
		plan := r.s.schedule(vepoch.Add(now))
		r.maxWait = max(r.maxWait, r.s.nwait)
		r.maxRun = max(r.maxRun, len(r.s.running))
		if plan.empty() {
			if next == len(reqs) {
				t.Fatalf("stuck at %v with %d unfinished", now, len(reqs)-done)
			}
			now = reqs[next].at
			continue
		}
		now += r.s.cost(plan)
		r.s.apply(plan, vepoch.Add(now))
		r.steps++
		checkBlocks(t, r.s)
		for i := range r.res {
			v := &r.res[i]
			if v.first < 0 && v.q.generated > 0 {
				v.first = now
			}
			if v.end < 0 && v.q.state == seqDone {
				v.end = now
				done++
				if v.q.generated != v.q.target {
					t.Fatalf("request %d finished with %d tokens, want %d", i, v.q.generated, v.q.target)
				}
			}
		}
		if r.steps > 1_000_000 {
			t.Fatal("runaway simulation")
		}
	}
	return r
}

// checkBlocks verifies that every block is either free or referenced by
// exactly as many running sequences as its reference count says.
func checkBlocks(t *testing.T, s *scheduler) {
	t.Helper()
	refs := make(map[int32]int32)
	for _, q := range s.running {
		if q.computed > len(q.blocks)*s.blockSize {
			t.Fatalf("sequence computed %d tokens in %d blocks", q.computed, len(q.blocks))
		}
		for _, b := range q.blocks {
			refs[b]++
		}
	}
	free := 0
	for b := range int32(s.pool.total()) {
		if s.pool.ref[b] != refs[b] {
			t.Fatalf("block %d: ref %d, held by %d sequences", b, s.pool.ref[b], refs[b])
		}
		if (s.pool.ref[b] == 0) != s.pool.inFree[b] {
			t.Fatalf("block %d: ref %d but inFree %v", b, s.pool.ref[b], s.pool.inFree[b])
		}
		if s.pool.inFree[b] {
			free++
		}
	}
	if free != s.pool.numFree {
		t.Fatalf("free list holds %d blocks, numFree says %d", free, s.pool.numFree)
	}
	if len(s.running) > s.maxNumSeqs {
		t.Fatalf("%d running > max_num_seqs %d", len(s.running), s.maxNumSeqs)
	}
}

func testConfig() Config {
	cfg := DefaultConfig()
	cfg.DecodeStep = 20 * time.Millisecond
	cfg.DecodePerSeq = 100 * time.Microsecond
	cfg.PrefillTokensPerSecond = 10000
	return cfg
}

// prefillCost is the model cost of a step that prefills n tokens and
// samples for k sequences.
func stepCost(cfg Config, prefill, sampling int) time.Duration {
	return cfg.DecodeStep + time.Duration(sampling)*cfg.DecodePerSeq +
		time.Duration(float64(prefill)/cfg.PrefillTokensPerSecond*float64(time.Second))
}

func TestSchedulerSingleRequestTiming(t *testing.T) {
	cfg := testConfig()
	r := drive(t, cfg, []vreq{{ids: ids(100, "a"), target: 10}})
	v := r.res[0]
	// The step that prefills the prompt samples the first token.
	wantFirst := stepCost(cfg, 100, 1)
	if v.first != wantFirst {
		t.Errorf("TTFT %v, want %v", v.first, wantFirst)
	}
	wantEnd := wantFirst + 9*stepCost(cfg, 0, 1)
	if v.end != wantEnd {
		t.Errorf("E2E %v, want %v", v.end, wantEnd)
	}
	if got := metricValue(t, r.reg, "vllm:generation_tokens_total", nil); got != 10 {
		t.Errorf("generation tokens %v, want 10", got)
	}
	if got := metricValue(t, r.reg, "vllm:prompt_tokens_total", nil); got != 100 {
		t.Errorf("prompt tokens %v, want 100", got)
	}
	if got := metricValue(t, r.reg, "vllm:inter_token_latency_seconds", nil); got != 9 {
		t.Errorf("ITL samples %v, want 9", got)
	}
	if got := metricValue(t, r.reg, "vllm:request_success_total", map[string]string{"finished_reason": "length"}); got != 1 {
		t.Errorf("length successes %v, want 1", got)
	}
	if r.s.pool.usage() != 0 {
		t.Errorf("kv usage %v after the request finished, want 0", r.s.pool.usage())
	}
}

func TestSchedulerTTFTGrowsWithPromptLength(t *testing.T) {
	cfg := testConfig()
	cfg.MaxBatchedTokens = 2048
	tests := []struct {
		prompt int
		want   time.Duration
	}{
		{prompt: 10, want: stepCost(cfg, 10, 1)},
		{prompt: 2000, want: stepCost(cfg, 2000, 1)},
		// Chunked: 2048 + 2048 + 904 tokens in three steps; only the last
		// samples.
		{prompt: 5000, want: 2*stepCost(cfg, 2048, 0) + stepCost(cfg, 904, 1)},
	}
	prev := time.Duration(0)
	for _, tc := range tests {
		r := drive(t, cfg, []vreq{{ids: ids(tc.prompt, "p"), target: 2}})
		got := r.res[0].first
		if got != tc.want {
			t.Errorf("prompt %d: TTFT %v, want %v", tc.prompt, got, tc.want)
		}
		if got <= prev {
			t.Errorf("prompt %d: TTFT %v does not exceed the shorter prompt's %v", tc.prompt, got, prev)
		}
		prev = got
	}
}

func TestSchedulerTTFTGrowsWithQueueDepth(t *testing.T) {
	cfg := testConfig()
	cfg.MaxNumSeqs = 2
	const out = 20
	ttftAt := func(depth int) []time.Duration {
		reqs := make([]vreq, depth)
		for i := range reqs {
			reqs[i] = vreq{ids: ids(50, string(rune('a'+i))), target: out}
		}
		r := drive(t, cfg, reqs)
		if depth > cfg.MaxNumSeqs && r.maxWait == 0 {
			t.Errorf("depth %d: no request ever waited", depth)
		}
		ttfts := make([]time.Duration, depth)
		for i, v := range r.res {
			ttfts[i] = v.first
		}
		return ttfts
	}
	one := ttftAt(1)[0]
	eight := ttftAt(8)
	// FCFS: TTFT never decreases along the queue, and the last request waits
	// for three pairs of 20-token requests before its own prefill.
	for i := 1; i < len(eight); i++ {
		if eight[i] < eight[i-1] {
			t.Errorf("TTFT[%d]=%v < TTFT[%d]=%v", i, eight[i], i-1, eight[i-1])
		}
	}
	last := eight[len(eight)-1]
	if min := 3 * out * stepCost(cfg, 0, 1); last < min {
		t.Errorf("TTFT at depth 8 %v, want at least %v", last, min)
	}
	if last <= one {
		t.Errorf("TTFT at depth 8 %v not above depth 1 %v", last, one)
	}
}

func TestSchedulerPrefixCache(t *testing.T) {
	cfg := testConfig()
	shared := ids(3200, "shared") // 200 full blocks of 16
	a := append(append([]int{}, shared...), ids(800, "tailA")...)
	b := append(append([]int{}, shared...), ids(800, "tailB")...)
	tests := []struct {
		name     string
		second   []int
		wantHits int
	}{
		{"shared prefix", b, 3200},
		// An identical prompt hits every full block but the one holding its
		// last token: floor((4000-1)/16) blocks.
		{"identical prompt", a, 249 * 16},
		{"no shared prefix", ids(4000, "other"), 0},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			// The second request arrives after the first finished.
			r := drive(t, cfg, []vreq{
				{ids: a, target: 4},
				{at: 10 * time.Second, ids: tc.second, target: 4},
			})
			if got := metricValue(t, r.reg, "vllm:prefix_cache_hits_total", nil); got != float64(tc.wantHits) {
				t.Errorf("hits %v, want %d", got, tc.wantHits)
			}
			if got := metricValue(t, r.reg, "vllm:prefix_cache_queries_total", nil); got != float64(len(a)+len(tc.second)) {
				t.Errorf("queries %v, want %d", got, len(a)+len(tc.second))
			}
			ttftA := r.res[0].first
			ttftB := r.res[1].first - 10*time.Second
			want := stepCost(cfg, len(tc.second)-tc.wantHits, 1)
			if ttftB != want {
				t.Errorf("second TTFT %v, want %v", ttftB, want)
			}
			if tc.wantHits > 0 && ttftB >= ttftA {
				t.Errorf("second TTFT %v not below first %v despite %d cached tokens", ttftB, ttftA, tc.wantHits)
			}
		})
	}
}

func TestSchedulerPrefixCacheSharedWhileRunning(t *testing.T) {
	// The second request arrives after the first's prefill step, while the
	// first still decodes: its blocks are cached and referenced twice.
	cfg := testConfig()
	p := ids(320, "x")
	r := drive(t, cfg, []vreq{
		{ids: p, target: 50},
		{at: 200 * time.Millisecond, ids: p, target: 50},
	})
	if got := metricValue(t, r.reg, "vllm:prefix_cache_hits_total", nil); got != 304 {
		t.Errorf("hits %v, want 304 (19 of 20 blocks)", got)
	}
}

func TestSchedulerLRUEviction(t *testing.T) {
	cfg := testConfig()
	cfg.KVBlocks = 64 // 1024 tokens
	cfg.MaxModelLen = 1024
	a := ids(480, "a") // 30 blocks
	r := drive(t, cfg, []vreq{
		{ids: a, target: 1},
		// Two unrelated requests that need 60 blocks together: A's cached
		// blocks must be evicted, tail first.
		{at: time.Second, ids: ids(480, "b"), target: 1},
		{at: time.Second, ids: ids(480, "c"), target: 1},
		{at: 2 * time.Second, ids: a, target: 1},
	})
	hits := metricValue(t, r.reg, "vllm:prefix_cache_hits_total", nil)
	// b and c took 60 of 64 blocks: the 34 never used, then 26 of A's,
	// tail first, so exactly A's first 4 blocks still hit.
	if hits != 4*16 {
		t.Errorf("hits %v after eviction, want 64", hits)
	}
	// Without the eviction pressure A would hit 29 blocks.
	r2 := drive(t, cfg, []vreq{{ids: a, target: 1}, {at: 2 * time.Second, ids: a, target: 1}})
	if got := metricValue(t, r2.reg, "vllm:prefix_cache_hits_total", nil); got != 29*16 {
		t.Errorf("hits %v without eviction, want %d", got, 29*16)
	}
}

func TestSchedulerKVFullMakesRequestsWait(t *testing.T) {
	cfg := testConfig()
	cfg.KVBlocks = 64 // 1024 tokens
	cfg.MaxModelLen = 1024
	// A takes 57 blocks for its prompt and grows to 63; B needs 13 blocks and
	// must wait until A finishes.
	r := drive(t, cfg, []vreq{
		{ids: ids(900, "a"), target: 100},
		{at: 100 * time.Millisecond, ids: ids(200, "b"), target: 5},
	})
	if r.maxWait == 0 {
		t.Error("B never waited")
	}
	if got := metricValue(t, r.reg, "vllm:num_preemptions_total", nil); got != 0 {
		t.Errorf("preemptions %v, want 0 (B waits, nothing is preempted)", got)
	}
	if r.res[1].first <= r.res[0].end {
		t.Errorf("B's first token at %v, before A finished at %v", r.res[1].first, r.res[0].end)
	}
}

func TestSchedulerPreemption(t *testing.T) {
	cfg := testConfig()
	cfg.KVBlocks = 64
	cfg.MaxModelLen = 1024
	// Each grows to 160+600 = 760 tokens = 48 blocks; two do not fit.
	r := drive(t, cfg, []vreq{
		{ids: ids(160, "a"), target: 600},
		{ids: ids(160, "b"), target: 600},
	})
	if got := metricValue(t, r.reg, "vllm:num_preemptions_total", nil); got < 1 {
		t.Errorf("preemptions %v, want at least 1", got)
	}
	if r.res[0].end >= r.res[1].end {
		t.Errorf("the earlier request (end %v) should finish before the preempted one (end %v)", r.res[0].end, r.res[1].end)
	}
	if got := metricValue(t, r.reg, "vllm:generation_tokens_total", nil); got != 1200 {
		t.Errorf("generation tokens %v, want 1200 (a preempted sequence keeps its tokens)", got)
	}
	if got := metricValue(t, r.reg, "vllm:time_to_first_token_seconds", nil); got != 2 {
		t.Errorf("TTFT samples %v, want 2", got)
	}
}

func TestSchedulerChunkedPrefillSharesSteps(t *testing.T) {
	// A long prompt arriving while another request decodes is prefilled in
	// budget-sized chunks, and the decode goes on inside the same steps.
	cfg := testConfig()
	cfg.MaxBatchedTokens = 1024
	r := drive(t, cfg, []vreq{
		{ids: ids(10, "d"), target: 30},
		{at: 50 * time.Millisecond, ids: ids(4000, "long"), target: 2},
	})
	// The long request joins after the decoder's third step; then each step
	// carries one decode token and 1023 prompt tokens (931 in the last,
	// which also samples the long request's first token).
	joined := stepCost(cfg, 10, 1) + 2*stepCost(cfg, 0, 1)
	wantFirst := joined + 3*stepCost(cfg, 1023, 1) + stepCost(cfg, 931, 2)
	if r.res[1].first != wantFirst {
		t.Errorf("long request's first token at %v, want %v", r.res[1].first, wantFirst)
	}
	// The decoder lost no step to the prefill: 30 tokens in 30 steps, five of
	// them slowed by the chunks and one by the long request's second token.
	wantEnd := joined + 3*stepCost(cfg, 1023, 1) + stepCost(cfg, 931, 2) + stepCost(cfg, 0, 2) + 22*stepCost(cfg, 0, 1)
	if r.res[0].end != wantEnd {
		t.Errorf("decoding request ended at %v, want %v", r.res[0].end, wantEnd)
	}
}

func TestSchedulerAbortFreesBlocks(t *testing.T) {
	cfg := testConfig()
	reg := prometheus.NewRegistry()
	s := newScheduler(&cfg, newMetrics(reg, cfg.Model, cfg.MaxModelLen))
	q := &sequence{st: newStream(), arrival: vepoch, promptLen: 100, blockHashes: blockHashes(ids(100, "a"), 16), target: 50, reason: finishLength}
	w := &sequence{st: newStream(), arrival: vepoch, promptLen: 100, blockHashes: blockHashes(ids(100, "b"), 16), target: 50, reason: finishLength}
	s.add(q)
	now := vepoch
	for range 3 {
		p := s.schedule(now)
		now = now.Add(s.cost(p))
		s.apply(p, now)
	}
	if s.pool.usage() == 0 {
		t.Fatal("no blocks in use while running")
	}
	s.add(w)
	s.abort(w) // aborted while waiting
	s.abort(q) // aborted while running
	s.abort(q) // a second abort is ignored
	checkBlocks(t, s)
	if s.pool.usage() != 0 || len(s.running) != 0 || s.nwait != 0 {
		t.Errorf("after aborts: usage %v, running %d, waiting %d; want all 0", s.pool.usage(), len(s.running), s.nwait)
	}
	if got := metricValue(t, reg, "vllm:request_success_total", map[string]string{"finished_reason": "abort"}); got != 2 {
		t.Errorf("aborts %v, want 2", got)
	}
	if p := s.schedule(now); !p.empty() {
		t.Errorf("plan has %d items after every request was aborted", len(p.items))
	}
}

func TestSchedulerMaxNumSeqs(t *testing.T) {
	cfg := testConfig()
	cfg.MaxNumSeqs = 3
	reqs := make([]vreq, 10)
	for i := range reqs {
		reqs[i] = vreq{ids: ids(20, string(rune('a'+i))), target: 5}
	}
	r := drive(t, cfg, reqs)
	if r.maxRun != 3 {
		t.Errorf("max running %d, want 3", r.maxRun)
	}
}

// BenchmarkSchedulerStep measures one engine step (plan and apply) with a
// full batch of 256 decoding sequences: the engine's own cost per step.
func BenchmarkSchedulerStep(b *testing.B) {
	cfg := DefaultConfig()
	reg := prometheus.NewRegistry()
	s := newScheduler(&cfg, newMetrics(reg, cfg.Model, cfg.MaxModelLen))
	add := func() {
		s.add(&sequence{st: newStream(), arrival: vepoch, promptLen: 64, target: 1 << 30, reason: finishLength})
	}
	for range cfg.MaxNumSeqs {
		add()
	}
	now := vepoch
	b.ResetTimer()
	for b.Loop() {
		p := s.schedule(now)
		now = now.Add(s.cost(p))
		s.apply(p, now)
		// Keep the KV cache from filling: restart sequences that grew long.
		if s.pool.numFree < cfg.MaxNumSeqs {
			for _, q := range slices.Clone(s.running) {
				s.abort(q)
			}
			for range cfg.MaxNumSeqs {
				add()
			}
		}
	}
	b.ReportMetric(float64(cfg.MaxNumSeqs)*float64(b.N)/b.Elapsed().Seconds(), "tokens/s")
}
