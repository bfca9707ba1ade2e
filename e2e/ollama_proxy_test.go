package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"
)

// ollamaTruth is what Ollama said about one request, as the recording proxy
// between the exporter and Ollama read it from the response: the final
// ("done") line of /api/generate and /api/chat, with its durations in
// nanoseconds, or the usage of the OpenAI-compatible API's last chunk
// (which has no durations). The proxy's own instants are kept too, but
// only to know which request is which and when it was in flight: they are
// a third client's clock, not the server's.
type ollamaTruth struct {
	ID     string    `json:"-"` // X-Request-Id
	Path   string    `json:"-"`
	Status int       `json:"-"`
	Recv   time.Time `json:"-"` // the proxy got the request
	First  time.Time `json:"-"` // the proxy read the response's first byte from Ollama
	End    time.Time `json:"-"` // the response ended

	Done               bool   `json:"done"`
	DoneReason         string `json:"done_reason"`
	Error              string `json:"error"`
	TotalDuration      int64  `json:"total_duration"`
	LoadDuration       int64  `json:"load_duration"`
	PromptEvalCount    int    `json:"prompt_eval_count"`
	PromptEvalDuration int64  `json:"prompt_eval_duration"`
	EvalCount          int    `json:"eval_count"`
	EvalDuration       int64  `json:"eval_duration"`

	// OpenAI API: the last chunk's usage.
	Usage *struct {
		PromptTokens     int `json:"prompt_tokens"`
		CompletionTokens int `json:"completion_tokens"`
	} `json:"usage"`
	// Lines is the number of NDJSON lines or SSE data events with content.
	Lines int `json:"-"`
}

// ServerTTFT is Ollama's own time to first token: from its handler's start
// (after the request's headers were read; the body is parsed after it) to
// the first token, which is total_duration less eval_duration (the
// runner's clock from the first token to the last). It includes the model's
// load and any wait for the runner.
func (o *ollamaTruth) ServerTTFT() time.Duration {
	return time.Duration(o.TotalDuration - o.EvalDuration)
}

// recordingProxy forwards everything to Ollama unchanged and flushed as it
// comes, and records each generation's ollamaTruth.
type recordingProxy struct {
	upstream *url.URL
	mu       sync.Mutex
	records  []*ollamaTruth
	started  map[string]chan struct{} // ID prefix -> closed at its first byte
	srv      *http.Server
}

func newRecordingProxy(upstream string) *recordingProxy {
	u, err := url.Parse(upstream)
	if err != nil {
		panic(err)
	}
	return &recordingProxy{upstream: u, started: map[string]chan struct{}{}}
}

// serve listens on addr: before it does, the exporter's polls of the
// target are refused, as they are while a server starts.
func (p *recordingProxy) serve(t *testing.T, addr string) {
	t.Helper()
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	rp := &httputil.ReverseProxy{
		Rewrite:       func(r *httputil.ProxyRequest) { r.SetURL(p.upstream) },
		FlushInterval: -1,
		ModifyResponse: func(resp *http.Response) error {
			path := resp.Request.URL.Path
			if !isGeneration(path) {
				return nil
			}
			rec := &ollamaTruth{ID: resp.Request.Header.Get("X-Request-Id"), Path: path, Status: resp.StatusCode,
				Recv: resp.Request.Context().Value(recvKey{}).(time.Time)}
			resp.Body = &recordingBody{rc: resp.Body, rec: rec, p: p}
			return nil
		},
	}
	p.srv = &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ctx := r.Context()
		rp.ServeHTTP(w, r.WithContext(contextWithRecv(ctx, time.Now())))
	})}
	go p.srv.Serve(ln)
	t.Cleanup(func() { p.srv.Close() })
}

func isGeneration(path string) bool {
	return path == "/api/generate" || path == "/api/chat" || path == "/v1/chat/completions"
}

// startedCh is closed when a request whose ID starts with prefix has its
// first byte.
func (p *recordingProxy) startedCh(prefix string) <-chan struct{} {
	p.mu.Lock()
	defer p.mu.Unlock()
	ch, ok := p.started[prefix]
	if !ok {
		ch = make(chan struct{})
		p.started[prefix] = ch
	}
	return ch
}

func (p *recordingProxy) firstByte(id string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for prefix, ch := range p.started {
		if strings.HasPrefix(id, prefix) {
			select {
			case <-ch:
			default:
				close(ch)
			}
		}
	}
}

// byPrefix returns the ended records whose ID starts with prefix, by ID.
func (p *recordingProxy) byPrefix(prefix string) []*ollamaTruth {
	p.mu.Lock()
	defer p.mu.Unlock()
	var out []*ollamaTruth
	for _, r := range p.records {
		if strings.HasPrefix(r.ID, prefix) {
			out = append(out, r)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].ID < out[j].ID })
	return out
}

func (p *recordingProxy) byID() map[string]*ollamaTruth {
	p.mu.Lock()
	defer p.mu.Unlock()
	m := make(map[string]*ollamaTruth, len(p.records))
	for _, r := range p.records {
		m[r.ID] = r
	}
	return m
}

type recvKey struct{}

func contextWithRecv(ctx context.Context, at time.Time) context.Context {
	return context.WithValue(ctx, recvKey{}, at)
}

// recordingBody reads the lines of a response as they pass, keeping the
// last one that carries Ollama's figures.
type recordingBody struct {
	rc      io.ReadCloser
	rec     *ollamaTruth
	p       *recordingProxy
	partial []byte
	closed  bool
}

func (b *recordingBody) Read(buf []byte) (int, error) {
	n, err := b.rc.Read(buf)
	if n > 0 {
		if b.rec.First.IsZero() {
			b.rec.First = time.Now()
			b.p.firstByte(b.rec.ID)
		}
		b.partial = append(b.partial, buf[:n]...)
		for {
			i := bytes.IndexByte(b.partial, '\n')
			if i < 0 {
				break
			}
			b.line(b.partial[:i])
			b.partial = b.partial[i+1:]
		}
	}
	if err == io.EOF {
		b.finish()
	}
	return n, err
}

func (b *recordingBody) line(l []byte) {
	l = bytes.TrimSpace(l)
	l = bytes.TrimPrefix(l, []byte("data: "))
	if len(l) == 0 || l[0] != '{' {
		return
	}
	b.rec.Lines++
	// Each line decodes over the record: the last one's figures stay.
	_ = json.Unmarshal(l, b.rec)
}

func (b *recordingBody) finish() {
	if b.closed {
		return
	}
	b.closed = true
	if len(b.partial) > 0 {
		b.line(b.partial)
	}
	b.rec.End = time.Now()
	b.p.mu.Lock()
	b.p.records = append(b.p.records, b.rec)
	b.p.mu.Unlock()
}

func (b *recordingBody) Close() error {
	b.finish()
	return b.rc.Close()
}
