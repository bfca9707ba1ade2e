package sessions

import (
	"math/rand/v2"
	"testing"
	"time"

	"github.com/infer-exporter/infer_exporter/internal/config"
	"github.com/infer-exporter/infer_exporter/probe/observation"
)

type waits struct {
	calls int
	d     []time.Duration
}

func (w *waits) ToolWait(calls int, d time.Duration) { w.calls += calls; w.d = append(w.d, d) }
func (w *waits) JobEnded(Job)                        {}

// TestAgentJoinsParallelCalls: a reply of three parallel calls is answered
// by three tool messages paired with the calls by id, and the next turn is
// due when the slowest call returns.
func TestAgentJoinsParallelCalls(t *testing.T) {
	ag := &config.Agent{
		ToolLatency:      config.ThinkTime{Dist: "uniform", Min: 10 * time.Millisecond, Max: time.Second},
		ToolResultTokens: config.Distribution{Dist: "uniform", Min: 3, Max: 9},
		MaxTurns:         4,
	}
	rec := &waits{}
	s := &Sessions{agent: ag, cfg: config.Sessions{OutputTokens: config.Distribution{Dist: "fixed", Mean: 8}, Agent: ag}, jobs: rec}
	ss := &session{rng: rand.New(rand.NewPCG(1, 2)), turns: 4, done: 1, idx: -1}
	end := time.Unix(100, 0)
	o := &observation.Request{Outcome: observation.Success, End: end, Calls: []observation.ToolCall{
		{Name: "a", Arguments: `{"x":1}`}, {Name: "b", Arguments: `{}`}, {Name: "a", Arguments: `{"x":2}`},
	}}
	// The same draws, in the same order: each call's latency, its result's
	// length and words.
	mirror := rand.New(rand.NewPCG(1, 2))
	var slowest time.Duration
	words := 0
	var lat []time.Duration
	for range o.Calls {
		d := drawDuration(mirror, ag.ToolLatency)
		lat = append(lat, d)
		slowest = max(slowest, d)
		n := drawCount(mirror, ag.ToolResultTokens, 1, config.MaxToolResultTokens)
		words += n
		toolResult(mirror, n)
	}
	if lat[0] == lat[1] && lat[1] == lat[2] {
		t.Fatalf("the seed draws equal latencies %v: the join is not tested", lat)
	}
	s.agentDoneLocked(ss, o)

	if got := ss.at.Sub(end); got != slowest || ss.job.tool != slowest {
		t.Errorf("next turn %v after the reply's end, tool time %v; want the slowest of %v", got, ss.job.tool, lat)
	}
	if rec.calls != 3 || len(rec.d) != 1 || rec.d[0] != slowest {
		t.Errorf("recorded %d calls, waits %v; want 3, [%v]", rec.calls, rec.d, slowest)
	}
	if s.heap.Len() != 1 || ss.msg == nil || ss.msg.InputTokens != words || ss.msg.OutputTokens != 8 {
		t.Fatalf("heap %d, next message %+v; want the session due, %d result words, max_tokens 8", s.heap.Len(), ss.msg, words)
	}
	if len(ss.history) != 4 {
		t.Fatalf("history %v: want the assistant's calls and three results", ss.history)
	}
	calls := ss.history[0]["tool_calls"].([]map[string]any)
	for i, c := range calls {
		res := ss.history[1+i]
		if res["role"] != "tool" || res["tool_call_id"] != c["id"] {
			t.Errorf("result %d %v does not answer call %v", i, res, c)
		}
		if fn := c["function"].(map[string]string); fn["name"] != o.Calls[i].Name || fn["arguments"] != o.Calls[i].Arguments {
			t.Errorf("call %d is %v, the reply's %+v", i, fn, o.Calls[i])
		}
	}
	if ss.history[0]["content"] != nil {
		t.Errorf("a reply that only calls has content %v, want null", ss.history[0]["content"])
	}
}

// TestJobResult: a job's duration is from its first turn's instant to its
// last reply's end, and a completed job at its turn limit ends turn_limit.
func TestJobResult(t *testing.T) {
	t0 := time.Unix(50, 0)
	var j job
	j.land(&observation.Request{Outcome: observation.Success, Scheduled: t0, End: t0.Add(300 * time.Millisecond), PromptTokens: 10, OutputTokens: 4})
	j.land(&observation.Request{Outcome: observation.Success, Scheduled: t0.Add(time.Second), End: t0.Add(1500 * time.Millisecond), PromptTokens: 30, OutputTokens: 5})
	j.tool = 700 * time.Millisecond
	got := j.result(Completed, 2)
	want := Job{Reason: Completed, Turns: 2, Duration: 1500 * time.Millisecond, ToolTime: 700 * time.Millisecond, PromptTokens: 40, OutputTokens: 9, End: t0.Add(1500 * time.Millisecond)}
	if got != want {
		t.Errorf("job %+v, want %+v", got, want)
	}
	j.limited = true
	if r := j.result(Completed, 2).Reason; r != TurnLimit {
		t.Errorf("a job at its limit ends %q, want %q", r, TurnLimit)
	}
	if d := (&job{}).result(Stopped, 0).Duration; d != 0 {
		t.Errorf("a job that sent nothing lasted %v", d)
	}
}
