package shadow_test

import (
	"bytes"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/infer-exporter/infer_exporter/internal/shadow"
)

// BenchmarkProxyAddedLatency measures the latency the proxy adds on
// loopback: each iteration sends one streamed chat completion directly to
// the upstream and one through the proxy, and times each from send to last
// byte. It reports the p50 and p99 of both and their differences
// (added-p50-µs, added-p99-µs), without capture, with capture into a file
// store, and with a store that never returns from Write (every sample
// dropped once the queue is full): a stalled store must not add latency.
//
// The upstream is a fixed handler (16 SSE events, flushed one by one), so
// that what varies is the proxy, not a model.
//
//	go test -run '^$' -bench ProxyAddedLatency -benchtime 2000x ./internal/shadow/
func BenchmarkProxyAddedLatency(b *testing.B) {
	event := []byte(`data: {"id":"x","object":"chat.completion.chunk","choices":[{"index":0,"delta":{"content":" lorem"}}]}` + "\n\n")
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", "text/event-stream")
		for range 16 {
			w.Write(event)
			w.(http.Flusher).Flush()
		}
		io.WriteString(w, `data: {"choices":[],"usage":{"prompt_tokens":12,"completion_tokens":16,"total_tokens":28}}`+"\n\ndata: [DONE]\n\n")
	}))
	defer up.Close()
	body := []byte(`{"model":"m","messages":[{"role":"user","content":"a prompt of a dozen words or so, as a chat turn might be"}],"max_tokens":16,"stream":true,"stream_options":{"include_usage":true}}`)

	for _, tc := range []struct {
		name   string
		sample float64
		store  func(b *testing.B) (shadow.Store, func())
	}{
		{"no-capture", 0, func(*testing.B) (shadow.Store, func()) { return nil, func() {} }},
		{"capture", 1, func(b *testing.B) (shadow.Store, func()) {
			s, err := shadow.OpenStore(b.TempDir(), 64<<20, 4)
			if err != nil {
				b.Fatal(err)
			}
			return s, func() { s.Close() }
		}},
		{"stalled-store", 1, func(*testing.B) (shadow.Store, func()) {
			s := &blockingStore{release: make(chan struct{})}
			return s, func() { close(s.release) }
		}},
	} {
		b.Run(tc.name, func(b *testing.B) {
			store, release := tc.store(b)
			proxyURL, stop := startProxy(b, shadow.Config{Upstream: up.URL, Sample: tc.sample, QueueLength: 64}, store, prometheus.NewRegistry())
			defer stop()
			defer release() // before stop: a stalled store holds Close otherwise
			hc := &http.Client{Transport: &http.Transport{DisableCompression: true, MaxIdleConnsPerHost: 4}}
			defer hc.CloseIdleConnections()
			once := func(url string) time.Duration {
				start := time.Now()
				resp, err := hc.Post(url+"/v1/chat/completions", "application/json", bytes.NewReader(body))
				if err != nil {
					b.Fatal(err)
				}
				n, err := io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
				d := time.Since(start)
				if err != nil || resp.StatusCode != 200 || n < 16*int64(len(event)) {
					b.Fatalf("status %d, %d bytes, %v", resp.StatusCode, n, err)
				}
				return d
			}
			for range 50 { // warm connections and pools
				once(up.URL)
				once(proxyURL)
			}
			direct := make([]time.Duration, 0, b.N)
			proxied := make([]time.Duration, 0, b.N)
			b.ResetTimer()
			for range b.N {
				direct = append(direct, once(up.URL))
				proxied = append(proxied, once(proxyURL))
			}
			b.StopTimer()
			q := func(d []time.Duration, p float64) float64 {
				s := slices.Clone(d)
				slices.Sort(s)
				return float64(s[min(int(p*float64(len(s))), len(s)-1)]) / 1e3
			}
			b.ReportMetric(q(direct, 0.5), "direct-p50-µs")
			b.ReportMetric(q(proxied, 0.5), "proxied-p50-µs")
			b.ReportMetric(q(proxied, 0.5)-q(direct, 0.5), "added-p50-µs")
			b.ReportMetric(q(direct, 0.99), "direct-p99-µs")
			b.ReportMetric(q(proxied, 0.99), "proxied-p99-µs")
			b.ReportMetric(q(proxied, 0.99)-q(direct, 0.99), "added-p99-µs")
		})
	}
}
