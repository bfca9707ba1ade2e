package client

import (
	"errors"
	"math"
	"strconv"
	"unicode/utf8"

	"github.com/infer-exporter/infer_exporter/probe/observation"
)

// This file reads the few fields the probe needs from an OpenAI chunk with a
// hand-written JSON scanner. encoding/json cost about 3.4 µs and 8.5
// allocations per chunk, 90% of the client's parse cost (see
// BenchmarkDecodeStream); this scanner validates the whole document just as
// strictly and allocates nothing once warm.
//
// Its meaning is defined by a generic decode: the chunk behaves exactly as if
// it were decoded with encoding/json into `any` (so duplicate keys: the last
// one wins; invalid UTF-8 in text becomes U+FFFD byte by byte; keys match
// exactly, case included) and then read by the rules below. FuzzDecodeChunk
// checks that equivalence against encoding/json.
//
//   - The document must be valid JSON (nesting at most 10000 deep, as
//     encoding/json allows) whose top level is an object.
//   - A non-null "error", or "object": "error", is an error the server
//     reported.
//   - The fields read are choices[].delta|message.content|refusal|
//     reasoning_content|reasoning, choices[].delta|message.tool_calls[].
//     function.name|arguments, choices[].delta|message.function_call.name|
//     arguments (the deprecated single call), choices[].text,
//     usage.prompt_tokens|completion_tokens, and
//     usage.completion_tokens_details.reasoning_tokens. Each may be absent
//     or null. Present with the wrong type (choices or tool_calls not an
//     array, a choice, delta, message, tool call, function, function_call,
//     usage or completion_tokens_details not an object, a text not a
//     string, a count not an integer in [0, 1e9]) the chunk cannot be read
//     and is a protocol error, rather than a token silently lost.
//   - Answer text (Chunk.Content) is, per choice, the delta's content and
//     refusal, the message's content and refusal, then text; reasoning the
//     delta's reasoning_content and reasoning, then the message's.
//     Tool-call text (Chunk.ToolCall) is, per choice, the delta's tool
//     calls then function_call, then the message's, each call its name
//     then its arguments: what the model generated, so that a stream whose
//     answer is a tool call has its tokens timed like any other.
//   - Each call's part of that text (Chunk.Calls) is, in the same order,
//     its name and arguments with the tool call's "index" (an integer in
//     [0, 1e9]; of another type or null, absent) and "id" (a string; of
//     another type or null, absent), so that interleaved calls can be
//     told apart. A function_call has neither. Neither makes a chunk
//     unreadable: the text alone is a token.
//   - The reasoning-token count is read apart from the usage flag: a usage
//     object whose only count is completion_tokens_details.reasoning_tokens
//     carries that count but no usage (Chunk.HasUsage stays false).
//   - The prompt tokens the server's prefix cache served
//     (usage.prompt_tokens_details.cached_tokens: vLLM with
//     --enable-prompt-tokens-details, SGLang, OpenAI; Chunk.CachedTokens)
//     are read apart from the usage flag too, and never make a chunk
//     unreadable: the details or the count of another type, or a count
//     out of [0, 1e9], is absent (0). A figure beside the usage must not
//     cost the request its tokens.
//   - The engine's own timings (Chunk.Server: vLLM's "metrics", llama.cpp's
//     "timings", Dynamo's "nvext".timing; timings.go) never make a chunk
//     unreadable: a member of the wrong type or out of bounds is absent.

// maxJSONDepth is encoding/json's nesting limit.
const maxJSONDepth = 10000

// maxCount bounds a usage count; larger is not a real count.
const maxCount = 1e9

var (
	errJSONSyntax = errors.New("invalid JSON")
	errJSONDepth  = errors.New("JSON nested too deep")
	// errEventNotObject is a chat chunk that is valid JSON but not an object.
	errEventNotObject = errors.New("event is not a JSON object")
)

// errWrongType is a field the probe reads that has the wrong JSON type.
var errWrongType = errors.New("a field has the wrong type")

const (
	slotAbsent = iota
	slotNull
	slotValue
	slotBad
)

// textSlot is one text field: its state and decoded bytes.
type textSlot struct {
	state uint8
	buf   []byte
}

func (t *textSlot) reset() { t.state, t.buf = slotAbsent, t.buf[:0] }

