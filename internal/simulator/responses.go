package simulator

import (
	"bytes"
	"cmp"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"time"
)

// The OpenAI Responses API, POST /v1/responses, as vLLM serves it (doc.go,
// "Responses API"). A request is a chat generation: its input (and
// instructions) is templated as chat messages and it reasons in reasoning
// mode; its lengths, EOS points and words follow the same model as
// /v1/chat/completions. Streamed, it is typed SSE events, each with its
// sequence_number; every event carries its sim_emit_unix_nano.
//
// A request that offers tools (and whose tool_choice is not "none") is
// answered with a call of the first tool, or of the one tool_choice names:
// output_item.added names it, then its arguments, a document its
// parameters accept (structured.go), are spread over the answer's tokens
// as function_call_arguments.delta events after the name, which is the
// answer's first token, as chat's name delta is (with a single answer
// token, the name and the whole arguments share it). A request
// whose text.format is json_schema or json_object is answered with such a
// document as its output text. The InvalidStructured fault cuts either
// document by its last byte, as for chat.

// responsesRequest holds the fields of a Responses API request that the
// simulator honours. Unknown fields are ignored, as vLLM does.
type responsesRequest struct {
	Model           string          `json:"model"`
	Input           json.RawMessage `json:"input"`
	Instructions    *string         `json:"instructions"`
	MaxOutputTokens *int            `json:"max_output_tokens"`
	Stream          bool            `json:"stream"`
	// IgnoreEOS and MinTokens are the simulator's length controls, as
	// for chat; vLLM's /v1/responses has no such fields.
	IgnoreEOS bool `json:"ignore_eos"`
	MinTokens *int `json:"min_tokens"`
	// Tools are the functions the request offers: a Responses tool names
	// its function and its parameters at its top level; a chat-shaped one
	// in "function" is read too. Only the called one's are read.
	Tools []struct {
		toolFunction
		Function toolFunction `json:"function"`
	} `json:"tools"`
	// ToolChoice "none" asks for a text answer despite the tools; a
	// named function ({"type":"function","name":...}, or chat's
	// {"type":"function","function":{"name":...}}) is the one called.
	ToolChoice json.RawMessage `json:"tool_choice"`
	// Text.Format asks for a JSON answer: json_schema (of its schema) or
	// json_object.
	Text *struct {
		Format struct {
			Type   string          `json:"type"`
			Schema json.RawMessage `json:"schema"`
		} `json:"format"`
	} `json:"text"`
}

// call returns the index of the tool the answer calls: the one
// tool_choice names, else the first.
func (req *responsesRequest) call() int {
	var named struct {
		Name     string `json:"name"`
		Function struct {
			Name string `json:"name"`
		} `json:"function"`
	}
	if json.Unmarshal(req.ToolChoice, &named) != nil {
		return 0
	}
	name := cmp.Or(named.Name, named.Function.Name)
	for i, t := range req.Tools {
		if name != "" && cmp.Or(t.Name, t.Function.Name) == name {
			return i
		}
	}
	return 0
}

// responsesInputItem is one item of a list input: a message (type
// "message" or absent) or a function call's output, which is the tool's
// message.
type responsesInputItem struct {
	Type    string          `json:"type"`
	Role    string          `json:"role"`
	Content json.RawMessage `json:"content"`
	Output  json.RawMessage `json:"output"`
}

