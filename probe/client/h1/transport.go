// Package h1 is a minimal HTTP/1.1 client for the measuring path: the
// caller's goroutine writes the request and reads the response stream, and
// nothing else runs per connection. A request over 16 KiB (oneWrite) is the
// exception: a goroutine of its own writes it while the caller's reads the
// answer, so that an answer the server sends before the body is written (a
// 413, a 400, a 429) is read, as net/http reads it; the goroutine ends with
// the write, and at the latest with the answer's body. net/http's Transport keeps a read loop
// and a write loop per connection beside the caller's goroutine, and hands
// every response through them; for a process holding tens of thousands of
// streams that is two more goroutine stacks and a channel hop per read.
//
// Transport is an http.RoundTripper for what the exporter's client sends:
// HTTP/1.1 over TCP or TLS (crypto/tls), no proxy, no redirects followed,
// no compression, request bodies held in memory. Response bodies may be
// chunked (extensions ignored, trailers read and dropped), of a
// Content-Length, or delimited by the connection's close; 1xx answers are
// skipped, any number of them within the head's byte budget, as net/http
// skips them; a field value with a control byte (NUL, a bare CR) is
// refused, as net/http refuses it; 204 and 304 have no body. Connections are kept alive in one pool
// per server address, each with its own lock.
package h1

import (
	"bufio"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"sync"
	"time"
)

// Defaults of a Transport's settings.
const (
	DefaultMaxIdlePerHost   = 64
	DefaultIdleTimeout      = 90 * time.Second
	DefaultMaxHeaderBytes   = 1 << 20
	DefaultReadBufferSize   = 1 << 10
	DefaultHandshakeTimeout = 10 * time.Second
	// maxChunkLine bounds a chunk's size line (with its extensions) and
	// each trailer line, as net/http's chunked reader does.
	maxChunkLine = 4096
	// oneWrite is the largest request copied into one buffer and written
	// in one call; a larger body goes out as a vectored write after its
	// head.
	oneWrite = 16 << 10
)

// Transport sends HTTP/1.1 requests on connections of its own. It is safe
// for concurrent use; the zero value is not: use New.
type Transport struct {
	dial           func(ctx context.Context, network, addr string) (net.Conn, error)
	tls            *tls.Config
	maxIdle        int
	idleTimeout    time.Duration
	maxHeaderBytes int
	readBuf        int

	// pools maps a server's scheme and address to its pool: read without
	// a lock, so that requests to different servers never meet.
	pools sync.Map // poolKey -> *pool
	bufs  sync.Pool
}

// Options configure a Transport; zero fields take the defaults above.
type Options struct {
	// Dial opens a TCP connection; default a net.Dialer with a 30 s
	// timeout and keep-alive.
	Dial func(ctx context.Context, network, addr string) (net.Conn, error)
	// TLS is the client configuration for https targets (cloned; its
	// ServerName defaults to the request's host).
	TLS *tls.Config
	// MaxIdlePerHost is the number of idle connections kept per server.
	MaxIdlePerHost int
	// IdleTimeout closes a connection idle for longer.
	IdleTimeout time.Duration
	// MaxHeaderBytes bounds a response's head.
	MaxHeaderBytes int
	// ReadBufferSize is each connection's read buffer.
	ReadBufferSize int
}

// New returns a Transport.
func New(o Options) *Transport {
	if o.Dial == nil {
		o.Dial = (&net.Dialer{Timeout: 30 * time.Second, KeepAlive: 30 * time.Second}).DialContext
	}
	if o.MaxIdlePerHost <= 0 {
		o.MaxIdlePerHost = DefaultMaxIdlePerHost
	}
	if o.IdleTimeout <= 0 {
		o.IdleTimeout = DefaultIdleTimeout
	}
	if o.MaxHeaderBytes <= 0 {
		o.MaxHeaderBytes = DefaultMaxHeaderBytes
	}
	if o.ReadBufferSize <= 0 {
		o.ReadBufferSize = DefaultReadBufferSize
	}
	t := &Transport{dial: o.Dial, maxIdle: o.MaxIdlePerHost, idleTimeout: o.IdleTimeout,
		maxHeaderBytes: o.MaxHeaderBytes, readBuf: o.ReadBufferSize}
	if o.TLS != nil {
		t.tls = o.TLS.Clone()
	}
	t.bufs.New = func() any { b := make([]byte, 0, 1024); return &b }
	return t
}

