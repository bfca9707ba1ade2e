package client

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"unicode/utf16"
	"unicode/utf8"

	"github.com/infer-exporter/infer_exporter/internal/config"
	"github.com/infer-exporter/infer_exporter/probe/sse"
)

// openAIFlavor speaks the OpenAI chat and completions APIs as vLLM, SGLang,
// TGI, llama.cpp and Ollama serve them. Both return the same stream shape, so
// one decoder reads both: chat puts text in choices[].delta, completions in
// choices[].text.
type openAIFlavor struct {
	facts
	path string // under /v1
}

func (f openAIFlavor) NewRequest(ctx context.Context, t *Target, r *Request) (*http.Request, error) {
	body, err := preparedBody(f, t, r)
	if err != nil {
		return nil, err
	}
	return newJSONRequest(ctx, t, endpoint(t.BaseURL, f.path), body)
}

// body encodes r's JSON body: the recorded one, made to stream, or one built
// from its fields.
func (f openAIFlavor) body(t *Target, r *Request) (*body, error) {
	if r.RawBody != nil {
		return recordedBody(f, t, r, true)
	}
	body := make(map[string]any, 10+len(r.Extra))
	if t.Model != "" {
		body["model"] = t.Model
	}
	if f.Chat() {
		body["messages"] = []map[string]string{{"role": "user", "content": r.Prompt}}
	} else {
		body["prompt"] = r.Prompt
	}
	r.Attach.setIn(body, f, r.Prompt)
	body["stream"] = true
	body["stream_options"] = map[string]bool{"include_usage": true}
	if r.MaxTokens > 0 {
		body["max_tokens"] = r.MaxTokens
	}
	setSampling(body, r)
	// Extra goes last so that it can override anything above, for the
	// server that needs, say, max_completion_tokens or continuous usage.
	for k, v := range r.Extra {
		body[k] = v
	}
	return encodeJSON(f.Name(), body)
}

// kindMembers puts chat's tools in "tools" ([{"type":"function",
// "function":{...}}], a shape Ollama's /api/chat shares) and "tool_choice"
// ("auto", "required" or {"type":"function","function":{"name":...}}),
// and the response format of chat and completions in "response_format"
// ({"type":"json_schema","json_schema":{"name","schema","strict"}}, strict
// as the format says, true unless set, or {"type":"json_object"}).
func (f openAIFlavor) kindMembers(k *config.RequestKinds) map[string]json.RawMessage {
	m := map[string]json.RawMessage{}
	if f.takes(config.KindTools) && len(k.Tools) > 0 {
		m["tools"] = chatTools(k.Tools)
		choice, ok := toolChoice(k)
		if !ok {
			choice = mustJSON(map[string]any{"type": "function", "function": map[string]string{"name": k.ToolChoice}})
		}
		m["tool_choice"] = choice
	}
	if rf := k.ResponseFormat; rf != nil && f.takes(config.KindResponseFormat) {
		if rf.Type == config.ResponseJSONSchema {
			m["response_format"] = mustJSON(map[string]any{"type": "json_schema",
				"json_schema": map[string]any{"name": rf.Name, "schema": rf.SchemaJSON, "strict": rf.StrictSchema()}})
		} else {
			m["response_format"] = mustJSON(map[string]string{"type": "json_object"})
		}
	}
	return m
}

// chatTools are tools in the chat API's shape.
func chatTools(tools []config.Tool) json.RawMessage {
	out := make([]map[string]any, 0, len(tools))
	for i := range tools {
		out = append(out, map[string]any{"type": "function", "function": function(&tools[i])})
	}
	return mustJSON(out)
}

// imageMember puts chat's images in its messages: one user message whose
// content is a text part holding the prompt, then an image_url part (a
// data URL) per image.
func (f openAIFlavor) imageMember(prompt string, images []Image) (string, *withImages) {
	if !f.takes(config.KindImages) {
		return "", nil
	}
	return "messages", &withImages{shape: chatParts, prompt: prompt, images: images}
}

func chatParts(w *bodyWriter, prompt string, images []Image) error {
	w.raw(`[{"role":"user","content":[{"type":"text","text":`)
	err := w.json(prompt)
	w.raw("}")
	for _, img := range images {
		w.raw(`,{"type":"image_url","image_url":{"url":"`)
		w.shared(img.DataURL())
		w.raw(`"}}`)
	}
	w.raw("]}]")
	return err
}

// endpoint joins the base URL and an API path under /v1. BaseURL may be the
// server root ("http://host:8000") or, as OpenAI SDKs write it, end in "/v1".
func endpoint(base, path string) string {
	base = strings.TrimRight(base, "/")
	if !strings.HasSuffix(base, "/v1") {
		base += "/v1"
	}
	return base + path
}

// newJSONRequest builds a POST of b with the target's headers and
// credentials.
func newJSONRequest(ctx context.Context, t *Target, url string, b *body) (*http.Request, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, b.reader())
	if err != nil {
		// The error quotes the URL only; the token is not in it.
		return nil, err
	}
	// NewRequest knows the length of its own readers only.
	req.ContentLength = int64(b.size)
	req.GetBody = func() (io.ReadCloser, error) { return b.reader(), nil }
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "text/event-stream")
	req.Header.Set("User-Agent", userAgent)
	config.SetTargetHeaders(req, t.Headers, t.BearerToken)
	return req, nil
}