// responsesMessages reduces a request's instructions and input to chat
// messages: instructions are a system message; a string input one user
// message; a list input its messages (content a string or an array of
// input_text, output_text or text parts, and input_image parts as images)
// and function call outputs (as tool messages), other items ignored.
// images is as chatMessages gives it: images[i] the keys of msgs[i]'s
// images, nil when there are none.
func responsesMessages(instructions *string, input json.RawMessage) (msgs []ChatMessage, images [][]uint64, err error) {
	if instructions != nil {
		msgs = append(msgs, ChatMessage{Role: "system", Content: *instructions})
	}
	input = bytes.TrimSpace(input)
	switch {
	case len(input) == 0 || string(input) == "null":
		return nil, nil, errors.New("input is required")
	case input[0] == '"':
		var s string
		if err := json.Unmarshal(input, &s); err != nil {
			return nil, nil, fmt.Errorf("input: %w", err)
		}
		return append(msgs, ChatMessage{Role: "user", Content: s}), nil, nil
	case input[0] != '[':
		return nil, nil, errors.New("input must be a string or an array of input items")
	}
	var items []responsesInputItem
	if err := json.Unmarshal(input, &items); err != nil {
		return nil, nil, fmt.Errorf("input: %w", err)
	}
	n := len(msgs)
	add := func(m []ChatMessage, im [][]uint64) {
		if im != nil && images == nil {
			images = make([][]uint64, len(msgs), len(msgs)+len(items))
		}
		msgs = append(msgs, m...)
		if images != nil {
			if im == nil {
				im = make([][]uint64, len(m))
			}
			images = append(images, im...)
		}
	}
	for i, it := range items {
		switch it.Type {
		case "", "message":
			in := []chatMessageJSON{{Role: it.Role, Content: it.Content}}
			if c := bytes.TrimSpace(it.Content); len(c) > 0 && c[0] == '[' {
				text, err := responsesParts(c)
				if err != nil {
					return nil, nil, fmt.Errorf("input[%d].content: %w", i, err)
				}
				in[0].Content = text
			}
			m, im, err := chatMessages(in)
			if err != nil {
				return nil, nil, fmt.Errorf("input[%d]: %w", i, err)
			}
			add(m, im)
		case "function_call_output":
			m, im, err := chatMessages([]chatMessageJSON{{Role: "tool", Content: it.Output}})
			if err != nil {
				return nil, nil, fmt.Errorf("input[%d].output: %w", i, err)
			}
			add(m, im)
		}
	}
	if len(msgs) == n {
		return nil, nil, errors.New("input holds no message")
	}
	return msgs, images, nil
}

// responsesParts turns an array of content parts into a chat content array:
// the parts with text (input_text, output_text, text) as text parts, and
// input_image parts ({"type":"input_image","image_url":"..."}) as image
// parts.
func responsesParts(raw json.RawMessage) (json.RawMessage, error) {
	var parts []struct {
		Type     string          `json:"type"`
		Text     string          `json:"text"`
		ImageURL json.RawMessage `json:"image_url"`
	}
	if err := json.Unmarshal(raw, &parts); err != nil {
		return nil, err
	}
	type part struct {
		Type     string          `json:"type"`
		Text     string          `json:"text,omitempty"`
		ImageURL json.RawMessage `json:"image_url,omitempty"`
	}
	out := make([]part, 0, len(parts))
	for _, p := range parts {
		switch p.Type {
		case "input_text", "output_text", "text":
			out = append(out, part{Type: "text", Text: p.Text})
		case "input_image":
			url := p.ImageURL
			if len(bytes.TrimSpace(url)) == 0 {
				url = json.RawMessage(`""`)
			}
			out = append(out, part{Type: "image_url", ImageURL: url})
		}
	}
	return json.Marshal(out)
}

func (s *Simulator) handleResponses(w http.ResponseWriter, r *http.Request, arrival time.Time) {
	var req responsesRequest
	fail := func(status int, msg string) { writeError(w, status, msg) }
	if err := decodeBody(w, r, &req); err != nil {
		fail(http.StatusBadRequest, err.Error())
		return
	}
	lora, status, err := s.checkModel(req.Model)
	if err != nil {
		fail(status, err.Error())
		return
	}
	msgs, images, err := responsesMessages(req.Instructions, req.Input)
	if err != nil {
		fail(http.StatusBadRequest, err.Error())
		return
	}
	ids, err := s.chatTokenIDs(msgs, images, true)
	if err != nil {
		fail(http.StatusBadRequest, err.Error())
		return
	}
	np := &responsesProto{
		model: s.modelName(lora), lora: lora, stream: req.Stream, arrival: arrival,
		id: strconv.FormatUint(s.reqs.Add(1), 16),
	}
	if len(req.Tools) > 0 && string(bytes.TrimSpace(req.ToolChoice)) != `"none"` {
		t := req.Tools[req.call()]
		np.toolName, _ = json.Marshal(cmp.Or(t.Name, t.Function.Name, "tool"))
		params := bytes.TrimSpace(t.Parameters)
		if len(params) == 0 {
			params = bytes.TrimSpace(t.Function.Parameters)
		}
		if len(params) == 0 || string(params) == "null" {
			np.doc = []byte("{}")
		} else {
			np.doc = structuredDoc(params)
		}
	} else if req.Text != nil {
		switch req.Text.Format.Type {
		case "json_schema":
			np.doc = structuredDoc(req.Text.Format.Schema)
		case "json_object":
			np.doc = structuredDoc(nil)
		}
	}
	if np.doc != nil {
		// The fault as serveGenerate reads it, at arrival.
		np.invalidStructured = s.faults.Load().InvalidStructured
	}
	s.serveNative(w, r, arrival, ids, req.MaxOutputTokens, req.MinTokens, req.IgnoreEOS, true, np, fail)
}