// countSlot is one usage count.
type countSlot struct {
	state uint8
	v     int
}

// textObject is a delta or message: content, refusal, reasoning_content,
// reasoning, and the tool-call text of tool_calls and function_call.
type textObject struct {
	state                                   uint8
	content, refusal, reasoningC, reasoning textSlot
	// toolCalls is the state of tool_calls and calls its text: every
	// call's name then arguments, in order (a later tool_calls key
	// replaces it, as a later key's value wins).
	toolCalls uint8
	calls     []byte
	// fnCall is the state of the deprecated function_call; its text.
	fnCall uint8
	fn     []byte
	// parts and fnParts are the same calls' parts, with their index and
	// id (Chunk.Calls).
	parts, fnParts callParts
	// name and argument are the scratch of the tool call or
	// function_call being read (the last of each key wins, so they are
	// kept apart until its object ends), and index and id the tool
	// call's.
	name, argument textSlot
	index          countSlot
	id             textSlot
}

func (o *textObject) reset() {
	o.state = slotAbsent
	o.content.reset()
	o.refusal.reset()
	o.reasoningC.reset()
	o.reasoning.reset()
	o.toolCalls, o.calls = slotAbsent, o.calls[:0]
	o.fnCall, o.fn = slotAbsent, o.fn[:0]
	o.parts.reset()
	o.fnParts.reset()
}

func (o *textObject) bad() bool {
	return o.state == slotBad || o.content.state == slotBad || o.refusal.state == slotBad ||
		o.reasoningC.state == slotBad || o.reasoning.state == slotBad ||
		o.toolCalls == slotBad || o.fnCall == slotBad
}

// openAIChunk is the scanner and the decoded fields of one chunk. It is
// reused across chunks; its buffers only grow.
type openAIChunk struct {
	data []byte
	pos  int

	key []byte // scratch for keys with escapes

	choicesBad                   bool
	content, reasoning, toolCall []byte
	parts                        callParts // the tool calls' parts
	calls                        []CallPart
	delta, message               textObject
	text                         textSlot
	usage                        usageSlots
	errorPresent                 bool
	errorRaw                     []byte
	objectError                  bool
	messageRaw                   []byte
	// server is the engine's own timings of the request (timings.go).
	server observation.ServerTimings
}

// decode reads one JSON document into out. out's byte slices alias c and are
// valid until the next decode.
func (c *openAIChunk) decode(data []byte, out *Chunk) error {
	if err := c.scan(data); err != nil {
		return &ProtocolError{Msg: "malformed JSON event " + excerpt(data), Err: err}
	}
	switch {
	case c.errorPresent:
		return &ProtocolError{Msg: "error in stream: " + excerpt(c.errorRaw)}
	case c.objectError:
		return &ProtocolError{Msg: "error in stream: " + excerpt(c.messageRaw)}
	case c.choicesBad || c.usage.bad():
		return &ProtocolError{Msg: "unreadable event " + excerpt(data), Err: errWrongType}
	}
	out.Content, out.Reasoning, out.ToolCall = c.content, c.reasoning, c.toolCall
	c.calls = c.parts.appendTo(c.calls[:0])
	out.Calls = c.calls
	c.usage.set(out)
	out.Server = c.server
	return nil
}

// scan parses data, keeping the last value of every field it reads. Its
// loop, as those of a choice and of tool_calls, is written out rather than
// given to scanObject: those run for every chunk, and a closure call per
// member made a chunk's decode 5-15% slower (BenchmarkDecodeChunk).
func (c *openAIChunk) scan(data []byte) error {
	c.choicesBad = false
	c.content, c.reasoning, c.toolCall = c.content[:0], c.reasoning[:0], c.toolCall[:0]
	c.parts.reset()
	c.usage = usageSlots{}
	c.errorPresent, c.errorRaw = false, nil
	c.objectError, c.messageRaw = false, nil
	c.server = observation.ServerTimings{}

	if err := c.openDocument(data, errEventNotObject); err != nil {
		return err
	}
	for first := true; ; {
		key, ok, err := c.nextKey(&first, '}')
		if err != nil {
			return err
		}
		if !ok {
			return c.endDocument()
		}
		switch string(key) {
		case "choices":
			err = c.scanChoices(2)
		case "usage":
			err = c.scanUsage(&c.usage, &chatUsageKeys, 2)
		case "error":
			null := c.peek() == 'n'
			c.errorRaw, err = c.rawValue(1)
			c.errorPresent = !null
		case "object":
			c.objectError = false
			if c.peek() == '"' {
				var s []byte
				var esc bool
				s, esc, err = c.readString()
				if err == nil && esc {
					c.key, err = appendUnquoted(c.key[:0], s)
					s = c.key
				}
				c.objectError = string(s) == "error"
			} else {
				err = c.skipValue(1)
			}
		case "message":
			c.messageRaw, err = c.rawValue(1)
		case "metrics":
			err = c.scanVLLMMetrics(&c.server, 2)
		case "timings":
			err = c.scanLlamaTimings(&c.server, 2)
		case "nvext":
			err = c.scanNvext(&c.server, 2)
		default:
			err = c.skipValue(1)
		}
		if err != nil {
			return err
		}
	}
}

