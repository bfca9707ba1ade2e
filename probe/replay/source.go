package replay

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/infer-exporter/infer_exporter/internal/config"
	"github.com/infer-exporter/infer_exporter/probe/client"
	"github.com/infer-exporter/infer_exporter/probe/observation"

	"github.com/infer-exporter/infer_exporter/internal/hashmix"
	"github.com/infer-exporter/infer_exporter/probe/prompt"
)

// Options configure a Source.
type Options struct {
	// Speed is trace seconds per wall second: 2 replays twice as fast.
	// Default 1.
	Speed float64
	// Start and End bound the window of the trace that is replayed, in trace
	// time from its first request: records with Start <= offset < End. End 0
	// means the end of the trace.
	Start, End time.Duration
	// Loop starts the window again when it ends, for ever. A pass lasts
	// End-Start when End is set; otherwise from Start to the last record
	// plus the window's mean gap between records.
	Loop bool
	// Sample is the fraction of records replayed, in (0, 1]; each record of
	// each pass is kept or not by a hash of Seed, the pass and the record.
	// Default 1.
	Sample float64
	// Seed selects the sample and the synthesised words.
	Seed int64
	// WordSalt, when not 0, changes the synthesised words and nothing else:
	// the same rows at the same instants with the same lengths and the same
	// prefix structure, but words no earlier replay with another salt sent,
	// so a server's prefix cache sees them cold. A bench repeat sets it to
	// its index.
	WordSalt uint64
	// MaxRate is the hard ceiling in requests/s, as for arrival processes:
	// consecutive sends are at least 1/MaxRate apart, and a request held
	// back by it counts in Clamped and drifts. 0 means DefaultCeiling times
	// the busiest second of the window (after Speed and Sample).
	MaxRate float64

	// Flavor is the facts of the target's flavor. Its prompt kind says
	// whether the API wraps the prompt in a chat message, so that the
	// template's tokens count in a synthesised prompt's length; its API
	// (Path) is the one a recorded body must have been recorded for. The
	// zero value is a text-prompt target of no OpenAI API, which takes no
	// recorded body.
	Flavor config.FlavorFacts
	// BlockSize is the number of tokens per hash id of a Mooncake trace.
	// Default 512.
	BlockSize int
	// ForceOutputTokens, for recorded bodies that carry output_tokens, sets
	// the target API's cap on output tokens (max_tokens, max_output_tokens)
	// to it and ignore_eos, so that the replay generates what production
	// generated. Otherwise a body is sent as it was.
	ForceOutputTokens bool
	// OnUnreplayable is what to do with a record that cannot be replayed
	// exactly (an output length of 0, a prompt shorter than the chat
	// template, hash ids that do not cover the prompt, a body recorded for
	// another API): Refuse (the default) or Skip.
	OnUnreplayable Policy

	// Recorder hears what the replay does; nil records nothing.
	Recorder Recorder
}

// DefaultBlockSize is the Mooncake traces' block size.
const DefaultBlockSize = 512

// DefaultCeiling is the multiple of the window's busiest second that
// MaxRate defaults to: it trims only bursts far denser than the trace's own
// peak, which a trace with microsecond gaps still has.
const DefaultCeiling = 10

// Recorder hears the replay's progress and timing. It is called from the
// request goroutines, concurrently.
type Recorder interface {
	// Replayed says one more record was replayed: its request finished
	// (whatever the outcome) or was dropped. progress is the fraction of
	// the latest pass (the one of the latest record replayed) replayed so
	// far, 0..1; a late request of an earlier pass does not move it.
	Replayed(progress float64)
	// Drift says a request was sent d after its trace instant (d >= 0): the
	// ceiling's delay plus the client's schedule lag. at is the send instant.
	Drift(at time.Time, d time.Duration)
}

