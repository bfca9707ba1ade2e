package main

import (
	"bufio"
	"context"
	"errors"
	"io"
	"math"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/infer-exporter/infer_exporter/probe/client"
	"github.com/infer-exporter/infer_exporter/probe/observation"
)

func TestReadRefRequest(t *testing.T) {
	for _, tc := range []struct {
		name, raw string
		path      string
		body      string
		err       error
	}{
		{name: "post with body", raw: "POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\n\r\nhello", path: "/v1/chat/completions", body: "hello"},
		{name: "get without body", raw: "GET /stats HTTP/1.1\r\nHost: x\r\n\r\n", path: "/stats"},
		{name: "header case", raw: "POST /a HTTP/1.0\r\ncontent-length: 2\r\n\r\nok", path: "/a", body: "ok"},
		{name: "closed before a request", raw: "", err: io.EOF},
		{name: "chunked body refused", raw: "POST /a HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n", err: errRefRequest},
		{name: "body over the bound", raw: "POST /a HTTP/1.1\r\nContent-Length: 2000000\r\n\r\n", err: errRefRequest},
		{name: "negative length", raw: "POST /a HTTP/1.1\r\nContent-Length: -1\r\n\r\n", err: errRefRequest},
		{name: "bad request line", raw: "POST /a\r\n\r\n", err: errRefRequest},
		{name: "header without colon", raw: "POST /a HTTP/1.1\r\nbroken\r\n\r\n", err: errRefRequest},
		{name: "body cut short", raw: "POST /a HTTP/1.1\r\nContent-Length: 9\r\n\r\nabc", err: errRefRequest},
		{name: "head over the bound", raw: "GET /a HTTP/1.1\r\nX: " + strings.Repeat("a", refMaxHeaderBytes) + "\r\n\r\n", err: errRefRequest},
	} {
		t.Run(tc.name, func(t *testing.T) {
			path, body, err := readRefRequest(bufio.NewReaderSize(strings.NewReader(tc.raw), 4096))
			if tc.err != nil {
				if !errors.Is(err, tc.err) {
					t.Fatalf("err %v, want %v", err, tc.err)
				}
				return
			}
			if err != nil || path != tc.path || string(body) != tc.body {
				t.Fatalf("got %q %q %v, want %q %q", path, body, err, tc.path, tc.body)
			}
		})
	}
}

func TestMaxTokensOf(t *testing.T) {
	for _, tc := range []struct {
		body string
		want int
	}{
		{`{"max_tokens":32,"stream":true}`, 32},
		{`{"model":"m","max_tokens": 7}`, 7},
		{`{"stream":true}`, refDefaultTokens},
		{`{"max_tokens":0}`, refDefaultTokens},
		{`{"max_tokens":99999999999}`, refMaxTokens},
	} {
		if got := maxTokensOf([]byte(tc.body)); got != tc.want {
			t.Errorf("%s: %d, want %d", tc.body, got, tc.want)
		}
	}
}

// startRefServer serves a reference server in this process for a test.
func startRefServer(t *testing.T, step time.Duration, spread bool) (*refServer, string) {
	t.Helper()
	s := &refServer{step: step, spread: spread}
	urls, err := s.listen(1)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); s.serve(ctx) }()
	t.Cleanup(func() { cancel(); <-done })
	return s, urls[0]
}

// The probe's own client reads the reference server's streams as complete
// successes, token for token, on one kept-alive connection.
func TestRefServerStreamsToTheClient(t *testing.T) {
	for _, tc := range []struct {
		name   string
		step   time.Duration
		spread bool
		tokens int
	}{
		{name: "back to back", tokens: 50},
		{name: "aligned steps", step: 2 * time.Millisecond, tokens: 10},
		{name: "spread steps", step: 2 * time.Millisecond, spread: true, tokens: 10},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s, url := startRefServer(t, tc.step, tc.spread)
			cl := client.New(client.Options{MaxConnsPerHost: 4})
			defer cl.Close()
			target := &client.Target{Name: "ref", BaseURL: url, Model: "ref-model", Flavor: client.OpenAIChat}
			for i := range 3 {
				var obs observation.Request
				cl.Do(context.Background(), target, &client.Request{Prompt: "hello", MaxTokens: tc.tokens}, &obs)
				if obs.Outcome != observation.Success || obs.ContentEvents != tc.tokens || obs.OutputTokens != tc.tokens ||
					obs.TokenSource != observation.TokensFromUsage {
					t.Fatalf("request %d: %s %v, %d events, %d tokens from %s", i, obs.Outcome, obs.Err, obs.ContentEvents, obs.OutputTokens, obs.TokenSource)
				}
				// The last token cannot leave before the steps of the
				// tokens before it (a slow reader only makes it later).
				if tc.step > 0 {
					if took := obs.End.Sub(obs.Sent); took < time.Duration(tc.tokens-1)*tc.step {
						t.Fatalf("request %d: %d tokens in %v, a step is %v", i, tc.tokens, took, tc.step)
					}
				}
			}
			stats, err := serverStats([]string{url})
			if err != nil {
				t.Fatal(err)
			}
			if stats.Chunks != uint64(3*tc.tokens) {
				t.Errorf("server wrote %d chunks, want %d", stats.Chunks, 3*tc.tokens)
			}
			if stats.Conns < 2 || stats.Conns > 4 {
				// The stats request's own connection and the client's
				// kept-alive ones: one, or a second dialed while the
				// first was on its way back to the pool, at most one a
				// request.
				t.Errorf("%d connections open, want the stats one and 1 to 3 of the client's", stats.Conns)
			}
			if s.conns.Load() < 1 {
				t.Error("no connection counted")
			}
			resp, err := http.Post(url+"/tokenize", "application/json", strings.NewReader(`{"prompt":"x"}`))
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			if resp.StatusCode != http.StatusNotFound {
				t.Errorf("/tokenize: %d, want 404 (no tokenizer: estimated prompts)", resp.StatusCode)
			}
		})
	}
}

