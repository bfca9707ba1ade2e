package shadow

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	mrand "math/rand/v2"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/infer-exporter/infer_exporter/internal/config"
)

// Drop reasons: a sampled request whose sample was not stored is counted
// under one of them. The request itself is always forwarded.
const (
	// DropQueueFull: the queue to the writer was full (the store is slow
	// or stalled).
	DropQueueFull = "queue_full"
	// DropTooLarge: the request body exceeded --shadow.max-body-bytes, or
	// the sample the store's file size.
	DropTooLarge = "too_large"
	// DropUnparseable: the body is not a JSON object, so it could neither
	// be replayed nor redacted.
	DropUnparseable = "unparseable"
	// DropWriteError: the store failed to write.
	DropWriteError = "write_error"
)

// DropReasons lists every drop reason, for pre-initialised counters.
var DropReasons = []string{DropQueueFull, DropTooLarge, DropUnparseable, DropWriteError}

// tailBytes is how much of the end of a sampled response is kept to find
// the output length in its usage: the usage chunk is the last event before
// [DONE]; the Responses API's last event, response.completed, ends with the
// response's usage; a non-streamed body ends with its usage too.
const tailBytes = 4 << 10

// Proxy forwards every request to the upstream unchanged, streaming
// preserved, and hands a sampled fraction of generation requests to a
// single writer goroutine that stores them.
//
// The request path does only this for a sampled request: it keeps the
// request body it read (see ServeHTTP) and the last 4 KiB of the
// response, and after the response is complete offers the sample to a
// bounded queue without waiting. Everything else (redaction, encoding, writing) happens on the
// writer goroutine. When the queue is full, by count or by bytes, the
// sample is dropped and counted; the request never waits for the store.
type Proxy struct {
	cfg      Config
	upstream *url.URL
	rp       *httputil.ReverseProxy
	store    Store
	redactor *redactor
	logger   *slog.Logger
	m        *proxyMetrics

	queue      chan *sample
	queued     atomic.Int64 // bytes of the samples in the queue or being written
	closing    chan struct{}
	closeOnce  atomic.Bool
	writerDone chan struct{}
	writeErrs  atomic.Uint64

	// Capture instants are wallStart plus the monotonic time since start,
	// so that their spacing is exact even if the wall clock is stepped.
	start     time.Time
	wallStart time.Time
}

type sample struct {
	at     time.Time
	method string
	path   string
	status int
	body   []byte
	tail   []byte
	size   int64
}

type proxyMetrics struct {
	requests, upstreamErrors, written prometheus.Counter
	dropped                           map[string]prometheus.Counter
}

func newProxyMetrics(reg prometheus.Registerer, store Store) *proxyMetrics {
	m := &proxyMetrics{
		requests: prometheus.NewCounter(prometheus.CounterOpts{Name: "infer_shadow_requests_total",
			Help: "Requests the shadow proxy forwarded to the upstream, sampled or not."}),
		upstreamErrors: prometheus.NewCounter(prometheus.CounterOpts{Name: "infer_shadow_upstream_errors_total",
			Help: "Requests the proxy answered with 502 because the upstream could not be reached or failed before its response headers."}),
		written: prometheus.NewCounter(prometheus.CounterOpts{Name: "infer_shadow_samples_written_total",
			Help: "Sampled requests written to the capture store."}),
		dropped: map[string]prometheus.Counter{},
	}
	dropped := prometheus.NewCounterVec(prometheus.CounterOpts{Name: "infer_shadow_samples_dropped_total",
		Help: "Sampled requests not written to the store (they were forwarded), by reason: queue_full, too_large, unparseable, write_error."},
		[]string{"reason"})
	for _, r := range DropReasons {
		m.dropped[r] = dropped.WithLabelValues(r)
	}
	reg.MustRegister(m.requests, m.upstreamErrors, m.written, dropped)
	if b, ok := store.(interface{ Bytes() int64 }); ok {
		reg.MustRegister(prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "infer_shadow_store_bytes",
			Help: "Total size of the capture store's files, in bytes (bounded by max files × max file bytes)."},
			func() float64 { return float64(b.Bytes()) }))
	}
	return m
}

