package client

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/url"

	"github.com/infer-exporter/infer_exporter/internal/config"
)

// tritonFlavor speaks the generate extension of Triton Inference Server as
// the TensorRT-LLM backend's ensemble model serves it:
// POST /v2/models/<model>/generate_stream with {"text_input", "max_tokens",
// "stream": true}, answered with SSE events, one per response:
//
//	data: {"model_name":"ensemble","model_version":"1","text_output":" word",...}
//
// With "stream": true each text_output is the new text since the previous
// event. The protocol has no end marker: the response body ending cleanly
// is the end (a body cut by the connection is reported as disconnected,
// because net/http tells the two apart), and the decoder then yields one
// synthetic end frame. The server reports no token counts, so output tokens
// are counted from content events (TokenSource "events"). An error is
// {"error": "..."}.
//
// Target.Model is the model in the path (for TensorRT-LLM usually
// "ensemble"). temperature, top_p and the seed (as "random_seed") are sent
// when set; Triton has no ignore_eos or min_tokens inputs.
type tritonFlavor struct{ facts }

// Triton is POST /v2/models/<model>/generate_stream of Triton Inference
// Server.
var Triton Flavor = tritonFlavor{factsOf("triton")}

// errNoModel is a Triton request without a model for its path.
var errNoModel = errors.New("triton flavor needs the target's model (the path's <model>)")

func (f tritonFlavor) NewRequest(ctx context.Context, t *Target, r *Request) (*http.Request, error) {
	if t.Model == "" {
		return nil, errNoModel
	}
	body := map[string]any{"text_input": r.Prompt, "stream": true}
	if r.MaxTokens > 0 {
		body["max_tokens"] = r.MaxTokens
	}
	setSamplingIn(body, r, "random_seed")
	buf, err := encodeBody(f.Name(), body, r)
	if err != nil {
		return nil, err
	}
	u := config.RootURL(t.BaseURL) + "/v2/models/" + url.PathEscape(t.Model) + "/generate_stream"
	return newNativeRequest(ctx, t, u, buf, "text/event-stream")
}

func (tritonFlavor) NewDecoder(body io.Reader, header http.Header, maxLineBytes int) Decoder {
	return newFrameDecoder(body, header, maxLineBytes, &tritonParser{}, sseEnd{eofIsEnd: true})
}

type tritonFrame struct {
	TextOutput *string `json:"text_output"`
	frameError
}

type tritonParser struct{ f tritonFrame }

func (p *tritonParser) parse(data []byte, c *Chunk) error {
	if err := decodeFrame(data, &p.f); err != nil {
		return err
	}
	if p.f.TextOutput != nil {
		c.Content = append(c.Content[:0], *p.f.TextOutput...)
	}
	return nil
}
