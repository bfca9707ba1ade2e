package plan

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"reflect"
	"strings"
	"sync"
	"testing"

	"github.com/infer-exporter/infer_exporter/internal/config"
	"github.com/infer-exporter/infer_exporter/internal/simulator/simulatortest"
	"github.com/infer-exporter/infer_exporter/probe/client"
	"github.com/infer-exporter/infer_exporter/probe/observation"
	"github.com/infer-exporter/infer_exporter/probe/prompt"
)

// kindsConfig is a configuration of one workload against url with kinds
// (YAML lines at the workload's indentation).
func kindsConfig(t testing.TB, url, flavor, kinds string) *config.Config {
	t.Helper()
	c, err := config.Parse([]byte(fmt.Sprintf(`targets:
  - {name: sim, url: %q, model: sim-model, flavor: %s}
workloads:
  - name: w
    target: sim
    arrival: {rate: 1}
%s`, url, flavor, kinds)), "c.yml")
	if err != nil {
		t.Fatal(err)
	}
	return c
}

const (
	weatherTool = `    tools:
      - name: get_weather
        parameters:
          type: object
          properties: {city: {type: string, minLength: 1}, days: {type: integer, minimum: 1}}
          required: [city, days]
      - name: noargs
`
	answerSchema = `    response_format:
      type: json_schema
      schema: {type: object, properties: {n: {type: integer}, tags: {type: array, items: {type: string}}}, required: [n, tags], additionalProperties: false}
`
)

func TestKindsCheck(t *testing.T) {
	c := kindsConfig(t, "http://127.0.0.1:1", "openai-chat", weatherTool+answerSchema)
	k, err := NewKinds(&c.Workloads[0].Kinds)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name, text           string
		calls                []observation.ToolCall
		structured, toolCall string
	}{
		{"valid call", "", calls("get_weather", `{"city":"Paris","days":2}`), "", observation.Valid},
		{"valid call, empty arguments", "", calls("noargs", ""), "", observation.Valid},
		{"two valid calls", "", calls("noargs", "{}", "get_weather", `{"city":"x","days":1}`), "", observation.Valid},
		{"unknown tool", "", calls("get_time", "{}"), "", observation.UnknownTool},
		{"bad arguments", "", calls("get_weather", `{"city":"Paris"`), "", observation.InvalidJSON},
		{"arguments mismatch", "", calls("get_weather", `{"city":"Paris","days":"2"}`), "", observation.SchemaMismatch},
		{"second call invalid", "", calls("noargs", "{}", "get_weather", `{"city":""}`), "", observation.SchemaMismatch},
		{"blank call only", "", calls(" ", "\n"), observation.InvalidJSON, observation.NoCall},
		{"no call, valid answer", `{"n":1,"tags":[]}`, nil, observation.Valid, observation.NoCall},
		{"no call, broken answer", `{"n":1,"tags":[]`, nil, observation.InvalidJSON, observation.NoCall},
		{"answer mismatch", `{"n":1.5,"tags":[]}`, nil, observation.SchemaMismatch, observation.NoCall},
		{"answer in a fence", "```json\n{\"n\":1,\"tags\":[]}\n```", nil, observation.InvalidJSON, observation.NoCall},
		{"answer then text", `{"n":1,"tags":[]} done`, nil, observation.InvalidJSON, observation.NoCall},
	} {
		o := &observation.Request{Outcome: observation.Success, Text: tc.text, Calls: tc.calls}
		why := k.Check(context.Background(), o)
		if o.StructuredCheck != tc.structured || o.ToolCallCheck != tc.toolCall {
			t.Errorf("%s: structured %q, tool call %q; want %q, %q (%s)", tc.name, o.StructuredCheck, o.ToolCallCheck, tc.structured, tc.toolCall, why)
		}
		if (tc.structured == observation.Valid || tc.structured == "") && tc.toolCall == observation.Valid && why != "" {
			t.Errorf("%s: valid, but why = %q", tc.name, why)
		}
		if (tc.structured != observation.Valid && tc.structured != "" || tc.toolCall != observation.Valid) && why == "" {
			t.Errorf("%s: not valid, and no reason", tc.name)
		}
	}
	// A failed request is not judged: it is counted as a failure already.
	o := &observation.Request{Outcome: observation.Timeout, Text: "{"}
	if k.Check(context.Background(), o); o.StructuredCheck != "" || o.ToolCallCheck != "" {
		t.Errorf("a timeout was judged: %q %q", o.StructuredCheck, o.ToolCallCheck)
	}
}

