package plan

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/santhosh-tekuri/jsonschema/v6"

	"github.com/infer-exporter/infer_exporter/internal/config"
	"github.com/infer-exporter/infer_exporter/probe/client"
	"github.com/infer-exporter/infer_exporter/probe/observation"
)

// Kinds is what a workload's requests carry beside their prompts (tools, a
// response format, images) and the judge of their answers' validity. It
// is built once per workload, from a loaded configuration whose schemas are
// compiled already, and shared read only by every request.
type Kinds struct {
	attach *client.Attachments
	// images is the set attach.Images come from, held here because an
	// ImageCache keeps a set only while a Kinds holds it.
	images *imageSet
	// instruction is appended to every prompt: the prompt asks for what
	// the request offers (a call, a JSON answer), as a real one would;
	// OpenAI's json_object mode refuses a prompt that does not say JSON.
	instruction string

	tools      map[string]*jsonschema.Schema // nil: no tools offered
	structured bool
	schema     *jsonschema.Schema // nil with structured: any JSON object
}

// NewKinds builds the kinds of a validated configuration; nil when it asks
// for nothing beyond the prompt. Its images are encoded anew: see
// ImageCache.NewKinds.
func NewKinds(k *config.RequestKinds) (*Kinds, error) { return (*ImageCache)(nil).NewKinds(k) }

// NewKinds is the package's NewKinds, whose images are encoded once for
// every Kinds built through c that asks for the same ones, as long as one
// of them is held (nil c: encoded anew).
func (c *ImageCache) NewKinds(k *config.RequestKinds) (*Kinds, error) {
	if !k.Any() {
		return nil, nil
	}
	out := &Kinds{attach: &client.Attachments{}}
	var ask []string
	if len(k.Tools) > 0 {
		out.tools = make(map[string]*jsonschema.Schema, len(k.Tools))
		tools := make([]map[string]any, 0, len(k.Tools))
		// The Responses API's tools are flat: the function's members
		// beside "type".
		flat := make([]map[string]any, 0, len(k.Tools))
		for _, t := range k.Tools {
			if t.Schema == nil {
				return nil, fmt.Errorf("tool %q: its parameters were not compiled (config.Parse compiles them)", t.Name)
			}
			out.tools[t.Name] = t.Schema
			fn := map[string]any{"name": t.Name, "parameters": t.ParametersJSON}
			if t.Description != "" {
				fn["description"] = t.Description
			}
			tools = append(tools, map[string]any{"type": "function", "function": fn})
			f := map[string]any{"type": "function"}
			for key, v := range fn {
				f[key] = v
			}
			flat = append(flat, f)
		}
		out.attach.Tools = mustJSON(tools)
		out.attach.ResponsesTools = mustJSON(flat)
		switch k.ToolChoice {
		case "", config.ToolChoiceAuto, config.ToolChoiceRequired:
			out.attach.ToolChoice = mustJSON(cmpOr(k.ToolChoice, config.ToolChoiceAuto))
			out.attach.ResponsesToolChoice = out.attach.ToolChoice
			ask = append(ask, "Answer by calling one of the functions offered.")
		default:
			out.attach.ToolChoice = mustJSON(map[string]any{"type": "function", "function": map[string]string{"name": k.ToolChoice}})
			out.attach.ResponsesToolChoice = mustJSON(map[string]string{"type": "function", "name": k.ToolChoice})
			ask = append(ask, "Answer by calling the function "+k.ToolChoice+".")
		}
	}
	if rf := k.ResponseFormat; rf != nil {
		out.structured = true
		switch rf.Type {
		case config.ResponseJSONSchema:
			if rf.Compiled == nil {
				return nil, errors.New("response_format: its schema was not compiled (config.Parse compiles it)")
			}
			out.schema = rf.Compiled
			out.attach.ResponseFormat = mustJSON(map[string]any{"type": "json_schema",
				"json_schema": map[string]any{"name": rf.Name, "schema": rf.SchemaJSON, "strict": true}})
			out.attach.ResponsesText = mustJSON(map[string]any{"format": map[string]any{"type": "json_schema",
				"name": rf.Name, "schema": rf.SchemaJSON, "strict": true}})
			out.attach.OllamaFormat = rf.SchemaJSON
			ask = append(ask, "Answer in JSON that follows the schema given.")
		default:
			out.attach.ResponseFormat = mustJSON(map[string]string{"type": "json_object"})
			out.attach.ResponsesText = mustJSON(map[string]any{"format": map[string]string{"type": "json_object"}})
			out.attach.OllamaFormat = mustJSON("json")
			ask = append(ask, "Answer with a JSON object.")
		}
	}
	if im := k.Images; im != nil {
		set, err := c.images(*im)
		if err != nil {
			return nil, err
		}
		out.images, out.attach.Images = set, set.images
		ask = append(ask, "Describe the images.")
	}
	out.instruction = "\n\n" + strings.Join(ask, " ")
	return out, nil
}

