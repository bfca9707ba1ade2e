package client

import (
	"context"
	"io"
	"net/http"

	"github.com/infer-exporter/infer_exporter/internal/config"
)

// llamaCppFlavor speaks llama.cpp's native completion API: POST /completion
// with {"prompt", "n_predict", "stream": true}, answered with SSE events
//
//	data: {"content":" word","stop":false,...}
//
// ending with an event whose "stop" is true, which carries the server's
// counts: "tokens_predicted" (output) and "tokens_evaluated" (prompt), also
// in "timings" (predicted_n, prompt_n; prompt_n excludes tokens reused from
// the cache, so tokens_evaluated is preferred), beside the server's own
// prompt_ms and predicted_ms (ServerTimings). That event is the end
// marker; a "data: [DONE]" is accepted too. An error is {"error": {...}}.
//
// ignore_eos is sent when set (llama.cpp honours it); min_tokens is not (no
// such option).
type llamaCppFlavor struct{ facts }

// LlamaCpp is POST /completion of the llama.cpp server.
var LlamaCpp Flavor = llamaCppFlavor{factsOf("llamacpp")}

func (f llamaCppFlavor) NewRequest(ctx context.Context, t *Target, r *Request) (*http.Request, error) {
	body := map[string]any{"prompt": r.Prompt, "stream": true}
	if t.Model != "" {
		// A single-model llama-server ignores it; a router (llama-swap,
		// the server's multi-model mode) picks the model by it.
		body["model"] = t.Model
	}
	if r.MaxTokens > 0 {
		body["n_predict"] = r.MaxTokens
	}
	if r.IgnoreEOS {
		body["ignore_eos"] = true
	}
	setSamplingIn(body, r, "seed")
	buf, err := encodeBody(f.Name(), body, r)
	if err != nil {
		return nil, err
	}
	return newNativeRequest(ctx, t, config.RootURL(t.BaseURL)+"/completion", buf, "text/event-stream")
}

func (llamaCppFlavor) NewDecoder(body io.Reader, header http.Header, maxLineBytes int) Decoder {
	return newFrameDecoder(body, header, maxLineBytes, &llamaCppParser{}, sseEnd{doneMarker: doneMarker})
}

type llamaCppFrame struct {
	Content         *string `json:"content"`
	Stop            bool    `json:"stop"`
	TokensPredicted *int64  `json:"tokens_predicted"`
	TokensEvaluated *int64  `json:"tokens_evaluated"`
	// Timings also carries the server's own prompt_ms and predicted_ms
	// (timings.go).
	Timings *llamaTimings `json:"timings"`
	frameError
}

type llamaCppParser struct{ f llamaCppFrame }

func (p *llamaCppParser) parse(data []byte, c *Chunk) error {
	if err := decodeFrame(data, &p.f); err != nil {
		return err
	}
	f := &p.f
	if f.Content != nil {
		c.Content = append(c.Content[:0], *f.Content...)
	}
	if !f.Stop {
		// Intermediate events carry running counts in some versions; only
		// the final event's are the request's.
		return nil
	}
	c.Done = true
	out, prompt := f.TokensPredicted, f.TokensEvaluated
	if f.Timings != nil {
		c.Server = f.Timings.server()
		if out == nil {
			out = f.Timings.PredictedN
		}
		if prompt == nil {
			prompt = f.Timings.PromptN
		}
	}
	if out != nil {
		return c.setUsage("tokens_predicted", out, "tokens_evaluated", prompt)
	}
	return nil
}