// openDocument starts reading data, one JSON document whose top level must
// be an object, past the object's '{'. notObject is the error for valid JSON
// that is not an object.
func (c *openAIChunk) openDocument(data []byte, notObject error) error {
	c.data, c.pos = data, 0
	if c.peek() != '{' {
		// Valid JSON that is not an object is unreadable; invalid is
		// malformed. Either way it is a protocol error: tell them apart.
		if err := c.skipValue(0); err != nil {
			return err
		}
		if c.ws(); c.pos != len(c.data) {
			return errJSONSyntax
		}
		return notObject
	}
	return c.openContainer(1)
}

// endDocument ends a document whose top-level object was read: nothing but
// white space may follow it.
func (c *openAIChunk) endDocument() error {
	if c.ws(); c.pos != len(c.data) {
		return errJSONSyntax
	}
	return nil
}

// rawValue skips one value inside a container at depth and returns its
// text, for an error message.
func (c *openAIChunk) rawValue(depth int) ([]byte, error) {
	start := c.pos
	err := c.skipValue(depth)
	return c.data[start:c.pos], err
}

// scanChoices reads the value of "choices", at nesting depth for its array.
func (c *openAIChunk) scanChoices(depth int) error {
	c.choicesBad = false
	c.content, c.reasoning, c.toolCall = c.content[:0], c.reasoning[:0], c.toolCall[:0]
	c.parts.reset()
	switch c.peek() {
	case 'n':
		return c.literal("null")
	case '[':
	default:
		c.choicesBad = true
		return c.skipValue(depth - 1)
	}
	if err := c.openContainer(depth); err != nil {
		return err
	}
	for first := true; ; {
		ok, err := c.nextElem(&first)
		if err != nil {
			return err
		}
		if !ok {
			return nil
		}
		if c.peek() != '{' {
			c.choicesBad = true
			if err := c.skipValue(depth); err != nil {
				return err
			}
			continue
		}
		if err := c.scanChoice(depth + 1); err != nil {
			return err
		}
	}
}

// scanChoice reads one choice object and appends its text in a fixed order.
func (c *openAIChunk) scanChoice(depth int) error {
	c.delta.reset()
	c.message.reset()
	c.text.reset()
	if err := c.openContainer(depth); err != nil {
		return err
	}
	for first := true; ; {
		key, ok, err := c.nextKey(&first, '}')
		if err != nil {
			return err
		}
		if !ok {
			break
		}
		switch string(key) {
		case "delta":
			err = c.scanTextObject(&c.delta, depth+1)
		case "message":
			err = c.scanTextObject(&c.message, depth+1)
		case "text":
			err = c.scanText(&c.text, depth)
		default:
			err = c.skipValue(depth)
		}
		if err != nil {
			return err
		}
	}
	if c.delta.bad() || c.message.bad() || c.text.state == slotBad {
		c.choicesBad = true
		return nil
	}
	c.content = append(c.content, c.delta.content.buf...)
	c.content = append(c.content, c.delta.refusal.buf...)
	c.content = append(c.content, c.message.content.buf...)
	c.content = append(c.content, c.message.refusal.buf...)
	c.content = append(c.content, c.text.buf...)
	c.reasoning = append(c.reasoning, c.delta.reasoningC.buf...)
	c.reasoning = append(c.reasoning, c.delta.reasoning.buf...)
	c.reasoning = append(c.reasoning, c.message.reasoningC.buf...)
	c.reasoning = append(c.reasoning, c.message.reasoning.buf...)
	c.toolCall = append(c.toolCall, c.delta.calls...)
	c.toolCall = append(c.toolCall, c.delta.fn...)
	c.toolCall = append(c.toolCall, c.message.calls...)
	c.toolCall = append(c.toolCall, c.message.fn...)
	c.parts.addAll(&c.delta.parts)
	c.parts.addAll(&c.delta.fnParts)
	c.parts.addAll(&c.message.parts)
	c.parts.addAll(&c.message.fnParts)
	return nil
}