// RefusalRecorder is a Recorder that also hears of every replayed request
// the target refused with a client error (outcome http_4xx, such as a
// record longer than the target's context), before its Replayed. It is
// called from the request goroutines, concurrently; r and obs must not be
// kept or changed.
type RefusalRecorder interface {
	Recorder
	Refused(r *Record, obs *observation.Request)
}

// Source replays a trace. Schedule and Prompts are the two views the
// workload runner takes; they share the dispatcher's state, so the runner
// must call Schedule().Next, then Prompts().Next and Prompts().Request for
// the same arrival, from one goroutine, which it does.
type Source struct {
	opts    Options
	synth   synthesizer
	recs    []Record        // the window's replayable records
	bodies  [][]byte        // the body to send, per record (nil for token records)
	ideal   []time.Duration // per record, from the window's start, at Speed
	passLen time.Duration   // at Speed
	maxRate float64
	minGap  time.Duration
	skipped int
	errs    []error

	// The dispatcher's state.
	pass    int   // the current pass, -1 before the first
	sel     []int // the current pass's sampled records
	pos     int   // next index into sel
	last    time.Duration
	emitted bool
	// lastIdeal is the trace instant of the arrival emitted last;
	// defaultCeiling says MaxRate was left to its default, whose spacing
	// does not apply between rows the trace itself puts on one instant
	// (maxGroup rows at most: the wire ceiling's burst).
	lastIdeal      time.Duration
	defaultCeiling bool
	maxGroup       int
	done           bool
	cur            arrivalInfo
	// pending holds the arrivals Request completed, by sequence number,
	// until their request ends or is dropped (guarded by mu).
	pending map[uint64]arrivalInfo
	clamped atomic.Uint64

	// Progress, across request goroutines.
	mu         sync.Mutex
	replayed   map[int]int // by pass: records replayed
	latest     int         // the latest pass that replayed a record
	latestSize int         // its number of records
}

// arrivalInfo is what the source knows about the arrival it last emitted.
type arrivalInfo struct {
	rec      *Record
	body     []byte
	pass     int
	passSize int
	ideal    time.Duration // the trace instant, from the run's start
	emitted  time.Duration // after the ceiling
}

// NewSource prepares a replay of tr. It checks every record of the window
// against opts (see Options.OnUnreplayable); under Skip, Skipped and Errors
// report what was left out.
func NewSource(tr *Trace, opts Options) (*Source, error) {
	if err := opts.withDefaults(); err != nil {
		return nil, err
	}
	s := &Source{
		opts:     opts,
		synth:    synthesizer{chat: opts.Flavor.Chat(), blockSize: opts.BlockSize, seed: wordSeed(opts.Seed, opts.WordSalt)},
		pass:     -1,
		replayed: map[int]int{},
	}
	for i := range tr.Records {
		r := &tr.Records[i]
		if r.Offset < opts.Start || (opts.End > 0 && r.Offset >= opts.End) {
			continue
		}
		ideal, ok := s.scale(r.Offset - opts.Start)
		if !ok {
			return nil, fmt.Errorf("%s:%d: offset %v at speed %v is beyond %v of replay", r.File, r.Line, r.Offset-opts.Start, opts.Speed, maxWall)
		}
		body, reason := s.check(r)
		if reason != "" {
			err := &LineError{File: r.File, Line: r.Line, Reason: reason}
			if opts.OnUnreplayable == Refuse {
				return nil, err
			}
			s.skipped++
			if len(s.errs) < MaxKeptErrors {
				s.errs = append(s.errs, err)
			}
			continue
		}
		s.recs = append(s.recs, *r)
		s.bodies = append(s.bodies, body)
		s.ideal = append(s.ideal, ideal)
	}
	if len(s.recs) == 0 {
		return nil, fmt.Errorf("%s: %w in the window [%v, %v)", tr.Name, ErrNoRecords, opts.Start, windowEnd(opts.End))
	}
	if opts.Loop {
		switch {
		case opts.End > 0:
			var ok bool
			if s.passLen, ok = s.scale(opts.End - opts.Start); !ok {
				return nil, fmt.Errorf("%s: the window [%v, %v) at speed %v lasts beyond %v", tr.Name, opts.Start, opts.End, opts.Speed, maxWall)
			}
		case len(s.recs) >= 2 && s.ideal[len(s.ideal)-1] > s.ideal[0]:
			n := len(s.ideal)
			span := s.ideal[n-1] - s.ideal[0]
			s.passLen = s.ideal[n-1] + span/time.Duration(n-1)
		default:
			return nil, fmt.Errorf("%s: loop needs an end to the window: the records do not span any time", tr.Name)
		}
	}
	s.maxRate = opts.MaxRate
	s.maxGroup = 1
	if s.maxRate == 0 {
		s.maxRate = min(DefaultCeiling*s.peakRate(), config.MaxRateLimit)
		s.defaultCeiling = true
		for i, run := 1, 1; i < len(s.ideal); i++ {
			if s.ideal[i] == s.ideal[i-1] {
				run++
			} else {
				run = 1
			}
			s.maxGroup = max(s.maxGroup, run)
		}
	}
	// Whole nanoseconds, rounded up: the ceiling is never exceeded, at the
	// cost of at most 1 ns per gap. A ceiling of less than one request in
	// maxWall is one request in maxWall (Next ends the schedule there).
	s.minGap = time.Duration(min(math.Ceil(1e9/s.maxRate), float64(maxWall)))
	return s, nil
}

