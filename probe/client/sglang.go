package client

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"

	"github.com/infer-exporter/infer_exporter/internal/config"
)

// sglangFlavor speaks SGLang's native API: POST /generate with {"text",
// "sampling_params", "stream": true}, answered with SSE events
//
//	data: {"text":"<all text so far>","meta_info":{"prompt_tokens":7,"completion_tokens":3,"finish_reason":null,...},"index":0}
//
// ending with "data: [DONE]". By default each event's "text" is the whole
// text generated so far, so an event's content is what it adds to the
// previous event's text; a server started with incremental streaming output
// sends only the new text, which the decoder recognises when an event's text
// does not extend the previous one. meta_info carries the server's running
// counts (prompt_tokens, completion_tokens). An error is {"error": ...}.
//
// ignore_eos and min_new_tokens (from MinTokens) are sent when set, in
// sampling_params, as are temperature and top_p. The seed is not sent:
// SGLang's per-request seed parameter has changed name across versions; use
// Extra.
type sglangFlavor struct{ facts }

// SGLang is POST /generate of SGLang.
var SGLang Flavor = sglangFlavor{factsOf("sglang")}

func (f sglangFlavor) NewRequest(ctx context.Context, t *Target, r *Request) (*http.Request, error) {
	params := map[string]any{}
	if r.MaxTokens > 0 {
		params["max_new_tokens"] = r.MaxTokens
	}
	if r.IgnoreEOS {
		params["ignore_eos"] = true
	}
	if r.MinTokens > 0 {
		params["min_new_tokens"] = r.MinTokens
	}
	setSamplingIn(params, r, "")
	body := map[string]any{"text": r.Prompt, "sampling_params": params, "stream": true}
	if t.Model != "" {
		// Routers (sgl-router) pick the model by it; a single server
		// ignores it.
		body["model"] = t.Model
	}
	buf, err := encodeBody(f.Name(), body, r)
	if err != nil {
		return nil, err
	}
	return newNativeRequest(ctx, t, config.RootURL(t.BaseURL)+"/generate", buf, "text/event-stream")
}

func (sglangFlavor) NewDecoder(body io.Reader, header http.Header, maxLineBytes int) Decoder {
	return newFrameDecoder(body, header, maxLineBytes, &sglangParser{}, sseEnd{doneMarker: doneMarker})
}

type sglangFrame struct {
	Text     *string `json:"text"`
	MetaInfo *struct {
		PromptTokens     *int64 `json:"prompt_tokens"`
		CompletionTokens *int64 `json:"completion_tokens"`
		// CachedTokens is read apart: of another type it is absent,
		// as the OpenAI chunk's cached count is (openai_json.go).
		CachedTokens json.RawMessage `json:"cached_tokens"`
	} `json:"meta_info"`
	Object string `json:"object"`
	frameError
}

type sglangParser struct {
	f    sglangFrame
	prev []byte // the previous event's text, to take the new part of a cumulative text
}

func (p *sglangParser) parse(data []byte, c *Chunk) error {
	if err := decodeFrame(data, &p.f); err != nil {
		return err
	}
	f := &p.f
	if f.Object == "error" {
		return &ProtocolError{Msg: "server reported an error: " + excerpt(data)}
	}
	if f.Text != nil {
		text := []byte(*f.Text)
		if bytes.HasPrefix(text, p.prev) {
			c.Content = append(c.Content[:0], text[len(p.prev):]...)
		} else {
			c.Content = append(c.Content[:0], text...) // incremental output
		}
		p.prev = append(p.prev[:0], text...)
	}
	if m := f.MetaInfo; m != nil {
		if n, ok := parseCount(m.CachedTokens); ok {
			c.CachedTokens = n
		}
	}
	if m := f.MetaInfo; m != nil && m.CompletionTokens != nil {
		return c.setUsage("meta_info.completion_tokens", m.CompletionTokens, "meta_info.prompt_tokens", m.PromptTokens)
	}
	return nil
}
