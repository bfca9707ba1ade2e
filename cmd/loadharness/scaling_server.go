package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"strconv"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
)

// refServer is the reference server of the scaling scenarios: an
// OpenAI-compatible chat stream written straight onto the TCP connection
// (HTTP/1.1, keep-alive, chunked), one write per event, nothing else. The
// embedded simulator costs more per token than the client it serves, so at
// hundreds of thousands of tokens a second it, not the client, would be
// measured; this server does the least any server must (read the request,
// write each event with its own system call) so that, on cores of its own,
// it stays far from its limit.
//
// By default every stream emits on a shared grid of decode steps, as one
// continuously batching engine does: a token of every stream in flight at
// each multiple of step, all at once. With spread, each stream keeps its
// own grid from its start (streams of many engines, whose steps are not
// aligned), so that the same tokens arrive evenly. A step of 0 writes the
// tokens back to back.
type refServer struct {
	step   time.Duration
	spread bool

	// chunks counts content events written; late those written more than
	// half a step after their instant on the grid (the server falling
	// behind); conns the connections open now.
	chunks, late atomic.Uint64
	conns        atomic.Int64
	// refused counts accepts that failed for want of file descriptors.
	refused atomic.Uint64

	mu        sync.Mutex
	listeners []net.Listener
}

// refStats is what GET /stats answers: the server's own account, so that a
// client can tell whether the server kept up.
type refStats struct {
	Chunks  uint64 `json:"chunks"`
	Late    uint64 `json:"late"`
	Conns   int64  `json:"conns"`
	Refused uint64 `json:"refused"`
	CPUNs   int64  `json:"cpu_ns"`
}

// Bounds on what one request may ask of the reference server.
const (
	refMaxHeaderBytes = 16 << 10
	refMaxBodyBytes   = 1 << 20
	refMaxTokens      = 1 << 20
	refDefaultTokens  = 16
)

var errRefRequest = errors.New("malformed request")

// listen opens n listeners on loopback (each its own port: one port holds at
// most about 28,000 client connections, the ephemeral port range).
func (s *refServer) listen(n int) ([]string, error) {
	var urls []string
	for range n {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			s.close()
			return nil, err
		}
		s.mu.Lock()
		s.listeners = append(s.listeners, ln)
		s.mu.Unlock()
		urls = append(urls, "http://"+ln.Addr().String())
	}
	return urls, nil
}

// serve accepts on every listener until ctx is done.
func (s *refServer) serve(ctx context.Context) {
	s.mu.Lock()
	lns := append([]net.Listener(nil), s.listeners...)
	s.mu.Unlock()
	stop := context.AfterFunc(ctx, s.close)
	defer stop()
	var wg sync.WaitGroup
	for _, ln := range lns {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				c, err := ln.Accept()
				if err != nil {
					if errors.Is(err, syscall.EMFILE) || errors.Is(err, syscall.ENFILE) {
						// Out of file descriptors: the connection waits
						// in the backlog and the client sees a slow
						// connect, as from a real server at its limit;
						// counted, so that the run says so.
						s.refused.Add(1)
						select {
						case <-time.After(5 * time.Millisecond):
						case <-ctx.Done():
							return
						}
						continue
					}
					return
				}
				go s.conn(ctx, c)
			}
		}()
	}
	wg.Wait()
}

func (s *refServer) close() {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, ln := range s.listeners {
		_ = ln.Close()
	}
}

// conn serves one keep-alive connection until the peer closes it.
func (s *refServer) conn(ctx context.Context, c net.Conn) {
	s.conns.Add(1)
	defer s.conns.Add(-1)
	defer c.Close()
	br := bufio.NewReaderSize(c, 4096)
	var buf []byte
	for ctx.Err() == nil {
		path, body, err := readRefRequest(br)
		if err != nil {
			if !errors.Is(err, io.EOF) {
				_, _ = io.WriteString(c, "HTTP/1.1 400 Bad Request\r\nContent-Length: 0\r\nConnection: close\r\n\r\n")
			}
			return
		}
		switch path {
		case "/v1/chat/completions":
			if buf, err = s.stream(ctx, c, body, buf); err != nil {
				return
			}
		case "/stats":
			js, _ := json.Marshal(refStats{Chunks: s.chunks.Load(), Late: s.late.Load(), Conns: s.conns.Load(), Refused: s.refused.Load(), CPUNs: int64(cpuTime())})
			if _, err := fmt.Fprintf(c, "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n%s", len(js), js); err != nil {
				return
			}
		default:
			// /tokenize among others: the probe then runs on estimated
			// prompt lengths.
			if _, err := io.WriteString(c, "HTTP/1.1 404 Not Found\r\nContent-Length: 0\r\n\r\n"); err != nil {
				return
			}
		}
	}
}

