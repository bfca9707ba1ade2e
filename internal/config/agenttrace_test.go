package config

import (
	"bytes"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// agentLine is a trace line of job id's turn, its offset or tool wait
// (as written: "" leaves it out) and its messages.
func agentLine(id string, turn int, timing, messages string) string {
	if timing != "" {
		timing = ", " + timing
	}
	return fmt.Sprintf(`{"session": %q, "turn": %d%s, "body": {"messages": [%s], "max_tokens": 8}}`, id, turn, timing, messages)
}

const (
	userMsg = `{"role": "user", "content": "hi"}`
	callMsg = `{"role": "assistant", "content": null, "tool_calls": [{"id": "c", "type": "function", "function": {"name": "f", "arguments": "{}"}}]}`
	toolMsg = `{"role": "tool", "tool_call_id": "c", "content": "ok"}`
)

// TestAgentTraceExample: the example of docs/replay.md is the testdata
// file, which reads as its two jobs, by offset, with their waits and tool
// results.
func TestAgentTraceExample(t *testing.T) {
	tr, err := ReadAgentTrace("testdata/agent_sessions.jsonl", false)
	if err != nil {
		t.Fatal(err)
	}
	if len(tr.Sessions) != 2 || tr.SkippedSessions != 0 || tr.SkippedLines != 0 {
		t.Fatalf("%d jobs, %d skipped (%d lines), want 2, 0", len(tr.Sessions), tr.SkippedSessions, tr.SkippedLines)
	}
	a, b := tr.Sessions[0], tr.Sessions[1]
	if a.ID != "job-17" || a.Offset != 0 || len(a.Turns) != 3 || b.ID != "job-18" || b.Offset != 1500*time.Millisecond || len(b.Turns) != 2 {
		t.Fatalf("jobs %+v %+v", a, b)
	}
	for i, want := range []struct {
		line, results int
		wait          time.Duration
	}{{1, 0, 0}, {3, 1, 430 * time.Millisecond}, {5, 0, 2050 * time.Millisecond}} {
		if got := a.Turns[i]; got.Line != want.line || got.ToolResults != want.results || got.ToolWait != want.wait {
			t.Errorf("job-17 turn %d: line %d, %d results, wait %v; want %+v", i+1, got.Line, got.ToolResults, got.ToolWait, want)
		}
	}
	if got := b.Turns[1]; got.ToolResults != 2 || got.ToolWait != 1200*time.Millisecond {
		t.Errorf("job-18 turn 2: %d results, wait %v; want 2, 1.2s", got.ToolResults, got.ToolWait)
	}
	doc, err := os.ReadFile("../../docs/replay.md")
	if err != nil {
		t.Fatal(err)
	}
	file, _ := os.ReadFile("testdata/agent_sessions.jsonl")
	if !bytes.Contains(doc, file) {
		t.Error("docs/replay.md does not show testdata/agent_sessions.jsonl as its example")
	}
}

// TestAgentTraceOffsetsFromFirst: offsets are measured from the earliest
// job's, and the jobs ordered by offset, the file's order among equal ones.
func TestAgentTraceOffsetsFromFirst(t *testing.T) {
	in := strings.Join([]string{
		agentLine("late", 1, `"offset": 12.5`, userMsg),
		agentLine("early", 1, `"offset": 10`, userMsg),
		agentLine("tie", 1, `"offset": 12.5`, userMsg),
	}, "\n")
	tr, err := ParseAgentTrace(strings.NewReader(in), "t.jsonl", false)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, s := range tr.Sessions {
		got = append(got, fmt.Sprintf("%s@%v", s.ID, s.Offset))
	}
	if want := "early@0s late@2.5s tie@2.5s"; strings.Join(got, " ") != want {
		t.Errorf("jobs %v, want %s", got, want)
	}
}

// TestAgentTraceRefusals: each malformed line is refused with its file,
// line and reason.
func TestAgentTraceRefusals(t *testing.T) {
	first := agentLine("a", 1, `"offset": 0`, userMsg)
	second := agentLine("a", 2, `"tool_wait": 0.1`, userMsg+","+callMsg+","+toolMsg)
	for _, tc := range []struct {
		name string
		in   []string
		want string
	}{
		{"not json", []string{first, "{"}, "t.jsonl:2: not a turn"},
		{"unknown field", []string{`{"session": "a", "turn": 1, "offset": 0, "body": {"messages": [{}]}, "arrival": 1}`}, `t.jsonl:1: not a turn: json: unknown field "arrival"`},
		{"two values", []string{first + " {}"}, "t.jsonl:1: holds more than one JSON value"},
		{"no session", []string{`{"turn": 1, "offset": 0, "body": {"messages": [{}]}}`}, `t.jsonl:1: needs "session"`},
		{"long session", []string{agentLine(strings.Repeat("x", MaxAgentSessionIDBytes+1), 1, `"offset": 0`, userMsg)}, `t.jsonl:1: "session" is longer than 256 bytes`},
		{"no turn", []string{`{"session": "a", "offset": 0, "body": {"messages": [{}]}}`}, `t.jsonl:1: needs "turn"`},
		{"turn 0", []string{agentLine("a", 0, `"offset": 0`, userMsg)}, `t.jsonl:1: "turn" 0 must be between 1 and 100`},
		{"turn over the bound", []string{agentLine("a", MaxSessionTurns+1, `"tool_wait": 0`, userMsg)}, `t.jsonl:1: "turn" 101 must be between 1 and 100 (config.MaxSessionTurns)`},
		{"fractional turn", []string{`{"session": "a", "turn": 1.5, "offset": 0, "body": {"messages": [{}]}}`}, "t.jsonl:1: not a turn"},
		{"missing turn 1", []string{agentLine("a", 2, `"tool_wait": 0`, userMsg)}, `t.jsonl:1: turn 2 of job "a", whose turn 1 is not before it`},
		{"turn 1 after turn 2", []string{second, first}, `t.jsonl:1: turn 2 of job "a", whose turn 1 is not before it`},
		{"turn skipped", []string{first, agentLine("a", 3, `"tool_wait": 0`, userMsg)}, `t.jsonl:2: turn 3 of job "a" follows its turn 1 (line 1)`},
		{"turn repeated", []string{first, second, second}, `t.jsonl:3: turn 2 of job "a" follows its turn 2 (line 2)`},
		{"turn 1 twice", []string{first, first}, `t.jsonl:2: job "a" has a turn 1 already (line 1)`},
		{"no offset", []string{agentLine("a", 1, "", userMsg)}, `t.jsonl:1: turn 1 needs "offset"`},
		{"negative offset", []string{agentLine("a", 1, `"offset": -1`, userMsg)}, `t.jsonl:1: "offset" -1 must be a number of seconds in [0,`},
		{"wait on turn 1", []string{agentLine("a", 1, `"offset": 0, "tool_wait": 1`, userMsg)}, `t.jsonl:1: "tool_wait" is a later turn's`},
		{"offset on turn 2", []string{first, agentLine("a", 2, `"offset": 1, "tool_wait": 1`, userMsg)}, `t.jsonl:2: "offset" is turn 1's`},
		{"no wait", []string{first, agentLine("a", 2, "", userMsg)}, `t.jsonl:2: needs "tool_wait"`},
		{"negative wait", []string{first, agentLine("a", 2, `"tool_wait": -0.5`, userMsg)}, `t.jsonl:2: "tool_wait" -0.5 must be a number of seconds in [0, 3600] (config.MaxThinkTime)`},
		{"wait over the bound", []string{first, agentLine("a", 2, `"tool_wait": 3600.5`, userMsg)}, `t.jsonl:2: "tool_wait" 3600.5 must be`},
		{"no body", []string{`{"session": "a", "turn": 1, "offset": 0}`}, `t.jsonl:1: "body" must be the chat-completions request as sent`},
		{"body not an object", []string{`{"session": "a", "turn": 1, "offset": 0, "body": "hi"}`}, `t.jsonl:1: "body" must be`},
		{"no messages", []string{`{"session": "a", "turn": 1, "offset": 0, "body": {"prompt": "hi"}}`}, `t.jsonl:1: "body" must be`},
		{"empty messages", []string{`{"session": "a", "turn": 1, "offset": 0, "body": {"messages": []}}`}, `t.jsonl:1: "body" must be`},
		{"empty", []string{"", "  "}, "t.jsonl: holds no job to replay"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := ParseAgentTrace(strings.NewReader(strings.Join(tc.in, "\n")), "t.jsonl", false)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("error %v, want one holding %q", err, tc.want)
			}
		})
	}
}