const userAgent = "infer_exporter"

// NewDecoder reads an SSE stream, or a single JSON body when the server
// ignored "stream": true and answered application/json.
func (openAIFlavor) NewDecoder(body io.Reader, header http.Header, maxLineBytes int) Decoder {
	if isJSON(header.Get("Content-Type")) {
		return newBodyDecoder(body, maxLineBytes, &openAIChunk{})
	}
	return &openAIStreamDecoder{sse: sse.NewReader(body, maxLineBytes)}
}

// parse makes openAIChunk a frameParser, for a non-streamed body.
func (c *openAIChunk) parse(data []byte, out *Chunk) error { return c.decode(data, out) }

var doneMarker = []byte("[DONE]")

// openAIStreamDecoder reads "data: {json}" events ending with "data: [DONE]".
type openAIStreamDecoder struct {
	sse   *sse.Reader
	ev    sse.Event
	chunk openAIChunk
}

func (d *openAIStreamDecoder) Next() error {
	ev, err := d.sse.Next()
	switch {
	case err == nil:
		d.ev = ev
		return nil
	case err == io.ErrUnexpectedEOF && bytes.Equal(bytes.TrimSpace(ev.Data), doneMarker):
		// The server sent a complete "data: [DONE]" line and closed the
		// body without the blank line that dispatches it. Strictly the
		// event is incomplete, but the server plainly said the stream was
		// over; llama.cpp recordings end this way.
		d.ev = ev
		return nil
	case errors.Is(err, sse.ErrLineTooLong), errors.Is(err, sse.ErrEventTooLong):
		return &ProtocolError{Msg: "reading event", Err: err}
	}
	return err
}

func (d *openAIStreamDecoder) Decode(c *Chunk) error {
	switch d.ev.Name {
	case "message":
	case "error":
		return &ProtocolError{Msg: "error event: " + excerpt(d.ev.Data)}
	default:
		return nil // an event type this API does not define: not ours to judge
	}
	data := bytes.TrimSpace(d.ev.Data)
	if bytes.Equal(data, doneMarker) {
		c.Done = true
		return nil
	}
	return d.chunk.decode(data, c)
}

// appendUnquoted appends the JSON string body s (without its quotes, already
// validated) with its escapes decoded. Lone surrogates become U+FFFD, as in
// encoding/json.
func appendUnquoted(dst, s []byte) ([]byte, error) {
	for len(s) > 0 {
		i := bytes.IndexByte(s, '\\')
		if i < 0 {
			return append(dst, s...), nil
		}
		dst = append(dst, s[:i]...)
		s = s[i:]
		if len(s) < 2 {
			return dst, errors.New("truncated escape")
		}
		switch s[1] {
		case '"', '\\', '/':
			dst = append(dst, s[1])
		case 'b':
			dst = append(dst, '\b')
		case 'f':
			dst = append(dst, '\f')
		case 'n':
			dst = append(dst, '\n')
		case 'r':
			dst = append(dst, '\r')
		case 't':
			dst = append(dst, '\t')
		case 'u':
			r, ok := hex4(s[2:])
			if !ok {
				return dst, errors.New("bad \\u escape")
			}
			s = s[6:]
			if utf16.IsSurrogate(r) {
				if len(s) >= 6 && s[0] == '\\' && s[1] == 'u' {
					if r2, ok := hex4(s[2:]); ok {
						if dec := utf16.DecodeRune(r, r2); dec != utf8.RuneError {
							dst = utf8.AppendRune(dst, dec)
							s = s[6:]
							continue
						}
					}
				}
				r = utf8.RuneError
			}
			dst = utf8.AppendRune(dst, r)
			continue
		default:
			return dst, fmt.Errorf("bad escape \\%c", s[1])
		}
		s = s[2:]
	}
	return dst, nil
}

func hex4(b []byte) (rune, bool) {
	if len(b) < 4 {
		return 0, false
	}
	var r rune
	for _, c := range b[:4] {
		switch {
		case '0' <= c && c <= '9':
			c -= '0'
		case 'a' <= c && c <= 'f':
			c = c - 'a' + 10
		case 'A' <= c && c <= 'F':
			c = c - 'A' + 10
		default:
			return 0, false
		}
		r = r<<4 | rune(c)
	}
	return r, true
}

// excerpt quotes at most 256 bytes of b for an error message.
func excerpt(b []byte) string {
	const n = 256
	if len(b) > n {
		return fmt.Sprintf("%q...", b[:n])
	}
	return fmt.Sprintf("%q", b)
}

// setSampling sets the sampling fields that the OpenAI-style bodies (chat,
// completions, Responses) share, each only when set: ignore_eos and
// min_tokens are vLLM (and SGLang) extensions, and other servers may reject
// unknown fields.
func setSampling(body map[string]any, r *Request) {
	if r.IgnoreEOS {
		body["ignore_eos"] = true
	}
	if r.MinTokens > 0 {
		body["min_tokens"] = r.MinTokens
	}
	setSamplingIn(body, r, "seed")
}