// A scaling load counts the requests scheduled in its window only, with
// every chunk of each, through the exporter's own workload path.
func TestLoadCountsItsWindow(t *testing.T) {
	_, url := startRefServer(t, time.Millisecond, false)
	job := clientJob{Mode: modeScaling, URLs: []string{url}, Cores: 1, Tokens: 4, Workloads: 2, Observer: "series"}
	began := time.Now()
	st, err := job.load(context.Background(), 200, 500*time.Millisecond, "")
	took := time.Since(began)
	if err != nil {
		t.Fatal(err)
	}
	// 200 req/s over a 0.5 s window: 100 arrivals, give or take the
	// runner's start a little after the window's clock.
	if st.Scheduled < 90 || st.Scheduled > 101 {
		t.Errorf("%d scheduled in the window, want about 100", st.Scheduled)
	}
	if st.Failed != 0 || st.Chunks != 4*st.Sent {
		t.Errorf("%d sent, %d failed, %d chunks: want 4 chunks a request", st.Sent, st.Failed, st.Chunks)
	}
	// The wall time is measured from when the load wakes at the window's
	// start (and has read the server's counters) to the run's end: within
	// the call, and on an idle machine most of the window. Not at least
	// 0.4 s, as this test once asked: on a busy machine the wake-up and
	// that read came 0.24 s late (a wall of 0.26 s), which is the
	// machine's speed, not the count's.
	if st.CPUSeconds <= 0 || st.WallSeconds <= 0 || st.WallSeconds > took.Seconds() || st.ServerChunks == 0 {
		t.Errorf("CPU %v s, wall %v s (the call took %v), server chunks %d", st.CPUSeconds, st.WallSeconds, took, st.ServerChunks)
	}
}

func TestTallyWindow(t *testing.T) {
	t0 := time.Unix(1000, 0)
	tl := &tally{from: t0, to: t0.Add(time.Second)}
	for _, at := range []time.Duration{-time.Millisecond, 0, 500 * time.Millisecond, time.Second, 2 * time.Second} {
		o := &observation.Request{Scheduled: t0.Add(at), Sent: t0.Add(at + time.Millisecond), Outcome: observation.Success, ContentEvents: 3}
		tl.Sent(o)
		tl.Done(o)
		tl.Dropped(o)
	}
	if tl.sent != 2 || tl.chunks != 6 || tl.dropped != 2 || len(tl.lags) != 2 || tl.lags[0] != time.Millisecond {
		t.Errorf("sent %d chunks %d dropped %d lags %v: want the two inside [from, to)", tl.sent, tl.chunks, tl.dropped, tl.lags)
	}
}

func TestHeldAndDegraded(t *testing.T) {
	for _, tc := range []struct {
		name string
		s    scalingStep
		want bool
	}{
		{"clean", scalingStep{Sent: 1000, Scheduled: 1000, LagP99: 0.002, SchedP99: 0.004}, true},
		{"1% dropped", scalingStep{Sent: 990, Dropped: 10, Scheduled: 1000}, true},
		{"over 1% dropped", scalingStep{Sent: 989, Dropped: 11, Scheduled: 1000}, false},
		{"a failure", scalingStep{Sent: 1000, Scheduled: 1000, Failed: 1}, false},
		{"degraded", scalingStep{Sent: 1000, Scheduled: 1000, Degraded: true}, false},
		{"nothing sent", scalingStep{}, false},
	} {
		if got := tc.s.Held(); got != tc.want {
			t.Errorf("%s: held %v, want %v", tc.name, got, tc.want)
		}
	}
	for _, tc := range []struct {
		lag, sched float64
		want       bool
	}{{0.009, 0.009, false}, {0.011, 0, true}, {0, 0.011, true}} {
		if got := degraded(tc.lag, tc.sched); got != tc.want {
			t.Errorf("degraded(%v, %v) = %v, want %v", tc.lag, tc.sched, got, tc.want)
		}
	}
}