// scanTextObject reads a delta or message object at the given depth.
func (c *openAIChunk) scanTextObject(o *textObject, depth int) error {
	o.reset()
	return c.scanObject(&o.state, depth, func(key []byte) error {
		switch string(key) {
		case "content":
			return c.scanText(&o.content, depth)
		case "refusal":
			return c.scanText(&o.refusal, depth)
		case "reasoning_content":
			return c.scanText(&o.reasoningC, depth)
		case "reasoning":
			return c.scanText(&o.reasoning, depth)
		case "tool_calls":
			return c.scanToolCalls(o, depth+1)
		case "function_call":
			o.fn = o.fn[:0]
			o.fnParts.reset()
			err := c.scanFunction(o, &o.fnCall, depth+1)
			if err == nil && o.fnCall == slotValue {
				o.fn = o.appendCall(o.fn)
				o.fnParts.add(-1, nil, o.name.buf, o.argument.buf, false)
			}
			return err
		}
		return c.skipValue(depth)
	})
}

// scanToolCalls reads the value of tool_calls, at depth for its array:
// [{"index": 0, "id": ..., "type": "function", "function": {"name": ...,
// "arguments": ...}}, ...], each part optional in a delta.
func (c *openAIChunk) scanToolCalls(o *textObject, depth int) error {
	o.calls = o.calls[:0]
	o.parts.reset()
	switch c.peek() {
	case 'n':
		o.toolCalls = slotNull
		return c.literal("null")
	case '[':
	default:
		o.toolCalls = slotBad
		return c.skipValue(depth - 1)
	}
	o.toolCalls = slotValue
	if err := c.openContainer(depth); err != nil {
		return err
	}
	for first := true; ; {
		ok, err := c.nextElem(&first)
		if err != nil || !ok {
			return err
		}
		if c.peek() != '{' {
			o.toolCalls = slotBad
			if err := c.skipValue(depth); err != nil {
				return err
			}
			continue
		}
		// A call's "function" key may repeat; the last one wins.
		var callState, fnState uint8
		o.name.reset()
		o.argument.reset()
		o.index = countSlot{}
		o.id.reset()
		err = c.scanObject(&callState, depth+1, func(key []byte) error {
			switch string(key) {
			case "function":
				return c.scanFunction(o, &fnState, depth+2)
			case "index":
				return c.scanCount(&o.index, depth+1)
			case "id":
				return c.scanText(&o.id, depth+1)
			}
			return c.skipValue(depth + 1)
		})
		if err != nil {
			return err
		}
		if fnState == slotBad {
			o.toolCalls = slotBad
		} else if fnState == slotValue {
			o.calls = o.appendCall(o.calls)
			index := -1
			if o.index.state == slotValue {
				index = o.index.v
			}
			o.parts.add(index, o.id.buf, o.name.buf, o.argument.buf, false)
		}
	}
}

// scanFunction reads a tool call's function, or a function_call: an
// object-or-null at depth whose name and arguments are texts, left in
// o.name and o.argument. A wrong-typed name or argument makes *state
// slotBad.
func (c *openAIChunk) scanFunction(o *textObject, state *uint8, depth int) error {
	o.name.reset()
	o.argument.reset()
	err := c.scanObject(state, depth, func(key []byte) error {
		switch string(key) {
		case "name":
			return c.scanText(&o.name, depth)
		case "arguments":
			return c.scanText(&o.argument, depth)
		}
		return c.skipValue(depth)
	})
	if o.name.state == slotBad || o.argument.state == slotBad {
		*state = slotBad
	}
	return err
}

// appendCall appends the call just read: its name, then its arguments.
func (o *textObject) appendCall(dst []byte) []byte {
	dst = append(dst, o.name.buf...)
	return append(dst, o.argument.buf...)
}

