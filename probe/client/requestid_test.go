package client

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/infer-exporter/infer_exporter/probe/observation"
)

// TestRequestIDHeader: a request's id goes out as X-Request-Id, in every
// flavor, so that the server can log it; none is sent without one.
func TestRequestIDHeader(t *testing.T) {
	got := make(chan string, 1)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		got <- r.Header.Get("X-Request-Id")
		w.Header().Set("Content-Type", "text/event-stream")
		_, _ = io.WriteString(w, "data: [DONE]\n\n")
	}))
	defer srv.Close()
	c := New(Options{})
	defer c.Close()
	for _, f := range []Flavor{OpenAIChat, OpenAICompletions, TGI, LlamaCpp, SGLang, Triton} {
		for _, id := range []string{"chat-steady-17", ""} {
			var o observation.Request
			c.Do(context.Background(), &Target{BaseURL: srv.URL, Model: "m", Flavor: f}, &Request{Prompt: "hi", MaxTokens: 1, RequestID: id}, &o)
			if h := <-got; h != id {
				t.Errorf("%s: X-Request-Id %q, want %q", f.Name(), h, id)
			}
		}
	}
}