// TestAgentTraceInterleaved: the lines of different jobs interleave, CRLF
// line endings and a byte order mark are read, blank lines ignored.
func TestAgentTraceInterleaved(t *testing.T) {
	in := "\ufeff" + strings.Join([]string{
		agentLine("a", 1, `"offset": 0`, userMsg),
		agentLine("b", 1, `"offset": 0.5`, userMsg),
		"",
		agentLine("b", 2, `"tool_wait": 0.25`, userMsg+","+callMsg+","+toolMsg),
		agentLine("a", 2, `"tool_wait": 0`, userMsg+","+callMsg+","+toolMsg+","+toolMsg),
		agentLine("b", 3, `"tool_wait": 1`, userMsg),
	}, "\r\n") + "\r\n"
	tr, err := ParseAgentTrace(strings.NewReader(in), "t.jsonl", false)
	if err != nil {
		t.Fatal(err)
	}
	if len(tr.Sessions) != 2 || len(tr.Sessions[0].Turns) != 2 || len(tr.Sessions[1].Turns) != 3 {
		t.Fatalf("%+v", tr.Sessions)
	}
	if r := tr.Sessions[0].Turns[1].ToolResults; r != 2 {
		t.Errorf("job a turn 2: %d tool results, want 2", r)
	}
	if w := tr.Sessions[1].Turns[1].ToolWait; w != 250*time.Millisecond {
		t.Errorf("job b turn 2: wait %v, want 250ms", w)
	}
}