// Supports says whether the transport can send req: HTTP/1.1 over http
// or https. Everything else is left to net/http.
func Supports(req *http.Request) bool {
	return req.URL != nil && (req.URL.Scheme == "http" || req.URL.Scheme == "https") && req.URL.Host != ""
}

// ErrUnsupported is the error of a request Supports refuses.
var ErrUnsupported = errors.New("h1: only http and https URLs")

// ProtocolError is a response the transport could not parse.
type ProtocolError struct{ Msg string }

func (e *ProtocolError) Error() string { return "h1: " + e.Msg }

func protoErr(format string, a ...any) error { return &ProtocolError{Msg: fmt.Sprintf(format, a...)} }

type poolKey struct {
	https bool
	addr  string
}

// pool holds one server's idle connections, newest last.
type pool struct {
	mu   sync.Mutex
	idle []*conn
}

// conn is one connection and its read buffer.
type conn struct {
	net.Conn
	br    *bufio.Reader
	key   poolKey
	idle  time.Time // when it was put back
	reuse bool      // it carried a request before
}

// CloseIdleConnections closes every idle connection.
func (t *Transport) CloseIdleConnections() {
	t.pools.Range(func(_, v any) bool {
		p := v.(*pool)
		p.mu.Lock()
		idle := p.idle
		p.idle = nil
		p.mu.Unlock()
		for _, c := range idle {
			_ = c.Close()
		}
		return true
	})
}

// get returns an idle connection to key that is still open, or dials one.
func (t *Transport) get(ctx context.Context, key poolKey, host string) (*conn, error) {
	if v, ok := t.pools.Load(key); ok {
		p := v.(*pool)
		now := time.Now()
		for {
			p.mu.Lock()
			n := len(p.idle)
			if n == 0 {
				p.mu.Unlock()
				break
			}
			c := p.idle[n-1]
			p.idle[n-1] = nil
			p.idle = p.idle[:n-1]
			p.mu.Unlock()
			if now.Sub(c.idle) < t.idleTimeout && alive(c) {
				return c, nil
			}
			_ = c.Close()
		}
	}
	raw, err := t.dial(ctx, "tcp", key.addr)
	if err != nil {
		return nil, err
	}
	if key.https {
		cfg := t.tls
		if cfg == nil {
			cfg = &tls.Config{}
		} else {
			cfg = cfg.Clone()
		}
		if cfg.ServerName == "" {
			cfg.ServerName = host
		}
		cfg.NextProtos = []string{"http/1.1"}
		tc := tls.Client(raw, cfg)
		hctx, cancel := context.WithTimeout(ctx, DefaultHandshakeTimeout)
		err := tc.HandshakeContext(hctx)
		cancel()
		if err != nil {
			_ = raw.Close()
			return nil, err
		}
		raw = tc
	}
	return &conn{Conn: raw, br: bufio.NewReaderSize(raw, t.readBuf), key: key}, nil
}

// put keeps c for the next request to its server, or closes it when the
// pool is full.
func (t *Transport) put(c *conn) {
	if c.br.Buffered() > 0 {
		// Bytes past the response: the connection is out of step.
		_ = c.Close()
		return
	}
	c.idle, c.reuse = time.Now(), true
	v, ok := t.pools.Load(c.key)
	if !ok {
		v, _ = t.pools.LoadOrStore(c.key, &pool{})
	}
	p := v.(*pool)
	p.mu.Lock()
	// The oldest idle connections are first: those idle past the
	// timeout go, so that a pool a burst filled does not hold its
	// descriptors (CLOSE_WAIT, once the server gave up on them) for good.
	var stale []*conn
	for len(p.idle) > 0 && c.idle.Sub(p.idle[0].idle) >= t.idleTimeout {
		stale = append(stale, p.idle[0])
		p.idle[0] = nil
		p.idle = p.idle[1:]
	}
	defer func() {
		for _, s := range stale {
			_ = s.Close()
		}
	}()
	if len(p.idle) < t.maxIdle {
		p.idle = append(p.idle, c)
		p.mu.Unlock()
		return
	}
	p.mu.Unlock()
	_ = c.Close()
}

