package config

import (
	"bufio"
	"bytes"
	"cmp"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"slices"
	"time"
)

// An agent_sessions trace (replay source ReplaySourceAgentSessions) holds
// recorded agent jobs, one JSON line per turn:
//
//	{"session": "job-17", "turn": 1, "offset": 0.0, "body": {"messages": [...], "tools": [...], "max_tokens": 256}}
//	{"session": "job-17", "turn": 2, "tool_wait": 0.43, "body": {"messages": [...]}}
//
// "offset" (turn 1 only) is the job's arrival in seconds, measured from the
// earliest job's, as the jsonl trace's "offset" is; "tool_wait" (every later
// turn) is the recorded pause in seconds between the previous turn's reply
// end and this turn's send; "body" is the chat-completions request body as
// the agent sent it, as the jsonl trace's "body" is. The lines of different
// jobs may interleave; a job's own turns come in order, 1, 2, 3... The
// parser lives here, not in probe/sessions, so that --config.check reads
// the file: the configuration cannot import the probes.

// Bounds of an agent_sessions trace. Every recorded body is held in memory
// while the workload runs, so the file's size bounds that memory.
const (
	// MaxAgentTraceBytes bounds the file.
	MaxAgentTraceBytes = 256 << 20
	// MaxAgentTraceLineBytes bounds one line: a turn whose conversation is
	// a 128k-token prompt fits with room to spare (as a jsonl trace's).
	MaxAgentTraceLineBytes = 16 << 20
	// MaxAgentTraceLines bounds the lines (turns) of the file.
	MaxAgentTraceLines = 1_000_000
	// MaxAgentSessions bounds the jobs of the file.
	MaxAgentSessions = 100_000
	// MaxAgentSessionIDBytes bounds a job's "session" id.
	MaxAgentSessionIDBytes = 256
	// maxAgentOffset bounds an arrival offset: 100 years, a jsonl trace's
	// bound too.
	maxAgentOffset = 100 * 365 * 24 * time.Hour
)

// AgentTrace is an agent_sessions trace, read and checked.
type AgentTrace struct {
	// Name is the file read.
	Name string
	// Sessions are its jobs, by offset (the file's order among equal ones).
	Sessions []AgentSession
	// SkippedSessions counts the jobs left out under on_malformed: skip
	// (every line of a job with a malformed line); SkippedLines their lines
	// and the malformed lines that named no job.
	SkippedSessions, SkippedLines int
	// Errors are the first MaxAgentTraceErrors skipped lines' reasons,
	// each "file:line: reason".
	Errors []error
}

// MaxAgentTraceErrors bounds AgentTrace.Errors.
const MaxAgentTraceErrors = 20

// AgentSession is one recorded job.
type AgentSession struct {
	ID string
	// Offset is its arrival, from the trace's earliest job's.
	Offset time.Duration
	Turns  []AgentTurn
}

// AgentTurn is one recorded turn of a job.
type AgentTurn struct {
	// Line is the turn's line in the file, for messages.
	Line int
	// ToolWait is the recorded pause between the previous turn's reply end
	// and this turn's send; 0 for turn 1.
	ToolWait time.Duration
	// ToolResults counts the "tool" messages that end Body's messages: the
	// previous turn's calls, answered (0 for turn 1).
	ToolResults int
	// Body is the request body as recorded: a JSON object with a
	// non-empty "messages" array.
	Body json.RawMessage
}

// agentTraceLine is one line of the file as decoded.
type agentTraceLine struct {
	Session  *string         `json:"session"`
	Turn     *int            `json:"turn"`
	Offset   *float64        `json:"offset"`
	ToolWait *float64        `json:"tool_wait"`
	Body     json.RawMessage `json:"body"`
}

// ReadAgentTrace reads and checks the agent_sessions trace at path. skip
// is on_malformed: skip (a malformed line drops its whole job, counted);
// otherwise the first malformed line is the error, "file:line: reason".
// The bounds above hold whatever skip says.
func ReadAgentTrace(path string, skip bool) (*AgentTrace, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	if fi, err := f.Stat(); err != nil {
		return nil, err
	} else if !fi.Mode().IsRegular() {
		return nil, fmt.Errorf("%s is not a regular file", path)
	}
	return ParseAgentTrace(f, path, skip)
}

