package engine

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"runtime"
	"runtime/debug"
	"runtime/metrics"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/infer-exporter/infer_exporter/internal/config"
)

// largeBodyMapped is the few mapped lines a large test body carries, half
// before its bulk and half after, so that a reader that stopped early
// would miss the second half.
const (
	largeBodyHead = "# TYPE vllm:num_requests_running gauge\nvllm:num_requests_running{model_name=\"m\"} 3\n"
	largeBodyTail = "# TYPE vllm:num_requests_waiting gauge\nvllm:num_requests_waiting{model_name=\"m\"} 5\nprocess_start_time_seconds 1.7e9\n"
)

// largeBody builds a body of nearly maxMetricsBytes: n lines made by line
// between the mapped head and tail.
func largeBody(n int, line func(b []byte, i int) []byte) []byte {
	b := make([]byte, 0, maxMetricsBytes)
	b = append(b, largeBodyHead...)
	for i := range n {
		b = line(b, i)
	}
	b = append(b, largeBodyTail...)
	if len(b) > maxMetricsBytes {
		panic(fmt.Sprintf("test body of %d bytes, over %d", len(b), maxMetricsBytes))
	}
	return b
}

// manySeries: 1,000,000 series of one unmapped family, 16 bytes each.
func manySeries() []byte {
	return largeBody(1_000_000, func(b []byte, i int) []byte {
		b = append(b, `o{i="`...)
		for d := 100000; d > 0; d /= 10 {
			b = append(b, byte('0'+i/d%10))
		}
		return append(b, "\"} 1\n"...)
	})
}

// manyFamilies: 1,600,000 unmapped families of one sample each, 10 bytes
// each ("f" and six letters).
func manyFamilies() []byte {
	return largeBody(1_600_000, func(b []byte, i int) []byte {
		b = append(b, 'f')
		for range 6 {
			b = append(b, byte('a'+i%26))
			i /= 26
		}
		return append(b, " 1\n"...)
	})
}

// heapObjects is the Go heap's bytes in objects, live or not yet swept.
func heapObjects() uint64 {
	s := []metrics.Sample{{Name: "/memory/classes/heap/objects:bytes"}}
	metrics.Read(s)
	return s[0].Value.Uint64()
}

// procStatus reads a kB field of /proc/self/status, in bytes; false where
// there is none (not Linux).
func procStatus(field string) (uint64, bool) {
	f, err := os.Open("/proc/self/status")
	if err != nil {
		return 0, false
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if rest, ok := strings.CutPrefix(sc.Text(), field+":"); ok {
			kb, err := strconv.ParseUint(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(rest), "kB")), 10, 64)
			return kb << 10, err == nil
		}
	}
	return 0, false
}

// TestScrapeMemoryLargeBodies: two targets at once, each serving a body of
// nearly 16 MiB of families the mapping does not read, are scraped with
// less than 100 MB added, in the Go heap (sampled every millisecond) and in
// the process's peak RSS (VmHWM, reset before the scrapes); and the mapped
// families around the bulk are read. Before parse.go these took 570 MB
// (a million series) and 960 MB (1.6 million families) per target.
func TestScrapeMemoryLargeBodies(t *testing.T) {
	const limit = 100 << 20
	for _, tc := range []struct {
		name string
		body func() []byte
	}{
		{"a million series of one family", manySeries},
		{"1.6 million one-sample families", manyFamilies},
	} {
		t.Run(tc.name, func(t *testing.T) {
			body := tc.body()
			serve := func() *httptest.Server {
				return httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
					if r.URL.Path != "/metrics" {
						http.NotFound(w, r)
						return
					}
					w.Write(body)
				}))
			}
			a, b := serve(), serve()
			defer a.Close()
			defer b.Close()
			c, err := config.Parse([]byte(fmt.Sprintf("targets:\n"+
				"  - {name: a, url: %s, model: m, metrics: {interval: 1h, timeout: 10m, engine: vllm}}\n"+
				"  - {name: b, url: %s, model: m, metrics: {interval: 1h, timeout: 10m, engine: vllm}}\n", a.URL, b.URL)), "c.yml")
			if err != nil {
				t.Fatal(err)
			}

			runtime.GC()
			debug.FreeOSMemory()
			baseHeap := heapObjects()
			baseRSS, haveRSS := procStatus("VmRSS")
			// Writing 5 resets the peak RSS to the current RSS (Linux 4.0).
			haveRSS = haveRSS && os.WriteFile("/proc/self/clear_refs", []byte("5"), 0) == nil
			var peakHeap uint64
			stop, sampled := make(chan struct{}), sync.WaitGroup{}
			sampled.Add(1)
			go func() {
				defer sampled.Done()
				tick := time.NewTicker(time.Millisecond)
				defer tick.Stop()
				for {
					peakHeap = max(peakHeap, heapObjects())
					select {
					case <-stop:
						return
					case <-tick.C:
					}
				}
			}()

			sm := NewScraper(slog.New(slog.DiscardHandler))
			defer sm.Close()
			if err := sm.ApplyConfig(context.Background(), c); err != nil {
				t.Fatal(err)
			}
			sa, sb := waitSnapshot(t, sm, "a"), waitSnapshot(t, sm, "b")
			close(stop)
			sampled.Wait()
			peakHeap = max(peakHeap, heapObjects())

			for _, s := range []*serverSnapshot{sa, sb} {
				if !s.up || s.values.v[qRunning] != 3 || s.values.v[qWaiting] != 5 {
					t.Errorf("%s: up %v running %v waiting %v, want up, 3 and 5", s.target, s.up, s.values.v[qRunning], s.values.v[qWaiting])
				}
			}
			added := int64(peakHeap) - int64(baseHeap)
			t.Logf("%d-byte bodies: Go heap %+.1f MB at its peak", len(body), float64(added)/1e6)
			if added > limit {
				t.Errorf("the Go heap grew by %.1f MB scraping two such bodies, want under %d MB", float64(added)/1e6, limit>>20)
			}
			if haveRSS {
				if hwm, ok := procStatus("VmHWM"); ok {
					rss := int64(hwm) - int64(baseRSS)
					t.Logf("peak RSS %+.1f MB", float64(rss)/1e6)
					if rss > limit {
						t.Errorf("the peak RSS grew by %.1f MB scraping two such bodies, want under %d MB", float64(rss)/1e6, limit>>20)
					}
				}
			}
		})
	}
}

// BenchmarkParseMetrics16MiB: a body of nearly 16 MiB of unmapped families
// read as the scraper reads it (stream), against expfmt over all of it
// (expfmt), as before parse.go.
//
//	go test -run '^$' -bench ParseMetrics16MiB -benchtime 3x ./engine/
func BenchmarkParseMetrics16MiB(b *testing.B) {
	for _, body := range []struct {
		name string
		b    []byte
	}{{"series", manySeries()}, {"families", manyFamilies()}} {
		b.Run(body.name+"/stream", func(b *testing.B) {
			b.ReportAllocs()
			b.SetBytes(int64(len(body.b)))
			for b.Loop() {
				if _, err := parseMetricsBody(context.Background(), bytes.NewReader(body.b)); err != nil {
					b.Fatal(err)
				}
			}
		})
		b.Run(body.name+"/expfmt", func(b *testing.B) {
			b.ReportAllocs()
			b.SetBytes(int64(len(body.b)))
			for b.Loop() {
				if _, err := referenceParse(body.b); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
