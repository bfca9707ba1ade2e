package client

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"

	"github.com/infer-exporter/infer_exporter/internal/config"
	"github.com/infer-exporter/infer_exporter/probe/sse"
)

// responsesFlavor speaks the OpenAI Responses API, as OpenAI and vLLM serve
// it: POST /v1/responses with {"input", "max_output_tokens", "stream":
// true}, answered with typed SSE events, one per token:
//
//	event: response.output_text.delta
//	data: {"type":"response.output_text.delta","sequence_number":4,"item_id":"msg_1","output_index":0,"content_index":0,"delta":"Hi"}
//
// between response.created and a terminal event: response.completed (or
// response.incomplete, an answer cut by max_output_tokens) carrying the
// response with its usage, response.failed, or an error event. There is no
// "[DONE]" (vLLM's documentation shows one after response.completed; the
// stream has ended by then). What each event means is in responses_json.go.
//
// The prompt is the request's input, a string: the server wraps it in a
// user message and applies the model's chat template, as for chat. The
// body asks "store": false, so that the probe's answers are not kept by a
// server that stores responses (OpenAI does by default). ignore_eos and
// min_tokens are vLLM extensions of chat and completions that its
// /v1/responses does not read (it ignores unknown fields); they are sent
// only when set, as for chat, and OpenAI refuses them.
//
// A workload's request kinds (Attachments) go in the API's own shapes:
// "tools" flat ({"type":"function","name",...}), "tool_choice" "auto",
// "required" or {"type":"function","name"}, a response format as
// "text": {"format": ...}, and images as input_image parts of one user
// message, after an input_text part holding the prompt. A function call
// streams as response.output_item.added naming it, then its arguments in
// response.function_call_arguments.delta events (responses_json.go).
//
// Extra is merged last, as for chat, but for its "messages": a chat
// conversation (a sessions workload's history of user and assistant
// messages) is the API's input as a list of messages.
type responsesFlavor struct{ facts }

// OpenAIResponses is POST /v1/responses with "stream": true.
var OpenAIResponses Flavor = responsesFlavor{factsOf("openai-responses")}

func (f responsesFlavor) NewRequest(ctx context.Context, t *Target, r *Request) (*http.Request, error) {
	body, err := preparedBody(f, t, r)
	if err != nil {
		return nil, err
	}
	return newJSONRequest(ctx, t, endpoint(t.BaseURL, "/responses"), body)
}

// body encodes r's JSON body: the recorded one, made to stream, or one built
// from its fields.
func (f responsesFlavor) body(t *Target, r *Request) (*body, error) {
	if r.RawBody != nil {
		// The Responses API has no stream_options.include_usage: its
		// usage comes in response.completed.
		return recordedBody(f, t, r, false)
	}
	body := make(map[string]any, 10+len(r.Extra))
	if t.Model != "" {
		body["model"] = t.Model
	}
	body["input"] = r.Prompt
	body["stream"] = true
	body["store"] = false
	if r.MaxTokens > 0 {
		body["max_output_tokens"] = r.MaxTokens
	}
	setSampling(body, r)
	r.Attach.setIn(body, f, r.Prompt)
	if m, ok := r.Extra["messages"]; ok {
		body["input"] = m
	}
	for k, v := range r.Extra {
		if k != "messages" {
			body[k] = v
		}
	}
	return encodeJSON(f.Name(), body)
}

// kindMembers puts the tools flat in "tools" ([{"type":"function",
// "name":...,"description":...,"parameters":{...}}]), the tool choice in
// "tool_choice" ("auto", "required" or {"type":"function","name":...}),
// and the response format in "text": {"format": {"type":"json_schema",
// "name":...,"schema":{...},"strict":...}}, strict as the format says,
// true unless set, or {"format":{"type":"json_object"}}.
func (f responsesFlavor) kindMembers(k *config.RequestKinds) map[string]json.RawMessage {
	m := map[string]json.RawMessage{}
	if f.takes(config.KindTools) && len(k.Tools) > 0 {
		flat := make([]map[string]any, 0, len(k.Tools))
		for i := range k.Tools {
			fn := function(&k.Tools[i])
			fn["type"] = "function"
			flat = append(flat, fn)
		}
		m["tools"] = mustJSON(flat)
		choice, ok := toolChoice(k)
		if !ok {
			choice = mustJSON(map[string]string{"type": "function", "name": k.ToolChoice})
		}
		m["tool_choice"] = choice
	}
	if rf := k.ResponseFormat; rf != nil && f.takes(config.KindResponseFormat) {
		if rf.Type == config.ResponseJSONSchema {
			m["text"] = mustJSON(map[string]any{"format": map[string]any{"type": "json_schema",
				"name": rf.Name, "schema": rf.SchemaJSON, "strict": rf.StrictSchema()}})
		} else {
			m["text"] = mustJSON(map[string]any{"format": map[string]string{"type": "json_object"}})
		}
	}
	return m
}

// imageMember puts the images in the input: one user message whose
// content is an input_text part holding the prompt, then an input_image
// part (a data URL, detail "auto", which the API requires) per image.
func (f responsesFlavor) imageMember(prompt string, images []Image) (string, *withImages) {
	if !f.takes(config.KindImages) {
		return "", nil
	}
	return "input", &withImages{shape: responsesParts, prompt: prompt, images: images}
}

func responsesParts(w *bodyWriter, prompt string, images []Image) error {
	w.raw(`[{"type":"message","role":"user","content":[{"type":"input_text","text":`)
	err := w.json(prompt)
	w.raw("}")
	for _, img := range images {
		w.raw(`,{"type":"input_image","image_url":"`)
		w.shared(img.DataURL())
		w.raw(`","detail":"auto"}`)
	}
	w.raw("]}]")
	return err
}

// NewDecoder reads the SSE stream of typed events, or a single response
// object when the server ignored "stream": true and answered
// application/json.
func (responsesFlavor) NewDecoder(body io.Reader, header http.Header, maxLineBytes int) Decoder {
	if isJSON(header.Get("Content-Type")) {
		return newBodyDecoder(body, maxLineBytes, &responsesChunk{})
	}
	return &responsesStreamDecoder{sse: sse.NewReader(body, maxLineBytes)}
}

// responsesStreamDecoder reads the API's events until a terminal one.
type responsesStreamDecoder struct {
	sse   *sse.Reader
	ev    sse.Event
	chunk responsesChunk
	// last: the current event was complete but for its blank line, and
	// the body ended after it.
	last bool
}

func (d *responsesStreamDecoder) Next() error {
	if d.last {
		return io.EOF
	}
	// A terminal event the body's end cut from its blank line says the
	// answer is whole, so it is taken.
	ev, last, err := readEvent(d.sse, d.ends)
	if err == nil {
		d.ev, d.last = ev, last
	}
	return err
}

// ends says whether ev is a readable event that ends the stream.
func (d *responsesStreamDecoder) ends(ev sse.Event) bool {
	var c Chunk
	return len(bytes.TrimSpace(ev.Data)) > 0 && d.chunk.decodeEvent(ev.Data, ev.Name, &c) == nil && c.Done
}

func (d *responsesStreamDecoder) Decode(c *Chunk) error {
	if d.ev.Name == "error" {
		return &ProtocolError{Msg: "error event: " + excerpt(d.ev.Data)}
	}
	data := bytes.TrimSpace(d.ev.Data)
	if bytes.Equal(data, doneMarker) {
		// Not the API's end marker: the terminal event is. A "[DONE]"
		// after it is never read; one without it ends nothing.
		return nil
	}
	return d.chunk.decodeEvent(data, d.ev.Name, c)
}