// scanObject reads an object-or-null value whose container is at depth,
// recording in state whether it was null, an object or something else, and
// calls field for each key with the scanner at the key's value. field must
// consume that value. (It does not escape, so the closures of the callers
// allocate nothing.)
func (c *openAIChunk) scanObject(state *uint8, depth int, field func(key []byte) error) error {
	switch c.peek() {
	case 'n':
		*state = slotNull
		return c.literal("null")
	case '{':
	default:
		*state = slotBad
		return c.skipValue(depth - 1)
	}
	*state = slotValue
	if err := c.openContainer(depth); err != nil {
		return err
	}
	for first := true; ; {
		key, ok, err := c.nextKey(&first, '}')
		if err != nil || !ok {
			return err
		}
		if err := field(key); err != nil {
			return err
		}
	}
}

// scanObjects reads an array-or-null value whose container is at depth,
// recording in state whether it was null, an array or something else, and
// calls elem for each element that is an object, with the scanner at it.
// elem must consume that object. An element that is not an object is
// skipped and makes *state slotBad. (elem does not escape, as scanObject's
// field does not.)
func (c *openAIChunk) scanObjects(state *uint8, depth int, elem func() error) error {
	switch c.peek() {
	case 'n':
		*state = slotNull
		return c.literal("null")
	case '[':
	default:
		*state = slotBad
		return c.skipValue(depth - 1)
	}
	*state = slotValue
	if err := c.openContainer(depth); err != nil {
		return err
	}
	for first := true; ; {
		ok, err := c.nextElem(&first)
		if err != nil || !ok {
			return err
		}
		if c.peek() != '{' {
			*state = slotBad
			if err := c.skipValue(depth); err != nil {
				return err
			}
			continue
		}
		if err := elem(); err != nil {
			return err
		}
	}
}

// scanText reads a string-or-null field inside a container at depth.
func (c *openAIChunk) scanText(t *textSlot, depth int) error {
	t.buf = t.buf[:0]
	switch c.peek() {
	case '"':
		raw, esc, err := c.readString()
		if err != nil {
			return err
		}
		t.state = slotValue
		t.buf = appendText(t.buf, raw, esc)
		return nil
	case 'n':
		t.state = slotNull
		return c.literal("null")
	default:
		t.state = slotBad
		return c.skipValue(depth)
	}
}

// usageSlots are the counts of a usage object: the prompt's and the
// completion's tokens, its details object's reasoning tokens, and its
// prompt details object's cached tokens.
type usageSlots struct {
	state              uint8 // the usage object itself
	prompt, completion countSlot
	detailsState       uint8     // the details object
	reasoningTokens    countSlot // ...its reasoning_tokens
	promptDetailsState uint8     // the prompt details object
	cachedTokens       countSlot // ...its cached_tokens
}

// usageKeys name a usage object's members: the chat API's and the
// Responses API's differ in their names alone.
type usageKeys struct {
	prompt, completion, details, promptDetails string
}

var (
	chatUsageKeys = usageKeys{prompt: "prompt_tokens", completion: "completion_tokens",
		details: "completion_tokens_details", promptDetails: "prompt_tokens_details"}
	responsesUsageKeys = usageKeys{prompt: "input_tokens", completion: "output_tokens",
		details: "output_tokens_details", promptDetails: "input_tokens_details"}
)

func (u *usageSlots) bad() bool {
	return u.state == slotBad || u.prompt.state == slotBad || u.completion.state == slotBad ||
		u.detailsState == slotBad || u.reasoningTokens.state == slotBad
}

// set sets out's counts from the usage object. The reasoning-token count is
// read apart from the usage flag (see the rules above).
func (u *usageSlots) set(out *Chunk) {
	if u.state != slotValue {
		return
	}
	if u.prompt.state == slotValue || u.completion.state == slotValue {
		out.HasUsage = true
		out.PromptTokens, out.CompletionTokens = u.prompt.v, u.completion.v
	}
	if u.detailsState == slotValue && u.reasoningTokens.state == slotValue {
		out.ReasoningTokens = u.reasoningTokens.v
	}
	if u.promptDetailsState == slotValue && u.cachedTokens.state == slotValue {
		out.CachedTokens = u.cachedTokens.v
	}
}