func TestSplitCPUsAndLists(t *testing.T) {
	for _, tc := range []struct {
		cpus           []int
		n              int
		client, server string
		shared         bool
	}{
		{[]int{0, 1, 2, 3}, 1, "0", "1-3", false},
		{[]int{0, 1, 2, 3}, 3, "0-2", "3", false},
		{[]int{0, 1, 2, 3}, 4, "0-3", "0-3", true},
		{[]int{0, 2, 3, 5, 6, 7}, 2, "0,2", "3,5-7", false},
	} {
		c, s, shared := splitCPUs(tc.cpus, tc.n)
		if cpuList(c) != tc.client || cpuList(s) != tc.server || shared != tc.shared {
			t.Errorf("%v n=%d: %s / %s shared %v, want %s / %s %v", tc.cpus, tc.n, cpuList(c), cpuList(s), shared, tc.client, tc.server, tc.shared)
		}
	}
	var got []int
	if err := intList(&got, 1, 16)("1, 2,16"); err != nil || len(got) != 3 || got[2] != 16 {
		t.Errorf("intList: %v %v", got, err)
	}
	for _, bad := range []string{"0", "17", "x", ""} {
		if err := intList(&got, 1, 16)(bad); err == nil {
			t.Errorf("intList(%q) accepted", bad)
		}
	}
	for _, tc := range []struct{ n, want int }{{1, 1}, {20000, 1}, {20001, 2}, {64000, 4}} {
		if got := portsFor(tc.n); got != tc.want {
			t.Errorf("portsFor(%d) = %d, want %d", tc.n, got, tc.want)
		}
	}
	if got := mergeInstants([]time.Duration{3, 1}, 2, 1); len(got) != 3 || got[0] != 1 || got[1] != 2 || got[2] != 3 {
		t.Errorf("mergeInstants: %v", got)
	}
}

// The fleet scenario counts what Prometheus would ingest from a registry
// holding one native histogram (with classic buckets) and one counter.
func TestScrapeExposition(t *testing.T) {
	reg := prometheus.NewRegistry()
	h := prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name: "demo_seconds", Help: "h", Buckets: []float64{.1, 1},
		NativeHistogramBucketFactor: 1.1,
	}, []string{"workload"})
	c := prometheus.NewCounter(prometheus.CounterOpts{Name: "demo_total", Help: "c"})
	reg.MustRegister(h, c)
	h.WithLabelValues("w").Observe(0.05)
	h.WithLabelValues("w").Observe(0.5)
	c.Inc()
	srv := httptest.NewServer(promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))
	defer srv.Close()
	e, err := scrapeExposition(srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	// Text: 3 buckets (with +Inf), _sum, _count, the counter.
	if e.classic != 6 || e.workload != 5 || e.native != 1 || e.nativeClassic != 5 || e.nativeBuckets != 2 {
		t.Fatalf("%+v", e)
	}
	modes := e.modes()
	if modes[0].series != 6 || modes[1].series != 2 || modes[2].series != 7 {
		t.Errorf("series per mode %d %d %d, want 6 2 7", modes[0].series, modes[1].series, modes[2].series)
	}
	if modes[1].perWorkload != 1 || modes[1].native != 1 || modes[1].bytes != e.protoBytes {
		t.Errorf("native mode: %+v", modes[1])
	}
	if e.gzipBytes <= 0 || e.gzipBytes >= e.textBytes+64 {
		t.Errorf("gzip %d of %d bytes", e.gzipBytes, e.textBytes)
	}
}

func TestPromMemory(t *testing.T) {
	// 1,000 float series of 3 label pairs (5 with job and instance) and a
	// 40-byte name, every 15 s: cardinality (732 + 5·32 + 2·40)·2 each, and
	// 720 samples in 3 h at 2 B, ×1.5 ×2.
	want := 1000*(732+5*32+2*40)*2.0 + 1000*720*2*1.5*2
	if got := promMemory(1000, 0, 15*time.Second, 3, 40); math.Abs(got-want) > 1e-6*want {
		t.Errorf("promMemory = %v, want %v", got, want)
	}
	// A native histogram's samples cost 25 B instead of 2.
	diff := promMemory(1000, 1000, 15*time.Second, 3, 40) - promMemory(1000, 0, 15*time.Second, 3, 40)
	if wantDiff := 1000 * 720 * (25.0 - 2) * 1.5 * 2; math.Abs(diff-wantDiff) > 1e-6*wantDiff {
		t.Errorf("native histograms add %v, want %v", diff, wantDiff)
	}
}