// calls is an answer's calls, given as name, arguments pairs.
func calls(nameArgs ...string) []observation.ToolCall {
	out := make([]observation.ToolCall, 0, len(nameArgs)/2)
	for i := 0; i+1 < len(nameArgs); i += 2 {
		out = append(out, observation.ToolCall{Name: nameArgs[i], Arguments: nameArgs[i+1]})
	}
	return out
}

// TestKindsCheckCallArguments: a call of a declared function whose
// arguments are not one JSON object, or do not parse, is invalid_json;
// unknown_tool is kept for a name not declared, whatever its arguments,
// and for a call whose fragments never named a function.
func TestKindsCheckCallArguments(t *testing.T) {
	c := kindsConfig(t, "http://127.0.0.1:1", "openai-chat", weatherTool+"      - name: get\n")
	k, err := NewKinds(&c.Workloads[0].Kinds)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name      string
		calls     []observation.ToolCall
		want, why string
	}{
		{"key=value arguments", calls("get_weather", "city=Paris, days=3"), observation.InvalidJSON, `get_weather's arguments are not a JSON object: "city=Paris, days=3"`},
		{"key=value with braces later", calls("get_weather", "city=Paris, days={3}"), observation.InvalidJSON, `get_weather's arguments are not a JSON object: "city=Paris, days={3}"`},
		{"an array", calls("get_weather", `["Paris",3]`), observation.InvalidJSON, "not a JSON object"},
		{"a string", calls("get_weather", `"Paris"`), observation.InvalidJSON, "not a JSON object"},
		{"null", calls("noargs", " null"), observation.InvalidJSON, "not a JSON object"},
		{"broken object", calls("get_weather", `{"city":"Paris",`), observation.InvalidJSON, "get_weather's arguments: unexpected EOF"},
		{"unquoted keys", calls("get_weather", `{city: Paris}`), observation.InvalidJSON, "get_weather's arguments: invalid character"},
		{"two objects in one call", calls("noargs", `{}{"x":1}`), observation.InvalidJSON, `noargs's arguments are more than one JSON object: "{\"x\":1}" after the first`},
		{"second call's arguments", calls("noargs", "{}", "get_weather", "city=Paris"), observation.InvalidJSON, "get_weather's arguments are not a JSON object"},
		{"unknown, object", calls("get_time", `{"city":"Paris"}`), observation.UnknownTool, `"get_time" is not a declared function`},
		{"unknown, a name twice", calls("get_weatherget_weather", `{"city":"Paris","days":1}`), observation.UnknownTool, `"get_weatherget_weather" is not a declared function`},
		{"unknown, no arguments", calls("get_time", ""), observation.UnknownTool, `"get_time" is not a declared function`},
		{"unknown, longer than a declared name", calls("get_weather_v2", "{}"), observation.UnknownTool, `"get_weather_v2" is not a declared function`},
		{"unknown, dotted", calls("functions.get_weather", `{"city":"Paris","days":1}`), observation.UnknownTool, `"functions.get_weather" is not a declared function`},
		{"no name", calls("", `{"city":"Paris"}`), observation.UnknownTool, `call 1 names no function (no fragment of it carried a name); its arguments: "{\"city\":\"Paris\"}"`},
		{"second call has no name", calls("noargs", "", "", `{"city":"Paris"}`), observation.UnknownTool, "call 2 names no function"},
		{"valid, space around", calls(" get_weather\n", ` {"city":"Paris","days":1} `), observation.Valid, ""},
		{"valid, empty arguments", calls("noargs", ""), observation.Valid, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			o := &observation.Request{Outcome: observation.Success, Calls: tc.calls}
			why := k.Check(context.Background(), o)
			if o.ToolCallCheck != tc.want || !strings.Contains(why, tc.why) || (tc.why == "") != (why == "") {
				t.Errorf("%q: %q (%s); want %q (%s)", tc.calls, o.ToolCallCheck, why, tc.want, tc.why)
			}
		})
	}
}

