package client

import (
	"errors"
	"fmt"

	"github.com/infer-exporter/infer_exporter/probe/observation"
)

// This file reads the OpenAI Responses API's JSON: one streamed event, or a
// whole response object that was not streamed. It scans with the chat
// scanner's primitives (openai_json.go), so that an event is validated as
// strictly and read without allocation once warm: a Responses stream has an
// event per token, as busy as a chat stream.
//
// Its meaning is defined, as the chat chunk's, by a generic decode: the
// document behaves exactly as if it were decoded with encoding/json into
// `any` (duplicate keys: the last one wins; invalid UTF-8 in text becomes
// U+FFFD byte by byte; keys match exactly) and then read by the rules below.
// FuzzDecodeResponses checks that equivalence against encoding/json.
//
// A streamed event (decodeEvent):
//
//   - The document must be valid JSON whose top level is an object.
//   - A non-null top-level "error" is an error the server reported; so is
//     an event whose kind is "error" (the API's error event: code,
//     message and param at the top level) and one whose kind is
//     "response.failed" (its response.error says why).
//   - The event's kind is its "type", a string; absent or null, the SSE
//     event name (when it is not the default "message"). A type of another
//     JSON type cannot be read.
//   - The token-bearing kinds, whose "delta" (a string or null; of another
//     type the event cannot be read) is a token's text:
//     response.output_text.delta and response.refusal.delta are answer text
//     (Chunk.Content); response.reasoning_text.delta and
//     response.reasoning_summary_text.delta reasoning text
//     (Chunk.Reasoning); response.function_call_arguments.delta and
//     response.custom_tool_call_input.delta tool-call text
//     (Chunk.ToolCall). The .done events and response.output_item.done
//     carry no token: they repeat text already streamed.
//   - response.output_item.added's "item", an object or null (another
//     type cannot be read), whose "type" is function_call or
//     custom_tool_call (a string or null; of another type the event cannot
//     be read), gives the call's "name" (a string or null; of another type
//     the event cannot be read) as tool-call text (Chunk.ToolCall), a
//     token as chat's name delta is: the model generated the name before
//     the arguments that follow, and chat streams it in a chunk of its
//     own (tool_calls[].function.name), so that the same answer has the
//     same first answer token and the same tool-call events through
//     either API. The "item" of another kind of event is not read.
//   - Each call's part of that text (Chunk.Calls) carries the event's
//     "output_index" (an integer in [0, 1e9]; of another type or null,
//     absent) and its call's id: the arguments' "item_id", the added
//     item's "id" (a string; of another type or null, absent), so that
//     interleaved calls can be told apart. Neither makes an event
//     unreadable.
//   - response.completed and response.incomplete end the stream
//     (Chunk.Done): the answer is whole, or cut where the server stopped it
//     (max_output_tokens reached, a content filter), as a chat answer that
//     finished for "length". Any event's "response", an object or null
//     (another type cannot be read), gives the usage: its usage
//     input_tokens, output_tokens and output_tokens_details
//     .reasoning_tokens, read by the chat chunk's rules for prompt_tokens,
//     completion_tokens and completion_tokens_details.reasoning_tokens.
//     Its other members (status, the output again) are not read.
//
// A response object that was not streamed (decodeBody):
//
//   - A non-null top-level "error" is an error the server reported.
//   - "status", a string or null, must be completed or incomplete when
//     present; any other status (failed, cancelled, queued, in_progress)
//     is not an answer and fails the request. Of another type the body
//     cannot be read.
//   - "output" is null or an array of item objects, each read by its
//     "type" (a string or null): a message's content parts, a reasoning
//     item's content and summary parts (each part an object whose "text"
//     and "refusal" are texts), a function_call's name then arguments and
//     a custom_tool_call's name then input are answer, reasoning and
//     tool-call text, each call a part of its own (Chunk.Calls). The fields
//     of an item of another type are not read, nor those its type does
//     not use.
//   - "usage" as for an event's response.

// eventKind is what an event's kind means to the probe.
type eventKind uint8

const (
	kindOther      eventKind = iota
	kindAnswer               // response.output_text.delta, response.refusal.delta
	kindReasoning            // response.reasoning_text.delta, response.reasoning_summary_text.delta
	kindToolCall             // response.function_call_arguments.delta, response.custom_tool_call_input.delta
	kindEnd                  // response.completed, response.incomplete
	kindItemAdded            // response.output_item.added
	kindFailed               // response.failed
	kindErrorEvent           // error
)