// readRefRequest reads one request's head and body. It accepts a
// Content-Length body only (the probe's client sends one), each part
// bounded.
func readRefRequest(br *bufio.Reader) (path string, body []byte, err error) {
	headBytes := 0
	length := 0
	for i := 0; ; i++ {
		line, err := br.ReadSlice('\n')
		if err != nil {
			if i == 0 && len(line) == 0 && err == io.EOF {
				return "", nil, io.EOF
			}
			return "", nil, fmt.Errorf("%w: %v", errRefRequest, err)
		}
		if headBytes += len(line); headBytes > refMaxHeaderBytes {
			return "", nil, fmt.Errorf("%w: head over %d bytes", errRefRequest, refMaxHeaderBytes)
		}
		line = bytes.TrimRight(line, "\r\n")
		if i == 0 {
			f := bytes.Fields(line)
			if len(f) != 3 || !bytes.HasPrefix(f[2], []byte("HTTP/1.")) {
				return "", nil, fmt.Errorf("%w: request line %q", errRefRequest, line)
			}
			path = string(f[1])
			continue
		}
		if len(line) == 0 {
			break
		}
		name, value, ok := bytes.Cut(line, []byte(":"))
		if !ok {
			return "", nil, fmt.Errorf("%w: header %q", errRefRequest, line)
		}
		value = bytes.TrimSpace(value)
		switch {
		case bytes.EqualFold(name, []byte("Content-Length")):
			n, err := strconv.Atoi(string(value))
			if err != nil || n < 0 || n > refMaxBodyBytes {
				return "", nil, fmt.Errorf("%w: Content-Length %q", errRefRequest, value)
			}
			length = n
		case bytes.EqualFold(name, []byte("Transfer-Encoding")):
			return "", nil, fmt.Errorf("%w: Transfer-Encoding %q not supported", errRefRequest, value)
		}
	}
	body = make([]byte, length)
	if _, err := io.ReadFull(br, body); err != nil {
		return "", nil, fmt.Errorf("%w: body: %v", errRefRequest, err)
	}
	return path, body, nil
}

// maxTokensOf reads "max_tokens" from a request body without decoding the
// rest; refDefaultTokens when absent, at most refMaxTokens.
func maxTokensOf(body []byte) int {
	key := []byte(`"max_tokens":`)
	i := bytes.Index(body, key)
	if i < 0 {
		return refDefaultTokens
	}
	rest := bytes.TrimLeft(body[i+len(key):], " ")
	n := 0
	for _, c := range rest {
		if c < '0' || c > '9' {
			break
		}
		n = n*10 + int(c-'0')
		if n > refMaxTokens {
			return refMaxTokens
		}
	}
	if n == 0 {
		return refDefaultTokens
	}
	return n
}

// The events, in vLLM's shape (about the size of a vLLM chat chunk).
const (
	refHead     = "HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nCache-Control: no-cache\r\nTransfer-Encoding: chunked\r\n\r\n"
	refRole     = `data: {"id":"chatcmpl-ref","object":"chat.completion.chunk","created":1,"model":"ref-model","choices":[{"index":0,"delta":{"role":"assistant","content":""},"logprobs":null,"finish_reason":null}]}` + "\n\n"
	refToken    = `data: {"id":"chatcmpl-ref","object":"chat.completion.chunk","created":1,"model":"ref-model","choices":[{"index":0,"delta":{"content":" tok"},"logprobs":null,"finish_reason":null}]}` + "\n\n"
	refFinish   = `data: {"id":"chatcmpl-ref","object":"chat.completion.chunk","created":1,"model":"ref-model","choices":[{"index":0,"delta":{},"logprobs":null,"finish_reason":"length"}]}` + "\n\n"
	refUsageFmt = `data: {"id":"chatcmpl-ref","object":"chat.completion.chunk","created":1,"model":"ref-model","choices":[],"usage":{"prompt_tokens":64,"completion_tokens":%d,"total_tokens":%d}}` + "\n\n"
	refDone     = "data: [DONE]\n\n"
)

// appendChunk appends data as one HTTP/1.1 chunk.
func appendChunk(b []byte, data string) []byte {
	b = strconv.AppendInt(b, int64(len(data)), 16)
	b = append(b, "\r\n"...)
	b = append(b, data...)
	return append(b, "\r\n"...)
}

// stream writes one response: the head with the role event, each token on
// the step grid, then the finish, usage and [DONE] events and the chunked
// terminator in one last write. buf is reused between requests.
func (s *refServer) stream(ctx context.Context, c net.Conn, body, buf []byte) ([]byte, error) {
	n := maxTokensOf(body)
	buf = appendChunk(append(buf[:0], refHead...), refRole)
	if _, err := c.Write(buf); err != nil {
		return buf, err
	}
	token := appendChunk(nil, refToken)
	var at time.Time
	if s.step > 0 {
		at = time.Now()
		if !s.spread {
			at = at.Truncate(s.step)
		}
	}
	var timer *time.Timer
	// Counted per stream, not per event: a shared counter touched by every
	// write would make the server's cores contend for one cache line. A
	// stream cut short counts what it wrote.
	var written, late uint64
	defer func() { s.chunks.Add(written); s.late.Add(late) }()
	for range n {
		if s.step > 0 {
			at = at.Add(s.step)
			if d := time.Until(at); d > 0 {
				if timer == nil {
					timer = time.NewTimer(d)
				} else {
					timer.Reset(d)
				}
				select {
				case <-timer.C:
				case <-ctx.Done():
					return buf, ctx.Err()
				}
			} else if -d > s.step/2 {
				late++
			}
		}
		if _, err := c.Write(token); err != nil {
			return buf, err
		}
		written++
	}
	// Counted before the stream's end is written, so that a client that
	// asks /stats right after it sees this stream's events.
	s.chunks.Add(written)
	s.late.Add(late)
	written, late = 0, 0
	buf = appendChunk(buf[:0], refFinish)
	buf = appendChunk(buf, fmt.Sprintf(refUsageFmt, n, 64+n))
	buf = appendChunk(buf, refDone)
	buf = append(buf, "0\r\n\r\n"...)
	_, err := c.Write(buf)
	return buf, err
}