func windowEnd(end time.Duration) any {
	if end == 0 {
		return "end"
	}
	return end
}

func (o *Options) withDefaults() error {
	if o.Speed == 0 {
		o.Speed = 1
	}
	if o.Sample == 0 {
		o.Sample = 1
	}
	if o.BlockSize == 0 {
		o.BlockSize = DefaultBlockSize
	}
	if o.OnUnreplayable == "" {
		o.OnUnreplayable = Refuse
	}
	switch {
	case math.IsNaN(o.Speed) || math.IsInf(o.Speed, 0) || o.Speed <= 0:
		return fmt.Errorf("speed %v must be a finite number > 0", o.Speed)
	case o.Start < 0:
		return fmt.Errorf("window start %v must not be negative", o.Start)
	case o.End != 0 && o.End <= o.Start:
		return fmt.Errorf("window end %v must be after its start %v", o.End, o.Start)
	case !(o.Sample > 0 && o.Sample <= 1):
		return fmt.Errorf("sample %v must be in (0, 1]", o.Sample)
	case o.BlockSize < 1 || o.BlockSize > maxTokens:
		return fmt.Errorf("block size %d must be in [1, %d]", o.BlockSize, maxTokens)
	case math.IsNaN(o.MaxRate) || o.MaxRate < 0 || o.MaxRate > config.MaxRateLimit:
		return fmt.Errorf("max rate %v must be in [0, %g] requests/s", o.MaxRate, float64(config.MaxRateLimit))
	case o.OnUnreplayable != Refuse && o.OnUnreplayable != Skip:
		return fmt.Errorf("unknown policy %q", o.OnUnreplayable)
	}
	return nil
}

// maxWall bounds the replay's instants, in wall time from the start of a
// pass: 2^62 ns, about 146 years, so that adding a pass length or a gap
// to one cannot overflow.
const maxWall = time.Duration(1 << 62)

// scale converts a trace duration to wall time at Speed; false when it is
// beyond maxWall.
func (s *Source) scale(d time.Duration) (time.Duration, bool) {
	v := math.Round(float64(d) / s.opts.Speed)
	if !(v >= 0 && v <= float64(maxWall)) {
		return 0, false
	}
	return time.Duration(v), true
}

