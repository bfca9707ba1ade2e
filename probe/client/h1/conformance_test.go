package h1

import (
	"bufio"
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// The conformance suite: every case runs against net/http's Transport,
// set up as the exporter's client sets it up, and against this package's,
// and both must read the same. A case is a server that writes raw bytes
// after reading each request.

// transports are the two under test.
func transports(tlsCfg *tls.Config) map[string]http.RoundTripper {
	return map[string]http.RoundTripper{
		"net/http": &http.Transport{
			Proxy: nil, DisableCompression: true, MaxIdleConnsPerHost: 64,
			ReadBufferSize: 1 << 10, WriteBufferSize: 1 << 10,
			MaxResponseHeaderBytes: DefaultMaxHeaderBytes, TLSClientConfig: tlsCfg,
		},
		"h1": New(Options{TLS: tlsCfg}),
	}
}

type closeIdler interface{ CloseIdleConnections() }

// rawServer accepts connections and, for each request read on one, calls
// script with the connection and the request's number on it (0 first); the
// connection is closed when script returns false.
type rawServer struct {
	ln      net.Listener
	accepts atomic.Int64
	wg      sync.WaitGroup
}

func newRawServer(t *testing.T, script func(c net.Conn, req *http.Request, n int) bool) *rawServer {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s := &rawServer{ln: ln}
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			s.accepts.Add(1)
			s.wg.Add(1)
			go func() {
				defer s.wg.Done()
				defer c.Close()
				br := bufio.NewReader(c)
				for n := 0; ; n++ {
					req, err := http.ReadRequest(br)
					if err != nil {
						return
					}
					_, _ = io.Copy(io.Discard, req.Body)
					if !script(c, req, n) {
						return
					}
				}
			}()
		}
	}()
	t.Cleanup(func() {
		ln.Close()
		s.wg.Wait()
	})
	return s
}

func (s *rawServer) url() string { return "http://" + s.ln.Addr().String() + "/v1/chat/completions" }

// post sends one streamed-style POST and reads its whole body.
func post(ctx context.Context, rt http.RoundTripper, url string) (status int, body string, err error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, bytes.NewBufferString(`{"stream":true}`))
	if err != nil {
		return 0, "", err
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := rt.RoundTrip(req)
	if err != nil {
		return 0, "", err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b), err
}