// New returns a proxy to cfg.Upstream that stores samples in store (which
// may be nil when cfg.Sample is 0), and starts its writer goroutine; Close
// stops it.
func New(cfg Config, store Store, reg prometheus.Registerer, logger *slog.Logger) (*Proxy, error) {
	cfg = cfg.withDefaults()
	if err := cfg.validate(store != nil); err != nil {
		return nil, err
	}
	up, _ := url.Parse(cfg.Upstream) // validated
	now := time.Now()
	p := &Proxy{
		cfg:        cfg,
		upstream:   up,
		store:      store,
		logger:     logger,
		m:          newProxyMetrics(reg, store),
		queue:      make(chan *sample, cfg.QueueLength),
		closing:    make(chan struct{}),
		writerDone: make(chan struct{}),
		start:      now,
		wallStart:  now.Round(0),
	}
	if cfg.Redact {
		var k [8]byte
		if _, err := rand.Read(k[:]); err != nil {
			return nil, fmt.Errorf("shadow: redaction key: %w", err)
		}
		p.redactor = &redactor{key: binary.LittleEndian.Uint64(k[:])}
	}
	p.rp = &httputil.ReverseProxy{
		Rewrite: func(pr *httputil.ProxyRequest) {
			pr.SetURL(up)
			// Rewrite strips forwarding headers from the outbound request;
			// the proxy is transparent, so a client's own are put back and
			// none are added.
			for _, h := range []string{"Forwarded", "X-Forwarded-For", "X-Forwarded-Host", "X-Forwarded-Proto"} {
				if v, ok := pr.In.Header[h]; ok {
					pr.Out.Header[h] = v
				}
			}
		},
		Transport:     newTransport(),
		FlushInterval: -1, // every write reaches the client at once
		ErrorLog:      slog.NewLogLogger(logger.Handler(), slog.LevelDebug),
		ErrorHandler: func(w http.ResponseWriter, r *http.Request, err error) {
			if r.Context().Err() != nil {
				return // the client went away; nobody to answer
			}
			p.m.upstreamErrors.Inc()
			logger.Debug("shadow: upstream failed", "path", r.URL.Path, "err", err)
			w.WriteHeader(http.StatusBadGateway)
		},
	}
	go p.write()
	return p, nil
}

// newTransport is tuned like the probe's client: keep-alive for many
// concurrent streams, no compression negotiated on the client's behalf (the
// bytes pass through as the upstream sent them), no proxy from the
// environment, HTTP/1.1.
func newTransport() *http.Transport {
	return &http.Transport{
		Proxy: nil,
		DialContext: (&net.Dialer{
			Timeout:   30 * time.Second,
			KeepAlive: 30 * time.Second,
		}).DialContext,
		MaxIdleConnsPerHost: 1024,
		IdleConnTimeout:     90 * time.Second,
		DisableCompression:  true,
		ForceAttemptHTTP2:   false,
	}
}

// ServeHTTP forwards r and, when it is sampled, offers its sample to the
// writer after the response is complete.
//
// The request body is read whole before it is forwarded (up to
// MaxBodyBytes; an inference request is a few kilobytes and the server
// cannot start before its last byte anyway). That is not only for capture:
// Go's HTTP/1 server drains and closes an unread request body when the
// handler starts its response, and the transport reads the body once more
// after sending it, to check its length, so a streamed answer that starts
// quickly could have its upstream connection torn down mid-stream
// (golang/go#40747; seen here on one request in a few hundred). A body
// already read has nothing left to race over. A larger body is forwarded
// as it streams in, in full-duplex mode, which stops the server from
// closing it under the transport.
func (p *Proxy) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	p.m.requests.Inc()
	at := time.Now()
	var body []byte
	whole := true
	if r.Body != nil && r.Body != http.NoBody && r.ContentLength != 0 {
		var err error
		body, err = io.ReadAll(io.LimitReader(r.Body, p.cfg.MaxBodyBytes+1))
		if err != nil {
			// The client broke off its own request.
			p.logger.Debug("shadow: reading the request body", "path", r.URL.Path, "err", err)
			w.WriteHeader(http.StatusBadRequest)
			return
		}
		if int64(len(body)) > p.cfg.MaxBodyBytes {
			whole = false
			r.Body = readCloser{io.MultiReader(bytes.NewReader(body), r.Body), r.Body}
			_ = http.NewResponseController(w).EnableFullDuplex()
		} else {
			r.Body = io.NopCloser(bytes.NewReader(body))
		}
	}
	if !p.sampled(r) {
		p.rp.ServeHTTP(w, r)
		return
	}
	tw := &tailWriter{ResponseWriter: w}
	p.rp.ServeHTTP(tw, r)
	if !whole {
		p.m.dropped[DropTooLarge].Inc()
		return
	}
	p.offer(at, r, body, tw)
}