// eventKindOf reads an event kind, from an event's type or its SSE name (a
// switch on the converted bytes allocates nothing).
func eventKindOf[T string | []byte](b T) eventKind {
	switch string(b) {
	case "response.output_text.delta", "response.refusal.delta":
		return kindAnswer
	case "response.reasoning_text.delta", "response.reasoning_summary_text.delta":
		return kindReasoning
	case "response.function_call_arguments.delta", "response.custom_tool_call_input.delta":
		return kindToolCall
	case "response.completed", "response.incomplete":
		return kindEnd
	case "response.output_item.added":
		return kindItemAdded
	case "response.failed":
		return kindFailed
	case "error":
		return kindErrorEvent
	}
	return kindOther
}

// responseFields are the members of a response object the probe reads.
type responseFields struct {
	state       uint8 // the object itself (an event's "response")
	status      textSlot
	errPresent  bool
	errRaw      []byte
	usage       usageSlots
	outputState uint8 // "output", read in a body only
	outputBad   bool  // an item of "output" cannot be read
	// server is vLLM's per-request "metrics" (timings.go).
	server observation.ServerTimings
}

func (r *responseFields) reset() {
	r.state = slotAbsent
	r.status.reset()
	r.errPresent, r.errRaw = false, nil
	r.usage = usageSlots{}
	r.outputState, r.outputBad = slotAbsent, false
	r.server = observation.ServerTimings{}
}

// outputItem is the scratch of the output item being read: its type and
// the texts its type may use.
type outputItem struct {
	typ, name, arguments, input textSlot
	// content and summary are the texts of the item's content and summary
	// parts, in order; their states say whether each was an array of
	// readable parts.
	contentState, summaryState uint8
	content, summary           []byte
	text, refusal              textSlot // the part being read
}

func (it *outputItem) reset() {
	it.typ.reset()
	it.name.reset()
	it.arguments.reset()
	it.input.reset()
	it.contentState, it.content = slotAbsent, it.content[:0]
	it.summaryState, it.summary = slotAbsent, it.summary[:0]
}

// responsesChunk is the reader and the decoded fields of one event or body.
// It is reused; its buffers only grow.
type responsesChunk struct {
	sc openAIChunk // the scanner: its data, position and key scratch

	typ, delta textSlot
	top        responseFields // the document's own members
	resp       responseFields // an event's "response"
	item       outputItem
	// An event's "item" (response.output_item.added's): the object's
	// state, its type and its name.
	itemState          uint8
	itemType, itemName textSlot
	itemID             textSlot
	// An event's "output_index" and "item_id": the call its arguments
	// belong to.
	outputIndex countSlot
	eventItemID textSlot
	// A body's output text by kind.
	content, reasoning, toolCall []byte
	// The tool calls' parts (Chunk.Calls).
	parts callParts
	calls []CallPart
}

// parse makes responsesChunk a frameParser: a body that was not streamed.
func (c *responsesChunk) parse(data []byte, out *Chunk) error { return c.decodeBody(data, out) }

// decodeEvent reads one streamed event whose SSE event name is name into
// out. out's byte slices alias c and are valid until the next decode.
func (c *responsesChunk) decodeEvent(data []byte, name string, out *Chunk) error {
	if err := c.scan(data, false); err != nil {
		return &ProtocolError{Msg: "malformed JSON event " + excerpt(data), Err: err}
	}
	if c.top.errPresent {
		return &ProtocolError{Msg: "error in stream: " + excerpt(c.top.errRaw)}
	}
	if c.typ.state == slotBad {
		return &ProtocolError{Msg: "unreadable event " + excerpt(data), Err: errWrongType}
	}
	kind := eventKindOf(c.typ.buf)
	if c.typ.state != slotValue && name != "message" {
		kind = eventKindOf(name)
	}
	switch kind {
	case kindErrorEvent:
		return &ProtocolError{Msg: "error event: " + excerpt(data)}
	case kindFailed:
		why := data
		if c.resp.errPresent {
			why = c.resp.errRaw
		}
		return &ProtocolError{Msg: "response failed: " + excerpt(why)}
	}
	if c.resp.state == slotBad || c.resp.usage.bad() {
		return &ProtocolError{Msg: "unreadable event " + excerpt(data), Err: errWrongType}
	}
	var dst *[]byte
	switch kind {
	case kindAnswer:
		dst = &out.Content
	case kindReasoning:
		dst = &out.Reasoning
	case kindToolCall:
		dst = &out.ToolCall
		c.parts.add(c.index(), c.eventItemID.buf, nil, c.delta.buf, false)
	case kindEnd:
		out.Done = true
	case kindItemAdded:
		if err := c.callName(data, out); err != nil {
			return err
		}
	}
	if dst != nil {
		if c.delta.state == slotBad {
			return &ProtocolError{Msg: "unreadable event " + excerpt(data), Err: errWrongType}
		}
		*dst = c.delta.buf
	}
	c.calls = c.parts.appendTo(c.calls[:0])
	out.Calls = c.calls
	c.resp.usage.set(out)
	out.Server = c.resp.server
	return nil
}