func cmpOr(s, def string) string {
	if s == "" {
		return def
	}
	return s
}

// mustJSON encodes a value built here of maps, strings and raw JSON, which
// cannot fail.
func mustJSON(v any) json.RawMessage {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err)
	}
	return b
}

// apply makes r carry the kinds, and keeps its answer for Check.
func (k *Kinds) apply(r *client.Request) {
	if k == nil {
		return
	}
	r.Prompt += k.instruction
	r.Attach = k.attach
	r.KeepText = k.tools != nil || k.structured
}

// Check judges a finished request's validity into o.StructuredCheck and
// o.ToolCallCheck, and returns why the first that is not valid is not
// ("" when both are, or neither was checked). Only a successful answer is
// judged: a failure is counted as one already. Its memory is bounded by the
// client's bound on kept text (client.DefaultMaxTextBytes).
func (k *Kinds) Check(o *observation.Request) string {
	if k == nil || o.Outcome != observation.Success {
		return ""
	}
	var why []string
	called := strings.TrimSpace(o.ToolCalls) != ""
	if k.tools != nil {
		var w string
		o.ToolCallCheck, w = k.checkCalls(o.ToolCalls)
		if w != "" {
			why = append(why, "tool call: "+w)
		}
	}
	// An answer that is a tool call has no text to judge: the call is
	// the answer.
	if k.structured && !(called && strings.TrimSpace(o.Text) == "") {
		var w string
		o.StructuredCheck, w = checkJSON(k.schema, o.Text)
		if w != "" {
			why = append(why, "structured answer: "+w)
		}
	}
	return strings.Join(why, "; ")
}

// checkJSON judges a structured answer: one JSON document (whitespace
// around it allowed, nothing else) that matches schema, or, without one,
// any JSON object.
func checkJSON(schema *jsonschema.Schema, text string) (string, string) {
	doc, err := jsonschema.UnmarshalJSON(strings.NewReader(text))
	if err != nil {
		return observation.InvalidJSON, fmt.Sprintf("%v in %s", err, quoteCut(text))
	}
	if schema == nil {
		if _, ok := doc.(map[string]any); !ok {
			return observation.SchemaMismatch, "json_object: the answer is not an object: " + quoteCut(text)
		}
		return observation.Valid, ""
	}
	if err := schema.Validate(doc); err != nil {
		return observation.SchemaMismatch, oneLine(err)
	}
	return observation.Valid, ""
}

// checkCalls judges the tool-call text of an answer: each call's name then
// its arguments (client.Chunk.ToolCall), in order. A name is what comes
// before its arguments' '{' (a function name has none: config's rule);
// the arguments are one JSON value, read with a decoder, so that what
// follows it is the next call. Empty arguments, which some servers send
// for a function without parameters, are the empty object. The first call
// that is not valid decides.
func (k *Kinds) checkCalls(text string) (string, string) {
	rest := strings.TrimSpace(text)
	if rest == "" {
		return observation.NoCall, "the answer called no function"
	}
	for rest != "" {
		name, args := rest, ""
		if i := strings.IndexByte(rest, '{'); i >= 0 {
			name, args = rest[:i], rest[i:]
		}
		name = strings.TrimSpace(name)
		schema, ok := k.tools[name]
		if !ok {
			return observation.UnknownTool, fmt.Sprintf("%s is not a declared function", quoteCut(name))
		}
		var doc any = map[string]any{}
		rest = ""
		if strings.TrimSpace(args) != "" {
			dec := json.NewDecoder(strings.NewReader(args))
			dec.UseNumber() // as jsonschema.UnmarshalJSON: integers stay exact
			if err := dec.Decode(&doc); err != nil {
				return observation.InvalidJSON, fmt.Sprintf("%s's arguments: %v in %s", name, err, quoteCut(args))
			}
			rest = strings.TrimSpace(args[dec.InputOffset():])
		}
		if err := schema.Validate(doc); err != nil {
			return observation.SchemaMismatch, fmt.Sprintf("%s's arguments: %s", name, oneLine(err))
		}
	}
	return observation.Valid, ""
}

// quoteCut quotes at most 120 bytes of s, for a reason a person reads.
func quoteCut(s string) string {
	const n = 120
	if len(s) > n {
		return fmt.Sprintf("%q...", s[:n])
	}
	return fmt.Sprintf("%q", s)
}

// oneLine is a validation error on one line (jsonschema's spans several).
func oneLine(err error) string {
	return strings.Join(strings.Fields(err.Error()), " ")
}

// Structured says whether the requests ask for a structured answer.
func (k *Kinds) Structured() bool { return k != nil && k.structured }

// OffersTools says whether the requests offer tools.
func (k *Kinds) OffersTools() bool { return k != nil && k.tools != nil }