// responsesProto renders a Responses API answer: typed events when
// streamed, one response object otherwise.
type responsesProto struct {
	model     []byte
	lora      int    // the request's model: 0 the base, i+1 LoRA adapter i
	id        string // the response's, as hex
	arrival   time.Time
	stream    bool
	toolName  []byte // JSON string of the called function; nil: a text answer
	p         *genParams
	promptLen int
	// cached is the prompt tokens the prefix cache served (setCached),
	// the usage's input_tokens_details.cached_tokens.
	cached int
	seq    int // the next event's sequence_number
	// doc, when set, is the answer's JSON document (structured.go): the
	// called function's arguments, or the text.format answer. pieces are
	// its pieces, one for each answer token, cut by the InvalidStructured
	// fault (invalidStructured, the request's).
	doc               []byte
	invalidStructured float64
	pieces            [][]byte
	// nameToken: the call's name is an answer token of its own, the
	// first, as chat's is; false with a single answer token, which then
	// carries the name and the whole arguments.
	nameToken bool
	// requestMetrics are the request's times, vLLM's "metrics" of the
	// finished response (request_metrics.go).
	requestMetrics
}

func (r *responsesProto) setCached(n int) { r.cached = n }

// setParams keeps the request's parameters and, once its length is drawn,
// spreads its document over its answer tokens: those after the reasoning,
// and after a call's name.
func (r *responsesProto) setParams(p *genParams) {
	r.p, r.promptLen = p, len(p.ids)
	n := p.target - p.reasoningOf(p.target)
	if r.nameToken = r.toolName != nil && n >= 2; r.nameToken {
		n--
	}
	if r.doc != nil {
		if n > 0 {
			r.pieces = docPieces(breakDoc(r.doc, p.key, r.invalidStructured), n)
		}
	}
}

// piece is the text of token i: a piece of the document for an answer
// token when there is one, else the generated word.
func (r *responsesProto) piece(i int) string {
	k := i - r.p.reasoning
	if r.nameToken {
		if k == 0 {
			return "" // the name's token, in its output_item.added
		}
		k--
	}
	if r.pieces != nil && k >= 0 && k < len(r.pieces) {
		return string(r.pieces[k])
	}
	return outputPiece(r.p.key, i)
}

func (r *responsesProto) adapter() int      { return r.lora }
func (*responsesProto) reasons() bool       { return true }
func (r *responsesProto) streams() bool     { return r.stream }
func (*responsesProto) contentType() string { return "text/event-stream" }
func (*responsesProto) malformed() []byte {
	return []byte("event: response.output_text.delta\ndata: {not json\n\n")
}

// event opens an event of type typ: its event line, and its data up to the
// sequence number; the caller appends its members, then close ends it.
func (r *responsesProto) event(b []byte, typ string) []byte {
	b = append(b, "event: "...)
	b = append(b, typ...)
	b = append(b, "\ndata: {\"type\":\""...)
	b = append(b, typ...)
	b = append(b, `","sequence_number":`...)
	b = strconv.AppendInt(b, int64(r.seq), 10)
	r.seq++
	return b
}

// close stamps an event and ends it.
func closeEvent(b []byte) []byte { return append(stamp(b), "\n\n"...) }

// answerIndex is the output index of the answer item: after the reasoning
// item, when there is one.
func (r *responsesProto) answerIndex() int {
	if r.p.reasoning > 0 {
		return 1
	}
	return 0
}

// itemID appends the id of the item of the given kind.
func (r *responsesProto) itemID(b []byte, prefix string) []byte {
	b = append(b, '"')
	b = append(b, prefix...)
	b = append(b, r.id...)
	return append(b, '"')
}

// response appends the response object in status with its output of
// produced tokens (none while in progress) and, when done, its usage.
func (r *responsesProto) response(b []byte, status string, produced int, done bool) []byte {
	b = append(b, `{"id":"resp_`...)
	b = append(b, r.id...)
	b = append(b, `","object":"response","created_at":`...)
	b = strconv.AppendInt(b, r.arrival.Unix(), 10)
	b = append(b, `,"status":"`...)
	b = append(b, status...)
	b = append(b, `","model":`...)
	b = append(b, r.model...)
	b = append(b, `,"error":null,"incomplete_details":`...)
	if status == "incomplete" {
		b = append(b, `{"reason":"max_output_tokens"}`...)
	} else {
		b = append(b, "null"...)
	}
	b = append(b, `,"output":[`...)
	nr := r.p.reasoningOf(produced)
	if nr > 0 {
		b = r.reasoningItem(b, nr, "completed")
		if produced > nr {
			b = append(b, ',')
		}
	}
	if produced > nr {
		b = r.answerItem(b, nr, produced, "completed")
	}
	b = append(b, `],"store":false,"usage":`...)
	if !done {
		return append(b, "null}"...)
	}
	b = append(b, `{"input_tokens":`...)
	b = strconv.AppendInt(b, int64(r.promptLen), 10)
	b = append(b, `,"input_tokens_details":{"cached_tokens":`...)
	b = strconv.AppendInt(b, int64(r.cached), 10)
	b = append(b, `},"output_tokens":`...)
	b = strconv.AppendInt(b, int64(produced), 10)
	b = append(b, `,"output_tokens_details":{"reasoning_tokens":`...)
	b = strconv.AppendInt(b, int64(nr), 10)
	b = append(b, `},"total_tokens":`...)
	b = strconv.AppendInt(b, int64(r.promptLen+produced), 10)
	b = append(b, '}')
	if r.on {
		b = appendVLLMMetrics(b, r.t)
	}
	return append(b, '}')
}