// index is an event's output_index, -1 when it has none.
func (c *responsesChunk) index() int {
	if c.outputIndex.state == slotValue {
		return c.outputIndex.v
	}
	return -1
}

// callName sets out.ToolCall from a response.output_item.added event's
// item: the name of the call it opens, if it opens one.
func (c *responsesChunk) callName(data []byte, out *Chunk) error {
	if c.itemState == slotBad || c.itemType.state == slotBad {
		return &ProtocolError{Msg: "unreadable event " + excerpt(data), Err: errWrongType}
	}
	if c.itemState != slotValue {
		return nil
	}
	switch string(c.itemType.buf) {
	case "function_call", "custom_tool_call":
		if c.itemName.state == slotBad {
			return &ProtocolError{Msg: "unreadable event " + excerpt(data), Err: errWrongType}
		}
		out.ToolCall = c.itemName.buf
		c.parts.add(c.index(), c.itemID.buf, c.itemName.buf, nil, false)
	}
	return nil
}

// decodeBody reads a whole response object into out. out's byte slices
// alias c and are valid until the next decode.
func (c *responsesChunk) decodeBody(data []byte, out *Chunk) error {
	if err := c.scan(data, true); err != nil {
		return &ProtocolError{Msg: "malformed JSON body " + excerpt(data), Err: err}
	}
	r := &c.top
	if r.errPresent {
		return &ProtocolError{Msg: "error in response: " + excerpt(r.errRaw)}
	}
	if r.status.state == slotBad || r.usage.bad() || r.outputState == slotBad || r.outputBad {
		return &ProtocolError{Msg: "unreadable response " + excerpt(data), Err: errWrongType}
	}
	if r.status.state == slotValue {
		switch string(r.status.buf) {
		case "completed", "incomplete":
		default:
			return &ProtocolError{Msg: fmt.Sprintf("response status %q is not an answer", textExcerpt(r.status.buf))}
		}
	}
	out.Content, out.Reasoning, out.ToolCall = c.content, c.reasoning, c.toolCall
	c.calls = c.parts.appendTo(c.calls[:0])
	out.Calls = c.calls
	r.usage.set(out)
	out.Server = r.server
	return nil
}

// textExcerpt cuts a server's text for an error message.
func textExcerpt(b []byte) string {
	if len(b) > 64 {
		return string(b[:64]) + "..."
	}
	return string(b)
}

// scan parses data, keeping the last value of every member it reads. body
// says data is a response object rather than an event.
func (c *responsesChunk) scan(data []byte, body bool) error {
	s := &c.sc
	c.typ.reset()
	c.delta.reset()
	c.itemState = slotAbsent
	c.itemType.reset()
	c.itemName.reset()
	c.itemID.reset()
	c.outputIndex = countSlot{}
	c.eventItemID.reset()
	c.top.reset()
	c.resp.reset()
	c.content, c.reasoning, c.toolCall = c.content[:0], c.reasoning[:0], c.toolCall[:0]
	c.parts.reset()

	if err := s.openDocument(data, errNotObject); err != nil {
		return err
	}
	for first := true; ; {
		key, ok, err := s.nextKey(&first, '}')
		if err != nil {
			return err
		}
		if !ok {
			return s.endDocument()
		}
		switch {
		case string(key) == "error":
			err = c.responseMember(&c.top, key, 1, false)
		case body:
			err = c.responseMember(&c.top, key, 1, true)
		case string(key) == "type":
			err = s.scanText(&c.typ, 1)
		case string(key) == "delta":
			err = s.scanText(&c.delta, 1)
		case string(key) == "output_index":
			err = s.scanCount(&c.outputIndex, 1)
		case string(key) == "item_id":
			err = s.scanText(&c.eventItemID, 1)
		case string(key) == "item":
			c.itemType.reset()
			c.itemName.reset()
			c.itemID.reset()
			err = s.scanObject(&c.itemState, 2, func(key []byte) error {
				switch string(key) {
				case "type":
					return s.scanText(&c.itemType, 2)
				case "name":
					return s.scanText(&c.itemName, 2)
				case "id":
					return s.scanText(&c.itemID, 2)
				}
				return s.skipValue(2)
			})
		case string(key) == "response":
			c.resp.reset()
			err = s.scanObject(&c.resp.state, 2, func(key []byte) error {
				return c.responseMember(&c.resp, key, 2, false)
			})
		default:
			err = s.skipValue(1)
		}
		if err != nil {
			return err
		}
	}
}

