package client

import (
	"context"
	"encoding/json"
	"io"
	"testing"
)

// TestRawBody: a recorded body is sent as it is when it already streams
// with usage for the target's model, and otherwise gets exactly those
// fields forced, everything else kept.
func TestRawBody(t *testing.T) {
	for _, tc := range []struct {
		name, model, body string
		same              bool   // sent byte for byte
		want              string // otherwise, the JSON sent (compared as JSON)
	}{
		{"already measurable", "m", `{"model":"m","messages":[{"role":"user","content":"<b>hi</b>"}],"stream":true,"stream_options":{"include_usage":true},"max_tokens":5}`, true, ""},
		{"no model to force", "", `{"model":"prod","prompt":"x","stream":true,"stream_options":{"include_usage":true,"continuous_usage_stats":true}}`, true, ""},
		{"not streamed", "m", `{"model":"m","prompt":"x & y","max_tokens":3}`, false,
			`{"model":"m","prompt":"x & y","max_tokens":3,"stream":true,"stream_options":{"include_usage":true}}`},
		{"other stream options kept", "m", `{"model":"m","prompt":"x","stream":true,"stream_options":{"continuous_usage_stats":true}}`, false,
			`{"model":"m","prompt":"x","stream":true,"stream_options":{"continuous_usage_stats":true,"include_usage":true}}`},
		{"production model name", "sim", `{"model":"prod-70b","prompt":"x","stream":true,"stream_options":{"include_usage":true},"temperature":0.7}`, false,
			`{"model":"sim","prompt":"x","stream":true,"stream_options":{"include_usage":true},"temperature":0.7}`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			req, err := OpenAIChat.NewRequest(context.Background(), &Target{BaseURL: "http://127.0.0.1:1", Model: tc.model},
				&Request{RawBody: []byte(tc.body), Prompt: "ignored", MaxTokens: 99, Extra: map[string]any{"ignored": true}})
			if err != nil {
				t.Fatal(err)
			}
			got, _ := io.ReadAll(req.Body)
			if req.URL.Path != "/v1/chat/completions" || req.Header.Get("Content-Type") != "application/json" {
				t.Errorf("request %s %v", req.URL, req.Header)
			}
			if tc.same {
				if string(got) != tc.body {
					t.Errorf("sent %s, want the body unchanged: %s", got, tc.body)
				}
				return
			}
			var g, w any
			if err := json.Unmarshal(got, &g); err != nil {
				t.Fatalf("sent %s: %v", got, err)
			}
			json.Unmarshal([]byte(tc.want), &w)
			gb, _ := json.Marshal(g)
			wb, _ := json.Marshal(w)
			if string(gb) != string(wb) {
				t.Errorf("sent %s, want %s", got, tc.want)
			}
		})
	}
	for _, bad := range []string{`[1]`, `null`, `{"stream_options": 3}`, `{`} {
		if _, err := OpenAICompletions.NewRequest(context.Background(), &Target{BaseURL: "http://127.0.0.1:1"}, &Request{RawBody: []byte(bad)}); err == nil {
			t.Errorf("%s: no error", bad)
		}
	}
}
