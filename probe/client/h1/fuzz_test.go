package h1

import (
	"bufio"
	"bytes"
	"context"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"
)

// byteConn is a connection whose server side is a fixed byte string; what
// the client writes is dropped.
type byteConn struct{ r *bytes.Reader }

func (c *byteConn) Read(p []byte) (int, error)      { return c.r.Read(p) }
func (c *byteConn) Write(p []byte) (int, error)     { return len(p), nil }
func (c *byteConn) Close() error                    { return nil }
func (c *byteConn) LocalAddr() net.Addr             { return &net.TCPAddr{} }
func (c *byteConn) RemoteAddr() net.Addr            { return &net.TCPAddr{} }
func (c *byteConn) SetDeadline(time.Time) error     { return nil }
func (c *byteConn) SetReadDeadline(time.Time) error { return nil }
func (c *byteConn) SetWriteDeadline(time.Time) error {
	return nil
}

// readAnswer sends one request on a connection that answers data and
// reads the answer's body, at most limit bytes of it.
func readAnswer(data []byte, limit int64) (status int, body []byte, err error) {
	rt := New(Options{
		Dial: func(context.Context, string, string) (net.Conn, error) {
			return &byteConn{r: bytes.NewReader(data)}, nil
		},
		MaxHeaderBytes: 64 << 10,
	})
	req, _ := http.NewRequest(http.MethodPost, "http://fuzz.test/v1/completions", strings.NewReader("{}"))
	resp, err := rt.RoundTrip(req)
	if err != nil {
		return 0, nil, err
	}
	defer resp.Body.Close()
	body, err = io.ReadAll(io.LimitReader(resp.Body, limit))
	return resp.StatusCode, body, err
}

// FuzzResponse feeds the response parser arbitrary bytes: it must never
// panic nor read a body longer than the bytes it was given, and where
// net/http's own parser reads the same bytes as a complete final answer,
// both must read the same status and body.
//
//	go test -run '^$' -fuzz FuzzResponse -fuzztime 60s ./probe/client/h1/
func FuzzResponse(f *testing.F) {
	for _, s := range []string{
		"HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nhello",
		"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5;ext=1\r\nhello\r\n0\r\nX-T: 1\r\n\r\n",
		"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\n\r\ndata: a\n\n",
		"HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok",
		"HTTP/1.1 204 No Content\r\n\r\n",
		"HTTP/1.1 304 Not Modified\r\nContent-Length: 3\r\n\r\n",
		"HTTP/1.0 200 OK\r\n\r\nold",
		"HTTP/1.1 200 OK\r\nContent-Length: 2\r\nContent-Length: 3\r\n\r\nok",
		"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nfffffffffffffffff\r\n",
		"HTTP/1.1 200 OK\r\nX: a\r\n b\r\nContent-Length: 1\r\n\r\nz",
		"HTTP/1.1 200 OK\nContent-Length: 1\n\nz",
		"HTTP/1.1 503 Busy\r\nContent-Length: 4\r\n\r\nbusy",
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		status, body, err := readAnswer(data, int64(len(data))+1)
		if len(body) > len(data) {
			t.Fatalf("read a body of %d bytes from %d bytes", len(body), len(data))
		}
		if err != nil {
			return
		}
		// net/http's reading of the same bytes, where it has one.
		br := bufio.NewReader(bytes.NewReader(data))
		req, _ := http.NewRequest(http.MethodPost, "http://fuzz.test/", nil)
		resp, herr := http.ReadResponse(br, req)
		if herr != nil || resp.StatusCode < 200 || resp.StatusCode == http.StatusSwitchingProtocols {
			return
		}
		hbody, herr := io.ReadAll(resp.Body)
		if herr != nil {
			return
		}
		if resp.StatusCode != status || !bytes.Equal(hbody, body) {
			t.Fatalf("net/http reads %d %q, this package %d %q", resp.StatusCode, hbody, status, body)
		}
	})
}