func TestConformance(t *testing.T) {
	writes := func(parts ...string) func(net.Conn, *http.Request, int) bool {
		return func(c net.Conn, _ *http.Request, _ int) bool {
			for _, p := range parts {
				if _, err := io.WriteString(c, p); err != nil {
					return false
				}
			}
			return true
		}
	}
	closes := func(parts ...string) func(net.Conn, *http.Request, int) bool {
		w := writes(parts...)
		return func(c net.Conn, r *http.Request, n int) bool {
			w(c, r, n)
			return false
		}
	}
	cases := []struct {
		name   string
		script func(net.Conn, *http.Request, int) bool
		status int
		body   string
		err    bool // the body's read (or the round trip) fails
		// accepts is how many connections two requests in a row take
		// (2: the first was not reused); 0: not checked.
		accepts int64
	}{
		{name: "content-length", script: writes("HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nhello"), status: 200, body: "hello", accepts: 1},
		{name: "chunked with extensions and trailers", script: writes(
			"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\nContent-Type: text/event-stream\r\n\r\n",
			"5;ext=1\r\nhello\r\n", "6;a;b=\"c d\"\r\n world\r\n", "0;last\r\nX-Trailer: t\r\nX-Other: u\r\n\r\n"),
			status: 200, body: "hello world", accepts: 1},
		{name: "chunked upper-case hex", script: writes("HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nA\r\n0123456789\r\n0\r\n\r\n"), status: 200, body: "0123456789", accepts: 1},
		{name: "body to the close", script: closes("HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\n\r\ndata: a\n\ndata: b\n\n"), status: 200, body: "data: a\n\ndata: b\n\n", accepts: 2},
		{name: "HTTP/1.0 without length", script: closes("HTTP/1.0 200 OK\r\n\r\nold"), status: 200, body: "old", accepts: 2},
		{name: "HTTP/1.0 keep-alive", script: writes("HTTP/1.0 200 OK\r\nConnection: keep-alive\r\nContent-Length: 3\r\n\r\nold"), status: 200, body: "old", accepts: 1},
		{name: "connection close header", script: closes("HTTP/1.1 200 OK\r\nConnection: close\r\nContent-Length: 2\r\n\r\nok"), status: 200, body: "ok", accepts: 2},
		{name: "closed mid-chunk", script: closes("HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n9\r\npart"), status: 200, body: "hellopart", err: true},
		{name: "closed between chunks", script: closes("HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n"), status: 200, body: "hello", err: true},
		{name: "closed mid-length", script: closes("HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\nhello"), status: 200, body: "hello", err: true},
		{name: "closed before an answer", script: closes(), err: true},
		{name: "closed mid-head", script: closes("HTTP/1.1 200 OK\r\nContent-Le"), err: true},
		{name: "1xx skipped", script: writes("HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 103 Early Hints\r\nLink: </a>; rel=preload\r\n\r\nHTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok"), status: 200, body: "ok", accepts: 1},
		// Interim answers are bounded by the head's byte budget, not
		// counted: 1,000 of them (19 KB) and then the answer are read
		// alike by both; as many as overflow the budget are refused by both.
		{name: "1000 interim answers", script: writes(strings.Repeat("HTTP/1.1 100 Continue\r\n\r\n", 1000) + "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok"), status: 200, body: "ok", accepts: 1},
		{name: "interim answers past the head budget", script: closes(strings.Repeat("HTTP/1.1 100 Continue\r\n\r\n", DefaultMaxHeaderBytes/25+1) + "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok"), err: true},
		// Forbidden bytes in a field value (RFC 9110 section 5.5):
		// refused by both, not passed on.
		{name: "NUL in a header value", script: closes("HTTP/1.1 200 OK\r\nX-A: a\x00b\r\nContent-Length: 2\r\n\r\nok"), err: true},
		{name: "bare CR in a header value", script: closes("HTTP/1.1 200 OK\r\nX-A: a\rb\r\nContent-Length: 2\r\n\r\nok"), err: true},
		{name: "control byte in a header value", script: closes("HTTP/1.1 200 OK\r\nX-A: a\x01b\r\nContent-Length: 2\r\n\r\nok"), err: true},
		{name: "DEL in a header value", script: closes("HTTP/1.1 200 OK\r\nX-A: a\x7fb\r\nContent-Length: 2\r\n\r\nok"), err: true},
		{name: "NUL in a trailer value", script: closes("HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n2\r\nok\r\n0\r\nX-T: a\x00b\r\n\r\n"), status: 200, body: "ok", err: true},
		{name: "malformed trailer line", script: closes("HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n2\r\nok\r\n0\r\nno colon here\r\n\r\n"), status: 200, body: "ok", err: true},
		{name: "tab and obs-text in a header value", script: writes("HTTP/1.1 200 OK\r\nX-A: a\tb\xe9\r\nContent-Length: 2\r\n\r\nok"), status: 200, body: "ok", accepts: 1},
		{name: "204 has no body", script: writes("HTTP/1.1 204 No Content\r\n\r\n"), status: 204, body: "", accepts: 1},
		{name: "304 has no body despite a length", script: writes("HTTP/1.1 304 Not Modified\r\nContent-Length: 10\r\n\r\n"), status: 304, body: "", accepts: 1},
		{name: "error status with body", script: writes("HTTP/1.1 503 Service Unavailable\r\nContent-Length: 4\r\n\r\nbusy"), status: 503, body: "busy", accepts: 1},
		// Reuse not checked: net/http keeps that connection; this
		// package closes it, as RFC 9112 section 6.3 asks of a message
		// framed two ways.
		{name: "chunked beside a length", script: writes("HTTP/1.1 200 OK\r\nContent-Length: 100\r\nTransfer-Encoding: chunked\r\n\r\n2\r\nok\r\n0\r\n\r\n"), status: 200, body: "ok"},
		{name: "conflicting lengths", script: writes("HTTP/1.1 200 OK\r\nContent-Length: 2\r\nContent-Length: 3\r\n\r\nok"), err: true},
		{name: "unsupported transfer encoding", script: writes("HTTP/1.1 200 OK\r\nTransfer-Encoding: gzip, chunked\r\n\r\n0\r\n\r\n"), err: true},
		{name: "malformed status line", script: closes("HTTP/1.1 2OO OK\r\n\r\n"), err: true},
		{name: "not HTTP", script: closes("SSH-2.0-OpenSSH_9.6\r\n"), err: true},
		{name: "malformed chunk size", script: closes("HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\nhello\r\n"), status: 200, err: true},
		{name: "no CRLF after chunk data", script: closes("HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n2\r\nokXX0\r\n\r\n"), status: 200, body: "ok", err: true},
		{name: "oversized chunk line", script: closes("HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5;" + strings.Repeat("x", 5000) + "\r\nhello\r\n0\r\n\r\n"), status: 200, err: true},
		{name: "oversized header", script: closes("HTTP/1.1 200 OK\r\nX-Big: " + strings.Repeat("y", 2<<20) + "\r\nContent-Length: 2\r\n\r\nok"), err: true},
		{name: "101 unasked", script: closes("HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\n\r\n"), status: 101},
		{name: "slow head", script: func(c net.Conn, _ *http.Request, _ int) bool {
			for _, b := range []byte("HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nContent-Length: 4\r\n\r\nslow") {
				if _, err := c.Write([]byte{b}); err != nil {
					return false
				}
				time.Sleep(200 * time.Microsecond)
			}
			return true
		}, status: 200, body: "slow", accepts: 1},
	}
	for _, tc := range cases {
		for name, rt := range transports(nil) {
			t.Run(tc.name+"/"+name, func(t *testing.T) {
				srv := newRawServer(t, tc.script)
				defer rt.(closeIdler).CloseIdleConnections()
				ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
				defer cancel()
				status, body, err := post(ctx, rt, srv.url())
				if (err != nil) != tc.err {
					t.Fatalf("error %v, want error %v", err, tc.err)
				}
				if status != tc.status || body != tc.body {
					t.Fatalf("got %d %q, want %d %q", status, body, tc.status, tc.body)
				}
				if tc.accepts == 0 {
					return
				}
				if status, body, err := post(ctx, rt, srv.url()); err != nil || status != tc.status || body != tc.body {
					t.Fatalf("second request: %d %q %v", status, body, err)
				}
				if got := srv.accepts.Load(); got != tc.accepts {
					t.Fatalf("two requests took %d connections, want %d", got, tc.accepts)
				}
			})
		}
	}
}