type readCloser struct {
	io.Reader
	io.Closer
}

// sampled decides, before forwarding, whether r's sample is taken: POST
// generation requests (to one of capturedPaths: chat, completions,
// Responses) with a body, with probability Sample.
func (p *Proxy) sampled(r *http.Request) bool {
	s := p.cfg.Sample
	if s <= 0 || r.Method != http.MethodPost || r.ContentLength == 0 || !captured(r.URL.Path) {
		return false
	}
	return s >= 1 || mrand.Float64() < s
}

// capturedPaths are the endpoints of the OpenAI APIs, from the flavor
// facts ("/chat/completions", "/completions", "/responses"): a request to a
// path that ends in one of them is a generation request that replay can
// send again, to a target of that API. Read only.
var capturedPaths = func() []string {
	var out []string
	for _, f := range config.AllFlavors() {
		if f.Path != "" {
			out = append(out, f.Path)
		}
	}
	return out
}()

// captured says whether path is a generation request's (capturedPaths).
func captured(path string) bool {
	for _, suffix := range capturedPaths {
		if strings.HasSuffix(path, suffix) {
			return true
		}
	}
	return false
}

// offer hands a sample to the writer without waiting.
func (p *Proxy) offer(at time.Time, r *http.Request, body []byte, tw *tailWriter) {
	s := &sample{
		at:     p.wallStart.Add(at.Sub(p.start)),
		method: r.Method,
		path:   r.URL.Path,
		status: tw.status,
		body:   body,
		tail:   tw.tail(),
	}
	s.size = int64(len(s.body) + len(s.tail))
	if p.queued.Add(s.size) > p.cfg.QueueBytes {
		p.queued.Add(-s.size)
		p.m.dropped[DropQueueFull].Inc()
		return
	}
	select {
	case p.queue <- s:
	default:
		p.queued.Add(-s.size)
		p.m.dropped[DropQueueFull].Inc()
	}
}

// write is the writer goroutine: it stores queued samples until Close, then
// stores what is left in the queue and exits.
func (p *Proxy) write() {
	defer close(p.writerDone)
	for {
		select {
		case s := <-p.queue:
			p.store1(s)
		case <-p.closing:
			for {
				select {
				case s := <-p.queue:
					p.store1(s)
				default:
					return
				}
			}
		}
	}
}

func (p *Proxy) store1(s *sample) {
	defer p.queued.Add(-s.size)
	line, reason := p.encode(s)
	if reason != "" {
		p.m.dropped[reason].Inc()
		return
	}
	if err := p.store.Write(line); err != nil {
		if errors.Is(err, ErrLineTooLarge) {
			p.m.dropped[DropTooLarge].Inc()
			return
		}
		p.m.dropped[DropWriteError].Inc()
		// Log the first error and then every 1000th, not a flood.
		if n := p.writeErrs.Add(1); n == 1 || n%1000 == 0 {
			p.logger.Warn("shadow: store write failed; samples are dropped, requests are not", "err", err, "failures", n)
		}
		return
	}
	p.m.written.Inc()
}

// encode renders one sample as a line of our JSONL format (see
// replay.CapturedRequest). The body is kept byte for byte, unless it spans
// several lines (it is then compacted: only whitespace between tokens
// changes) or is redacted.
func (p *Proxy) encode(s *sample) ([]byte, string) {
	body := bytes.TrimSpace(s.body)
	if len(body) == 0 || body[0] != '{' || !json.Valid(body) {
		return nil, DropUnparseable
	}
	if p.redactor != nil {
		b, err := p.redactor.redact(body)
		if err != nil {
			return nil, DropUnparseable
		}
		body = b
	} else if bytes.ContainsAny(body, "\r\n") {
		var buf bytes.Buffer
		if err := json.Compact(&buf, body); err != nil {
			return nil, DropUnparseable
		}
		body = buf.Bytes()
	}
	line := make([]byte, 0, len(body)+192)
	line = append(line, `{"time":"`...)
	line = s.at.UTC().AppendFormat(line, time.RFC3339Nano)
	line = append(line, `","method":`...)
	line, _ = appendJSONString(line, s.method)
	line = append(line, `,"path":`...)
	line, _ = appendJSONString(line, s.path)
	line = append(line, `,"status":`...)
	line = strconv.AppendInt(line, int64(s.status), 10)
	if n, ok := outputTokens(s.tail); ok {
		line = append(line, `,"output_tokens":`...)
		line = strconv.AppendInt(line, int64(n), 10)
	}
	if p.redactor != nil {
		line = append(line, `,"redacted":true`...)
	}
	line = append(line, `,"body":`...)
	line = append(line, body...)
	line = append(line, "}\n"...)
	return line, ""
}

