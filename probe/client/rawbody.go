package client

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/infer-exporter/infer_exporter/internal/config"
)

// recordedBody is r's recorded body (Request.RawBody) as flavor f sends
// it: made to stream (forceStreaming), for t's model.
func recordedBody(f Flavor, t *Target, r *Request, includeUsage bool) (*body, error) {
	raw, maxTokens, err := forceStreaming(r.RawBody, t.Model, includeUsage)
	if err != nil {
		return nil, fmt.Errorf("%s raw request body: %w", f.Name(), err)
	}
	r.rawSent, r.rawMaxTokens = true, maxTokens
	return oneBody(raw), nil
}

// forceStreaming returns a recorded request body (Request.RawBody) ready
// to be measured: "stream": true, with includeUsage "stream_options":
// {"include_usage": true} (other stream options kept; the Responses API
// has no include_usage: its usage comes with its last event), and, when
// model is not empty, "model": model. A body that already says all of
// that is returned unchanged, byte for byte; otherwise it is re-encoded,
// its other fields' values kept as they were (keys then come out sorted).
// It also returns the output tokens the body asks for at most
// (bodyMaxTokens).
func forceStreaming(body []byte, model string, includeUsage bool) ([]byte, int, error) {
	var m map[string]json.RawMessage
	if err := json.Unmarshal(body, &m); err != nil {
		return nil, 0, err
	}
	if m == nil {
		return nil, 0, errors.New("not a JSON object")
	}
	maxTokens := bodyMaxTokens(m)
	changed := false
	if !isJSONTrue(m["stream"]) {
		m["stream"] = json.RawMessage("true")
		changed = true
	}
	var opts map[string]json.RawMessage
	if raw, ok := m["stream_options"]; includeUsage && ok && !bytes.Equal(bytes.TrimSpace(raw), []byte("null")) {
		if err := json.Unmarshal(raw, &opts); err != nil {
			return nil, 0, errors.New("stream_options is not a JSON object")
		}
	}
	if includeUsage && !isJSONTrue(opts["include_usage"]) {
		if opts == nil {
			opts = map[string]json.RawMessage{}
		}
		opts["include_usage"] = json.RawMessage("true")
		b, err := json.Marshal(opts)
		if err != nil {
			return nil, 0, err
		}
		m["stream_options"] = b
		changed = true
	}
	if model != "" {
		var cur string
		if raw, ok := m["model"]; !ok || json.Unmarshal(raw, &cur) != nil || cur != model {
			b, err := json.Marshal(model)
			if err != nil {
				return nil, 0, err
			}
			m["model"] = b
			changed = true
		}
	}
	if !changed {
		return body, maxTokens, nil
	}
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false) // keep the prompt's bytes as they were
	if err := enc.Encode(m); err != nil {
		return nil, 0, err
	}
	return bytes.TrimSuffix(buf.Bytes(), []byte("\n")), maxTokens, nil
}

// bodyMaxTokens is the cap on output tokens a recorded body asks for, 0
// when it asks for none (or not as a positive integer): its
// max_completion_tokens, which OpenAI's API and vLLM take before
// max_tokens; else the first of the OpenAI APIs' cap members it has
// (config.BodyMaxTokensMembers: max_tokens, the Responses API's
// max_output_tokens). A server's usage count above it is not believed, as
// above a built request's max_tokens (UsageBelievable).
func bodyMaxTokens(m map[string]json.RawMessage) int {
	for _, key := range bodyCapMembers {
		var n int
		if raw, ok := m[key]; ok && json.Unmarshal(raw, &n) == nil && n > 0 {
			return n
		}
	}
	return 0
}

// bodyCapMembers are the members bodyMaxTokens reads, in its order; read
// only.
var bodyCapMembers = append([]string{"max_completion_tokens"}, config.BodyMaxTokensMembers()...)

func isJSONTrue(raw json.RawMessage) bool {
	return bytes.Equal(bytes.TrimSpace(raw), []byte("true"))
}