// TestAgentTraceSkip: under skip, a malformed line drops its whole job,
// its lines before and after it, counted with their reasons; a malformed
// line that names no job drops itself.
func TestAgentTraceSkip(t *testing.T) {
	in := strings.Join([]string{
		agentLine("a", 1, `"offset": 0`, userMsg),
		agentLine("b", 1, `"offset": 1`, userMsg),
		agentLine("a", 2, `"tool_wait": -1`, userMsg), // drops a
		agentLine("a", 3, `"tool_wait": 1`, userMsg),
		"not json",
		agentLine("b", 2, `"tool_wait": 1`, userMsg),
	}, "\n")
	tr, err := ParseAgentTrace(strings.NewReader(in), "t.jsonl", true)
	if err != nil {
		t.Fatal(err)
	}
	if len(tr.Sessions) != 1 || tr.Sessions[0].ID != "b" || len(tr.Sessions[0].Turns) != 2 || tr.Sessions[0].Offset != 0 {
		t.Fatalf("jobs %+v, want b alone, at 0, with its 2 turns", tr.Sessions)
	}
	if tr.SkippedSessions != 1 || tr.SkippedLines != 4 {
		t.Errorf("skipped %d jobs, %d lines; want 1, 4", tr.SkippedSessions, tr.SkippedLines)
	}
	if len(tr.Errors) != 2 || !strings.HasPrefix(tr.Errors[0].Error(), "t.jsonl:3: ") || !strings.HasPrefix(tr.Errors[1].Error(), "t.jsonl:5: ") {
		t.Errorf("errors %v, want lines 3 and 5", tr.Errors)
	}
	// Every job skipped is an error still.
	if _, err := ParseAgentTrace(strings.NewReader("{"), "t.jsonl", true); err == nil || !strings.Contains(err.Error(), "holds no job") {
		t.Errorf("error %v, want holds no job", err)
	}
}

