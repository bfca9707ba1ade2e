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

// TestTraceparentHeader: a request's trace context goes out as a W3C
// traceparent, sampled or not, and its observation carries it with the
// request id; none is sent without one.
func TestTraceparentHeader(t *testing.T) {
	got := make(chan string, 1)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		got <- r.Header.Get("traceparent")
		w.Header().Set("Content-Type", "text/event-stream")
		_, _ = io.WriteString(w, "data: [DONE]\n\n")
	}))
	defer srv.Close()
	c := New(Options{})
	defer c.Close()
	tr := observation.Trace{TraceID: [16]byte{1, 2, 3}, SpanID: [8]byte{9}}
	for _, tc := range []struct {
		name  string
		trace observation.Trace
		want  string
	}{
		{"not sampled", tr, "00-01020300000000000000000000000000-0900000000000000-00"},
		{"sampled", observation.Trace{TraceID: tr.TraceID, SpanID: tr.SpanID, Sampled: true}, "00-01020300000000000000000000000000-0900000000000000-01"},
		{"none", observation.Trace{}, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var o observation.Request
			c.Do(context.Background(), &Target{BaseURL: srv.URL, Model: "m"}, &Request{Prompt: "hi", MaxTokens: 1, RequestID: "w-1", Trace: tc.trace}, &o)
			if h := <-got; h != tc.want {
				t.Errorf("traceparent %q, want %q", h, tc.want)
			}
			if o.Trace != tc.trace || o.RequestID != "w-1" {
				t.Errorf("observation carries %+v %q, want %+v w-1", o.Trace, o.RequestID, tc.trace)
			}
		})
	}
}
