package client

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
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

// TestDialOption: Options.Dial opens every connection of the client's own
// transports, h1's and net/http's alike, so that a caller's dialer (the
// /probe allow list) sees each one.
func TestDialOption(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		fmt.Fprint(w, "data: {\"choices\":[{\"delta\":{\"content\":\"t\"}}]}\n\ndata: [DONE]\n\n")
	}))
	defer srv.Close()
	for _, wire := range []string{WireH1, WireNetHTTP} {
		t.Run(wire, func(t *testing.T) {
			var dials atomic.Int32
			dial := func(ctx context.Context, network, addr string) (net.Conn, error) {
				dials.Add(1)
				return (&net.Dialer{}).DialContext(ctx, network, addr)
			}
			c := New(Options{Wire: wire, Dial: dial})
			defer c.Close()
			target := &Target{Name: "t", BaseURL: srv.URL}
			var obs observation.Request
			c.Do(context.Background(), target, &Request{Prompt: "p", MaxTokens: 1}, &obs)
			if obs.Outcome != observation.Success {
				t.Fatalf("outcome %s, err %v", obs.Outcome, obs.Err)
			}
			if dials.Load() == 0 {
				t.Fatalf("%s did not dial through Options.Dial", c.TransportName(target))
			}
			// /v1/models goes through net/http whatever the wire.
			c.Close()
			before := dials.Load()
			c.Models(context.Background(), target)
			if dials.Load() == before {
				t.Errorf("/v1/models did not dial through Options.Dial")
			}
			refused := New(Options{Wire: wire, Dial: func(context.Context, string, string) (net.Conn, error) {
				return nil, errors.New("refused")
			}})
			defer refused.Close()
			obs = observation.Request{}
			refused.Do(context.Background(), target, &Request{Prompt: "p", MaxTokens: 1}, &obs)
			if obs.Outcome != observation.Disconnected {
				t.Errorf("a refused dial: outcome %s, want disconnected", obs.Outcome)
			}
		})
	}
}