// text appends tokens [from, to) of the generation.
func (r *responsesProto) text(b []byte, from, to int) []byte {
	for i := from; i < to; i++ {
		b = append(b, r.piece(i)...)
	}
	return b
}

// reasoningItem appends the reasoning item of the first n tokens (none yet
// while it is in progress).
func (r *responsesProto) reasoningItem(b []byte, n int, status string) []byte {
	b = append(b, `{"id":`...)
	b = r.itemID(b, "rs_")
	b = append(b, `,"type":"reasoning","summary":[],"content":[`...)
	if status == "completed" {
		b = append(b, `{"type":"reasoning_text","text":"`...)
		b = append(r.text(b, 0, n), `"}`...)
	}
	b = append(b, `],"status":"`...)
	b = append(b, status...)
	return append(b, `"}`...)
}

// answerItem appends the answer item of tokens [from, to): a message, or a
// function call whose arguments they are.
func (r *responsesProto) answerItem(b []byte, from, to int, status string) []byte {
	done := status == "completed"
	b = append(b, `{"id":`...)
	if r.toolName != nil {
		b = r.itemID(b, "fc_")
		b = append(b, `,"type":"function_call","call_id":"call_0","name":`...)
		b = append(b, r.toolName...)
		b = append(b, `,"arguments":"`...)
		if done {
			b = r.text(b, from, to)
		}
		b = append(b, `","status":"`...)
	} else {
		b = r.itemID(b, "msg_")
		b = append(b, `,"type":"message","role":"assistant","content":[`...)
		if done {
			b = append(b, `{"type":"output_text","text":"`...)
			b = append(r.text(b, from, to), `","annotations":[]}`...)
		}
		b = append(b, `],"status":"`...)
	}
	b = append(b, status...)
	return append(b, `"}`...)
}

// begin is what precedes the first token: the response created and in
// progress.
func (r *responsesProto) begin(b []byte) []byte {
	for _, typ := range []string{"response.created", "response.in_progress"} {
		b = append(r.event(b, typ), `,"response":`...)
		b = closeEvent(r.response(b, "in_progress", 0, false))
	}
	return b
}

// itemEvent appends an output_item.added or .done event of item index.
func (r *responsesProto) itemEvent(b []byte, typ string, index int, item func([]byte) []byte) []byte {
	b = append(r.event(b, typ), `,"output_index":`...)
	b = strconv.AppendInt(b, int64(index), 10)
	b = append(b, `,"item":`...)
	return closeEvent(item(b))
}

// partEvent appends a content_part event of item index, whose part is
// typ with text.
func (r *responsesProto) partEvent(b []byte, event, prefix string, index int, partType string, text func([]byte) []byte) []byte {
	b = append(r.event(b, event), `,"item_id":`...)
	b = r.itemID(b, prefix)
	b = append(b, `,"output_index":`...)
	b = strconv.AppendInt(b, int64(index), 10)
	b = append(b, `,"content_index":0,"part":{"type":"`...)
	b = append(b, partType...)
	b = append(b, `","text":"`...)
	b = append(text(b), '"')
	if partType == "output_text" {
		b = append(b, `,"annotations":[]`...)
	}
	return closeEvent(append(b, '}'))
}

// textEvent appends a delta or done event of a text: its item's id and
// indexes and member (delta, text or arguments) with text.
func (r *responsesProto) textEvent(b []byte, event, prefix string, index int, content bool, member string, text func([]byte) []byte) []byte {
	b = append(r.event(b, event), `,"item_id":`...)
	b = r.itemID(b, prefix)
	b = append(b, `,"output_index":`...)
	b = strconv.AppendInt(b, int64(index), 10)
	if content {
		b = append(b, `,"content_index":0`...)
	}
	b = append(b, `,"`...)
	b = append(b, member...)
	b = append(b, `":"`...)
	b = append(text(b), '"')
	return closeEvent(b)
}

