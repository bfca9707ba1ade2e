package plan

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"runtime"
	"strings"
	"unicode/utf8"

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

	// slots bound the checks that run at once (Check).
	slots *CheckSlots
}

// CheckSlots bound the answers' checks that run at once: each finished
// request is checked on its own goroutine, so that without a bound a burst
// of answers is as many checks at once, each holding its parsed answer and
// its validator's work. A check's work is bounded (config.MaxAnswerDepth,
// config.MaxSchemaEvaluations); the slots bound how many such at once.
type CheckSlots struct{ c chan struct{} }

// NewCheckSlots lets n checks run at once (at least 1). runtime.GOMAXPROCS
// is the natural n: a check is CPU work alone, and more at once than the
// CPUs that run them would only hold more answers in memory.
func NewCheckSlots(n int) *CheckSlots {
	return &CheckSlots{c: make(chan struct{}, max(n, 1))}
}

// acquire takes a slot, waiting while all are taken; false when ctx ends
// first. A free slot is taken even when ctx has ended: an answer that
// arrived during a drain's grace is checked as any other.
func (s *CheckSlots) acquire(ctx context.Context) bool {
	select {
	case s.c <- struct{}{}:
		return true
	default:
	}
	select {
	case s.c <- struct{}{}:
		return true
	case <-ctx.Done():
		return false
	}
}

func (s *CheckSlots) release() { <-s.c }

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
	out := &Kinds{slots: NewCheckSlots(runtime.GOMAXPROCS(0))}
	var ask []string
	if len(k.Tools) > 0 {
		out.tools = make(map[string]*jsonschema.Schema, len(k.Tools))
		for _, t := range k.Tools {
			if t.Schema == nil {
				return nil, fmt.Errorf("tool %q: its parameters were not compiled (config.Parse compiles them)", t.Name)
			}
			out.tools[t.Name] = t.Schema
		}
		switch k.ToolChoice {
		case "", config.ToolChoiceAuto, config.ToolChoiceRequired:
			ask = append(ask, "Answer by calling one of the functions offered.")
		default:
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
			ask = append(ask, "Answer in JSON that follows the schema given.")
		default:
			ask = append(ask, "Answer with a JSON object.")
		}
	}
	var images []client.Image
	if im := k.Images; im != nil {
		set, err := c.images(*im)
		if err != nil {
			return nil, err
		}
		out.images, images = set, set.images
		ask = append(ask, "Describe the images.")
	}
	// Each flavor that takes the kinds encodes them in its own shapes
	// (probe/client), once here for every request of the workload.
	out.attach = client.NewAttachments(k, images)
	out.instruction = "\n\n" + strings.Join(ask, " ")
	return out, nil
}

