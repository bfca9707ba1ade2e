package simulator

import (
	"context"
	"math/bits"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// stream is what a handler and the engine share about one request. The
// engine publishes progress; the handler reads it when signalled. Tokens are
// never queued one by one: the handler renders token i from the request's
// key, so publishing is a counter update and cannot block the engine however
// slow the client is.
type stream struct {
	mu       sync.Mutex
	produced int    // tokens generated so far
	finished bool   // the request finished (stop or length)
	reason   string // finish reason when finished
	closed   bool   // the engine shut down before the request finished
	ready    chan struct{}
	// timings are the request's times in the engine once it finished
	// (request_metrics.go).
	timings requestTimings
	// cached is the prompt tokens the prefix cache served at the
	// request's first admission (hit blocks × BlockSize), which its usage
	// reports as prompt_tokens_details.cached_tokens, as vLLM's
	// num_cached_tokens does.
	cached int
}

func newStream() *stream { return &stream{ready: make(chan struct{}, 1)} }

func (st *stream) signal() {
	select {
	case st.ready <- struct{}{}:
	default:
	}
}

func (st *stream) publish(produced int, finished bool, reason string) {
	st.mu.Lock()
	st.produced, st.finished, st.reason = produced, finished, reason
	st.mu.Unlock()
	st.signal()
}

func (st *stream) close() {
	st.mu.Lock()
	st.closed = true
	st.mu.Unlock()
	st.signal()
}

// setCached keeps the tokens the first admission found cached.
func (st *stream) setCached(n int) {
	st.mu.Lock()
	st.cached = n
	st.mu.Unlock()
}

// cachedTokens are the tokens setCached kept; 0 before the first admission.
func (st *stream) cachedTokens() int {
	st.mu.Lock()
	defer st.mu.Unlock()
	return st.cached
}

func (st *stream) snapshot() (produced int, finished bool, reason string, closed bool) {
	st.mu.Lock()
	defer st.mu.Unlock()
	return st.produced, st.finished, st.reason, st.closed
}

type seqState uint8

const (
	seqNew seqState = iota
	seqWaiting
	seqRunning
	seqDone
)

// sequence is one request inside the engine. The handler fills the first
// block of fields before submitting it; everything after belongs to the
// engine goroutine.
type sequence struct {
	st          *stream
	arrival     time.Time
	promptLen   int
	blockHashes []uint64 // hash chain of the prompt's full blocks
	target      int      // tokens to generate before finishing
	reason      string   // finish reason on reaching target
	stallAfter  int      // mid-stream stall fault: after this many tokens...
	stallFor    time.Duration
	// id is the request's X-Request-Id for the prefix log; "" when none.
	id string
	// lora is the request's LoRA adapter: 0 for the base model, i+1 for
	// Config.LoRAAdapters[i].
	lora int

	state       seqState
	generated   int
	computed    int     // tokens whose KV is computed
	blocks      []int32 // block table
	registered  int     // leading prompt blocks known to be in the prefix cache
	lastTokenAt time.Time
	pausedUntil time.Time
	logged      bool // its first admission is in the prefix log
	// scheduledAt is the start of the step that first admitted it (a
	// preempted sequence keeps it); firstTokenAt the end of the step that
	// sampled its first token.
	scheduledAt  time.Time
	firstTokenAt time.Time
}

// total is the number of tokens whose KV the sequence needs before it can
// sample its next token: the prompt and every generated token but the last,
// plus the last one as this step's input.
func (q *sequence) total() int { return q.promptLen + q.generated }

func (q *sequence) paused(now time.Time) bool {
	return !q.pausedUntil.IsZero() && now.Before(q.pausedUntil)
}

type workItem struct {
	q       *sequence
	n       int  // tokens computed in this step
	samples bool // the step ends with a sampled token
}

type stepPlan struct {
	items         []workItem
	prefillTokens int
	sampling      int
}

func (p *stepPlan) empty() bool { return len(p.items) == 0 }

// scheduler is the continuous-batching model: a FCFS waiting queue, a running
// batch in admission order and the KV block pool. It is a plain data
// structure driven by schedule/apply, so that tests can run it on a virtual
// clock.
type scheduler struct {
	maxNumSeqs, budget, blockSize int
	decodeStep, decodePerSeq      time.Duration
	prefillTPS                    float64

	pool    *blockPool
	m       *metrics
	waiting []*sequence // waiting[whead:] is the queue; entries may be done
	whead   int
	nwait   int // live entries in the queue
	running []*sequence

	plan    stepPlan
	scratch []int32
	keep    []*sequence

	// prefixes is the prefix cache's per-request ground truth.
	prefixes *prefixLog

	// LoRA: at most maxLoRA distinct adapters among the running
	// sequences (0 = no limit: no adapter is served); lora reports the
	// adapters running and waiting, named by adapters, when set.
	maxLoRA      int
	adapters     []string
	lora         *loraInfo
	loraRunning  uint64 // the adapters (bit i: adapters[i]) last reported
	loraWaiting  uint64
	loraReported bool
}

func newScheduler(cfg *Config, m *metrics) *scheduler {
	return &scheduler{
		maxNumSeqs:   cfg.MaxNumSeqs,
		budget:       cfg.MaxBatchedTokens,
		blockSize:    cfg.BlockSize,
		decodeStep:   cfg.DecodeStep,
		decodePerSeq: cfg.DecodePerSeq,
		prefillTPS:   cfg.PrefillTokensPerSecond,
		pool:         newBlockPool(cfg.KVBlocks),
		m:            m,
		prefixes:     newPrefixLog(),
		maxLoRA:      cfg.MaxLoRA,
		adapters:     cfg.LoRAAdapters,
	}
}

// loraBit is the bit of q's adapter in an adapter mask; 0 for the base
// model.
func loraBit(q *sequence) uint64 {
	if q.lora == 0 {
		return 0
	}
	return 1 << (q.lora - 1)
}

// runningAdapters is the mask of the adapters of the running sequences.
func (s *scheduler) runningAdapters() uint64 {
	var m uint64
	for _, q := range s.running {
		m |= loraBit(q)
	}
	return m
}

// add queues a new sequence.
func (s *scheduler) add(q *sequence) {
	q.state = seqWaiting
	s.waiting = append(s.waiting, q)
	s.nwait++
}

// pushFront queues a preempted sequence ahead of everything else.
func (s *scheduler) pushFront(q *sequence) {
	q.state = seqWaiting
	s.nwait++
	if s.whead > 0 {
		s.whead--
		s.waiting[s.whead] = q
		return
	}
	s.waiting = append(s.waiting, nil)
	copy(s.waiting[1:], s.waiting)
	s.waiting[0] = q
}

// compactWaiting drops the consumed head of the queue once it is large, so
// the slice does not grow without bound.
func (s *scheduler) compactWaiting() {
	if s.whead == 0 || s.whead < len(s.waiting)/2 {
		return
	}
	n := copy(s.waiting, s.waiting[s.whead:])
	clear(s.waiting[n:])
	s.waiting = s.waiting[:n]
	s.whead = 0
}

// abort ends a sequence whose client went away.
func (s *scheduler) abort(q *sequence) {
	switch q.state {
	case seqWaiting:
		s.nwait-- // the queue entry is skipped lazily
	case seqRunning:
		s.pool.release(q.blocks)
		q.blocks = nil
		for i, r := range s.running {
			if r == q {
				s.running = append(s.running[:i], s.running[i+1:]...)
				break
			}
		}
	default:
		return
	}
	q.state = seqDone
	s.m.success[finishAbort].Inc()
}

// ensureBlocks gives q enough blocks to hold tokens tokens, all or nothing.
func (s *scheduler) ensureBlocks(q *sequence, tokens int) bool {
	need := (tokens+s.blockSize-1)/s.blockSize - len(q.blocks)
	if need <= 0 {
		return true
	}
	if need > s.pool.numFree {
		return false
	}
	for range need {
		q.blocks = append(q.blocks, s.pool.allocate())
	}
	return true
}

// preempt sends q back to the front of the queue, freeing its blocks; it
// will recompute its prompt and the tokens generated so far.
func (s *scheduler) preempt(q *sequence) {
	s.pool.release(q.blocks)
	q.blocks = q.blocks[:0]
	q.computed, q.registered = 0, 0
	for i := len(s.running) - 1; i >= 0; i-- {
		if s.running[i] == q {
			s.running = append(s.running[:i], s.running[i+1:]...)
			break
		}
	}
	s.pushFront(q)
	s.m.preemptions.Inc()
}

// schedule plans one step at instant now: first the running sequences in
// admission order (decodes and unfinished prefill chunks), then, if nothing
// was preempted, waiting sequences in FCFS order while there is a batch slot,
// token budget and KV room.
func (s *scheduler) schedule(now time.Time) *stepPlan {
	p := &s.plan
	clear(p.items)
	p.items, p.prefillTokens, p.sampling = p.items[:0], 0, 0
	budget := s.budget
	preempted := false

	for i := 0; i < len(s.running) && budget > 0; i++ {
		q := s.running[i]
		if q.paused(now) {
			continue
		}
		n := min(q.total()-q.computed, budget)
		for q != nil && !s.ensureBlocks(q, q.computed+n) {
			// No room for q's next tokens: preempt the most recently
			// admitted sequence, which may be q itself.
			victim := s.running[len(s.running)-1]
			s.preempt(victim)
			preempted = true
			if victim == q {
				q = nil
			}
		}
		if q == nil {
			break
		}
		budget -= n
		s.addItem(q, n)
	}

	if !preempted {
		s.admit(now, budget)
	}
	return p
}

func (s *scheduler) addItem(q *sequence, n int) {
	p := &s.plan
	samples := q.computed+n == q.total()
	if samples {
		p.sampling++
	}
	// A decode computes only the last sampled token; everything else is
	// prefill (a prompt chunk, or a recomputation after preemption).
	if !(q.generated > 0 && n == 1 && q.computed == q.total()-1) {
		p.prefillTokens += n
	}
	p.items = append(p.items, workItem{q: q, n: n, samples: samples})
}

func (s *scheduler) admit(now time.Time, budget int) {
	bs := s.blockSize
	s.keep = s.keep[:0]
	var loras uint64 // the running adapters, when their number is bounded
	if len(s.adapters) > 0 {
		loras = s.runningAdapters()
	}
	i := s.whead
	for ; i < len(s.waiting) && len(s.running) < s.maxNumSeqs && budget > 0; i++ {
		q := s.waiting[i]
		if q.state != seqWaiting {
			continue // aborted while waiting
		}
		if q.paused(now) {
			s.keep = append(s.keep, q) // a preempted sequence inside a stall fault
			continue
		}
		if b := loraBit(q); b != 0 && loras&b == 0 && bits.OnesCount64(loras) >= s.maxLoRA {
			// vLLM's scheduler skips a request whose adapter would be
			// one more than max_loras in the batch; those behind it
			// may go.
			s.keep = append(s.keep, q)
			continue
		}
		total := q.total()
		// The prefix cache can serve full prompt blocks, but never the last
		// token: at least one token is computed so that there are logits to
		// sample from.
		maxHit := min(len(q.blockHashes), (total-1)/bs)
		s.scratch = s.pool.lookup(s.scratch[:0], q.blockHashes[:maxHit])
		hits := len(s.scratch)
		n := min(total-hits*bs, budget)
		need := (hits*bs+n+bs-1)/bs - hits
		free := s.pool.numFree
		for _, b := range s.scratch {
			if s.pool.inFree[b] {
				free-- // touching it takes it off the free list
			}
		}
		if need > free {
			break // FCFS: the head waits for room, and so does everyone behind it
		}
		for _, b := range s.scratch {
			s.pool.touch(b)
		}
		q.blocks = append(q.blocks[:0], s.scratch...)
		for range need {
			q.blocks = append(q.blocks, s.pool.allocate())
		}
		q.computed, q.registered = hits*bs, hits
		if q.scheduledAt.IsZero() {
			q.scheduledAt = now
			if q.st != nil {
				q.st.setCached(hits * bs)
			}
		}
		s.m.prefixQueries.Add(float64(total))
		s.m.prefixHits.Add(float64(hits * bs))
		if q.id != "" && !q.logged {
			q.logged = true
			s.prefixes.admitted(q, hits*bs)
		}

		q.state = seqRunning
		s.nwait--
		s.running = append(s.running, q)
		loras |= loraBit(q)
		budget -= n
		s.addItem(q, n)
	}
	// waiting[whead:i] is consumed; put the skipped paused entries back just
	// before i, in their order.
	for j := len(s.keep) - 1; j >= 0; j-- {
		i--
		s.waiting[i] = s.keep[j]
	}
	clear(s.waiting[s.whead:i])
	s.whead = i
	clear(s.keep)
	s.compactWaiting()
}

// cost is the model duration of the planned step.
func (s *scheduler) cost(p *stepPlan) time.Duration {
	return s.decodeStep + time.Duration(p.sampling)*s.decodePerSeq +
		time.Duration(float64(p.prefillTokens)/s.prefillTPS*float64(time.Second))
}

// apply completes the planned step at instant now: KV is computed, full
// prompt blocks enter the prefix cache, sampling sequences gain a token and
// finished ones leave the batch.
func (s *scheduler) apply(p *stepPlan, now time.Time) {
	bs := s.blockSize
	finished := 0
	for _, it := range p.items {
		q := it.q
		if q.state != seqRunning {
			continue
		}
		q.computed += it.n
		for q.registered < len(q.blockHashes) && (q.registered+1)*bs <= q.computed {
			s.pool.register(q.blocks[q.registered], q.blockHashes[q.registered])
			q.registered++
		}
		if !it.samples {
			continue
		}
		q.generated++
		// Every metric is updated before the handler hears of the token, so
		// that /metrics never lags a response a client has already read.
		s.m.generationTokens.Inc()
		if q.generated == 1 {
			q.firstTokenAt = now
			s.m.ttft.Observe(now.Sub(q.arrival).Seconds())
			s.m.promptTokens.Add(float64(q.promptLen))
		} else {
			s.m.itl.Observe(now.Sub(q.lastTokenAt).Seconds())
		}
		q.lastTokenAt = now
		if q.generated >= q.target {
			s.pool.release(q.blocks)
			q.blocks = nil
			q.state = seqDone
			finished++
			s.m.e2e.Observe(now.Sub(q.arrival).Seconds())
			s.m.queue.Observe(q.scheduledAt.Sub(q.arrival).Seconds())
			s.m.prefill.Observe(q.firstTokenAt.Sub(q.scheduledAt).Seconds())
			s.m.decode.Observe(now.Sub(q.firstTokenAt).Seconds())
			s.m.promptLength.Observe(float64(q.promptLen))
			s.m.generationLength.Observe(float64(q.generated))
			s.m.success[q.reason].Inc()
			if q.logged {
				s.prefixes.finished(q, now)
			}
			q.st.setTimings(timingsFor(q, now))
			q.st.publish(q.generated, true, q.reason)
			continue
		}
		if q.stallFor > 0 && q.generated == q.stallAfter {
			q.pausedUntil = now.Add(q.stallFor)
		}
		q.st.publish(q.generated, false, "")
	}
	if finished > 0 {
		kept := s.running[:0]
		for _, q := range s.running {
			if q.state == seqRunning {
				kept = append(kept, q)
			}
		}
		clear(s.running[len(kept):])
		s.running = kept
	}
}

// nextResume is the earliest end of a stall among sequences that wait only
// for it.
func (s *scheduler) nextResume(now time.Time) (time.Time, bool) {
	var t time.Time
	consider := func(q *sequence) {
		if q.paused(now) && (t.IsZero() || q.pausedUntil.Before(t)) {
			t = q.pausedUntil
		}
	}
	for _, q := range s.running {
		consider(q)
	}
	for _, q := range s.waiting[s.whead:] {
		if q.state == seqWaiting {
			consider(q)
		}
	}
	return t, !t.IsZero()
}

func (s *scheduler) updateGauges() {
	s.m.running.Set(float64(len(s.running)))
	s.m.waiting.Set(float64(s.nwait))
	s.m.kvUsage.Set(s.pool.usage())
	if s.lora != nil && len(s.adapters) > 0 {
		s.reportLoRA()
	}
}

// reportLoRA tells the LoRA gauge which adapters have requests running
// and waiting, when that changed.
func (s *scheduler) reportLoRA() {
	running := s.runningAdapters()
	var waiting uint64
	all := uint64(1)<<len(s.adapters) - 1
	for _, q := range s.waiting[s.whead:] {
		if q.state == seqWaiting {
			waiting |= loraBit(q)
			if waiting == all {
				break
			}
		}
	}
	if s.loraReported && running == s.loraRunning && waiting == s.loraWaiting {
		return
	}
	s.loraReported, s.loraRunning, s.loraWaiting = true, running, waiting
	s.lora.set(s.adapterList(running), s.adapterList(waiting))
}

// adapterList joins the names of the adapters of mask with commas, in
// their configured order, as vLLM's gauge lists them.
func (s *scheduler) adapterList(mask uint64) string {
	var b strings.Builder
	for i, name := range s.adapters {
		if mask&(1<<i) == 0 {
			continue
		}
		if b.Len() > 0 {
			b.WriteByte(',')
		}
		b.WriteString(name)
	}
	return b.String()
}

// closeAll tells every live sequence's handler that the engine is gone.
func (s *scheduler) closeAll() {
	for _, q := range s.running {
		q.st.close()
	}
	for _, q := range s.waiting[s.whead:] {
		if q.state == seqWaiting {
			q.st.close()
		}
	}
}

// maxStepLag bounds how far behind schedule the loop may run and still
// start the next step at the previous step's end instant (so that step
// durations do not drift). Beyond it (a stopped process, an overloaded
// machine) the loop restarts its clock from now instead of bursting to catch
// up.
const maxStepLag = 10 * time.Millisecond

// engine runs the scheduler in one goroutine. Handlers talk to it through an
// inbox; it never blocks on a handler.
type engine struct {
	sched     *scheduler
	timeScale float64
	faults    *atomic.Pointer[Faults]

	mu     sync.Mutex
	inbox  []engineOp
	spare  []engineOp
	closed bool
	wake   chan struct{}
	done   chan struct{}
}

type engineOp struct {
	q     *sequence
	abort bool
}

func newEngine(cfg *Config, m *metrics, faults *atomic.Pointer[Faults]) *engine {
	return &engine{
		sched:     newScheduler(cfg, m),
		timeScale: cfg.TimeScale,
		faults:    faults,
		wake:      make(chan struct{}, 1),
		done:      make(chan struct{}),
	}
}

func (e *engine) send(op engineOp) bool {
	e.mu.Lock()
	if e.closed {
		e.mu.Unlock()
		return false
	}
	e.inbox = append(e.inbox, op)
	e.mu.Unlock()
	select {
	case e.wake <- struct{}{}:
	default:
	}
	return true
}

// submit queues q; false means the engine has shut down.
func (e *engine) submit(q *sequence) bool { return e.send(engineOp{q: q}) }

// abort asks the engine to drop q (the client went away).
func (e *engine) abort(q *sequence) { e.send(engineOp{q: q, abort: true}) }

func (e *engine) drain() {
	e.mu.Lock()
	ops := e.inbox
	e.inbox = e.spare[:0]
	e.mu.Unlock()
	for _, op := range ops {
		if op.abort {
			e.sched.abort(op.q)
		} else {
			e.sched.add(op.q)
		}
	}
	clear(ops)
	e.spare = ops[:0]
}

// run is the engine loop: drain the inbox, plan a step, sleep until the
// step's end instant, apply it. It returns when ctx is done, after telling
// every waiting handler.
func (e *engine) run(ctx context.Context) {
	defer close(e.done)
	defer e.shutdown()
	timer := time.NewTimer(time.Hour)
	timer.Stop()
	var prevEnd time.Time
	busy := false
	steps := 0
	for {
		if ctx.Err() != nil {
			return
		}
		e.drain()
		now := time.Now()
		plan := e.sched.schedule(now)
		e.sched.updateGauges()
		if plan.empty() {
			busy = false
			var timerC <-chan time.Time
			if t, ok := e.sched.nextResume(now); ok {
				timer.Reset(t.Sub(now))
				timerC = timer.C
			}
			select {
			case <-ctx.Done():
			case <-e.wake:
			case <-timerC:
			}
			timer.Stop()
			continue
		}

		scale := e.timeScale * e.faults.Load().Slowdown
		d := time.Duration(float64(e.sched.cost(plan)) * scale)
		if d > 0 {
			start := now
			if busy && now.Sub(prevEnd) <= maxStepLag {
				start = prevEnd
			}
			end := start.Add(d)
			if wait := end.Sub(now); wait > 0 {
				timer.Reset(wait)
				select {
				case <-ctx.Done():
					timer.Stop()
					return
				case <-timer.C:
				}
			}
			prevEnd = end
		} else {
			// Instant mode: let the handlers that write the tokens run.
			steps++
			if steps%8 == 0 {
				runtime.Gosched()
			}
		}
		busy = true
		e.sched.apply(plan, time.Now())
		e.sched.updateGauges()
	}
}

func (e *engine) shutdown() {
	e.mu.Lock()
	e.closed = true
	ops := e.inbox
	e.inbox = nil
	e.mu.Unlock()
	for _, op := range ops {
		if !op.abort {
			op.q.st.close()
		}
	}
	e.sched.closeAll()
}