func (r *responsesProto) token(b []byte, i int, piece string, _ bool, _ string) []byte {
	nr := r.p.reasoning
	if r.pieces != nil && i >= nr {
		// A document's piece, and the pad fault's padding after it.
		word := outputPiece(r.p.key, i)
		piece = r.piece(i) + piece[len(word):]
	}
	delta := func(b []byte) []byte { return append(b, piece...) }
	if i < nr {
		if i == 0 {
			b = r.itemEvent(b, "response.output_item.added", 0, func(b []byte) []byte { return r.reasoningItem(b, 0, "in_progress") })
			b = r.partEvent(b, "response.content_part.added", "rs_", 0, "reasoning_text", func(b []byte) []byte { return b })
		}
		return r.textEvent(b, "response.reasoning_text.delta", "rs_", 0, true, "delta", delta)
	}
	idx := r.answerIndex()
	if i == nr {
		if nr > 0 {
			b = r.closeReasoning(b, nr)
		}
		b = r.itemEvent(b, "response.output_item.added", idx, func(b []byte) []byte { return r.answerItem(b, i, i, "in_progress") })
		if r.toolName == nil {
			b = r.partEvent(b, "response.content_part.added", "msg_", idx, "output_text", func(b []byte) []byte { return b })
		}
		if r.nameToken {
			return b // the call's name is this token
		}
	}
	if r.toolName != nil {
		return r.textEvent(b, "response.function_call_arguments.delta", "fc_", idx, false, "delta", delta)
	}
	return r.textEvent(b, "response.output_text.delta", "msg_", idx, true, "delta", delta)
}

// closeReasoning appends the events that end the reasoning item, of the
// first nr tokens.
func (r *responsesProto) closeReasoning(b []byte, nr int) []byte {
	text := func(b []byte) []byte { return r.text(b, 0, nr) }
	b = r.textEvent(b, "response.reasoning_text.done", "rs_", 0, true, "text", text)
	b = r.partEvent(b, "response.content_part.done", "rs_", 0, "reasoning_text", text)
	return r.itemEvent(b, "response.output_item.done", 0, func(b []byte) []byte { return r.reasoningItem(b, nr, "completed") })
}

// end closes the open item and ends the stream: response.completed, or
// response.incomplete when the generation was cut at max_output_tokens.
// The done events repeat the generated words (without the pad fault's
// padding).
func (r *responsesProto) end(b []byte, produced int, reason string) []byte {
	nr := r.p.reasoningOf(produced)
	switch {
	case produced <= nr:
		if produced > 0 {
			b = r.closeReasoning(b, produced)
		}
	case r.toolName != nil:
		idx := r.answerIndex()
		args := func(b []byte) []byte { return r.text(b, nr, produced) }
		b = append(r.event(b, "response.function_call_arguments.done"), `,"item_id":`...)
		b = r.itemID(b, "fc_")
		b = append(b, `,"output_index":`...)
		b = strconv.AppendInt(b, int64(idx), 10)
		b = append(b, `,"name":`...)
		b = append(b, r.toolName...)
		b = append(b, `,"arguments":"`...)
		b = closeEvent(append(args(b), '"'))
		b = r.itemEvent(b, "response.output_item.done", idx, func(b []byte) []byte { return r.answerItem(b, nr, produced, "completed") })
	default:
		idx := r.answerIndex()
		text := func(b []byte) []byte { return r.text(b, nr, produced) }
		b = r.textEvent(b, "response.output_text.done", "msg_", idx, true, "text", text)
		b = r.partEvent(b, "response.content_part.done", "msg_", idx, "output_text", text)
		b = r.itemEvent(b, "response.output_item.done", idx, func(b []byte) []byte { return r.answerItem(b, nr, produced, "completed") })
	}
	typ, status := "response.completed", "completed"
	if reason != finishStop {
		typ, status = "response.incomplete", "incomplete"
	}
	b = append(r.event(b, typ), `,"response":`...)
	return closeEvent(r.response(b, status, produced, true))
}

// body is the whole answer of a request that was not streamed.
func (r *responsesProto) body(b []byte, produced int, reason string, _ float64) []byte {
	status := "completed"
	if reason != finishStop {
		status = "incomplete"
	}
	b = r.response(b, status, produced, true)
	b = append(b[:len(b)-1], arrivalField...) // the response's closing brace goes
	b = strconv.AppendInt(b, r.arrival.UnixNano(), 10)
	return stamp(b)
}