// agentTraceReader is the state of one parse.
type agentTraceReader struct {
	name     string
	skip     bool
	trace    AgentTrace
	sessions map[string]*AgentSession
	order    []*AgentSession // by first line
	dropped  map[string]bool
}

// ParseAgentTrace reads an agent_sessions trace from r; name is the file
// named in errors.
func ParseAgentTrace(r io.Reader, name string, skip bool) (*AgentTrace, error) {
	rd := &agentTraceReader{name: name, skip: skip, trace: AgentTrace{Name: name},
		sessions: map[string]*AgentSession{}, dropped: map[string]bool{}}
	counted := &countingReader{r: r}
	br := bufio.NewReaderSize(counted, 64<<10)
	for n := 1; ; n++ {
		line, tooLong, err := readAgentLine(br)
		if counted.n > MaxAgentTraceBytes {
			return nil, fmt.Errorf("%s: larger than %s (config.MaxAgentTraceBytes)", name, byteSize(MaxAgentTraceBytes))
		}
		if err != nil && !errors.Is(err, io.EOF) {
			return nil, fmt.Errorf("%s: %w", name, err)
		}
		if n > MaxAgentTraceLines && (len(line) > 0 || tooLong) {
			return nil, fmt.Errorf("%s: more than %d lines (config.MaxAgentTraceLines)", name, MaxAgentTraceLines)
		}
		if n == 1 {
			line = bytes.TrimPrefix(line, []byte("\ufeff"))
		}
		if perr := rd.line(n, line, tooLong); perr != nil {
			return nil, perr
		}
		if errors.Is(err, io.EOF) {
			break
		}
	}
	return rd.finish()
}

// countingReader counts the bytes read through it.
type countingReader struct {
	r io.Reader
	n int64
}

func (c *countingReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.n += int64(n)
	return n, err
}

// readAgentLine reads one line, without its line ending; a line longer than
// MaxAgentTraceLineBytes is read to its end and returned empty, tooLong.
func readAgentLine(br *bufio.Reader) (line []byte, tooLong bool, err error) {
	for {
		chunk, err := br.ReadSlice('\n')
		if !tooLong {
			if len(line)+len(chunk) > MaxAgentTraceLineBytes+2 {
				tooLong, line = true, nil
			} else {
				line = append(line, chunk...)
			}
		}
		if errors.Is(err, bufio.ErrBufferFull) {
			continue
		}
		line = bytes.TrimRight(line, "\r\n")
		if len(line) > MaxAgentTraceLineBytes {
			tooLong, line = true, nil
		}
		return line, tooLong, err
	}
}

// line parses line n; a malformed one is the error, or under skip drops
// its job.
func (rd *agentTraceReader) line(n int, line []byte, tooLong bool) error {
	if tooLong {
		return rd.bad(n, "", fmt.Sprintf("longer than %s (config.MaxAgentTraceLineBytes)", byteSize(MaxAgentTraceLineBytes)))
	}
	if len(bytes.TrimSpace(line)) == 0 {
		return nil
	}
	var l agentTraceLine
	dec := json.NewDecoder(bytes.NewReader(line))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&l); err != nil {
		return rd.bad(n, "", "not a turn: "+clipReason(err.Error()))
	}
	if dec.More() {
		return rd.bad(n, "", "holds more than one JSON value")
	}
	if l.Session == nil || *l.Session == "" {
		return rd.bad(n, "", `needs "session", the job's id (a non-empty string)`)
	}
	id := *l.Session
	if len(id) > MaxAgentSessionIDBytes {
		return rd.bad(n, "", fmt.Sprintf(`"session" is longer than %d bytes (config.MaxAgentSessionIDBytes)`, MaxAgentSessionIDBytes))
	}
	if rd.dropped[id] {
		rd.trace.SkippedLines++
		return nil
	}
	turn, reason := rd.turn(n, id, &l)
	if reason != "" {
		return rd.bad(n, id, reason)
	}
	if turn.Line == 0 {
		return nil // a job's first turn, started by rd.turn
	}
	rd.sessions[id].Turns = append(rd.sessions[id].Turns, turn)
	return nil
}

