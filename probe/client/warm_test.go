package client

import (
	"context"
	"net/http"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/infer-exporter/infer_exporter/probe/observation"
)

// TestWarm: Warm opens n connections, and n requests in flight together
// then take them: the server sees no connection beyond the n, and none is
// left kept.
func TestWarm(t *testing.T) {
	const n = 6
	var opened atomic.Int32
	// Each request is answered once all n have arrived, so that every one
	// needs a connection of its own (none can reuse another's).
	var arrived sync.WaitGroup
	arrived.Add(n)
	stream := streamHandler(chatContent("a"), done)
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		arrived.Done()
		arrived.Wait()
		stream(w, r)
	}))
	countNewConns(srv, &opened)
	srv.Start()
	defer srv.Close()
	c := New(Options{MaxConnsPerHost: 16})
	defer c.Close()
	target := &Target{BaseURL: srv.URL}
	if got := c.Warm(context.Background(), target, n); got != n {
		t.Fatalf("Warm opened %d, want %d", got, n)
	}
	if k := c.stash.kept(); k != n {
		t.Fatalf("%d kept, want %d", k, n)
	}
	var wg sync.WaitGroup
	for range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			obs := observation.Request{}
			c.Do(context.Background(), target, &Request{Prompt: "hi"}, &obs)
			if obs.Outcome != observation.Success {
				t.Errorf("%s %v", obs.Outcome, obs.Err)
			}
		}()
	}
	wg.Wait()
	if got := opened.Load(); got != n {
		t.Errorf("the server saw %d connections for %d warmed and %d requests", got, n, n)
	}
	if k := c.stash.kept(); k != 0 {
		t.Errorf("%d connections still kept after %d requests", k, n)
	}
}

// TestWarmExpires: connections not taken within warmTTL are closed, at the
// next dial or at Close, and Warm is bounded.
func TestWarmExpires(t *testing.T) {
	srv := httptest.NewServer(streamHandler(chatContent("a"), done))
	defer srv.Close()
	c := New(Options{})
	target := &Target{BaseURL: srv.URL}
	if got := c.Warm(context.Background(), target, 3); got != 3 {
		t.Fatalf("Warm opened %d, want 3", got)
	}
	c.stash.expire(time.Now().Add(warmTTL))
	if k := c.stash.kept(); k != 0 {
		t.Errorf("%d kept past warmTTL", k)
	}
	c.Warm(context.Background(), target, 2)
	c.Close()
	if k := c.stash.kept(); k != 0 {
		t.Errorf("%d kept after Close", k)
	}
	if got := New(Options{Transport: http.DefaultTransport}).Warm(context.Background(), target, 3); got != 0 {
		t.Errorf("a client with its own transport warmed %d", got)
	}
	if got := c.Warm(context.Background(), &Target{BaseURL: "http://127.0.0.1:1"}, 2); got != 0 {
		t.Errorf("%d opened to a closed port", got)
	}
}

func TestDialAddr(t *testing.T) {
	for _, tc := range []struct{ url, want string }{
		{"http://127.0.0.1:8000", "127.0.0.1:8000"},
		{"http://vllm", "vllm:80"},
		{"https://vllm/v1", "vllm:443"},
		{"http://[::1]:9", "[::1]:9"},
	} {
		if got, err := dialAddr(tc.url); err != nil || got != tc.want {
			t.Errorf("dialAddr(%q) = %q, %v; want %q", tc.url, got, err, tc.want)
		}
	}
}