// appendJSONString appends s as a JSON string.
func appendJSONString(dst []byte, s string) ([]byte, error) {
	b, err := json.Marshal(s)
	return append(dst, b...), err
}

// outputTokensKeys are the members of the APIs' usage that count the
// output tokens: chat's and completions' "completion_tokens", the Responses
// API's "output_tokens". A response holds the one of its API only.
var outputTokensKeys = [][]byte{[]byte(`"completion_tokens"`), []byte(`"output_tokens"`)}

// outputTokens finds the last output token count ("completion_tokens": N
// or "output_tokens": N) in the tail of a response: the server's usage.
func outputTokens(tail []byte) (int, bool) {
	i, key := -1, []byte(nil)
	for _, k := range outputTokensKeys {
		if j := bytes.LastIndex(tail, k); j > i {
			i, key = j, k
		}
	}
	if i < 0 {
		return 0, false
	}
	rest := bytes.TrimLeft(tail[i+len(key):], " \t")
	if len(rest) == 0 || rest[0] != ':' {
		return 0, false
	}
	rest = bytes.TrimLeft(rest[1:], " \t")
	j := 0
	for j < len(rest) && rest[j] >= '0' && rest[j] <= '9' {
		j++
	}
	if j == 0 || j > 9 {
		return 0, false
	}
	n, err := strconv.Atoi(string(rest[:j]))
	return n, err == nil
}

// Close stops taking samples, stores those still queued and stops the writer
// goroutine. It waits at most until ctx is done (a stalled store would hold
// it for ever); the proxy's server must be shut down first.
func (p *Proxy) Close(ctx context.Context) error {
	if p.closeOnce.CompareAndSwap(false, true) {
		close(p.closing)
	}
	select {
	case <-p.writerDone:
		return nil
	case <-ctx.Done():
		return fmt.Errorf("shadow: samples still being written: %w", ctx.Err())
	}
}

// tailWriter passes a response through and keeps its status and its last
// tailBytes bytes.
type tailWriter struct {
	http.ResponseWriter
	status int
	ring   [tailBytes]byte
	n      int64 // bytes written in all
}

func (t *tailWriter) WriteHeader(code int) {
	if t.status == 0 && code >= 200 {
		t.status = code
	}
	t.ResponseWriter.WriteHeader(code)
}

func (t *tailWriter) Write(b []byte) (int, error) {
	if t.status == 0 {
		t.status = http.StatusOK
	}
	n, err := t.ResponseWriter.Write(b)
	kept := b[:n]
	if len(kept) > tailBytes {
		kept = kept[len(kept)-tailBytes:]
	}
	pos := int((t.n + int64(n-len(kept))) % tailBytes)
	c := copy(t.ring[pos:], kept)
	copy(t.ring[:], kept[c:])
	t.n += int64(n)
	return n, err
}

// Flush and Unwrap let ReverseProxy flush every write and reach the
// connection (http.ResponseController).
func (t *tailWriter) Flush() { _ = http.NewResponseController(t.ResponseWriter).Flush() }

func (t *tailWriter) Unwrap() http.ResponseWriter { return t.ResponseWriter }

// tail returns the kept bytes in order.
func (t *tailWriter) tail() []byte {
	if t.n <= tailBytes {
		return append([]byte(nil), t.ring[:t.n]...)
	}
	pos := int(t.n % tailBytes)
	out := make([]byte, 0, tailBytes)
	out = append(out, t.ring[pos:]...)
	return append(out, t.ring[:pos]...)
}