// turn checks line n, of job id, and returns its turn; a first turn starts
// the job. It returns why the line is malformed, or "".
func (rd *agentTraceReader) turn(n int, id string, l *agentTraceLine) (AgentTurn, string) {
	if l.Turn == nil {
		return AgentTurn{}, `needs "turn", the turn's number in its job (1, 2, ...)`
	}
	k := *l.Turn
	if k < 1 || k > MaxSessionTurns {
		return AgentTurn{}, fmt.Sprintf(`"turn" %d must be between 1 and %d (config.MaxSessionTurns)`, k, MaxSessionTurns)
	}
	body, results, reason := agentBody(l.Body)
	if reason != "" {
		return AgentTurn{}, reason
	}
	s := rd.sessions[id]
	if k == 1 {
		off, reason := agentFirstTurn(l, s)
		if reason != "" {
			return AgentTurn{}, reason
		}
		if len(rd.order) >= MaxAgentSessions {
			return AgentTurn{}, fmt.Sprintf("more than %d jobs (config.MaxAgentSessions)", MaxAgentSessions)
		}
		s = &AgentSession{ID: id, Offset: off, Turns: []AgentTurn{{Line: n, Body: body}}}
		rd.sessions[id] = s
		rd.order = append(rd.order, s)
		return AgentTurn{}, ""
	}
	switch {
	case s == nil:
		return AgentTurn{}, fmt.Sprintf("turn %d of job %s, whose turn 1 is not before it", k, quote(id))
	case k != len(s.Turns)+1:
		return AgentTurn{}, fmt.Sprintf("turn %d of job %s follows its turn %d (line %d): a job's turns come in order, 1, 2, 3...", k, quote(id), len(s.Turns), s.Turns[len(s.Turns)-1].Line)
	case l.Offset != nil:
		return AgentTurn{}, `"offset" is turn 1's (the job's arrival); a later turn has "tool_wait"`
	case l.ToolWait == nil:
		return AgentTurn{}, `needs "tool_wait", the seconds between the previous turn's reply end and this turn's send`
	}
	w := *l.ToolWait
	if math.IsNaN(w) || w < 0 || w > MaxThinkTime.Seconds() {
		return AgentTurn{}, fmt.Sprintf(`"tool_wait" %v must be a number of seconds in [0, %g] (config.MaxThinkTime)`, w, MaxThinkTime.Seconds())
	}
	return AgentTurn{Line: n, ToolWait: time.Duration(math.Round(w * float64(time.Second))), ToolResults: results, Body: body}, ""
}

// agentFirstTurn checks a job's first turn: its offset, and that the job
// has none yet (s).
func agentFirstTurn(l *agentTraceLine, s *AgentSession) (time.Duration, string) {
	switch {
	case s != nil:
		return 0, fmt.Sprintf("job %s has a turn 1 already (line %d)", quote(*l.Session), s.Turns[0].Line)
	case l.ToolWait != nil:
		return 0, `"tool_wait" is a later turn's; turn 1 has "offset" (the job's arrival)`
	case l.Offset == nil:
		return 0, `turn 1 needs "offset", the job's arrival in seconds from the trace's first job`
	}
	o := *l.Offset
	if math.IsNaN(o) || o < 0 || o > maxAgentOffset.Seconds() {
		return 0, fmt.Sprintf(`"offset" %v must be a number of seconds in [0, %.0f]`, o, maxAgentOffset.Seconds())
	}
	return time.Duration(math.Round(o * float64(time.Second))), ""
}

