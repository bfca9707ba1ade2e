package shadow_test

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"go.uber.org/goleak"

	"github.com/infer-exporter/infer_exporter/internal/shadow"
	"github.com/infer-exporter/infer_exporter/internal/simulator"
	"github.com/infer-exporter/infer_exporter/internal/simulator/simulatortest"
	"github.com/infer-exporter/infer_exporter/probe/client"
	"github.com/infer-exporter/infer_exporter/probe/observation"
	"github.com/infer-exporter/infer_exporter/probe/replay"
)

// TestMain fails the package if a test leaves a goroutine behind: the
// proxy's writer must stop with Close.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

var discard = slog.New(slog.DiscardHandler)

// recorder wraps an upstream handler and keeps, per request, what the
// upstream received and exactly what it wrote back.
type recorder struct {
	mu   sync.Mutex
	reqs []*recorded
}

type recorded struct {
	at     time.Time
	id     string // the X-Test-ID header
	path   string
	body   []byte
	status int
	header http.Header // as the handler set it, at its first write
	resp   bytes.Buffer
}

func (rc *recorder) wrap(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		rec := &recorded{at: time.Now(), id: r.Header.Get("X-Test-ID"), path: r.URL.Path}
		rec.body, _ = io.ReadAll(r.Body)
		r.Body = io.NopCloser(bytes.NewReader(rec.body))
		h.ServeHTTP(&recWriter{ResponseWriter: w, rec: rec}, r)
		rc.mu.Lock()
		rc.reqs = append(rc.reqs, rec)
		rc.mu.Unlock()
	})
}

// sorted returns the recorded requests in arrival order.
func (rc *recorder) sorted() []*recorded {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	out := slices.Clone(rc.reqs)
	slices.SortFunc(out, func(a, b *recorded) int { return a.at.Compare(b.at) })
	return out
}

func (rc *recorder) byID(id string) *recorded {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	for _, r := range rc.reqs {
		if r.id == id {
			return r
		}
	}
	return nil
}

type recWriter struct {
	http.ResponseWriter
	rec *recorded
}

func (w *recWriter) WriteHeader(code int) {
	if w.rec.status == 0 {
		w.rec.status = code
		w.rec.header = w.Header().Clone()
	}
	w.ResponseWriter.WriteHeader(code)
}

func (w *recWriter) Write(b []byte) (int, error) {
	if w.rec.status == 0 {
		w.WriteHeader(http.StatusOK)
	}
	w.rec.resp.Write(b)
	return w.ResponseWriter.Write(b)
}

func (w *recWriter) Flush()                      { _ = http.NewResponseController(w.ResponseWriter).Flush() }
func (w *recWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// startSim serves a simulator behind the recorder on 127.0.0.1.
func startSim(t testing.TB, cfg simulator.Config, rc *recorder) string {
	t.Helper()
	sim, err := simulator.New(cfg, discard)
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(rc.wrap(sim.Handler()))
	t.Cleanup(srv.Close)
	t.Cleanup(func() { sim.Close() })
	return srv.URL
}

// startProxy serves a proxy to upstream on 127.0.0.1. stop (also run at
// cleanup) stops the server, waiting for its handlers, then the proxy's
// writer, as Serve does.
func startProxy(t testing.TB, cfg shadow.Config, store shadow.Store, reg prometheus.Registerer) (url string, stop func()) {
	t.Helper()
	p, err := shadow.New(cfg, store, reg, discard)
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(p)
	var once sync.Once
	stop = func() {
		once.Do(func() {
			srv.Close()
			if err := p.Close(context.Background()); err != nil {
				t.Error(err)
			}
		})
	}
	t.Cleanup(stop)
	return srv.URL, stop
}

func counter(t *testing.T, reg *prometheus.Registry, name string, labels ...string) float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
	series:
		for _, m := range mf.GetMetric() {
			for i := 0; i+1 < len(labels); i += 2 {
				found := false
				for _, lp := range m.GetLabel() {
					found = found || lp.GetName() == labels[i] && lp.GetValue() == labels[i+1]
				}
				if !found {
					continue series
				}
			}
			if c := m.GetCounter(); c != nil {
				return c.GetValue()
			}
			return m.GetGauge().GetValue()
		}
	}
	t.Fatalf("no metric %s%v", name, labels)
	return 0
}