// TestAgentTraceBounds: a line past MaxAgentTraceLineBytes is malformed
// (skipped under skip, the next read); a file past MaxAgentTraceBytes is
// refused whatever the policy.
func TestAgentTraceBounds(t *testing.T) {
	long := `{"session": "x", "turn": 1, "offset": 0, "body": {"messages": [{"content": "` + strings.Repeat("w", MaxAgentTraceLineBytes) + `"}]}}`
	in := long + "\n" + agentLine("a", 1, `"offset": 0`, userMsg) + "\n"
	if _, err := ParseAgentTrace(strings.NewReader(in), "t.jsonl", false); err == nil || !strings.Contains(err.Error(), "t.jsonl:1: longer than 16 MiB (config.MaxAgentTraceLineBytes)") {
		t.Errorf("error %v, want line 1 too long", err)
	}
	tr, err := ParseAgentTrace(strings.NewReader(in), "t.jsonl", true)
	if err != nil || len(tr.Sessions) != 1 || tr.Sessions[0].ID != "a" || tr.SkippedLines != 1 {
		t.Errorf("skip: %v, %+v; want job a read after the long line", err, tr)
	}
	if testing.Short() {
		return
	}
	mib := agentLine("a", 1, `"offset": 0`, `{"role": "user", "content": "`+strings.Repeat("w", 1<<20)+`"}`) + "\n"
	big := &repeatReader{line: []byte(mib), left: MaxAgentTraceBytes + 1}
	if _, err := ParseAgentTrace(big, "t.jsonl", true); err == nil || !strings.Contains(err.Error(), "larger than 256 MiB (config.MaxAgentTraceBytes)") {
		t.Errorf("error %v, want the file refused as too large", err)
	}
}

// repeatReader reads line again and again, left bytes in all.
type repeatReader struct {
	line []byte
	left int
	off  int
}

func (r *repeatReader) Read(p []byte) (int, error) {
	n := 0
	for n < len(p) && r.left > 0 {
		c := copy(p[n:min(len(p), n+r.left)], r.line[r.off:])
		r.off = (r.off + c) % len(r.line)
		n += c
		r.left -= c
	}
	if n == 0 {
		return 0, io.EOF
	}
	return n, nil
}

// TestAgentReplayConfig: source agent_sessions reads its trace at load (so
// --config.check reports a malformed line), takes speed and on_malformed,
// and refuses the replay fields that do not apply and another flavor than
// openai-chat, each with its line.
func TestAgentReplayConfig(t *testing.T) {
	dir := t.TempDir()
	good := agentLine("a", 1, `"offset": 0`, userMsg) + "\n"
	write := func(name, text string) {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(text), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	write("good.jsonl", good)
	write("bad.jsonl", good+agentLine("a", 3, `"tool_wait": 1`, userMsg)+"\n")
	parse := func(flavor, replay string) error {
		_, err := Parse([]byte(fmt.Sprintf(`targets:
  - {name: local, url: http://127.0.0.1:8000, model: m, flavor: %s}
workloads:
  - name: r
    target: local
    replay:
%s`, flavor, replay)), filepath.Join(dir, "c.yml"))
		return err
	}
	if err := parse("openai-chat", "      {source: agent_sessions, path: good.jsonl, speed: 2, on_malformed: skip}\n"); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name, flavor, replay, want string
	}{
		{"malformed line", "openai-chat", "      source: agent_sessions\n      path: bad.jsonl\n",
			`c.yml:8: workloads[0].replay.path: ` + filepath.Join(dir, "bad.jsonl") + `:2: turn 3 of job "a" follows its turn 1 (line 1)`},
		{"flavor", "openai-completions", "      source: agent_sessions\n      path: good.jsonl\n",
			"c.yml:6: workloads[0].replay: source agent_sessions needs flavor openai-chat"},
		{"loop", "openai-chat", "      source: agent_sessions\n      path: good.jsonl\n      loop: true\n",
			"c.yml:9: workloads[0].replay.loop: does not apply to source agent_sessions"},
		{"max_rate", "openai-chat", "      source: agent_sessions\n      path: good.jsonl\n      max_rate: 3\n",
			"c.yml:9: workloads[0].replay.max_rate: does not apply"},
		{"sample", "openai-chat", "      source: agent_sessions\n      path: good.jsonl\n      sample: 0.5\n",
			"c.yml:9: workloads[0].replay.sample: does not apply"},
		{"force_output_tokens", "openai-chat", "      source: agent_sessions\n      path: good.jsonl\n      force_output_tokens: true\n",
			"c.yml:9: workloads[0].replay.force_output_tokens: only applies to source jsonl"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if err := parse(tc.flavor, tc.replay); err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("error %v, want one holding %q", err, tc.want)
			}
		})
	}
}