// RoundTrip sends req on a connection of its server's pool (or a new one)
// and returns the response with its body unread; the body's Close returns
// the connection to the pool when the body was read to its end, and closes
// it otherwise. The context's cancellation or deadline ends the request at
// any point, the body's reads included.
func (t *Transport) RoundTrip(req *http.Request) (*http.Response, error) {
	if !Supports(req) {
		closeBody(req)
		return nil, ErrUnsupported
	}
	ctx := req.Context()
	if err := ctx.Err(); err != nil {
		closeBody(req)
		return nil, err
	}
	https := req.URL.Scheme == "https"
	host := req.URL.Hostname()
	port := req.URL.Port()
	if port == "" {
		port = "80"
		if https {
			port = "443"
		}
	}
	key := poolKey{https: https, addr: net.JoinHostPort(host, port)}
	body, err := requestBody(req)
	if err != nil {
		return nil, err
	}
	for attempt := 0; ; attempt++ {
		c, err := t.get(ctx, key, host)
		if err != nil {
			return nil, err
		}
		resp, err := t.exchange(ctx, c, req, body)
		if err == nil {
			return resp, nil
		}
		var retry retryable
		if attempt == 0 && errors.As(err, &retry) {
			// A reused connection the server had closed, found so
			// before any byte of an answer: nothing was served, so
			// the request goes once more on a new connection.
			continue
		}
		return nil, err
	}
}

// retryable wraps the failure of a request on a reused connection that
// read not one byte of an answer.
type retryable struct{ err error }

func (r retryable) Error() string { return r.err.Error() }
func (r retryable) Unwrap() error { return r.err }

// exchange writes the request on c and reads the response head.
//
// A request that fits oneWrite is written, then its answer read: the
// kernel's socket buffer takes it whole, so the write never waits on the
// server. A larger one is written by a goroutine of its own while the
// caller's goroutine reads the answer, so that an answer that comes before
// the body is written (a 413 to a prompt over the server's limit, a 400,
// a 429, after which the server stops reading or closes) is read and
// returned, as net/http returns it, instead of the write's error.
func (t *Transport) exchange(ctx context.Context, c *conn, req *http.Request, reqBody [][]byte) (*http.Response, error) {
	// The context's end interrupts any read or write on c from here on;
	// the body's end stops the watch.
	w := &watch{c: c}
	w.stop = context.AfterFunc(ctx, w.fire)
	var rw *reqWriter
	var err error
	if rw, err = t.write(c, req, reqBody); err != nil {
		w.done()
		_ = c.Close()
		if c.reuse && !w.fired() {
			return nil, retryable{err}
		}
		return nil, w.err(ctx, err)
	}
	resp, silent, err := t.readResponse(c, req)
	if err != nil {
		w.done()
		_ = c.Close()
		if rw != nil {
			// The close ends the write; the request's bytes are not
			// touched once RoundTrip returns.
			if werr := rw.wait(); werr != nil && silent {
				// No answer, and the write failed: the write's
				// error is the cause, as when it came first.
				err = werr
			}
			silent = silent && (rw.err != nil || errors.Is(err, errNoAnswer))
		} else {
			silent = errors.Is(err, errNoAnswer)
		}
		if c.reuse && !w.fired() && silent {
			return nil, retryable{err}
		}
		return nil, w.err(ctx, err)
	}
	resp.Request = req
	b := resp.Body.(*body)
	b.t, b.w, b.ctx = t, w, ctx
	if rw != nil && !rw.ended() {
		// An early answer. A server that says it closes the connection
		// does not want the rest of the body (RFC 9112, section 9.6):
		// the write stops; else it goes on beside the answer's read,
		// as net/http's does, and the connection is kept only if it
		// ends in time (body.finish).
		if resp.Close {
			rw.stop()
		}
	}
	b.wr = rw
	if b.r == nil {
		// No body: the connection is free at once.
		b.finish()
	}
	return resp, nil
}