// check says why a record cannot be replayed exactly ("" when it can), and
// returns the body to send for a recorded request.
func (s *Source) check(r *Record) ([]byte, string) {
	if r.Body != nil {
		return s.checkBody(r)
	}
	before, after := s.synth.template()
	chat := s.opts.Flavor.Chat()
	switch {
	// The readers refuse such lengths; a Trace built in memory may hold
	// them, and a prompt is built to its length.
	case r.InputTokens > maxTokens || r.OutputTokens > maxTokens:
		return nil, fmt.Sprintf("length %d+%d is over the ceiling of %d tokens", r.InputTokens, r.OutputTokens, maxTokens)
	case r.OutputTokens < 1:
		return nil, fmt.Sprintf("output length %d cannot be forced (max_tokens must be at least 1)", r.OutputTokens)
	case chat && r.InputTokens < before+after:
		return nil, fmt.Sprintf("prompt length %d is shorter than the chat template's %d tokens", r.InputTokens, before+after)
	case !chat && r.InputTokens < 1:
		return nil, "prompt length 0: a completions prompt needs at least one token"
	case r.HashIDs != nil:
		need := (r.InputTokens + s.opts.BlockSize - 1) / s.opts.BlockSize
		if len(r.HashIDs) != need {
			return nil, fmt.Sprintf("%d hash_ids, but input_length %d needs %d blocks of %d tokens", len(r.HashIDs), r.InputTokens, need, s.opts.BlockSize)
		}
	}
	return nil, ""
}

// checkBody says why a recorded body cannot be sent to the target ("" when
// it can), and returns the body to send: as recorded, or with its output
// length forced.
func (s *Source) checkBody(r *Record) ([]byte, string) {
	if reason := s.otherAPI(r); reason != "" {
		return nil, reason
	}
	if !s.opts.ForceOutputTokens || r.OutputTokens <= 0 {
		return r.Body, ""
	}
	if r.OutputTokens > maxTokens {
		return nil, fmt.Sprintf("output length %d is over the ceiling of %d tokens", r.OutputTokens, maxTokens)
	}
	b, err := forceOutput(r.Body, r.OutputTokens, s.opts.Flavor.BodyMaxTokens)
	if err != nil {
		return nil, "body: " + clip(err.Error(), maxReason)
	}
	return b, ""
}

// otherAPI says why a recorded body was not recorded for the target's API,
// by the flavor facts: the API of the record's path
// (config.RecordedPathFlavor), or, for a record without one, the API its
// body's members tell (config.RecordedBodyFlavor), against the target's
// flavor. "" when it was, or when a body without a path does not tell: it
// is sent as it was, for the target's API.
func (s *Source) otherAPI(r *Record) string {
	target := s.opts.Flavor
	if target.Path == "" {
		return fmt.Sprintf("a recorded body is sent to an OpenAI API (%s); the target's flavor %q is none",
			strings.Join(config.OpenAIFlavors(), ", "), target.Name)
	}
	speaks := fmt.Sprintf("the target speaks the %s API (%s)", target.Name, target.Path)
	if r.Path != "" {
		api, ok := config.RecordedPathFlavor(r.Path)
		switch {
		case !ok:
			return fmt.Sprintf("recorded for %s, the path of no OpenAI API; %s", clip(r.Path, maxQuoted), speaks)
		case api.Name != target.Name:
			return fmt.Sprintf("recorded for %s, the %s API; %s", clip(r.Path, maxQuoted), api.Name, speaks)
		}
		return ""
	}
	var m map[string]json.RawMessage
	if json.Unmarshal(r.Body, &m) != nil {
		return "" // sent as it was: the target says what is wrong with it
	}
	api, told := config.RecordedBodyFlavor(func(member string) bool {
		_, ok := m[member]
		return ok
	})
	if told && api.Name != target.Name {
		return fmt.Sprintf("recorded without a path, with a body of the %s API (by its members: %s, %s); %s",
			api.Name, api.BodyPrompt, api.BodyMaxTokens, speaks)
	}
	return ""
}