// errNotObject is a Responses event or body that is valid JSON but not an
// object.
var errNotObject = errors.New("not a JSON object")

// responseMember reads the value of member key of a response object at
// depth; withOutput reads its output items too.
func (c *responsesChunk) responseMember(r *responseFields, key []byte, depth int, withOutput bool) error {
	s := &c.sc
	switch string(key) {
	case "status":
		return s.scanText(&r.status, depth)
	case "error":
		null := s.peek() == 'n'
		raw, err := s.rawValue(depth)
		r.errPresent, r.errRaw = !null, raw
		return err
	case "usage":
		// Read by the chat chunk's rules, under the Responses API's names.
		return s.scanUsage(&r.usage, &responsesUsageKeys, depth+1)
	case "output":
		if withOutput {
			return c.scanOutput(r, depth+1)
		}
	case "metrics":
		return s.scanVLLMMetrics(&r.server, depth+1)
	}
	return s.skipValue(depth)
}

// scanOutput reads a body's "output", at depth for its array.
func (c *responsesChunk) scanOutput(r *responseFields, depth int) error {
	s := &c.sc
	c.content, c.reasoning, c.toolCall = c.content[:0], c.reasoning[:0], c.toolCall[:0]
	c.parts.reset()
	r.outputBad = false
	// An element that is not an object makes outputState slotBad, which
	// decodeBody reads as it reads outputBad.
	return s.scanObjects(&r.outputState, depth, func() error { return c.scanItem(r, depth+1) })
}

// scanItem reads one output item, the object at depth, and appends its
// text by its type.
func (c *responsesChunk) scanItem(r *responseFields, depth int) error {
	s := &c.sc
	it := &c.item
	it.reset()
	var state uint8
	err := s.scanObject(&state, depth, func(key []byte) error {
		switch string(key) {
		case "type":
			return s.scanText(&it.typ, depth)
		case "name":
			return s.scanText(&it.name, depth)
		case "arguments":
			return s.scanText(&it.arguments, depth)
		case "input":
			return s.scanText(&it.input, depth)
		case "content":
			it.content = it.content[:0]
			return c.scanParts(&it.contentState, &it.content, depth+1)
		case "summary":
			it.summary = it.summary[:0]
			return c.scanParts(&it.summaryState, &it.summary, depth+1)
		}
		return s.skipValue(depth)
	})
	if err != nil {
		return err
	}
	if it.typ.state == slotBad {
		r.outputBad = true
		return nil
	}
	switch string(it.typ.buf) {
	case "message":
		if it.contentState == slotBad {
			r.outputBad = true
			return nil
		}
		c.content = append(c.content, it.content...)
	case "reasoning":
		if it.contentState == slotBad || it.summaryState == slotBad {
			r.outputBad = true
			return nil
		}
		c.reasoning = append(append(c.reasoning, it.content...), it.summary...)
	case "function_call":
		if it.name.state == slotBad || it.arguments.state == slotBad {
			r.outputBad = true
			return nil
		}
		c.toolCall = append(append(c.toolCall, it.name.buf...), it.arguments.buf...)
		c.parts.add(-1, nil, it.name.buf, it.arguments.buf, true)
	case "custom_tool_call":
		if it.name.state == slotBad || it.input.state == slotBad {
			r.outputBad = true
			return nil
		}
		c.toolCall = append(append(c.toolCall, it.name.buf...), it.input.buf...)
		c.parts.add(-1, nil, it.name.buf, it.input.buf, true)
	}
	return nil
}

// scanParts reads an item's content or summary, null or an array at depth
// of part objects, appending each part's text then refusal to dst. A value
// of another type, a part that is not an object or a text that is not a
// string makes *state slotBad.
func (c *responsesChunk) scanParts(state *uint8, dst *[]byte, depth int) error {
	s := &c.sc
	it := &c.item
	return s.scanObjects(state, depth, func() error {
		it.text.reset()
		it.refusal.reset()
		var part uint8
		err := s.scanObject(&part, depth+1, func(key []byte) error {
			switch string(key) {
			case "text":
				return s.scanText(&it.text, depth+1)
			case "refusal":
				return s.scanText(&it.refusal, depth+1)
			}
			return s.skipValue(depth + 1)
		})
		if err != nil {
			return err
		}
		if it.text.state == slotBad || it.refusal.state == slotBad {
			*state = slotBad
			return nil
		}
		*dst = append(append(*dst, it.text.buf...), it.refusal.buf...)
		return nil
	})
}
