package shadow

import (
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

func dirBytes(t *testing.T, dir string) (files []string, total int64) {
	t.Helper()
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		fi, err := e.Info()
		if err != nil {
			t.Fatal(err)
		}
		files = append(files, e.Name())
		total += fi.Size()
	}
	return files, total
}

// TestStoreRotates: files never exceed their size, the store never exceeds
// its count, the oldest go first, Bytes is the truth, and a reopened store
// continues the sequence and counts what is there.
func TestStoreRotates(t *testing.T) {
	dir := t.TempDir()
	s, err := OpenStore(dir, 100, 3)
	if err != nil {
		t.Fatal(err)
	}
	line := []byte(strings.Repeat("x", 39) + "\n") // 40 bytes: two per file
	for i := range 9 {
		if err := s.Write(line); err != nil {
			t.Fatal(err)
		}
		files, total := dirBytes(t, dir)
		if len(files) > 3 || total != s.Bytes() || total > 300 {
			t.Fatalf("after %d writes: files %v, %d bytes on disk, Bytes() %d", i+1, files, total, s.Bytes())
		}
	}
	files, _ := dirBytes(t, dir)
	// 9 lines, 2 per file: files 0..4 written, 0 and 1 deleted.
	want := []string{"shadow-0000000002.jsonl", "shadow-0000000003.jsonl", "shadow-0000000004.jsonl"}
	if !slices.Equal(files, want) {
		t.Errorf("files %v, want %v", files, want)
	}
	if err := s.Write(make([]byte, 101)); err != ErrLineTooLarge {
		t.Errorf("oversized line: %v", err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}

	s2, err := OpenStore(dir, 100, 3)
	if err != nil {
		t.Fatal(err)
	}
	defer s2.Close()
	if s2.Bytes() != 200 {
		t.Errorf("reopened store counts %d bytes, want 200", s2.Bytes())
	}
	if err := s2.Write(line); err != nil {
		t.Fatal(err)
	}
	files, total := dirBytes(t, dir)
	want = []string{"shadow-0000000003.jsonl", "shadow-0000000004.jsonl", "shadow-0000000005.jsonl"}
	if !slices.Equal(files, want) || total != s2.Bytes() {
		t.Errorf("after reopening: files %v (%d bytes, Bytes %d), want %v", files, total, s2.Bytes(), want)
	}
	if _, err := OpenStore(filepath.Join(dir, "shadow-0000000005.jsonl"), 100, 3); err == nil {
		t.Error("a file as the store directory: no error")
	}
}

func TestRedactKeepsTokenLengths(t *testing.T) {
	r := &redactor{key: 42}
	body := `{"model":"m","user":"alice@example.com","max_tokens":7,"stream":true,
	  "messages":[{"role":"system","content":"You are  a helpful\nassistant."},
	              {"role":"user","name":"alice","content":[{"type":"text","text":"My secret password is hunter2"},{"type":"image_url","image_url":{"url":"https://x/y.png"}}]},
	              {"role":"assistant","content":null,"tool_calls":[{"id":"c1","type":"function","function":{"name":"lookup","arguments":"{\"q\": \"hunter2\"}"}}]}],
	  "tools":[{"type":"function","function":{"name":"lookup","description":"Look a thing up"}}]}`
	out, err := r.redact([]byte(body))
	if err != nil {
		t.Fatal(err)
	}
	for _, secret := range []string{"alice", "secret", "password", "hunter2", "helpful", "assistant.", "https://x"} {
		if strings.Contains(string(out), secret) {
			t.Errorf("redacted body still holds %q: %s", secret, out)
		}
	}
	var in, red map[string]any
	if err := json.Unmarshal([]byte(body), &in); err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(out, &red); err != nil {
		t.Fatalf("redacted body is not JSON: %v: %s", err, out)
	}
	if _, ok := red["user"]; ok {
		t.Error("user kept")
	}
	for _, k := range []string{"model", "max_tokens", "stream", "tools"} {
		if fmt.Sprint(in[k]) != fmt.Sprint(red[k]) {
			t.Errorf("%s changed: %v -> %v", k, in[k], red[k])
		}
	}
	// Same shape, same word count in every string, roles and types kept.
	sameWords(t, in["messages"], red["messages"], "messages")
}

// TestRedactResponsesBody: a Responses API body's instructions and input
// (a list of items: messages with text parts, a tool's output) are
// redacted like chat messages, word for word; the output format and the
// tools, the application's, are kept.
func TestRedactResponsesBody(t *testing.T) {
	r := &redactor{key: 42}
	body := `{"model":"m","user":"alice@example.com","max_output_tokens":7,"stream":true,
	  "instructions":"You are a  helpful assistant for Acme.",
	  "input":[{"role":"user","content":[{"type":"input_text","text":"My secret password is hunter2"}]},
	           {"type":"function_call_output","call_id":"c1","output":"alice lives in Paris"}],
	  "text":{"format":{"type":"json_schema","name":"answer","schema":{"type":"object"}}},
	  "tools":[{"type":"function","name":"lookup","description":"Look a thing up"}]}`
	out, err := r.redact([]byte(body))
	if err != nil {
		t.Fatal(err)
	}
	for _, secret := range []string{"alice", "Acme", "secret", "password", "hunter2", "Paris"} {
		if strings.Contains(string(out), secret) {
			t.Errorf("redacted body still holds %q: %s", secret, out)
		}
	}
	var in, red map[string]any
	if err := json.Unmarshal([]byte(body), &in); err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(out, &red); err != nil {
		t.Fatalf("redacted body is not JSON: %v: %s", err, out)
	}
	for _, k := range []string{"model", "max_output_tokens", "stream", "text", "tools"} {
		if fmt.Sprint(in[k]) != fmt.Sprint(red[k]) {
			t.Errorf("%s changed: %v -> %v", k, in[k], red[k])
		}
	}
	if in["instructions"] == red["instructions"] {
		t.Errorf("instructions kept: %v", red["instructions"])
	}
	sameWords(t, in["instructions"], red["instructions"], "instructions")
	sameWords(t, in["input"], red["input"], "input")
	// A string input is text too.
	out, err = r.redact([]byte(`{"input":"my secret"}`))
	if err != nil || strings.Contains(string(out), "secret") || !strings.HasPrefix(string(out), `{"input":"`) {
		t.Errorf("string input: %s %v", out, err)
	}
}

// sameWords checks that b has a's shape and, in every string, its number
// of words, and a's roles and types.
func sameWords(t *testing.T, a, b any, key string) {
	t.Helper()
	switch a := a.(type) {
	case string:
		bs := b.(string)
		if key == "role" || key == "type" {
			if a != bs {
				t.Errorf("%s changed: %q -> %q", key, a, bs)
			}
		} else if len(strings.Fields(a)) != len(strings.Fields(bs)) {
			t.Errorf("%s: %q (%d words) -> %q (%d words)", key, a, len(strings.Fields(a)), bs, len(strings.Fields(bs)))
		}
	case []any:
		bl := b.([]any)
		if len(a) != len(bl) {
			t.Fatalf("%s: length changed", key)
		}
		for i := range a {
			sameWords(t, a[i], bl[i], key)
		}
	case map[string]any:
		bm := b.(map[string]any)
		if len(a) != len(bm) {
			t.Fatalf("%s: keys changed", key)
		}
		for k := range a {
			sameWords(t, a[k], bm[k], k)
		}
	default:
		if fmt.Sprint(a) != fmt.Sprint(b) {
			t.Errorf("%s: %v -> %v", key, a, b)
		}
	}
}

// TestRedactPreservesSharedPrefixes: requests that begin alike begin alike
// after redaction and diverge where they diverged; another key gives other
// filler; a token-id prompt stays ids.
func TestRedactPreservesSharedPrefixes(t *testing.T) {
	r := &redactor{key: 1}
	red := func(prompt string) []string {
		out, err := r.redact([]byte(`{"prompt":` + mustJSON(prompt) + `}`))
		if err != nil {
			t.Fatal(err)
		}
		var m struct{ Prompt string }
		if err := json.Unmarshal(out, &m); err != nil {
			t.Fatal(err)
		}
		return strings.Fields(m.Prompt)
	}
	a := red("the system prompt is long and shared then question one")
	b := red("the system prompt is long and shared then question two")
	c := red("a system prompt is long and shared then question one")
	if !slices.Equal(a[:9], b[:9]) || a[9] == b[9] {
		t.Errorf("shared prefix not kept, or the difference lost:\n%v\n%v", a, b)
	}
	if slices.Equal(a[1:], c[1:]) {
		t.Error("filler after a different first word is the same: a word-for-word code")
	}
	other := (&redactor{key: 2})
	out, _ := other.redact([]byte(`{"prompt":"the system prompt is long and shared then question one"}`))
	if strings.Contains(string(out), strings.Join(a, " ")) {
		t.Error("another key gave the same filler")
	}
	ids, err := r.redact([]byte(`{"prompt":[101, 2023, 2003]}`))
	if err != nil {
		t.Fatal(err)
	}
	var m struct{ Prompt []int }
	if err := json.Unmarshal(ids, &m); err != nil || len(m.Prompt) != 3 || slices.Equal(m.Prompt, []int{101, 2023, 2003}) {
		t.Errorf("token-id prompt redacted to %s", ids)
	}
	for _, bad := range []string{`[1,2]`, `"text"`, `{"prompt":`, `null`} {
		if _, err := r.redact([]byte(bad)); err == nil {
			t.Errorf("%s: redacted without error", bad)
		}
	}
}

func mustJSON(v any) string {
	b, _ := json.Marshal(v)
	return string(b)
}

func TestOutputTokens(t *testing.T) {
	for _, tc := range []struct {
		tail string
		n    int
		ok   bool
	}{
		{`data: {"usage":{"prompt_tokens":5,"completion_tokens":17,"total_tokens":22}}` + "\n\ndata: [DONE]\n\n", 17, true},
		{`{"usage": {"completion_tokens" : 3}} {"completion_tokens": 9}`, 9, true},
		{`data: {"usage":null}`, 0, false},
		{`"completion_tokens": "x"`, 0, false},
		{`"completion_tokens"`, 0, false},
		// The Responses API's last event ends with its usage.
		{"event: response.completed\ndata: {\"type\":\"response.completed\",\"response\":{\"output\":[],\"usage\":{\"input_tokens\":5," +
			"\"input_tokens_details\":{\"cached_tokens\":0},\"output_tokens\":12,\"output_tokens_details\":{\"reasoning_tokens\":3},\"total_tokens\":17}}}\n\n", 12, true},
		{`{"usage":{"output_tokens":4}}`, 4, true},
		{`{"output_tokens_details":{"reasoning_tokens":3}}`, 0, false},
	} {
		n, ok := outputTokens([]byte(tc.tail))
		if n != tc.n || ok != tc.ok {
			t.Errorf("%q: %d %v, want %d %v", tc.tail, n, ok, tc.n, tc.ok)
		}
	}
}

// TestTailWriterKeepsTheEnd: whatever the write sizes, the tail is the last
// tailBytes bytes written, in order.
func TestTailWriterKeepsTheEnd(t *testing.T) {
	for _, sizes := range [][]int{{10}, {tailBytes}, {tailBytes + 7}, {3000, 3000, 3000}, {1, tailBytes - 1, 5, 9000, 2}} {
		tw := &tailWriter{ResponseWriter: discardWriter{}}
		var all []byte
		for i, n := range sizes {
			b := make([]byte, n)
			for j := range b {
				b[j] = byte('a' + (i*7+j)%26)
			}
			all = append(all, b...)
			tw.Write(b)
		}
		want := all[max(0, len(all)-tailBytes):]
		if got := tw.tail(); string(got) != string(want) {
			t.Errorf("sizes %v: tail differs (len %d, want %d)", sizes, len(got), len(want))
		}
	}
}

type discardWriter struct{}

func (discardWriter) Header() http.Header         { return http.Header{} }
func (discardWriter) Write(b []byte) (int, error) { return len(b), nil }
func (discardWriter) WriteHeader(int)             {}
