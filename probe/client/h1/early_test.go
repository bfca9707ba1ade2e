package h1

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// earlyBody is a prompt large enough that its write blocks on the socket
// buffers of a server that stops reading (loopback's receive buffer stays at
// its 128 KiB default while nobody reads it, the send buffer at most 4 MiB).
const earlyBody = 8 << 20

// earlyAnswer is the body of every early answer.
const earlyAnswer = `{"error":"no"}`

// earlyServer answers each request after reading its head and the first
// after bytes of its body, then ends as then says:
//
//   - "close": closes at once, the rest of the body unread (the kernel
//     resets the connection);
//   - "linger": half-closes, and reads and drops what still comes until the
//     client closes (a lingering close: nginx's, net/http's server's);
//   - "hold": neither reads nor closes, until the test ends;
//   - "silent": as "hold", without answering;
//   - "drain": reads the whole body and keeps the connection for the next
//     request.
type earlyServer struct {
	ln      net.Listener
	accepts atomic.Int64
	wg      sync.WaitGroup
	release chan struct{}
}

func newEarlyServer(t *testing.T, status, after int, then string) *earlyServer {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s := &earlyServer{ln: ln, release: make(chan struct{})}
	answer := fmt.Sprintf("HTTP/1.1 %d %s\r\nContent-Type: application/json\r\nContent-Length: %d\r\n", status, http.StatusText(status), len(earlyAnswer))
	if then != "drain" {
		answer += "Connection: close\r\n"
	}
	answer += "\r\n" + earlyAnswer
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
				// Nothing here may block for good: a client that is
				// wrong must fail the test, not hang it.
				_ = c.SetDeadline(time.Now().Add(20 * time.Second))
				br := bufio.NewReader(c)
				for {
					req, err := http.ReadRequest(br)
					if err != nil {
						return
					}
					if _, err := io.CopyN(io.Discard, req.Body, int64(after)); err != nil {
						return
					}
					if then == "silent" {
						<-s.release
						return
					}
					if _, err := io.WriteString(c, answer); err != nil {
						return
					}
					switch then {
					case "close":
						return
					case "linger":
						_ = c.(*net.TCPConn).CloseWrite()
						_, _ = io.Copy(io.Discard, c)
						return
					case "hold":
						<-s.release
						return
					}
					if _, err := io.Copy(io.Discard, req.Body); err != nil {
						return
					}
				}
			}()
		}
	}()
	t.Cleanup(func() {
		ln.Close()
		close(s.release)
		s.wg.Wait()
	})
	return s
}

// postLarge sends a POST of n bytes and reads the whole answer.
func postLarge(ctx context.Context, rt http.RoundTripper, url string, n int) (status int, body string, err error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, bytes.NewBuffer(bytes.Repeat([]byte("p"), n)))
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

// An answer that comes before the request's body is written (a 413 to a
// prompt over the server's limit, a 400, a 429) is read and returned with
// its status, as net/http returns it, not lost to the write that the
// server stopped reading. Two requests in a row: the first's connection,
// cut short or closed, does not fail the second.
func TestConformanceEarlyAnswer(t *testing.T) {
	cases := []struct {
		status int
		after  int // body bytes the server reads before answering
		then   string
		// racy: net/http's outcome is a race, not checked. When the
		// server closes with the body unread, the kernel resets the
		// connection: net/http's write loop sees the reset, its read
		// loop the answer before it, and the one that reports first
		// wins (the answer in 5 of 60 runs on a 2-core machine; the
		// write's error otherwise). This package reads the answer,
		// which the reset does not take from the socket's buffer.
		racy bool
	}{
		{http.StatusRequestEntityTooLarge, 0, "close", true},
		{http.StatusBadRequest, 64 << 10, "close", true},
		{http.StatusTooManyRequests, 0, "close", true},
		{http.StatusRequestEntityTooLarge, 0, "linger", false},
		{http.StatusBadRequest, 1 << 20, "linger", false},
		{http.StatusRequestEntityTooLarge, 0, "hold", false},
		{http.StatusBadRequest, 64 << 10, "hold", false},
		{http.StatusTooManyRequests, 0, "drain", false},
		{http.StatusBadRequest, 64 << 10, "drain", false},
	}
	for _, tc := range cases {
		for name, rt := range transports(nil) {
			t.Run(fmt.Sprintf("%d after %d then %s/%s", tc.status, tc.after, tc.then, name), func(t *testing.T) {
				if tc.racy && name == "net/http" {
					t.Skip("net/http's outcome is a race here (see racy)")
				}
				srv := newEarlyServer(t, tc.status, tc.after, tc.then)
				defer rt.(closeIdler).CloseIdleConnections()
				ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
				defer cancel()
				for i := range 2 {
					status, body, err := postLarge(ctx, rt, "http://"+srv.ln.Addr().String()+"/v1/completions", earlyBody)
					if err != nil || status != tc.status || body != earlyAnswer {
						t.Fatalf("request %d: %d %q %v, want %d and the error body", i, status, body, err, tc.status)
					}
				}
			})
		}
	}
}