// maxWriteWait is how long a body's end waits for its request's write to
// end before the connection is closed rather than kept (net/http waits as
// long): a server may answer the moment the last byte came, before the
// writing goroutine has returned.
const maxWriteWait = 50 * time.Millisecond

// reqWriter is a request written by a goroutine of its own. Its methods
// run on the caller's goroutine.
type reqWriter struct {
	c       *conn
	result  chan error // the write's error, once
	err     error
	done    bool // result was received
	stopped bool
}

// start writes head and body on c; head's buffer goes back to t's pool
// after the write.
func (t *Transport) start(c *conn, bp *[]byte, head []byte, body [][]byte) *reqWriter {
	rw := &reqWriter{c: c, result: make(chan error, 1)}
	// The write consumes its net.Buffers: a slice of its own, so that
	// the body's pieces are left whole for a second attempt.
	bufs := make(net.Buffers, 0, 1+len(body))
	bufs = append(append(bufs, head), body...)
	go func() {
		_, err := bufs.WriteTo(c.Conn)
		t.putBuf(bp, head)
		rw.result <- err
	}()
	return rw
}

// ended says whether the write ended, without waiting.
func (rw *reqWriter) ended() bool {
	if !rw.done {
		select {
		case rw.err = <-rw.result:
			rw.done = true
		default:
		}
	}
	return rw.done
}

// wait waits for the write's end and returns its error; the caller makes
// sure it ends (closes the connection, or the context's watch does).
func (rw *reqWriter) wait() error {
	if !rw.done {
		rw.err = <-rw.result
		rw.done = true
	}
	return rw.err
}

// stop ends the write where it is: a connection whose request was cut
// short is not kept.
func (rw *reqWriter) stop() {
	rw.stopped = true
	_ = rw.c.SetWriteDeadline(time.Unix(1, 0))
}

// wrote says whether the request was written whole, waiting up to
// maxWriteWait for the write to end.
func (rw *reqWriter) wrote() bool {
	if !rw.ended() && !rw.stopped {
		t := time.NewTimer(maxWriteWait)
		select {
		case rw.err = <-rw.result:
			rw.done = true
		case <-t.C:
		}
		t.Stop()
	}
	return rw.done && rw.err == nil && !rw.stopped
}

// watch ties a connection to a request's context.
type watch struct {
	c    *conn
	stop func() bool
	mu   sync.Mutex
	hit  bool
}

// fire runs when the context ends: every blocked read and write of the
// connection returns at once.
func (w *watch) fire() {
	w.mu.Lock()
	w.hit = true
	w.mu.Unlock()
	_ = w.c.SetDeadline(time.Unix(1, 0))
}

func (w *watch) fired() bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.hit
}

// done stops the watch; it says whether the connection is untouched by it.
func (w *watch) done() bool { return w.stop() }

// err is what the request failed with: the context's error when the
// context ended it.
func (w *watch) err(ctx context.Context, err error) error {
	if w.fired() {
		if cerr := ctx.Err(); cerr != nil {
			return fmt.Errorf("%w (%w)", cerr, err)
		}
	}
	return err
}

// Pieces is a request body held in memory in pieces that nothing modifies
// while the request lives (the flavors' bodies, whose images every request
// of a workload shares: probe/client's pieces.go). The transport writes
// them as they are, copying none: Pieces returns them, and the body is
// then read.
type Pieces interface {
	Pieces() [][]byte
}