// TestProxyByteIdentical: through the proxy, with capture on, a client gets
// exactly the status, headers and bytes the upstream wrote, for streamed
// and whole answers, errors and other endpoints.
func TestProxyByteIdentical(t *testing.T) {
	cfg := simulatortest.InstantConfig()
	rc := &recorder{}
	up := startSim(t, cfg, rc)
	dir := t.TempDir()
	store, err := shadow.OpenStore(dir, 1<<20, 4)
	if err != nil {
		t.Fatal(err)
	}
	// At cleanup, after the proxy (whose cleanup, registered later, runs
	// first) has stopped its writer: a store closed under a write races.
	t.Cleanup(func() { store.Close() })
	reg := prometheus.NewRegistry()
	proxyURL, _ := startProxy(t, shadow.Config{Upstream: up, Sample: 1}, store, reg)
	hc := &http.Client{Transport: &http.Transport{DisableCompression: true}}
	defer hc.CloseIdleConnections()

	for i, tc := range []struct {
		method, path, body string
	}{
		{"POST", "/v1/chat/completions", `{"model":"sim-model","messages":[{"role":"user","content":"hello there"}],"max_tokens":12,"stream":true,"stream_options":{"include_usage":true}}`},
		{"POST", "/v1/completions", `{"prompt":"once upon a time","max_tokens":5,"stream":true}`},
		{"POST", "/v1/chat/completions", `{"messages":[{"role":"user","content":"no stream"}],"max_tokens":4}`},
		{"POST", "/v1/chat/completions", `{"messages": not json`},
		{"POST", "/tokenize", `{"prompt":"a b c"}`},
		{"GET", "/v1/models", ""},
		{"GET", "/health", ""},
	} {
		id := strconv.Itoa(i)
		req, _ := http.NewRequest(tc.method, proxyURL+tc.path, strings.NewReader(tc.body))
		req.Header.Set("X-Test-ID", id)
		req.Header.Set("Content-Type", "application/json")
		resp, err := hc.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		got, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		if err != nil {
			t.Fatal(err)
		}
		up := rc.byID(id)
		if up == nil {
			t.Fatalf("%s %s never reached the upstream", tc.method, tc.path)
		}
		if string(up.body) != tc.body {
			t.Errorf("%s %s: the upstream received %q, the client sent %q", tc.method, tc.path, up.body, tc.body)
		}
		if resp.StatusCode != up.status || !bytes.Equal(got, up.resp.Bytes()) {
			t.Errorf("%s %s: client got %d %q, upstream wrote %d %q", tc.method, tc.path, resp.StatusCode, got, up.status, up.resp.Bytes())
		}
		for k, v := range up.header {
			if !slices.Equal(resp.Header[k], v) {
				t.Errorf("%s %s: header %s = %q through the proxy, %q from the upstream", tc.method, tc.path, k, resp.Header[k], v)
			}
		}
	}
	if got := counter(t, reg, "infer_shadow_requests_total"); got != 7 {
		t.Errorf("infer_shadow_requests_total = %v, want 7", got)
	}
}

// TestProxyStreamsUnbuffered: the first event reaches the client while the
// upstream is still holding the rest, so streaming is preserved (a
// buffering proxy would deadlock here; the context ends the test then).
func TestProxyStreamsUnbuffered(t *testing.T) {
	release := make(chan struct{})
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", "text/event-stream")
		io.WriteString(w, "data: first\n\n")
		w.(http.Flusher).Flush()
		select {
		case <-release:
		case <-r.Context().Done():
			return
		}
		io.WriteString(w, "data: [DONE]\n\n")
	}))
	defer up.Close()
	proxyURL, _ := startProxy(t, shadow.Config{Upstream: up.URL}, nil, prometheus.NewRegistry())
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, "POST", proxyURL+"/v1/chat/completions", strings.NewReader(`{}`))
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	br := bufio.NewReader(resp.Body)
	line, err := br.ReadString('\n')
	if err != nil || line != "data: first\n" {
		t.Fatalf("first line %q, %v: the proxy held the stream back", line, err)
	}
	close(release)
	rest, _ := io.ReadAll(br)
	if string(rest) != "\ndata: [DONE]\n\n" {
		t.Errorf("rest %q", rest)
	}
}