// forceOutput sets capMember (the member that caps the output in the
// body of the API the body is sent to: max_tokens, or the Responses API's
// max_output_tokens) to n, and max_completion_tokens too when the body has
// it, and ignore_eos to true.
func forceOutput(body []byte, n int, capMember string) ([]byte, error) {
	var m map[string]json.RawMessage
	if err := json.Unmarshal(body, &m); err != nil {
		return nil, err
	}
	v := json.RawMessage(fmt.Sprint(n))
	m[capMember] = v
	if _, ok := m["max_completion_tokens"]; ok {
		m["max_completion_tokens"] = v
	}
	m["ignore_eos"] = json.RawMessage("true")
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(m); err != nil {
		return nil, err
	}
	return bytes.TrimRight(buf.Bytes(), "\n"), nil
}

// peakRate is the most records the window holds in any one second of wall
// time (at Speed), times Sample: the busiest second of the replay.
func (s *Source) peakRate() float64 {
	best, j := 0, 0
	for i := range s.ideal {
		for s.ideal[i]-s.ideal[j] >= time.Second {
			j++
		}
		best = max(best, i-j+1)
	}
	return max(float64(best)*s.opts.Sample, 1)
}

// OverContext counts the window's records that cannot fit a context of
// contextLen tokens: those whose prompt plus forced output length (the
// chat template included) is more. A recorded body's prompt length is not
// known without the target's tokenizer, so bodies are not counted. It
// returns how many, the largest such length, and the record it is at
// (file:line).
func (s *Source) OverContext(contextLen int) (rows, largest int, at string) {
	for i := range s.recs {
		r := &s.recs[i]
		if s.bodies[i] != nil {
			continue
		}
		if n := r.InputTokens + r.OutputTokens; n > contextLen {
			rows++
			if n > largest {
				largest, at = n, fmt.Sprintf("%s:%d", r.File, r.Line)
			}
		}
	}
	return rows, largest, at
}

// wordSeed is the synthesizer's seed: the replay's seed, mixed with a salt
// when one is given (salt 0 keeps the words of a replay without one).
func wordSeed(seed int64, salt uint64) uint64 {
	if salt == 0 {
		return uint64(seed)
	}
	return key3(uint64(seed), salt, 0x5a17)
}

// Window is the length of the replayed window at Speed: from its first
// record's instant to its last one's (one pass's length when Loop).
func (s *Source) Window() time.Duration {
	if s.opts.Loop {
		return s.passLen
	}
	return s.ideal[len(s.ideal)-1]
}

// Bodies says whether the window's records carry recorded request bodies,
// sent as they were: their words are the trace's, whatever WordSalt.
func (s *Source) Bodies() bool {
	for _, b := range s.bodies {
		if b != nil {
			return true
		}
	}
	return false
}

// Records is the number of records in the window that are replayed (before
// sampling).
func (s *Source) Records() int { return len(s.recs) }

// Skipped is the number of records of the window left out as unreplayable
// (under Skip); Errors holds the first MaxKeptErrors of them.
func (s *Source) Skipped() int { return s.skipped }

// Errors returns the errors of the first skipped records.
func (s *Source) Errors() []error { return s.errs }

// Burst is how many requests the replay may send at one instant: the
// largest group of rows sharing an instant in the trace when MaxRate was
// left to its default, else 1. The wire ceiling's bucket must hold it, or it
// would refuse the group it was built to let through.
func (s *Source) Burst() int { return s.maxGroup }

// MaxRate is the ceiling in force, in (0, config.MaxRateLimit], for
// arrival.NewWireCeiling.
func (s *Source) MaxRate() float64 { return s.maxRate }

// Schedule returns the replay's arrival schedule.
func (s *Source) Schedule() *Schedule { return &Schedule{s} }

// Prompts returns the replay's prompt source.
func (s *Source) Prompts() *Prompts { return &Prompts{s} }

// Schedule is the Source as an arrival schedule.
type Schedule struct{ s *Source }

