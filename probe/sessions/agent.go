package sessions

import (
	"container/heap"
	"math/rand/v2"
	"strconv"
	"strings"
	"time"

	"github.com/infer-exporter/infer_exporter/internal/config"
	"github.com/infer-exporter/infer_exporter/probe/observation"
	"github.com/infer-exporter/infer_exporter/probe/prompt"
)

// An agent's job (config.Agent) is a session whose next turn exists only
// when the reply called tools: each call is answered by a simulated tool
// after a drawn latency, with a result of drawn length; parallel calls are
// joined, so the next turn is due when the slowest has returned (the
// reply's End plus the longest latency, the job's "think time"); its prompt
// is the conversation so far, the assistant's calls and one tool message
// per call (role "tool", tool_call_id). A reply without a call ends the job
// (completed), as does max_turns with calls pending (turn_limit).

// Job end reasons, the values of infer_probe_agent_jobs_total's reason
// label: the session's, and TurnLimit.
const (
	// TurnLimit: the job's max_turns-th reply still called tools.
	TurnLimit = "turn_limit"
)

// JobEndReasons lists every job end reason.
var JobEndReasons = []string{Completed, TurnLimit, ContextLimit, TurnFailed, TurnDropped, Stopped}

// Job is what one agent job measured, when it ended.
type Job struct {
	// Reason is one of JobEndReasons.
	Reason string
	// Turns answered successfully.
	Turns int
	// Duration is from its first turn's scheduled instant to the end of
	// its last turn's reply (the client's last read); 0 when no turn was
	// sent. Every turn's latency and every tool wait is in it: turn k+1
	// is scheduled at turn k's end plus its tool wait.
	Duration time.Duration
	// ToolTime is the sum of its tool waits (each the slowest of a turn's
	// parallel calls), ToolCalls the calls answered.
	ToolTime  time.Duration
	ToolCalls int
	// PromptTokens and OutputTokens are its turns' usage, added up.
	PromptTokens, OutputTokens int
	// End is its last reply's end (the client's last read); zero when no
	// turn ended with a reply.
	End time.Time
}

// JobRecorder hears an agent's jobs (probe/live's series is one). Its
// methods are called under the sessions' lock: they must not block nor call
// back.
type JobRecorder interface {
	// ToolWait: a turn's calls (calls of them) were answered after d, the
	// slowest call's latency.
	ToolWait(calls int, d time.Duration)
	// JobEnded: a job ended.
	JobEnded(j Job)
}

type noJobRecorder struct{}

func (noJobRecorder) ToolWait(int, time.Duration) {}
func (noJobRecorder) JobEnded(Job)                {}

// BindJobs gives an agent's sessions their job recorder.
func (s *Sessions) BindJobs(r JobRecorder) { s.jobs = r }

// job is an agent job's measurement so far.
type job struct {
	first, last    time.Time // first turn's scheduled instant, last reply's end
	tool           time.Duration
	calls          int
	prompt, output int
	limited        bool // ended at max_turns with calls pending
}

// land counts a turn that ended (answered, failed or dropped).
func (j *job) land(o *observation.Request) {
	if j.first.IsZero() {
		j.first = o.Scheduled
	}
	if !o.End.IsZero() {
		j.last = o.End
	}
	if o.Outcome == observation.Success {
		j.prompt += o.PromptTokens
		j.output += o.OutputTokens
	}
}

// result is the job, ended for the session's reason after turns.
func (j *job) result(reason string, turns int) Job {
	if reason == Completed && j.limited {
		reason = TurnLimit
	}
	out := Job{Reason: reason, Turns: turns, ToolTime: j.tool, ToolCalls: j.calls, PromptTokens: j.prompt, OutputTokens: j.output, End: j.last}
	if !j.first.IsZero() && j.last.After(j.first) {
		out.Duration = j.last.Sub(j.first)
	}
	return out
}

// agentDoneLocked goes on with an agent's job after a successful reply o:
// it ends without calls, at max_turns or when the workload is stopping;
// otherwise its calls are answered and the next turn is scheduled when
// the slowest has returned.
func (s *Sessions) agentDoneLocked(ss *session, o *observation.Request) {
	switch {
	case len(o.Calls) == 0:
		s.endLocked(ss, Completed)
		return
	case ss.done >= ss.turns:
		ss.job.limited = true
		s.endLocked(ss, Completed)
		return
	case s.closed:
		s.endLocked(ss, Stopped)
		return
	}
	calls := make([]map[string]any, len(o.Calls))
	results := make([]map[string]any, len(o.Calls))
	var wait time.Duration
	resultTokens := 0
	for i, c := range o.Calls {
		// The ids are the exporter's own, unique within the job: the chat
		// API pairs each result with its call by them.
		id := "call_" + strconv.Itoa(ss.done) + "_" + strconv.Itoa(i)
		calls[i] = map[string]any{"id": id, "type": "function",
			"function": map[string]string{"name": c.Name, "arguments": c.Arguments}}
		wait = max(wait, s.toolLatency(ss.rng))
		n := drawCount(ss.rng, s.agent.ToolResultTokens, 1, config.MaxToolResultTokens)
		text := toolResult(ss.rng, n)
		resultTokens += n
		results[i] = map[string]any{"role": "tool", "tool_call_id": id, "content": text}
		ss.bytes += len(c.Name) + len(c.Arguments) + len(text)
	}
	var content any // a reply that only calls has no content
	if o.Text != "" {
		content = o.Text
	}
	ss.history = append(ss.history, map[string]any{"role": "assistant", "content": content, "tool_calls": calls})
	ss.history = append(ss.history, results...)
	ss.bytes += len(o.Text)
	ss.job.tool += wait
	ss.job.calls += len(o.Calls)
	s.jobs.ToolWait(len(o.Calls), wait)
	// The next turn's "message" is the results: what it adds to the
	// prompt, and its max_tokens.
	ss.msg = &prompt.Prompt{
		InputTokens:  resultTokens,
		OutputTokens: drawCount(ss.rng, s.cfg.OutputTokens, 1, config.MaxTokens),
	}
	ss.at = o.End.Add(wait)
	heap.Push(&s.heap, ss)
}

// toolLatency draws one call's latency.
func (s *Sessions) toolLatency(rng *rand.Rand) time.Duration {
	return drawDuration(rng, s.agent.ToolLatency)
}

// resultWords are a tool result's words: short and common, about a token
// each in most tokenizers, and one each in the simulator's.
var resultWords = []string{"result", "value", "found", "item", "status", "ok", "data", "row", "name", "id", "time", "count"}

// toolResult is a result of n words, drawn from rng.
func toolResult(rng *rand.Rand, n int) string {
	var b strings.Builder
	for i := range n {
		if i > 0 {
			b.WriteByte(' ')
		}
		b.WriteString(resultWords[rng.IntN(len(resultWords))])
	}
	return b.String()
}
