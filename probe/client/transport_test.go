package client

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/infer-exporter/infer_exporter/probe/observation"
)

// TestTransportChoice: the client's transport by Options and target, and
// a stream read through each.
func TestTransportChoice(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		for i := range 3 {
			fmt.Fprintf(w, "data: {\"choices\":[{\"delta\":{\"content\":\"t%d\"}}]}\n\n", i)
			w.(http.Flusher).Flush()
		}
		fmt.Fprint(w, "data: [DONE]\n\n")
	}))
	defer srv.Close()
	t.Logf("default transport: %s", defaultWire)
	for _, tc := range []struct {
		name string
		opts Options
		want string
	}{
		{"default", Options{}, defaultWire},
		{"h1", Options{Wire: WireH1}, WireH1},
		{"net/http", Options{Wire: WireNetHTTP}, WireNetHTTP},
		{"custom", Options{Wire: WireH1, Transport: http.DefaultTransport.(*http.Transport).Clone()}, WireCustom},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := New(tc.opts)
			defer c.Close()
			target := &Target{Name: "t", BaseURL: srv.URL}
			if got := c.TransportName(target); got != tc.want {
				t.Fatalf("transport %q, want %q", got, tc.want)
			}
			for range 2 {
				var obs observation.Request
				c.Do(context.Background(), target, &Request{Prompt: "p", MaxTokens: 3}, &obs)
				if obs.Outcome != observation.Success || obs.ContentEvents != 3 {
					t.Fatalf("outcome %s, %d events, err %v", obs.Outcome, obs.ContentEvents, obs.Err)
				}
			}
		})
	}
	if got := New(Options{Wire: WireH1}).TransportName(&Target{BaseURL: "unix:///run/x.sock"}); got != WireNetHTTP {
		t.Fatalf("a URL h1 does not send to: %q, want net/http", got)
	}
}
