package plan

import (
	"context"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/infer-exporter/infer_exporter/internal/config"
	"github.com/infer-exporter/infer_exporter/probe/observation"
)

// nested is a JSON value nested n levels deep: n arrays around inner.
func nested(n int, inner string) string {
	return strings.Repeat("[", n) + inner + strings.Repeat("]", n)
}

// recursiveKinds are the kinds of a recursive response format (the
// issue's {"type":"array","items":{"$ref":"#"}}) and a tool whose
// parameters nest the same way under "a".
func recursiveKinds(t *testing.T) *Kinds {
	t.Helper()
	c := kindsConfig(t, "http://127.0.0.1:1", "openai-chat", `    response_format:
      type: json_schema
      schema: {type: array, items: {$ref: "#"}}
    tools:
      - name: f
        parameters: {type: object, properties: {a: {$ref: "#/$defs/list"}}, $defs: {list: {type: array, items: {$ref: "#/$defs/list"}}}}
`)
	k, err := NewKinds(&c.Workloads[0].Kinds)
	if err != nil {
		t.Fatal(err)
	}
	return k
}

// TestCheckNestingBound: an answer, or a call's arguments, nested deeper
// than config.MaxAnswerDepth is judged invalid_json with a reason that
// says so, unparsed; one at the bound is judged by its schema. The
// issue's answer, 9,990 levels (20 KB) against a recursive schema, made
// the validator allocate 840 MB per check and the exporter run out of
// memory at 4 answers a second; here each row's check allocates at most
// its ceiling (runtime.MemStats.TotalAlloc around it, every allocation
// of the process, so generous: the unbounded check of the first row
// allocates over 800 MB, one at the bound some 200 KB).
func TestCheckNestingBound(t *testing.T) {
	const deep = 9990
	max := config.MaxAnswerDepth
	tooDeep := "nested more than 128 levels deep (config.MaxAnswerDepth): not parsed"
	k := recursiveKinds(t)
	for _, tc := range []struct {
		name, text           string
		calls                []observation.ToolCall
		structured, toolCall string
		why                  string // in the reason
		ceiling              uint64 // bytes the check may allocate
	}{
		{"the issue's answer", nested(deep, "0"), nil, observation.InvalidJSON, observation.NoCall, "structured answer: " + tooDeep, 64 << 10},
		{"one level too deep", nested(max+1, ""), nil, observation.InvalidJSON, observation.NoCall, tooDeep, 64 << 10},
		{"at the bound, valid", nested(max, ""), nil, observation.Valid, observation.NoCall, "", 4 << 20},
		{"at the bound, not valid", nested(max, "0"), nil, observation.SchemaMismatch, observation.NoCall, "at '/0/0/0/0", 4 << 20},
		{"deep arguments", "", calls("f", `{"a":`+nested(deep, "")+`}`), "", observation.InvalidJSON, "tool call: f's arguments: " + tooDeep, 64 << 10},
		{"arguments at the bound", "", calls("f", `{"a":`+nested(max-1, "")+`}`), "", observation.Valid, "", 4 << 20},
		{"arguments one too deep", "", calls("f", `{"a":`+nested(max, "")+`}`), "", observation.InvalidJSON, tooDeep, 64 << 10},
		{"deep second call", "", calls("f", `{"a":[]}`, "f", `{"a":`+nested(deep, "")+`}`), "", observation.InvalidJSON, tooDeep, 64 << 10},
		// Brackets in a string are text, not levels.
		{"brackets in a string", `[["` + nested(deep, "") + `"]]`, nil, observation.SchemaMismatch, observation.NoCall, "at '/0/0'", 1 << 20},
		{"escaped quote in a string", `[["\"` + nested(deep, "") + `"]]`, nil, observation.SchemaMismatch, observation.NoCall, "at '/0/0'", 1 << 20},
	} {
		t.Run(tc.name, func(t *testing.T) {
			o := &observation.Request{Outcome: observation.Success, Text: tc.text, Calls: tc.calls}
			var before, after runtime.MemStats
			runtime.GC()
			runtime.ReadMemStats(&before)
			why := k.Check(context.Background(), o)
			runtime.ReadMemStats(&after)
			if o.StructuredCheck != tc.structured || o.ToolCallCheck != tc.toolCall {
				t.Errorf("structured %q, tool call %q; want %q, %q (%s)", o.StructuredCheck, o.ToolCallCheck, tc.structured, tc.toolCall, why)
			}
			if !strings.Contains(why, tc.why) {
				t.Errorf("why %q, want %q in it", why, tc.why)
			}
			if len(why) > 1000 {
				t.Errorf("a reason of %d bytes", len(why))
			}
			t.Logf("allocated %d KB: %s", (after.TotalAlloc-before.TotalAlloc)>>10, why)
			if a := after.TotalAlloc - before.TotalAlloc; a > tc.ceiling {
				t.Errorf("the check allocated %d KB, over %d KB", a>>10, tc.ceiling>>10)
			}
		})
	}
	// json_object's answers are bounded the same way.
	c := kindsConfig(t, "http://127.0.0.1:1", "openai-chat", "    response_format: {type: json_object}\n")
	obj, err := NewKinds(&c.Workloads[0].Kinds)
	if err != nil {
		t.Fatal(err)
	}
	o := &observation.Request{Outcome: observation.Success, Text: `{"a":` + nested(deep, "") + `}`}
	if why := obj.Check(context.Background(), o); o.StructuredCheck != observation.InvalidJSON || !strings.Contains(why, tooDeep) {
		t.Errorf("json_object: %q (%s)", o.StructuredCheck, why)
	}
}