// scanUsage reads the value of a usage member into u, at depth for its
// object, its members named by keys. (The keys are compared as
// string(key) == name, which allocates nothing.)
func (c *openAIChunk) scanUsage(u *usageSlots, keys *usageKeys, depth int) error {
	*u = usageSlots{}
	return c.scanObject(&u.state, depth, func(key []byte) error {
		switch {
		case string(key) == keys.prompt:
			return c.scanCount(&u.prompt, depth)
		case string(key) == keys.completion:
			return c.scanCount(&u.completion, depth)
		case string(key) == keys.details:
			u.reasoningTokens = countSlot{}
			return c.scanObject(&u.detailsState, depth+1, func(key []byte) error {
				if string(key) == "reasoning_tokens" {
					return c.scanCount(&u.reasoningTokens, depth+1)
				}
				return c.skipValue(depth + 1)
			})
		case string(key) == keys.promptDetails:
			u.cachedTokens = countSlot{}
			return c.scanObject(&u.promptDetailsState, depth+1, func(key []byte) error {
				if string(key) == "cached_tokens" {
					return c.scanCount(&u.cachedTokens, depth+1)
				}
				return c.skipValue(depth + 1)
			})
		}
		return c.skipValue(depth)
	})
}

// scanCount reads a count-or-null field.
func (c *openAIChunk) scanCount(n *countSlot, depth int) error {
	*n = countSlot{}
	switch b := c.peek(); {
	case b == 'n':
		n.state = slotNull
		return c.literal("null")
	case b == '-' || ('0' <= b && b <= '9'):
		raw, err := c.number()
		if err != nil {
			return err
		}
		if v, ok := parseCount(raw); ok {
			n.state, n.v = slotValue, v
		} else {
			n.state = slotBad
		}
		return nil
	default:
		n.state = slotBad
		return c.skipValue(depth)
	}
}

// parseCount accepts a JSON number whose value is an integer in [0, 1e9].
func parseCount(raw []byte) (int, bool) {
	if len(raw) <= 9 {
		v := 0
		for _, d := range raw {
			if d < '0' || d > '9' {
				goto slow
			}
			v = v*10 + int(d-'0')
		}
		return v, true
	}
slow:
	f, err := strconv.ParseFloat(string(raw), 64)
	if err != nil || f < 0 || f > maxCount || f != math.Trunc(f) {
		return 0, false
	}
	return int(f), true
}

// appendText appends a JSON string's raw body, decoding escapes and, as
// encoding/json does, replacing each byte of invalid UTF-8 with U+FFFD.
func appendText(dst, raw []byte, esc bool) []byte {
	n0 := len(dst)
	if esc {
		var err error
		if dst, err = appendUnquoted(dst, raw); err != nil {
			// Unreachable: readString validated the escapes.
			return dst
		}
	} else {
		dst = append(dst, raw...)
	}
	if utf8.Valid(dst[n0:]) {
		return dst
	}
	bad := append([]byte(nil), dst[n0:]...)
	dst = dst[:n0]
	for len(bad) > 0 {
		r, size := utf8.DecodeRune(bad)
		dst = utf8.AppendRune(dst, r) // RuneError for an invalid byte
		bad = bad[size:]
	}
	return dst
}

// The scanner proper. Positions are byte offsets into c.data.

func (c *openAIChunk) ws() {
	for c.pos < len(c.data) {
		switch c.data[c.pos] {
		case ' ', '\t', '\n', '\r':
			c.pos++
		default:
			return
		}
	}
}

// peek returns the next byte after whitespace, or 0 at the end.
func (c *openAIChunk) peek() byte {
	c.ws()
	if c.pos < len(c.data) {
		return c.data[c.pos]
	}
	return 0
}

// openContainer consumes '{' or '[' opening nesting level depth.
func (c *openAIChunk) openContainer(depth int) error {
	if depth > maxJSONDepth {
		return errJSONDepth
	}
	c.pos++
	return nil
}