// Next returns the offset from the start of the run of the next request:
// its trace instant (from the window's start, at Speed, plus a pass length
// per earlier pass), moved later when the ceiling demands it. Offsets
// strictly increase. It returns false when the window ends (never, with
// Loop).
func (sc *Schedule) Next() (time.Duration, bool) {
	s := sc.s
	for !s.done {
		if s.pos >= len(s.sel) {
			if s.pass >= 0 && !s.opts.Loop {
				s.done = true
				break
			}
			s.pass++
			s.sel = s.selectPass(s.pass, s.sel[:0])
			s.pos = 0
			continue
		}
		i := s.sel[s.pos]
		s.pos++
		if s.pass > 0 && s.passLen > (math.MaxInt64-s.ideal[len(s.ideal)-1]-s.minGap)/time.Duration(s.pass) {
			s.done = true // beyond 292 years
			break
		}
		ideal := time.Duration(s.pass)*s.passLen + s.ideal[i]
		at := ideal
		if s.emitted && s.last > math.MaxInt64-s.minGap {
			s.done = true // beyond 292 years
			break
		}
		switch {
		case s.emitted && s.defaultCeiling && ideal == s.lastIdeal:
			// Rows the trace puts on one instant go out together, at the
			// instant their group was emitted: the default ceiling spaces
			// instants, not the rows of one.
			at = s.last
		case s.emitted && at < s.last+s.minGap:
			at = s.last + s.minGap
			s.clamped.Add(1)
		}
		s.last, s.lastIdeal, s.emitted = at, ideal, true
		s.cur = arrivalInfo{rec: &s.recs[i], body: s.bodies[i], pass: s.pass, passSize: len(s.sel), ideal: ideal, emitted: at}
		return at, true
	}
	return 0, false
}

// selectPass appends the indexes of the records sampled for pass p.
func (s *Source) selectPass(p int, dst []int) []int {
	if s.opts.Sample >= 1 {
		for i := range s.recs {
			dst = append(dst, i)
		}
		return dst
	}
	limit := uint64(s.opts.Sample * (1 << 53))
	k := key3(uint64(s.opts.Seed), uint64(p), 0x5a3b1e)
	for i := range s.recs {
		if hashmix.Mix64(k^uint64(i)*0x9e3779b97f4a7c15)>>11 < limit {
			dst = append(dst, i)
		}
	}
	return dst
}

// rateWindow is the stretch of replay time over which Rate counts records.
const rateWindow = 10 * time.Second

// Rate returns the trace's request rate, in requests/s, over the rateWindow
// of replay time before elapsed (over the time since the start, in the first
// rateWindow; at least one second), times Sample: 0 once a replay that
// does not loop is over. It reads only what NewSource built, so it is safe to call while
// the dispatcher calls Next.
func (sc *Schedule) Rate(elapsed time.Duration) float64 {
	s := sc.s
	if elapsed < 0 {
		return 0
	}
	e := elapsed
	if s.opts.Loop {
		e = elapsed % s.passLen
	}
	span := min(max(elapsed, time.Second), rateWindow)
	hi := sort.Search(len(s.ideal), func(i int) bool { return s.ideal[i] > e })
	lo := sort.Search(len(s.ideal), func(i int) bool { return s.ideal[i] > e-span })
	n := hi - lo
	if s.opts.Loop && e-span < 0 {
		// The window reaches back into the previous pass.
		from := s.passLen + (e - span)
		n += len(s.ideal) - sort.Search(len(s.ideal), func(i int) bool { return s.ideal[i] > from })
	}
	return float64(n) * s.opts.Sample / span.Seconds()
}

// Clamped returns how many requests the ceiling moved later than their trace
// instant.
func (sc *Schedule) Clamped() uint64 { return sc.s.clamped.Load() }

// MaxRate is the ceiling in force.
func (sc *Schedule) MaxRate() float64 { return sc.s.maxRate }