// A server's keep-alive limits: it closes an idle connection after a
// while, or after some requests, without saying so. The next request must
// go on a new connection, not fail.
func TestConformanceServerClosesIdle(t *testing.T) {
	for _, limit := range []string{"idle timeout", "max requests"} {
		for name, rt := range transports(nil) {
			t.Run(limit+"/"+name, func(t *testing.T) {
				srv := newRawServer(t, func(c net.Conn, _ *http.Request, n int) bool {
					_, _ = io.WriteString(c, "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok")
					if limit == "idle timeout" {
						time.Sleep(20 * time.Millisecond)
						return false
					}
					return n < 1 // two requests a connection, then a silent close
				})
				defer rt.(closeIdler).CloseIdleConnections()
				for i := range 5 {
					_, body, err := post(context.Background(), rt, srv.url())
					if err != nil || body != "ok" {
						t.Fatalf("request %d: %q %v", i, body, err)
					}
					time.Sleep(50 * time.Millisecond)
				}
			})
		}
	}
}

// Each chunk is read as soon as it arrives, not when more follows: the
// server sends the next only after the client has read the last.
func TestConformanceStreamsEachChunk(t *testing.T) {
	for _, framing := range []string{"chunked", "close"} {
		for name, rt := range transports(nil) {
			t.Run(framing+"/"+name, func(t *testing.T) {
				next := make(chan struct{})
				srv := newRawServer(t, func(c net.Conn, _ *http.Request, _ int) bool {
					head := "HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nTransfer-Encoding: chunked\r\n\r\n"
					if framing == "close" {
						head = "HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\n\r\n"
					}
					_, _ = io.WriteString(c, head)
					for i := range 3 {
						ev := fmt.Sprintf("data: %d\n\n", i)
						if framing == "chunked" {
							ev = fmt.Sprintf("%x\r\n%s\r\n", len(ev), ev)
						}
						_, _ = io.WriteString(c, ev)
						select {
						case <-next:
						case <-time.After(5 * time.Second):
							return false
						}
					}
					if framing == "chunked" {
						_, _ = io.WriteString(c, "0\r\n\r\n")
					}
					return framing == "chunked"
				})
				defer rt.(closeIdler).CloseIdleConnections()
				req, _ := http.NewRequest(http.MethodPost, srv.url(), strings.NewReader("{}"))
				resp, err := rt.RoundTrip(req)
				if err != nil {
					t.Fatal(err)
				}
				defer resp.Body.Close()
				buf := make([]byte, 1024)
				for i := range 3 {
					n, err := resp.Body.Read(buf)
					if want := fmt.Sprintf("data: %d\n\n", i); string(buf[:n]) != want || err != nil {
						t.Fatalf("read %d: %q %v, want %q", i, buf[:n], err, want)
					}
					next <- struct{}{}
				}
				if rest, err := io.ReadAll(resp.Body); len(rest) != 0 || err != nil {
					t.Fatalf("after the events: %q %v", rest, err)
				}
			})
		}
	}
}