// blockingStore stalls every write until released.
type blockingStore struct {
	release chan struct{}
	writes  atomic.Int32
}

func (s *blockingStore) Write([]byte) error {
	s.writes.Add(1)
	<-s.release
	return nil
}

// TestStalledStoreNeverBlocksRequests: with a store that never returns,
// every proxied request still completes, correct; samples beyond the queue
// are dropped and counted. If the request path waited for the store even
// once, the requests would hang for ever (the context ends the test then).
func TestStalledStoreNeverBlocksRequests(t *testing.T) {
	up := startSim(t, simulatortest.InstantConfig(), &recorder{})
	store := &blockingStore{release: make(chan struct{})}
	reg := prometheus.NewRegistry()
	const queue, n = 4, 40
	proxyURL, stop := startProxy(t, shadow.Config{Upstream: up, Sample: 1, QueueLength: queue}, store, reg)

	cl := client.New(client.Options{})
	defer cl.Close()
	target := &client.Target{BaseURL: proxyURL, Model: "sim-model"}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for i := range n {
		var o observation.Request
		cl.Do(ctx, target, &client.Request{Prompt: "request " + strconv.Itoa(i), MaxTokens: 8, IgnoreEOS: true}, &o)
		if o.Outcome != observation.Success || o.OutputTokens != 8 {
			t.Fatalf("request %d through a stalled store: %s %v", i, o.Outcome, o.Err)
		}
	}
	dropped := counter(t, reg, "infer_shadow_samples_dropped_total", "reason", shadow.DropQueueFull)
	if written := counter(t, reg, "infer_shadow_samples_written_total"); written != 0 {
		t.Errorf("written %v while the store is stalled", written)
	}
	// One sample is stuck in Write, at most `queue` wait behind it.
	if dropped < n-queue-1 || dropped > n-1 {
		t.Errorf("dropped{queue_full} = %v, want %d..%d", dropped, n-queue-1, n-1)
	}
	close(store.release)
	stop()
	written := counter(t, reg, "infer_shadow_samples_written_total")
	if written+dropped != n || float64(store.writes.Load()) != written {
		t.Errorf("written %v + dropped %v != %d requests (store saw %d writes)", written, dropped, n, store.writes.Load())
	}
}

// TestQueueBytesBound: samples are also bounded by their bytes waiting.
func TestQueueBytesBound(t *testing.T) {
	up := startSim(t, simulatortest.InstantConfig(), &recorder{})
	store := &blockingStore{release: make(chan struct{})}
	reg := prometheus.NewRegistry()
	proxyURL, _ := startProxy(t, shadow.Config{Upstream: up, Sample: 1, QueueBytes: 10 << 10}, store, reg)
	defer close(store.release)
	cl := client.New(client.Options{})
	defer cl.Close()
	big := strings.Repeat("word ", 4<<10) // a 20 KiB body: over the bound alone
	var o observation.Request
	cl.Do(context.Background(), &client.Target{BaseURL: proxyURL, Model: "sim-model"}, &client.Request{Prompt: big, MaxTokens: 1}, &o)
	if o.Outcome != observation.Success {
		t.Fatalf("%s %v", o.Outcome, o.Err)
	}
	if d := counter(t, reg, "infer_shadow_samples_dropped_total", "reason", shadow.DropQueueFull); d != 1 {
		t.Errorf("dropped{queue_full} = %v, want 1", d)
	}
}