// ShareSlots makes k's checks take their turns in s, shared with other
// kinds (the live exporter's workloads share one), instead of its own.
// Called before k is used.
func (k *Kinds) ShareSlots(s *CheckSlots) {
	if k != nil && s != nil {
		k.slots = s
	}
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
// client's bound on kept text (client.DefaultMaxTextBytes), by the depth
// of what it parses (config.MaxAnswerDepth) and by the schema's cost per
// value (config.MaxSchemaEvaluations).
//
// A check waits for one of its kinds' slots (CheckSlots) while all are
// taken. Waiting keeps the figures true: every answer is judged, the
// costly ones too, where skipping checks under load would count the cheap
// answers only. The request's timing was taken already; only its report
// to the observers waits. When ctx ends first (a run stopped past its
// drain's grace) the answer is left not checked: it is counted by its
// outcome, in no validity result.
func (k *Kinds) Check(ctx context.Context, o *observation.Request) string {
	if k == nil || o.Outcome != observation.Success || (k.tools == nil && !k.structured) {
		return ""
	}
	if !k.slots.acquire(ctx) {
		return ""
	}
	defer k.slots.release()
	var why []string
	called := callsAny(o.Calls)
	if k.tools != nil {
		var w string
		o.ToolCallCheck, w = k.checkCalls(o.Calls)
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

// deeperThan says whether JSON text nests more than limit levels (each
// array or object is one), counted on its bytes outside strings, before
// it is parsed: linear, and allocation-free. For text that is JSON the
// count is exact. With first, only the first value is measured: what
// follows a call's arguments is the next call.
func deeperThan(text string, limit int, first bool) bool {
	depth, inString, escaped := 0, false, false
	for i := 0; i < len(text); i++ {
		c := text[i]
		switch {
		case inString:
			switch {
			case escaped:
				escaped = false
			case c == '\\':
				escaped = true
			case c == '"':
				inString = false
			}
		case c == '"':
			inString = true
		case c == '[' || c == '{':
			if depth++; depth > limit {
				return true
			}
		case c == ']' || c == '}':
			if depth > 0 {
				depth--
			}
			if first && depth == 0 {
				return false
			}
		}
	}
	return false
}

// tooDeep is the reason for an answer or arguments deeperThan the bound.
var tooDeep = fmt.Sprintf("nested more than %d levels deep (config.MaxAnswerDepth): not parsed", config.MaxAnswerDepth)

// checkJSON judges a structured answer: one JSON document (whitespace
// around it allowed, nothing else) that matches schema, or, without one,
// any JSON object. One nested deeper than config.MaxAnswerDepth is judged
// invalid_json unparsed: the validator recurses per level, keeping each
// level's path in its errors, so that 9,990 levels took 840 MB.
func checkJSON(schema *jsonschema.Schema, text string) (string, string) {
	if deeperThan(text, config.MaxAnswerDepth, false) {
		return observation.InvalidJSON, tooDeep + ": " + quoteCut(text)
	}
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
		return observation.SchemaMismatch, mismatch(err)
	}
	return observation.Valid, ""
}

// callsAny says whether an answer called a function: a call whose text
// is more than white space.
func callsAny(calls []observation.ToolCall) bool {
	for _, c := range calls {
		if strings.TrimSpace(c.Name) != "" || strings.TrimSpace(c.Arguments) != "" {
			return true
		}
	}
	return false
}

// checkCalls judges an answer's tool calls, each its name and its
// arguments as the client put them together (observation.Request.Calls:
// parallel calls whose fragments were interleaved are each whole). A call
// names a declared function (a call whose fragments never named one is
// unknown_tool too); its arguments are one JSON object, and nothing else.
// Empty arguments, which some servers send for a function without
// parameters, are the empty object; arguments that are not an object
// (city=Paris, [1], "x"), do not parse, or hold more than one value are
// invalid_json, as the API requires an object. The first call that is not
// valid decides; arguments nested deeper than config.MaxAnswerDepth are
// invalid_json, unparsed, as a structured answer is.
func (k *Kinds) checkCalls(calls []observation.ToolCall) (string, string) {
	if !callsAny(calls) {
		return observation.NoCall, "the answer called no function"
	}
	for i, c := range calls {
		name, args := strings.TrimSpace(c.Name), strings.TrimSpace(c.Arguments)
		if name == "" && args == "" {
			continue
		}
		if name == "" {
			return observation.UnknownTool, fmt.Sprintf("call %d names no function (no fragment of it carried a name); its arguments: %s", i+1, quoteCut(args))
		}
		schema, declared := k.tools[name]
		if !declared {
			return observation.UnknownTool, fmt.Sprintf("%s is not a declared function", quoteCut(name))
		}
		if result, why := checkArguments(schema, name, args); result != observation.Valid {
			return result, why
		}
	}
	return observation.Valid, ""
}

// checkArguments judges one call's arguments (trimmed) against its
// function's parameters.
func checkArguments(schema *jsonschema.Schema, name, args string) (string, string) {
	var doc any = map[string]any{}
	switch {
	case args == "":
	case args[0] != '{':
		return observation.InvalidJSON, fmt.Sprintf("%s's arguments are not a JSON object: %s", name, quoteCut(args))
	default:
		if deeperThan(args, config.MaxAnswerDepth, true) {
			return observation.InvalidJSON, fmt.Sprintf("%s's arguments: %s: %s", name, tooDeep, quoteCut(args))
		}
		dec := json.NewDecoder(strings.NewReader(args))
		dec.UseNumber() // as jsonschema.UnmarshalJSON: integers stay exact
		if err := dec.Decode(&doc); err != nil {
			return observation.InvalidJSON, fmt.Sprintf("%s's arguments: %v in %s", name, err, quoteCut(args))
		}
		if rest := strings.TrimSpace(args[dec.InputOffset():]); rest != "" {
			return observation.InvalidJSON, fmt.Sprintf("%s's arguments are more than one JSON object: %s after the first", name, quoteCut(rest))
		}
	}
	if err := schema.Validate(doc); err != nil {
		return observation.SchemaMismatch, fmt.Sprintf("%s's arguments: %s", name, mismatch(err))
	}
	return observation.Valid, ""
}

// maxReasonBytes bounds a mismatch's reason, which /probe logs.
const maxReasonBytes = 300

// mismatch is a validation error's reason, bounded: where the first
// failure is and what it is, and how many more there are. jsonschema's
// own text lists every failure on every path, each with the path, and
// grows with the answer and its depth (33 MB for an answer 18 deep
// against a schema that recursed twice per level).
func mismatch(err error) string {
	var verr *jsonschema.ValidationError
	if !errors.As(err, &verr) {
		return cut(oneLine(err), maxReasonBytes)
	}
	first, n := verr, 0
	var leaves func(e *jsonschema.ValidationError)
	leaves = func(e *jsonschema.ValidationError) {
		if len(e.Causes) == 0 {
			if n++; n == 1 {
				first = e
			}
			return
		}
		for _, c := range e.Causes {
			leaves(c)
		}
	}
	leaves(verr)
	one := &jsonschema.ValidationError{SchemaURL: first.SchemaURL, InstanceLocation: first.InstanceLocation, ErrorKind: first.ErrorKind}
	why := cut(oneLine(one), maxReasonBytes)
	if n > 1 {
		why += fmt.Sprintf(" (and %d more)", n-1)
	}
	return why
}

// cut is s cut to at most n bytes, on a rune's start, with "..." when cut.
func cut(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n] + "..."
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
