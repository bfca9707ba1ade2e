package client

import (
	"context"
	"io"
	"net/http"

	"github.com/infer-exporter/infer_exporter/internal/config"
	"github.com/infer-exporter/infer_exporter/probe/observation"
)

// tgiFlavor speaks Text Generation Inference's native streaming API:
// POST /generate_stream with {"inputs", "parameters"}, answered with SSE
// events, one per token:
//
//	data:{"index":1,"token":{"id":9509,"text":" Deep","logprob":-0.5,"special":false},"generated_text":null,"details":null}
//
// The last event carries the whole "generated_text" (non-null) and, because
// the request asks for "details", the server's counts in
// details.generated_tokens (and, in TGI 2 and later, details.prompt_tokens).
// TGI sends no "[DONE]": the event with generated_text is the end marker.
// A special token (the final EOS, "special": true) is a generated token that
// the server counts but that carries no answer text, so it is not a content
// event. An error is {"error": "...", "error_type": "..."}.
//
// TGI has no ignore_eos or min_tokens; they are not sent. The seed goes in
// parameters.seed.
type tgiFlavor struct{ facts }

// TGI is POST /generate_stream of Text Generation Inference.
var TGI Flavor = tgiFlavor{factsOf("tgi")}

func (f tgiFlavor) NewRequest(ctx context.Context, t *Target, r *Request) (*http.Request, error) {
	params := map[string]any{"details": true}
	if r.MaxTokens > 0 {
		params["max_new_tokens"] = r.MaxTokens
	}
	setSamplingIn(params, r, "seed")
	body := map[string]any{"inputs": r.Prompt, "parameters": params, "stream": true}
	buf, err := encodeBody(f.Name(), body, r)
	if err != nil {
		return nil, err
	}
	return newNativeRequest(ctx, t, config.RootURL(t.BaseURL)+"/generate_stream", buf, "text/event-stream")
}

func (tgiFlavor) NewDecoder(body io.Reader, header http.Header, maxLineBytes int) Decoder {
	return newFrameDecoder(body, header, maxLineBytes, &tgiParser{headers: tgiTimings(header)}, sseEnd{})
}

type tgiFrame struct {
	Token *struct {
		Text    *string `json:"text"`
		Special bool    `json:"special"`
	} `json:"token"`
	GeneratedText *string `json:"generated_text"`
	Details       *struct {
		GeneratedTokens *int64 `json:"generated_tokens"`
		PromptTokens    *int64 `json:"prompt_tokens"`
		InputLength     *int64 `json:"input_length"`
	} `json:"details"`
	frameError
}

type tgiParser struct {
	f tgiFrame
	// headers are the answer's timing headers, the request's timings,
	// given with its last frame.
	headers observation.ServerTimings
}

func (p *tgiParser) parse(data []byte, c *Chunk) error {
	if err := decodeFrame(data, &p.f); err != nil {
		return err
	}
	f := &p.f
	switch {
	case f.Token != nil:
		if f.Token.Text != nil && !f.Token.Special {
			c.Content = append(c.Content[:0], *f.Token.Text...)
		}
	case f.GeneratedText != nil:
		// No token, only the whole text: a body that was not streamed
		// (every event of a stream carries its token).
		c.Content = append(c.Content[:0], *f.GeneratedText...)
	}
	if d := f.Details; d != nil && d.GeneratedTokens != nil {
		prompt := d.PromptTokens
		if prompt == nil {
			prompt = d.InputLength
		}
		if err := c.setUsage("details.generated_tokens", d.GeneratedTokens, "details.prompt_tokens", prompt); err != nil {
			return err
		}
	}
	c.Done = f.GeneratedText != nil
	if c.Done {
		c.Server = p.headers
	}
	return nil
}