// TestKindsResponsesBody: the kinds in the Responses API's shapes, as
// OpenAI's API reference and vLLM's ResponsesRequest (the openai package's
// types) define them: flat function tools, tool_choice {"type":"function",
// "name"}, the format in text.format with its name, schema and strict, and
// the images as input_image parts (a data URL and detail, which the API
// requires) of one user message after the prompt's input_text part.
func TestKindsResponsesBody(t *testing.T) {
	for _, tc := range []struct {
		name, kinds, want string
	}{
		{"tools, named, and a schema", weatherTool + "    tool_choice: get_weather\n" + answerSchema,
			`{"model":"sim-model","input":"hello\n\nAnswer by calling the function get_weather. Answer in JSON that follows the schema given.","stream":true,"store":false,"max_output_tokens":4,` +
				`"tools":[{"type":"function","name":"get_weather","parameters":{"properties":{"city":{"minLength":1,"type":"string"},"days":{"minimum":1,"type":"integer"}},"required":["city","days"],"type":"object"}},` +
				`{"type":"function","name":"noargs","parameters":{"type":"object"}}],"tool_choice":{"type":"function","name":"get_weather"},` +
				`"text":{"format":{"type":"json_schema","name":"answer","schema":{"additionalProperties":false,"properties":{"n":{"type":"integer"},"tags":{"items":{"type":"string"},"type":"array"}},"required":["n","tags"],"type":"object"},"strict":true}}}`},
		{"required, a description, json_object", "    tools: [{name: f, description: Does f.}]\n    tool_choice: required\n    response_format: {type: json_object}\n",
			`{"model":"sim-model","input":"hello\n\nAnswer by calling one of the functions offered. Answer with a JSON object.","stream":true,"store":false,"max_output_tokens":4,` +
				`"tools":[{"type":"function","name":"f","description":"Does f.","parameters":{"type":"object"}}],"tool_choice":"required","text":{"format":{"type":"json_object"}}}`},
		{"images", "    images: {count: 2, width: 8, height: 8}\n",
			`{"model":"sim-model","input":[{"type":"message","role":"user","content":[{"type":"input_text","text":"hello\n\nDescribe the images."},` +
				`{"type":"input_image","image_url":"IMAGE0","detail":"auto"},{"type":"input_image","image_url":"IMAGE1","detail":"auto"}]}],"stream":true,"store":false,"max_output_tokens":4}`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := kindsConfig(t, "http://127.0.0.1:1", "openai-responses", tc.kinds)
			k, err := NewKinds(&c.Workloads[0].Kinds)
			if err != nil {
				t.Fatal(err)
			}
			target, err := client.TargetOf(&c.Targets[0])
			if err != nil {
				t.Fatal(err)
			}
			r := Template{Kinds: k}.Request(prompt.Prompt{Text: "hello", OutputTokens: 4})
			hr, err := client.OpenAIResponses.NewRequest(context.Background(), target, r)
			if err != nil {
				t.Fatal(err)
			}
			body, _ := io.ReadAll(hr.Body)
			want := tc.want
			for i, im := range r.Attach.Images {
				want = strings.Replace(want, fmt.Sprintf("IMAGE%d", i), string(im.DataURL()), 1)
			}
			var g, w any
			if err := json.Unmarshal(body, &g); err != nil {
				t.Fatalf("%s: %v", body, err)
			}
			if err := json.Unmarshal([]byte(want), &w); err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(g, w) {
				t.Errorf("sent %s\nwant %s", body, want)
			}
		})
	}
}