// TestDeeperThan: the depth is counted on the bytes, outside strings; with
// first, only the first value.
func TestDeeperThan(t *testing.T) {
	for _, tc := range []struct {
		text  string
		limit int
		first bool
		want  bool
	}{
		{"[[0]]", 2, false, false},
		{"[[0]]", 1, false, true},
		{`{"a":{"b":[1]}}`, 3, false, false},
		{`{"a":{"b":[1]}}`, 2, false, true},
		{`["[[[["]`, 1, false, false},
		{`["\"[[["]`, 1, false, false},
		{`["\\",[[0]]]`, 2, false, true}, // an escaped backslash ends no string
		{`{}[[[0]]]`, 2, true, false},    // the next call's text is not measured
		{`{}[[[0]]]`, 2, false, true},
		{`]]]]][[0]]`, 2, false, false}, // stray closers count nothing
		{"", 0, false, false},
	} {
		if got := deeperThan(tc.text, tc.limit, tc.first); got != tc.want {
			t.Errorf("deeperThan(%q, %d, %v) = %v, want %v", tc.text, tc.limit, tc.first, got, tc.want)
		}
	}
}

// TestCheckSlots: a check waits for a slot while all are taken, and runs
// when one is freed; one whose context ends first leaves its answer not
// checked; a free slot is taken even with an ended context (an answer
// that arrived during a drain's grace is checked).
func TestCheckSlots(t *testing.T) {
	k := recursiveKinds(t)
	slots := NewCheckSlots(1)
	k.ShareSlots(slots)
	answer := func() *observation.Request {
		return &observation.Request{Outcome: observation.Success, Text: "[[]]"}
	}

	ended, cancel := context.WithCancel(context.Background())
	cancel()
	o := answer()
	if k.Check(ended, o); o.StructuredCheck != observation.Valid {
		t.Fatalf("a free slot and an ended context: %q, want checked", o.StructuredCheck)
	}

	slots.c <- struct{}{} // every slot taken
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan *observation.Request)
	go func() {
		o := answer()
		k.Check(ctx, o)
		done <- o
	}()
	select {
	case o := <-done:
		t.Fatalf("checked (%q) while every slot was taken", o.StructuredCheck)
	case <-time.After(50 * time.Millisecond):
	}
	cancel()
	if o := <-done; o.StructuredCheck != "" || o.ToolCallCheck != "" {
		t.Errorf("context ended while waiting: %q %q, want not checked", o.StructuredCheck, o.ToolCallCheck)
	}

	go func() {
		o := answer()
		k.Check(context.Background(), o)
		done <- o
	}()
	<-slots.c // the slot freed
	if o := <-done; o.StructuredCheck != observation.Valid {
		t.Errorf("after the slot was freed: %q, want valid", o.StructuredCheck)
	}
	if len(slots.c) != 0 {
		t.Errorf("%d slots still taken after the checks", len(slots.c))
	}
}