// Prompts is the Source as the runner's prompt source.
type Prompts struct{ s *Source }

// Next returns the prompt of the arrival Schedule.Next last returned: for a
// token-only record, a synthesised prompt of exactly its input length (the
// chat template included when the target's flavor takes chat messages) and its output length; for a
// recorded body, only the recorded output length (Request puts the body in).
func (pr *Prompts) Next() prompt.Prompt {
	a := &pr.s.cur
	if a.rec == nil {
		return prompt.Prompt{}
	}
	if a.body != nil {
		return prompt.Prompt{OutputTokens: a.rec.OutputTokens}
	}
	return prompt.Prompt{
		Text:         pr.s.synth.prompt(a.rec, a.pass),
		InputTokens:  a.rec.InputTokens,
		OutputTokens: a.rec.OutputTokens,
	}
}

// Request completes the request built from the prompt Next just returned,
// arrival seq of the run: a recorded body is sent as it was
// (client.Request.RawBody); a token-only record's output length is forced
// (max_tokens and ignore_eos). Prompts then follows the request as an
// Observer, finding it again by its sequence number: its end or its drop
// records drift and progress.
func (pr *Prompts) Request(seq uint64, req *client.Request) {
	s := pr.s
	a := s.cur
	if a.rec == nil {
		return
	}
	if a.body != nil {
		req.RawBody = a.body
	} else {
		req.MaxTokens = a.rec.OutputTokens
		req.IgnoreEOS = true
	}
	s.mu.Lock()
	if s.pending == nil {
		s.pending = map[uint64]arrivalInfo{}
	}
	s.pending[seq] = a
	s.mu.Unlock()
}

// Sent implements the runner's Observer; a replay follows ends only.
func (pr *Prompts) Sent(*observation.Request) {}

// FirstToken implements the runner's Observer.
func (pr *Prompts) FirstToken(*observation.Request) {}

// Token implements the runner's Observer.
func (pr *Prompts) Token(*observation.Request) {}

// Done records the drift and progress of a replayed request that ended.
func (pr *Prompts) Done(obs *observation.Request) { pr.end(obs) }

// Dropped records a replayed arrival that was never sent.
func (pr *Prompts) Dropped(obs *observation.Request) { pr.end(obs) }

func (pr *Prompts) end(obs *observation.Request) {
	s := pr.s
	s.mu.Lock()
	a, ok := s.pending[obs.Seq]
	delete(s.pending, obs.Seq)
	s.mu.Unlock()
	if ok { // an arrival that carried a known-answer check is not a record
		s.follow(&a, obs)
	}
}

// follow records one replayed arrival.
func (s *Source) follow(a *arrivalInfo, obs *observation.Request) {
	rec := s.opts.Recorder
	if rec == nil {
		return
	}
	if obs.Outcome == observation.HTTP4xx {
		if rr, ok := rec.(RefusalRecorder); ok {
			rr.Refused(a.rec, obs)
		}
	}
	if !obs.Sent.IsZero() && !obs.Scheduled.IsZero() {
		// Scheduled is the run's start plus the emitted offset, so the
		// trace instant is Scheduled minus the ceiling's delay.
		rec.Drift(obs.Sent, obs.Sent.Sub(obs.Scheduled)+(a.emitted-a.ideal))
	}
	s.mu.Lock()
	s.replayed[a.pass]++
	if a.pass > s.latest {
		s.latest, s.latestSize = a.pass, a.passSize
		for p := range s.replayed {
			if p < a.pass {
				delete(s.replayed, p) // the gauge follows the latest pass
			}
		}
	} else if a.pass == s.latest {
		s.latestSize = a.passSize
	}
	progress := float64(s.replayed[s.latest]) / float64(max(s.latestSize, 1))
	s.mu.Unlock()
	rec.Replayed(progress)
}

// ErrNoRecords is NewSource's error for a window without a replayable
// record.
var ErrNoRecords = errors.New("no replayable record")
