package client

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"

	"github.com/infer-exporter/infer_exporter/internal/config"
	"github.com/infer-exporter/infer_exporter/probe/ndjson"
)

// ollamaFlavor speaks Ollama's native API, POST /api/generate (prompt) and
// POST /api/chat (messages), which stream NDJSON: one JSON object per line,
//
//	{"model":"tiny","created_at":"...","response":"q","done":false}
//	{"model":"tiny","created_at":"...","message":{"role":"assistant","content":"q"},"done":false}
//
// ending with a line whose "done" is true. That line is the end marker and
// carries the server's counts: "eval_count" (output tokens) and
// "prompt_eval_count" (prompt tokens), with durations in nanoseconds
// (ServerTimings: load_duration, prompt_eval_duration, eval_duration).
// Reasoning models add "thinking" (generate) or message.thinking (chat),
// which are output tokens too. A chat answer that calls a tool puts it in
// message.tool_calls, [{"function": {"name": ..., "arguments": {...}}}]
// (arguments a JSON object, not a string as in the OpenAI API). A line is a
// content event when any of response, thinking, message.content,
// message.thinking or a tool call's name or arguments is non-empty;
// thinking is not part of the answer text, nor is a tool call, which is an
// answer all the same. An error is {"error": "..."},
// before or inside the stream. A server that does not stream answers with
// the "done" line alone, holding the whole answer: one content event, a
// success without TPOT or ITL.
//
// The output cap is options.num_predict; temperature, top_p and seed go in
// options too. Ollama has no ignore_eos or min_tokens; they are not sent.
type ollamaFlavor struct {
	facts
	path string
}

// The Ollama flavors.
var (
	// OllamaGenerate is POST /api/generate.
	OllamaGenerate Flavor = ollamaFlavor{facts: factsOf("ollama-generate"), path: "/api/generate"}
	// OllamaChat is POST /api/chat.
	OllamaChat Flavor = ollamaFlavor{facts: factsOf("ollama-chat"), path: "/api/chat"}
)

func (f ollamaFlavor) NewRequest(ctx context.Context, t *Target, r *Request) (*http.Request, error) {
	body := map[string]any{"model": t.Model, "stream": true}
	if f.Chat() {
		body["messages"] = []map[string]string{{"role": "user", "content": r.Prompt}}
	} else {
		body["prompt"] = r.Prompt
	}
	r.Attach.setIn(body, f, r.Prompt)
	options := map[string]any{}
	if r.MaxTokens > 0 {
		options["num_predict"] = r.MaxTokens
	}
	setSamplingIn(options, r, "seed")
	if len(options) > 0 {
		body["options"] = options
	}
	buf, err := encodeBody(f.Name(), body, r)
	if err != nil {
		return nil, err
	}
	return newNativeRequest(ctx, t, config.RootURL(t.BaseURL)+f.path, buf, "application/x-ndjson")
}

// kindMembers puts /api/chat's tools in "tools", in the chat API's shape
// (Ollama has no tool_choice), and the response format in "format": the
// schema itself, or "json".
func (f ollamaFlavor) kindMembers(k *config.RequestKinds) map[string]json.RawMessage {
	m := map[string]json.RawMessage{}
	if f.takes(config.KindTools) && len(k.Tools) > 0 {
		m["tools"] = chatTools(k.Tools)
	}
	if rf := k.ResponseFormat; rf != nil && f.takes(config.KindResponseFormat) {
		if rf.Type == config.ResponseJSONSchema {
			m["format"] = rf.SchemaJSON
		} else {
			m["format"] = mustJSON("json")
		}
	}
	return m
}

// imageMember puts the images' base64 in /api/chat's message, beside its
// content, or in /api/generate's "images", beside the prompt.
func (f ollamaFlavor) imageMember(prompt string, images []Image) (string, *withImages) {
	switch {
	case !f.takes(config.KindImages):
		return "", nil
	case f.Chat():
		return "messages", &withImages{shape: ollamaMessage, prompt: prompt, images: images}
	}
	return "images", &withImages{shape: ollamaImages, images: images}
}