// TestTooLargeAndUnparseable: such requests are forwarded; their samples
// are dropped with their reason.
func TestTooLargeAndUnparseable(t *testing.T) {
	rc := &recorder{}
	up := startSim(t, simulatortest.InstantConfig(), rc)
	store, err := shadow.OpenStore(t.TempDir(), 1<<20, 2)
	if err != nil {
		t.Fatal(err)
	}
	// At cleanup, after the proxy (whose cleanup, registered later, runs
	// first) has stopped its writer: a store closed under a write races.
	t.Cleanup(func() { store.Close() })
	reg := prometheus.NewRegistry()
	proxyURL, stop := startProxy(t, shadow.Config{Upstream: up, Sample: 1, MaxBodyBytes: 1000}, store, reg)
	for _, body := range []string{`{"prompt":"` + strings.Repeat("x ", 600) + `","max_tokens":1}`, `not json`} {
		resp, err := http.Post(proxyURL+"/v1/completions", "application/json", strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
	}
	stop()
	if len(rc.sorted()) != 2 {
		t.Errorf("%d requests reached the upstream, want 2", len(rc.sorted()))
	}
	for _, reason := range []string{shadow.DropTooLarge, shadow.DropUnparseable} {
		if d := counter(t, reg, "infer_shadow_samples_dropped_total", "reason", reason); d != 1 {
			t.Errorf("dropped{%s} = %v, want 1", reason, d)
		}
	}
}

func TestUpstreamDown(t *testing.T) {
	reg := prometheus.NewRegistry()
	// Port 1 on loopback: nothing listens, the dial is refused.
	proxyURL, _ := startProxy(t, shadow.Config{Upstream: "http://127.0.0.1:1"}, nil, reg)
	resp, err := http.Post(proxyURL+"/v1/completions", "application/json", strings.NewReader(`{}`))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusBadGateway {
		t.Errorf("status %d, want 502", resp.StatusCode)
	}
	if v := testutil.ToFloat64(mustCollector(t, reg, "infer_shadow_upstream_errors_total")); v != 1 {
		t.Errorf("upstream errors %v", v)
	}
}

func mustCollector(t *testing.T, reg *prometheus.Registry, name string) prometheus.Collector {
	t.Helper()
	return prometheus.CollectorFunc(func(ch chan<- prometheus.Metric) {
		v := counter(t, reg, name)
		ch <- prometheus.MustNewConstMetric(prometheus.NewDesc(name, "copy", nil, nil), prometheus.CounterValue, v)
	})
}

func TestConfigRefused(t *testing.T) {
	for _, cfg := range []shadow.Config{
		{},
		{Upstream: "127.0.0.1:8000"},
		{Upstream: "http://127.0.0.1:8000", Sample: 1.5},
		{Upstream: "http://127.0.0.1:8000", Sample: 0.5}, // no store
	} {
		if _, err := shadow.New(cfg, nil, prometheus.NewRegistry(), discard); err == nil {
			t.Errorf("%+v accepted", cfg)
		}
	}
}

// TestCaptureRecordsReplayableLines: the store holds, per sampled request,
// its body as sent, byte for byte, its path and status, and the output
// length from its usage; the replay reader reads it back.
func TestCaptureRecordsReplayableLines(t *testing.T) {
	rc := &recorder{}
	up := startSim(t, simulatortest.InstantConfig(), rc)
	dir := t.TempDir()
	store, err := shadow.OpenStore(dir, 1<<20, 4)
	if err != nil {
		t.Fatal(err)
	}
	// At cleanup, after the proxy (whose cleanup, registered later, runs
	// first) has stopped its writer: a store closed under a write races.
	t.Cleanup(func() { store.Close() })
	reg := prometheus.NewRegistry()
	proxyURL, stop := startProxy(t, shadow.Config{Upstream: up, Sample: 1}, store, reg)
	cl := client.New(client.Options{})
	defer cl.Close()
	var usage []int
	for i := range 5 {
		var o observation.Request
		cl.Do(context.Background(), &client.Target{BaseURL: proxyURL, Model: "sim-model"},
			&client.Request{Prompt: "question <b>" + strconv.Itoa(i) + "</b> & co", MaxTokens: 20}, &o)
		if o.Outcome != observation.Success {
			t.Fatal(o.Err)
		}
		usage = append(usage, o.OutputTokens)
	}
	// A pretty-printed body, compacted into one line.
	resp, err := http.Post(proxyURL+"/v1/chat/completions", "application/json",
		strings.NewReader("{\n  \"messages\": [{\"role\": \"user\", \"content\": \"x\"}],\n  \"max_tokens\": 2\n}"))
	if err != nil {
		t.Fatal(err)
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	stop()
	if w := counter(t, reg, "infer_shadow_samples_written_total"); w != 6 {
		t.Errorf("written %v, want 6", w)
	}
	if b := counter(t, reg, "infer_shadow_store_bytes"); b != float64(store.Bytes()) || b == 0 {
		t.Errorf("infer_shadow_store_bytes %v, store %d", b, store.Bytes())
	}
	tr, err := replay.ReadFile(dir, replay.FormatJSONL, replay.ReadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	ups := rc.sorted()
	if len(tr.Records) != 6 || len(ups) != 6 {
		t.Fatalf("%d records, %d upstream requests", len(tr.Records), len(ups))
	}
	for i, rec := range tr.Records[:5] {
		// The body as sent, less the whitespace around it (the client's
		// encoder ends it with a newline, which a JSON line cannot hold).
		if !bytes.Equal(rec.Body, bytes.TrimSpace(ups[i].body)) || rec.Path != "/v1/chat/completions" || rec.OutputTokens != usage[i] {
			t.Errorf("record %d: body %s path %s output %d; upstream got %s, usage %d", i, rec.Body, rec.Path, rec.OutputTokens, ups[i].body, usage[i])
		}
	}
	if got := string(tr.Records[5].Body); got != `{"messages":[{"role":"user","content":"x"}],"max_tokens":2}` {
		t.Errorf("pretty body stored as %s", got)
	}
}

// TestProxyManyStreams: hundreds of streamed answers through the proxy, 16
// at a time, all complete. A plain ReverseProxy, which lets the server
// close the request body under the transport (golang/go#40747), cut a
// stream in 2 of 5 runs of this test. Both ways a body is forwarded are
// covered: read whole first, and streamed in full duplex (a body over
// MaxBodyBytes).
func TestProxyManyStreams(t *testing.T) {
	cfg := simulator.DefaultConfig()
	cfg.TimeScale = 0.05
	up := startSim(t, cfg, &recorder{})
	for _, tc := range []struct {
		name    string
		maxBody int64
	}{{"buffered", 0}, {"full duplex", 16}} {
		t.Run(tc.name, func(t *testing.T) {
			proxyURL, _ := startProxy(t, shadow.Config{Upstream: up, MaxBodyBytes: tc.maxBody}, nil, prometheus.NewRegistry())
			cl := client.New(client.Options{})
			defer cl.Close()
			target := &client.Target{BaseURL: proxyURL, Model: "sim-model"}
			const n, workers = 400, 16
			var failed atomic.Int32
			var wg sync.WaitGroup
			for w := range workers {
				wg.Add(1)
				go func() {
					defer wg.Done()
					for i := w; i < n; i += workers {
						var o observation.Request
						cl.Do(context.Background(), target, &client.Request{Prompt: "stream " + strconv.Itoa(i), MaxTokens: 16, IgnoreEOS: true, Timeout: time.Minute}, &o)
						if o.Outcome != observation.Success || o.OutputTokens != 16 {
							failed.Add(1)
							t.Errorf("request %d: %s %v", i, o.Outcome, o.Err)
						}
					}
				}()
			}
			wg.Wait()
			if f := failed.Load(); f > 0 {
				t.Errorf("%d of %d streams failed", f, n)
			}
		})
	}
}

// TestProxySlowRequestBody: a client whose body arrives in two parts, 20 ms
// apart, and an upstream that starts its streamed answer before it reads
// the body. The upstream still gets the whole body, and the client the
// whole answer, whatever the pause.
func TestProxySlowRequestBody(t *testing.T) {
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		// Full duplex: this upstream reads the body after it starts its
		// answer.
		http.NewResponseController(w).EnableFullDuplex()
		w.Header().Set("Content-Type", "text/event-stream")
		io.WriteString(w, "data: early\n\n")
		w.(http.Flusher).Flush()
		body, _ := io.ReadAll(r.Body)
		io.WriteString(w, "data: "+string(body)+"\n\ndata: [DONE]\n\n")
	}))
	defer up.Close()
	proxyURL, _ := startProxy(t, shadow.Config{Upstream: up.URL}, nil, prometheus.NewRegistry())
	conn, err := net.Dial("tcp", strings.TrimPrefix(proxyURL, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	body := `{"prompt":"two parts"}`
	fmt.Fprintf(conn, "POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Length: %d\r\n\r\n%s", len(body), body[:10])
	time.Sleep(20 * time.Millisecond)
	io.WriteString(conn, body[10:])
	conn.SetReadDeadline(time.Now().Add(30 * time.Second)) // ends a hung test, never a passing one
	resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
	if err != nil {
		t.Fatal(err)
	}
	got, err := io.ReadAll(resp.Body)
	if err != nil || string(got) != "data: early\n\ndata: "+body+"\n\ndata: [DONE]\n\n" {
		t.Errorf("answer %q, %v", got, err)
	}
}
