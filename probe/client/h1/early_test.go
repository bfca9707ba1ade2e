package h1

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
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