// agentBody checks a turn's body and returns it, with the tool messages
// that end its messages.
func agentBody(raw json.RawMessage) (json.RawMessage, int, string) {
	body := bytes.TrimSpace(raw)
	const want = `"body" must be the chat-completions request as sent: a JSON object with a non-empty "messages" array`
	if len(body) == 0 || body[0] != '{' {
		return nil, 0, want
	}
	var b struct {
		Messages []struct {
			Role string `json:"role"`
		} `json:"messages"`
	}
	if err := json.Unmarshal(body, &b); err != nil || len(b.Messages) == 0 {
		return nil, 0, want
	}
	results := 0
	for i := len(b.Messages) - 1; i >= 0 && b.Messages[i].Role == "tool"; i-- {
		results++
	}
	// The line's buffer is not kept: the body owns its bytes.
	return bytes.Clone(body), results, ""
}

// bad handles malformed line n, of job id ("" when it names none): the
// error, or under skip, the job dropped and counted.
func (rd *agentTraceReader) bad(n int, id, reason string) error {
	err := fmt.Errorf("%s:%d: %s", rd.name, n, reason)
	if !rd.skip {
		return err
	}
	rd.trace.SkippedLines++
	if len(rd.trace.Errors) < MaxAgentTraceErrors {
		rd.trace.Errors = append(rd.trace.Errors, err)
	}
	if id == "" || rd.dropped[id] {
		return nil
	}
	rd.dropped[id] = true
	rd.trace.SkippedSessions++
	if s := rd.sessions[id]; s != nil {
		rd.trace.SkippedLines += len(s.Turns)
		delete(rd.sessions, id)
	}
	return nil
}

// finish orders the jobs by arrival, measured from the earliest.
func (rd *agentTraceReader) finish() (*AgentTrace, error) {
	out := make([]AgentSession, 0, len(rd.sessions))
	for _, s := range rd.order {
		if rd.sessions[s.ID] == s {
			out = append(out, *s)
		}
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("%s: holds no job to replay (%d skipped)", rd.name, rd.trace.SkippedSessions)
	}
	slices.SortStableFunc(out, func(a, b AgentSession) int { return cmp.Compare(a.Offset, b.Offset) })
	first := out[0].Offset
	for i := range out {
		out[i].Offset -= first
	}
	rd.trace.Sessions = out
	return &rd.trace, nil
}

// clipReason bounds a decoder's message, which may quote the input.
func clipReason(s string) string {
	const keep = 200
	if len(s) <= keep {
		return s
	}
	cut := keep
	for cut > 0 && s[cut]&0xC0 == 0x80 { // do not split a UTF-8 sequence
		cut--
	}
	return s[:cut] + "…"
}

// agentReplayFields are the replay fields that do not apply to an
// agent_sessions replay: its jobs are replayed whole, each once, at its
// recorded offset.
var agentReplayFields = []string{"start", "end", "loop", "sample", "seed", "max_rate"}

// validateAgentReplay checks a workload replaying an agent_sessions trace:
// the replay fields that apply, the target's flavor, and the trace itself,
// read here so that --config.check reports its malformed lines. p is the
// workload's path.
func (c *Config) validateAgentReplay(v *validator, p path, w *Workload) {
	r := w.Replay
	rp := append(append(path{}, p...), "replay")
	for _, key := range agentReplayFields {
		if nodeAt(v.root, append(append(path{}, rp...), key)) != nil {
			v.add(rp, key, "does not apply to source agent_sessions: each recorded job is replayed once, whole, at its offset (speed scales the offsets and tool waits)")
		}
	}
	if t, ok := c.Target(w.Target); ok && t.Flavor != FlavorOpenAIChat {
		v.add(p, "replay", fmt.Sprintf("source agent_sessions needs flavor %s (its recorded bodies are chat-completions requests carrying tool calls and their results), the target's is %s", FlavorOpenAIChat, t.Flavor))
	}
	if fi, err := os.Stat(r.Path); r.Path == "" || err != nil || fi.IsDir() {
		return // refused by validateReplay
	}
	if _, err := ReadAgentTrace(r.Path, r.OnMalformed == "skip"); err != nil {
		v.add(rp, "path", err.Error())
	}
}
