package live

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"net/http"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/infer-exporter/infer_exporter/internal/simulator/simulatortest"
	"github.com/infer-exporter/infer_exporter/probe/observation"
	"github.com/infer-exporter/infer_exporter/probe/sessions"
)

// recordedJob is a job of the test's trace: its turns' messages, each
// turn's the conversation so far as an agent recorded it.
type recordedJob struct {
	offset float64 // seconds
	turns  [][]map[string]any
}

// recordedTrace writes jobs as an agent_sessions trace, every later turn
// after wait seconds, and returns its path.
func recordedTrace(t *testing.T, jobs []recordedJob, wait float64) string {
	t.Helper()
	var b strings.Builder
	for turn := 0; turn < 3; turn++ { // the jobs' lines interleave
		for i, j := range jobs {
			if turn >= len(j.turns) {
				continue
			}
			line := map[string]any{"session": fmt.Sprintf("job-%d", i), "turn": turn + 1,
				"body": map[string]any{"model": "recorded-model", "messages": j.turns[turn], "max_tokens": 3, "ignore_eos": true}}
			if turn == 0 {
				line["offset"] = j.offset
			} else {
				line["tool_wait"] = wait
			}
			enc, err := json.Marshal(line)
			if err != nil {
				t.Fatal(err)
			}
			b.Write(enc)
			b.WriteByte('\n')
		}
	}
	path := filepath.Join(t.TempDir(), "jobs.jsonl")
	if err := os.WriteFile(path, []byte(b.String()), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// agentConversation is a recorded conversation of calls: the task, then
// per call the assistant's call and its result, words words each.
func agentConversation(task string, calls, words int) [][]map[string]any {
	msgs := []map[string]any{{"role": "user", "content": task}}
	turns := [][]map[string]any{append([]map[string]any(nil), msgs...)}
	for c := range calls {
		id := fmt.Sprintf("call_%d", c)
		msgs = append(msgs,
			map[string]any{"role": "assistant", "content": nil, "tool_calls": []map[string]any{{"id": id, "type": "function",
				"function": map[string]any{"name": "search", "arguments": `{"q": "x"}`}}}},
			map[string]any{"role": "tool", "tool_call_id": id, "content": strings.TrimSpace(strings.Repeat("found ", words*(c+1)))})
		turns = append(turns, append([]map[string]any(nil), msgs...))
	}
	return turns
}

// simPromptTokens is the simulator's count of messages, template and
// generation prompt included (its /tokenize).
func simPromptTokens(t *testing.T, url string, messages []map[string]any) int {
	t.Helper()
	body, _ := json.Marshal(map[string]any{"messages": messages, "add_generation_prompt": true})
	resp, err := http.Post(url+"/tokenize", "application/json", bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var out struct{ Count int }
	if err := json.NewDecoder(resp.Body).Decode(&out); err != nil {
		t.Fatal(err)
	}
	return out.Count
}

// TestAgentReplayGroundTruth replays three recorded jobs (of 2, 3 and 2
// turns, arriving 0, 0.2 and 0.4 s into the trace, tool waits of 60 ms) at
// speed 2 against the simulator, and checks: the jobs arrive at their
// offsets over the speed exactly; turn k+1 is scheduled exactly turn k's
// end plus the wait over the speed; each turn's prompt is its recorded
// messages to the token (not the live replies); each job's first instant
// to last end is its turns' E2E and waits within 1%; the job series count
// the jobs, turns, tool time and calls exactly.
func TestAgentReplayGroundTruth(t *testing.T) {
	const (
		speed = 2.0
		wait  = 60 * time.Millisecond // recorded; 30 ms replayed
	)
	jobs := []recordedJob{
		{offset: 0, turns: agentConversation("find the first thing", 1, 5)},
		{offset: 0.2, turns: agentConversation("find the second thing and the third", 2, 7)},
		{offset: 0.4, turns: agentConversation("find the last one", 1, 11)},
	}
	path := recordedTrace(t, jobs, wait.Seconds())
	cfg := simulatortest.InstantConfig()
	sr := runSessions(t, cfg, "openai-chat", fmt.Sprintf("    max_in_flight: 8\n    replay: {source: agent_sessions, path: %q, speed: %g}\n", path, speed), nil)

	totalTurns, calls := 0, 0
	for _, j := range jobs {
		totalTurns += len(j.turns)
		calls += len(j.turns) - 1
	}
	if n := testutil.ToFloat64(sr.agents.jobs[sessions.Completed]); n != float64(len(jobs)) {
		t.Fatalf("%v jobs completed, want %d (ended: %v)", n, len(jobs), agentEnded(sr))
	}
	if len(sr.obs) != totalTurns {
		t.Fatalf("%d requests, want %d", len(sr.obs), totalTurns)
	}
	replayedWait := time.Duration(float64(wait) / speed)
	convs := sr.conversations(replayedWait)
	if len(convs) != len(jobs) {
		t.Fatalf("%d jobs found in the observations (turn k+1 scheduled turn k's end plus %v), want %d", len(convs), replayedWait, len(jobs))
	}
	sort.Slice(convs, func(a, b int) bool { return convs[a][0].Scheduled.Before(convs[b][0].Scheduled) })
	var wantSum float64
	for i, conv := range convs {
		j := jobs[i]
		if len(conv) != len(j.turns) {
			t.Fatalf("job %d has %d turns, want %d", i, len(conv), len(j.turns))
		}
		off := conv[0].Scheduled.Sub(convs[0][0].Scheduled)
		if want := time.Duration(j.offset * float64(time.Second) / speed); off != want {
			t.Errorf("job %d arrived %v after the first, want %v (its offset over the speed)", i, off, want)
		}
		var parts time.Duration
		for k, o := range conv {
			if o.Outcome != observation.Success {
				t.Fatalf("job %d turn %d: %s", i, k+1, o.Outcome)
			}
			rec, ok := sr.sim.PrefixRecord(fmt.Sprintf("chat-%d", o.Seq))
			if !ok {
				t.Fatalf("job %d turn %d: no ground truth for request %d", i, k+1, o.Seq)
			}
			if want := simPromptTokens(t, sr.url, j.turns[k]); rec.PromptTokens != want {
				t.Errorf("job %d turn %d: %d prompt tokens, want %d (its recorded messages)", i, k+1, rec.PromptTokens, want)
			}
			if k > 0 {
				parts += replayedWait
			}
			parts += o.End.Sub(o.Scheduled)
		}
		dur := conv[len(conv)-1].End.Sub(conv[0].Scheduled)
		if math.Abs(float64(dur-parts)) > 0.01*float64(parts) {
			t.Errorf("job %d: %v from its first turn's instant to its last reply's end, its turns' E2E and waits %v", i, dur, parts)
		}
		wantSum += parts.Seconds()
	}
	n, sum := observed(t, sr.agents.duration)
	if n != uint64(len(jobs)) || math.Abs(sum-wantSum) > 0.01*wantSum {
		t.Errorf("job duration series: %d jobs, %v s; want %d, %v s", n, sum, len(jobs), wantSum)
	}
	if n, sum := observed(t, sr.agents.tool); n != uint64(len(jobs)) || math.Abs(sum-float64(calls)*replayedWait.Seconds()) > 1e-9 {
		t.Errorf("job tool time series: %d jobs, %v s; want %d, %v s", n, sum, len(jobs), float64(calls)*replayedWait.Seconds())
	}
	if n, sum := observed(t, sr.agents.turns); n != uint64(len(jobs)) || sum != float64(totalTurns) {
		t.Errorf("job turns series: %d jobs, %v turns; want %d, %d", n, sum, len(jobs), totalTurns)
	}
	if n := testutil.ToFloat64(sr.agents.toolCalls); n != float64(calls) {
		t.Errorf("%v tool calls counted, want %d (the recorded results)", n, calls)
	}
	for k, want := range []uint64{3, 3, 1} {
		if n, _ := observed(t, sr.sessions.ttft[k]); n != want {
			t.Errorf("turn %d TTFT series: %d turns, want %d", k+1, n, want)
		}
	}
}