// The context ends a request wherever it is: waiting for the head, or
// blocked in a body's read.
func TestConformanceContext(t *testing.T) {
	for _, where := range []string{"head", "body"} {
		for name, rt := range transports(nil) {
			t.Run(where+"/"+name, func(t *testing.T) {
				release := make(chan struct{})
				defer close(release)
				srv := newRawServer(t, func(c net.Conn, _ *http.Request, _ int) bool {
					if where == "body" {
						_, _ = io.WriteString(c, "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n2\r\nok\r\n")
					}
					<-release
					return false
				})
				defer rt.(closeIdler).CloseIdleConnections()
				ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
				defer cancel()
				_, body, err := post(ctx, rt, srv.url())
				if !errors.Is(err, context.DeadlineExceeded) {
					t.Fatalf("error %v (body %q), want the deadline", err, body)
				}
				if where == "body" && body != "ok" {
					t.Fatalf("body %q before the deadline, want ok", body)
				}
			})
		}
	}
}

// TLS through crypto/tls: a streamed answer over https, and the
// connection reused.
func TestConformanceTLS(t *testing.T) {
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", "text/event-stream")
		for i := range 3 {
			fmt.Fprintf(w, "data: %d\n\n", i)
			w.(http.Flusher).Flush()
		}
	}))
	var conns atomic.Int64
	srv.Config.ConnState = func(_ net.Conn, s http.ConnState) {
		if s == http.StateNew {
			conns.Add(1)
		}
	}
	srv.StartTLS()
	defer srv.Close()
	pool := x509.NewCertPool()
	pool.AddCert(srv.Certificate())
	for name, rt := range transports(&tls.Config{RootCAs: pool}) {
		t.Run(name, func(t *testing.T) {
			conns.Store(0)
			defer rt.(closeIdler).CloseIdleConnections()
			for range 2 {
				status, body, err := post(context.Background(), rt, srv.URL+"/v1/chat/completions")
				if err != nil || status != 200 || body != "data: 0\n\ndata: 1\n\ndata: 2\n\n" {
					t.Fatalf("%d %q %v", status, body, err)
				}
			}
			if n := conns.Load(); n != 1 {
				t.Fatalf("two requests took %d connections", n)
			}
		})
	}
	// An untrusted certificate is refused.
	if _, _, err := post(context.Background(), New(Options{}), srv.URL); err == nil {
		t.Fatal("a certificate nobody trusts was accepted")
	}
}

// The request goes out as net/http would write it: the head's fields, the
// body and its length, in one write when it is small.
func TestRequestWritten(t *testing.T) {
	got := make(chan *http.Request, 1)
	srv := newRawServer(t, func(c net.Conn, r *http.Request, _ int) bool {
		got <- r
		_, _ = io.WriteString(c, "HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n")
		return true
	})
	rt := New(Options{})
	defer rt.CloseIdleConnections()
	body := strings.Repeat("p", 40<<10) // over oneWrite: a vectored write
	req, _ := http.NewRequest(http.MethodPost, srv.url()+"?a=b", bytes.NewBufferString(body))
	req.Header.Set("Authorization", "Bearer k")
	req.Header.Set("X-Request-Id", "r1")
	req.Host = "example.test"
	resp, err := rt.RoundTrip(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	r := <-got
	if r.Method != "POST" || r.RequestURI != "/v1/chat/completions?a=b" || r.Host != "example.test" ||
		r.Header.Get("Authorization") != "Bearer k" || r.Header.Get("X-Request-Id") != "r1" || r.ContentLength != int64(len(body)) {
		t.Fatalf("request read as %s %s host %q headers %v length %d", r.Method, r.RequestURI, r.Host, r.Header, r.ContentLength)
	}
	bad, _ := http.NewRequest(http.MethodPost, srv.url(), nil)
	bad.Header.Set("X-Split", "a\r\nInjected: yes")
	if _, err := rt.RoundTrip(bad); err == nil {
		t.Fatal("a header with a line break was written")
	}
}

// Idle connections past the idle timeout are closed when the pool is next
// used (taken from: newest first; given back to: oldest first), never
// handed out.
func TestIdleConnectionsExpire(t *testing.T) {
	srv := newRawServer(t, func(c net.Conn, _ *http.Request, _ int) bool {
		_, _ = io.WriteString(c, "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok")
		return true
	})
	rt := New(Options{IdleTimeout: 50 * time.Millisecond})
	defer rt.CloseIdleConnections()
	// Two requests at once: two connections, both idle after.
	var wg sync.WaitGroup
	for range 2 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if _, body, err := post(context.Background(), rt, srv.url()); err != nil || body != "ok" {
				t.Errorf("%q %v", body, err)
			}
		}()
	}
	wg.Wait()
	time.Sleep(100 * time.Millisecond)
	if _, _, err := post(context.Background(), rt, srv.url()); err != nil {
		t.Fatal(err)
	}
	v, _ := rt.pools.Load(poolKey{addr: srv.ln.Addr().String()})
	p := v.(*pool)
	p.mu.Lock()
	n := len(p.idle)
	p.mu.Unlock()
	if n != 1 {
		t.Fatalf("%d idle connections kept, want 1 (the two expired ones closed)", n)
	}
}