func ollamaMessage(w *bodyWriter, prompt string, images []Image) error {
	w.raw(`[{"role":"user","content":`)
	err := w.json(prompt)
	w.raw(`,"images":`)
	w.base64s(images)
	w.raw("}]")
	return err
}

func ollamaImages(w *bodyWriter, _ string, images []Image) error {
	w.base64s(images)
	return nil
}

func (f ollamaFlavor) NewDecoder(body io.Reader, _ http.Header, maxLineBytes int) Decoder {
	return &ollamaDecoder{r: ndjson.NewReader(body, maxLineBytes)}
}

type ollamaFrame struct {
	Response *string `json:"response"`
	Thinking *string `json:"thinking"`
	Message  *struct {
		Content   *string `json:"content"`
		Thinking  *string `json:"thinking"`
		ToolCalls []struct {
			Function *struct {
				Name      *string         `json:"name"`
				Arguments json.RawMessage `json:"arguments"`
			} `json:"function"`
		} `json:"tool_calls"`
	} `json:"message"`
	Done            bool   `json:"done"`
	EvalCount       *int64 `json:"eval_count"`
	PromptEvalCount *int64 `json:"prompt_eval_count"`
	ollamaDurations
	frameError
}

// appendOptional appends a JSON string field that may be absent.
func appendOptional(dst []byte, s *string) []byte {
	if s == nil {
		return dst
	}
	return append(dst, *s...)
}

// ollamaDecoder reads NDJSON lines.
type ollamaDecoder struct {
	r    *ndjson.Reader
	line []byte
	last bool // the current line ended the body without its newline
	f    ollamaFrame
	// parts and calls are the frame's tool calls (Chunk.Calls).
	parts callParts
	calls []CallPart
}

func (d *ollamaDecoder) Next() error {
	if d.last {
		return io.EOF
	}
	line, err := d.r.Next()
	switch {
	case err == nil:
		d.line = line
		return nil
	case err == io.ErrUnexpectedEOF:
		// The body ended cleanly without a final newline. A complete
		// "done" line is the end of the answer (a non-streamed body is
		// one such line); anything else was cut.
		if json.Valid(line) {
			d.line, d.last = line, true
			return nil
		}
		return err
	case errors.Is(err, ndjson.ErrLineTooLong):
		return &ProtocolError{Msg: "reading line", Err: err}
	}
	return err
}

func (d *ollamaDecoder) Decode(c *Chunk) error {
	if err := decodeFrame(d.line, &d.f); err != nil {
		return err
	}
	f := &d.f
	// Each of the four text fields, and a tool call, makes the line a
	// content event when it is non-empty, wherever it sits: /api/generate
	// writes response and thinking, /api/chat message.content,
	// message.thinking and message.tool_calls, and a line carrying both
	// shapes loses nothing.
	c.Content = appendOptional(c.Content[:0], f.Response)
	c.Reasoning = appendOptional(c.Reasoning[:0], f.Thinking)
	if m := f.Message; m != nil {
		c.Content = appendOptional(c.Content, m.Content)
		c.Reasoning = appendOptional(c.Reasoning, m.Thinking)
		c.ToolCall = c.ToolCall[:0]
		d.parts.reset()
		for _, tc := range m.ToolCalls {
			if fn := tc.Function; fn != nil {
				n := len(c.ToolCall)
				c.ToolCall = appendOptional(c.ToolCall, fn.Name)
				name := c.ToolCall[n:]
				// The arguments object's JSON text is what the
				// model generated.
				a := bytes.TrimSpace(fn.Arguments)
				if len(a) == 0 || bytes.Equal(a, []byte("null")) {
					a = nil
				}
				// Ollama sends each call whole.
				d.parts.add(-1, nil, name, a, true)
				c.ToolCall = append(c.ToolCall, a...)
			}
		}
		d.calls = d.parts.appendTo(d.calls[:0])
		c.Calls = d.calls
	}
	if !f.Done {
		if d.last {
			return &ProtocolError{Msg: "body ended before a \"done\": true line"}
		}
		return nil
	}
	c.Done = true
	c.Server = f.ollamaDurations.server()
	if f.EvalCount != nil {
		return c.setUsage("eval_count", f.EvalCount, "prompt_eval_count", f.PromptEvalCount)
	}
	return nil
}