// TestKindsRequestBodies: the prompt asks for what the request offers,
// and the answer is kept for the check.
func TestKindsRequest(t *testing.T) {
	c := kindsConfig(t, "http://127.0.0.1:1", "openai-chat", weatherTool+"    tool_choice: get_weather\n    images: {count: 2, width: 8, height: 8}\n")
	k, err := NewKinds(&c.Workloads[0].Kinds)
	if err != nil {
		t.Fatal(err)
	}
	r := Template{Kinds: k}.Request(prompt.Prompt{Text: "hello", OutputTokens: 4})
	if !strings.HasPrefix(r.Prompt, "hello\n\n") || !strings.Contains(r.Prompt, "get_weather") || !r.KeepText {
		t.Errorf("request %q, keep text %v", r.Prompt, r.KeepText)
	}
	a := r.Attach
	target, err := client.TargetOf(&c.Targets[0])
	if err != nil {
		t.Fatal(err)
	}
	hr, err := client.OpenAIChat.NewRequest(context.Background(), target, r)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(hr.Body)
	if len(a.Images) != 2 || !strings.HasPrefix(string(a.Images[0].DataURL()), "data:image/png;base64,iVBOR") ||
		!strings.Contains(string(body), `"tool_choice":{"function":{"name":"get_weather"},"type":"function"}`) {
		t.Errorf("attachments: %d images, body %.300s", len(a.Images), body)
	}
}

// TestKindsValidRatioAgainstSimulator: against the simulator with 10% of
// structured answers cut by a byte, the valid ratio is 0.90 within
// binomial noise. n = 1000 requests of distinct prompts; the fault draws
// each answer by a hash of its prompt, so the count is a fixed number for
// these prompts, and the bound is what any other 1000 would meet 99.9% of
// the time: 900 ± 3.29·sqrt(1000·0.9·0.1) = 900 ± 31.2, so [869, 931].
// Every answer that is not valid must be invalid_json (the fault's only
// effect), and each is judged: a tool call's arguments as its parameters,
// a response format's answer as its schema. The same for the Responses
// API, whose call is named in an event of its own (no token) before its
// argument deltas, and whose format is text.format.
func TestKindsValidRatioAgainstSimulator(t *testing.T) {
	const n, lo, hi = 1000, 869, 931
	for _, tc := range []struct {
		name, flavor, kinds string
		tools               bool
	}{
		{"json_schema", "openai-chat", answerSchema, false},
		{"json_object", "openai-chat", "    response_format: {type: json_object}\n", false},
		{"tools", "openai-chat", weatherTool + "    tool_choice: get_weather\n", true},
		{"responses json_schema", "openai-responses", answerSchema, false},
		{"responses tools", "openai-responses", weatherTool + "    tool_choice: get_weather\n", true},
		{"responses tools, auto", "openai-responses", weatherTool, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			sim := simulatortest.InstantConfig()
			sim.Faults.InvalidStructured = 0.1
			url, _ := simulatortest.StartTest(t, sim)
			c := kindsConfig(t, url, tc.flavor, tc.kinds)
			k, err := NewKinds(&c.Workloads[0].Kinds)
			if err != nil {
				t.Fatal(err)
			}
			target, err := client.TargetOf(&c.Targets[0])
			if err != nil {
				t.Fatal(err)
			}
			cl := client.New(client.Options{MaxConnsPerHost: 8})
			defer cl.Close()
			tmpl := Template{Kinds: k}
			counts := map[string]int{}
			var mu sync.Mutex
			var wg sync.WaitGroup
			sem := make(chan struct{}, 8)
			for i := range n {
				wg.Add(1)
				sem <- struct{}{}
				go func() {
					defer func() { <-sem; wg.Done() }()
					// Lengths from 1 to 40 tokens: the document is spread
					// over however many the answer has.
					r := tmpl.Request(prompt.Prompt{Text: fmt.Sprintf("request number %d", i), OutputTokens: 1 + i%40})
					var o observation.Request
					cl.Do(context.Background(), target, r, &o)
					why := k.Check(context.Background(), &o)
					result := o.StructuredCheck
					if tc.tools {
						result = o.ToolCallCheck
					}
					mu.Lock()
					defer mu.Unlock()
					if o.Outcome != observation.Success {
						counts[string(o.Outcome)]++
						return
					}
					counts[result]++
					if result != observation.Valid && result != observation.InvalidJSON {
						t.Errorf("request %d: %s (%s)", i, result, why)
					}
				}()
			}
			wg.Wait()
			if v := counts[observation.Valid]; v < lo || v > hi || counts[observation.Valid]+counts[observation.InvalidJSON] != n {
				t.Errorf("%v: valid %d of %d, want [%d, %d] with the rest invalid_json", counts, v, n, lo, hi)
			}
			t.Logf("%v", counts)
		})
	}
}