// writers counts the goroutines writing a request (reqWriter's).
func writers() int {
	buf := make([]byte, 1<<20)
	buf = buf[:runtime.Stack(buf, true)]
	return bytes.Count(buf, []byte("h1.(*Transport).start.func"))
}

// noWriters fails t unless every request's writing goroutine has ended
// (within seconds: one that sent its result may not have exited yet).
func noWriters(t *testing.T) {
	t.Helper()
	for deadline := time.Now().Add(5 * time.Second); writers() > 0; {
		if time.Now().After(deadline) {
			t.Fatalf("%d request writers still running", writers())
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// The goroutine that writes a large request ends on every path: the
// context's end while the server reads nothing, an early answer whose body
// is closed unread, and the normal answer, whose connection is kept.
func TestRequestWriterEnds(t *testing.T) {
	rt := New(Options{})
	defer rt.CloseIdleConnections()
	url := func(s *earlyServer) string { return "http://" + s.ln.Addr().String() + "/v1/completions" }

	t.Run("context ends the write", func(t *testing.T) {
		// The server reads the head and then nothing, never answering.
		srv := newEarlyServer(t, 0, 0, "silent")
		ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
		defer cancel()
		_, _, err := postLarge(ctx, rt, url(srv), earlyBody)
		if !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("error %v, want the deadline", err)
		}
		noWriters(t)
	})
	t.Run("early answer closed unread", func(t *testing.T) {
		srv := newEarlyServer(t, http.StatusRequestEntityTooLarge, 0, "hold")
		req, _ := http.NewRequest(http.MethodPost, url(srv), bytes.NewBuffer(make([]byte, earlyBody)))
		resp, err := rt.RoundTrip(req)
		if err != nil || resp.StatusCode != http.StatusRequestEntityTooLarge {
			t.Fatalf("%v %v", resp, err)
		}
		resp.Body.Close()
		noWriters(t)
	})
	t.Run("normal answers keep the connection", func(t *testing.T) {
		srv := newEarlyServer(t, http.StatusOK, earlyBody, "drain")
		defer rt.CloseIdleConnections() // before the server's cleanup waits for its connection
		for i := range 5 {
			status, body, err := postLarge(context.Background(), rt, url(srv), earlyBody)
			if err != nil || status != http.StatusOK || body != earlyAnswer {
				t.Fatalf("request %d: %d %q %v", i, status, body, err)
			}
		}
		// The answer comes once the whole body was read, so each write
		// ended with it and the connection went back to the pool.
		if n := srv.accepts.Load(); n != 1 {
			t.Fatalf("five requests took %d connections, want 1", n)
		}
		noWriters(t)
	})
	t.Run("idle connection closed by the server", func(t *testing.T) {
		// The server closes each connection after its answer, without
		// saying so: the next request's write or read on the reused
		// connection fails before any answer, and it goes again on a
		// new one.
		srv := newRawServer(t, func(c net.Conn, _ *http.Request, _ int) bool {
			_, _ = io.WriteString(c, "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok")
			time.Sleep(20 * time.Millisecond)
			return false
		})
		for i := range 3 {
			status, body, err := postLarge(context.Background(), rt, srv.url(), earlyBody)
			if err != nil || status != http.StatusOK || body != "ok" {
				t.Fatalf("request %d: %d %q %v", i, status, body, err)
			}
			time.Sleep(50 * time.Millisecond)
		}
		noWriters(t)
	})
}