// requestBody returns req's body in memory, in pieces: a Pieces body's
// own, or the one slice a bytes.Buffer writes itself out with (no copy),
// or what the body reads.
func requestBody(req *http.Request) ([][]byte, error) {
	if req.Body == nil || req.Body == http.NoBody {
		return nil, nil
	}
	defer req.Body.Close()
	if p, ok := req.Body.(Pieces); ok {
		return p.Pieces(), nil
	}
	if wt, ok := req.Body.(io.WriterTo); ok {
		var cw captureWriter
		if _, err := wt.WriteTo(&cw); err != nil {
			return nil, err
		}
		if len(cw.parts) == 1 {
			return cw.parts, nil
		}
		// A writer may reuse its buffer between writes: its slices
		// are copied.
		var all []byte
		for _, p := range cw.parts {
			all = append(all, p...)
		}
		return [][]byte{all}, nil
	}
	b, err := io.ReadAll(req.Body)
	return [][]byte{b}, err
}

// captureWriter keeps the slices written to it: a bytes.Buffer writes its
// whole content in one call, which is then sent without a copy.
type captureWriter struct{ parts [][]byte }

func (c *captureWriter) Write(p []byte) (int, error) {
	c.parts = append(c.parts, p)
	return len(p), nil
}

func closeBody(req *http.Request) {
	if req.Body != nil {
		_ = req.Body.Close()
	}
}

// write sends the request's head and body: in one write when they fit
// oneWrite; else it starts their vectored write on a goroutine of its own
// and returns it.
func (t *Transport) write(c *conn, req *http.Request, body [][]byte) (*reqWriter, error) {
	size := 0
	for _, p := range body {
		size += len(p)
	}
	bp := t.bufs.Get().(*[]byte)
	b := (*bp)[:0]
	method := req.Method
	if method == "" {
		method = http.MethodGet
	}
	b = append(b, method...)
	b = append(b, ' ')
	b = append(b, req.URL.RequestURI()...)
	b = append(b, " HTTP/1.1\r\nHost: "...)
	host := req.Host
	if host == "" {
		host = req.URL.Host
	}
	if h := req.Header.Get("Host"); h != "" {
		host = h
	}
	b = append(b, host...)
	b = append(b, "\r\n"...)
	for k, vs := range req.Header {
		switch k {
		case "Host", "Content-Length", "Transfer-Encoding", "Connection":
			continue
		}
		for _, v := range vs {
			if !validHeader(k, v) {
				t.putBuf(bp, b)
				return nil, fmt.Errorf("h1: invalid header field %q", k)
			}
			b = append(b, k...)
			b = append(b, ": "...)
			b = append(b, v...)
			b = append(b, "\r\n"...)
		}
	}
	if body != nil || methodHasBody(method) {
		b = append(b, "Content-Length: "...)
		b = strconv.AppendInt(b, int64(size), 10)
		b = append(b, "\r\n"...)
	}
	if req.Close {
		b = append(b, "Connection: close\r\n"...)
	}
	b = append(b, "\r\n"...)
	if len(b)+size > oneWrite {
		return t.start(c, bp, b, body), nil
	}
	for _, p := range body {
		b = append(b, p...)
	}
	_, err := c.Write(b)
	t.putBuf(bp, b)
	return nil, err
}

// putBuf gives b, bp's buffer, back to the pool.
func (t *Transport) putBuf(bp *[]byte, b []byte) {
	*bp = b[:0]
	if cap(b) > oneWrite+1024 {
		// A large one-off is not kept in the pool.
		*bp = make([]byte, 0, 1024)
	}
	t.bufs.Put(bp)
}

func methodHasBody(m string) bool {
	return m == http.MethodPost || m == http.MethodPut || m == http.MethodPatch
}

// validHeader refuses a field that would split the head.
func validHeader(k, v string) bool {
	if k == "" {
		return false
	}
	for i := 0; i < len(k); i++ {
		if c := k[i]; c <= ' ' || c == ':' || c >= 0x7f {
			return false
		}
	}
	for i := 0; i < len(v); i++ {
		if c := v[i]; c == '\r' || c == '\n' || c == 0 {
			return false
		}
	}
	return true
}
