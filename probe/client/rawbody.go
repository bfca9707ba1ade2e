package client

import (
	"bytes"
	"encoding/json"
	"errors"
)

// streamingBody returns a recorded request body (Request.RawBody) ready to be
// measured: "stream": true, "stream_options": {"include_usage": true} (other
// stream options kept) and, when model is not empty, "model": model. A body
// that already says all of that is returned unchanged, byte for byte;
// otherwise it is re-encoded, its other fields' values kept as they were
// (keys then come out sorted).
func streamingBody(body []byte, model string) ([]byte, error) {
	return forceStreaming(body, model, true)
}

// forceStreaming is streamingBody, with "stream_options" left as it is
// unless includeUsage (the Responses API has no include_usage: its usage
// comes with its last event).
func forceStreaming(body []byte, model string, includeUsage bool) ([]byte, error) {
	var m map[string]json.RawMessage
	if err := json.Unmarshal(body, &m); err != nil {
		return nil, err
	}
	if m == nil {
		return nil, errors.New("not a JSON object")
	}
	changed := false
	if !isJSONTrue(m["stream"]) {
		m["stream"] = json.RawMessage("true")
		changed = true
	}
	var opts map[string]json.RawMessage
	if raw, ok := m["stream_options"]; includeUsage && ok && !bytes.Equal(bytes.TrimSpace(raw), []byte("null")) {
		if err := json.Unmarshal(raw, &opts); err != nil {
			return nil, errors.New("stream_options is not a JSON object")
		}
	}
	if includeUsage && !isJSONTrue(opts["include_usage"]) {
		if opts == nil {
			opts = map[string]json.RawMessage{}
		}
		opts["include_usage"] = json.RawMessage("true")
		b, err := json.Marshal(opts)
		if err != nil {
			return nil, err
		}
		m["stream_options"] = b
		changed = true
	}
	if model != "" {
		var cur string
		if raw, ok := m["model"]; !ok || json.Unmarshal(raw, &cur) != nil || cur != model {
			b, err := json.Marshal(model)
			if err != nil {
				return nil, err
			}
			m["model"] = b
			changed = true
		}
	}
	if !changed {
		return body, nil
	}
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false) // keep the prompt's bytes as they were
	if err := enc.Encode(m); err != nil {
		return nil, err
	}
	return bytes.TrimSuffix(buf.Bytes(), []byte("\n")), nil
}

func isJSONTrue(raw json.RawMessage) bool {
	return bytes.Equal(bytes.TrimSpace(raw), []byte("true"))
}