// nextKey advances to the next key of an object whose '{' was consumed,
// and past its colon. ok is false when the object ended.
func (c *openAIChunk) nextKey(first *bool, closer byte) (key []byte, ok bool, err error) {
	b := c.peek()
	if b == closer && *first {
		c.pos++
		return nil, false, nil
	}
	if !*first {
		switch b {
		case closer:
			c.pos++
			return nil, false, nil
		case ',':
			c.pos++
			b = c.peek()
		default:
			return nil, false, errJSONSyntax
		}
	}
	*first = false
	if b != '"' {
		return nil, false, errJSONSyntax
	}
	key, esc, err := c.readString()
	if err != nil {
		return nil, false, err
	}
	if esc {
		c.key, err = appendUnquoted(c.key[:0], key)
		if err != nil {
			return nil, false, err
		}
		key = c.key
	}
	if c.peek() != ':' {
		return nil, false, errJSONSyntax
	}
	c.pos++
	c.ws()
	return key, true, nil
}

// nextElem advances to the next element of an array whose '[' was consumed.
func (c *openAIChunk) nextElem(first *bool) (ok bool, err error) {
	b := c.peek()
	if b == ']' && *first {
		c.pos++
		return false, nil
	}
	if !*first {
		switch b {
		case ']':
			c.pos++
			return false, nil
		case ',':
			c.pos++
			c.ws()
		default:
			return false, errJSONSyntax
		}
	}
	*first = false
	return true, nil
}

// skipValue validates and skips one value inside a container at depth.
func (c *openAIChunk) skipValue(depth int) error {
	switch b := c.peek(); {
	case b == '{':
		if err := c.openContainer(depth + 1); err != nil {
			return err
		}
		for first := true; ; {
			_, ok, err := c.nextKey(&first, '}')
			if err != nil {
				return err
			}
			if !ok {
				return nil
			}
			if err := c.skipValue(depth + 1); err != nil {
				return err
			}
		}
	case b == '[':
		if err := c.openContainer(depth + 1); err != nil {
			return err
		}
		for first := true; ; {
			ok, err := c.nextElem(&first)
			if err != nil {
				return err
			}
			if !ok {
				return nil
			}
			if err := c.skipValue(depth + 1); err != nil {
				return err
			}
		}
	case b == '"':
		_, _, err := c.readString()
		return err
	case b == 't':
		return c.literal("true")
	case b == 'f':
		return c.literal("false")
	case b == 'n':
		return c.literal("null")
	case b == '-' || ('0' <= b && b <= '9'):
		_, err := c.number()
		return err
	default:
		return errJSONSyntax
	}
}

func (c *openAIChunk) literal(lit string) error {
	if len(c.data)-c.pos < len(lit) || string(c.data[c.pos:c.pos+len(lit)]) != lit {
		return errJSONSyntax
	}
	c.pos += len(lit)
	return nil
}

// readString consumes a string and returns its raw body (between the
// quotes), whether it has escapes, and an error if it is not valid JSON.
func (c *openAIChunk) readString() (raw []byte, esc bool, err error) {
	start := c.pos + 1
	d := c.data
	for i := start; i < len(d); {
		switch b := d[i]; {
		case b == '"':
			c.pos = i + 1
			return d[start:i], esc, nil
		case b == '\\':
			esc = true
			if i+1 >= len(d) {
				return nil, false, errJSONSyntax
			}
			switch d[i+1] {
			case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
				i += 2
			case 'u':
				if _, ok := hex4(d[i+2:]); !ok {
					return nil, false, errJSONSyntax
				}
				i += 6
			default:
				return nil, false, errJSONSyntax
			}
		case b < 0x20:
			return nil, false, errJSONSyntax
		default:
			i++
		}
	}
	return nil, false, errJSONSyntax
}

// number consumes a number per the JSON grammar and returns its text.
func (c *openAIChunk) number() ([]byte, error) {
	d, i := c.data, c.pos
	digits := func() int {
		n := 0
		for i < len(d) && '0' <= d[i] && d[i] <= '9' {
			i++
			n++
		}
		return n
	}
	if i < len(d) && d[i] == '-' {
		i++
	}
	switch {
	case i < len(d) && d[i] == '0':
		i++
	case digits() == 0:
		return nil, errJSONSyntax
	}
	if i < len(d) && d[i] == '.' {
		i++
		if digits() == 0 {
			return nil, errJSONSyntax
		}
	}
	if i < len(d) && (d[i] == 'e' || d[i] == 'E') {
		i++
		if i < len(d) && (d[i] == '+' || d[i] == '-') {
			i++
		}
		if digits() == 0 {
			return nil, errJSONSyntax
		}
	}
	raw := d[c.pos:i]
	c.pos = i
	return raw, nil
}
