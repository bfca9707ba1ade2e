package simulator_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/infer-exporter/infer_exporter/internal/simulator/simulatortest"
)

// BenchmarkStreamedTokens drives concurrent streaming chat completions over
// loopback HTTP against a simulator with time scale 0 (instant steps) and
// reports the streamed tokens per second the simulator serves, client
// included, so load tests know it is not their bottleneck. One op is one
// request of 128 tokens.
func BenchmarkStreamedTokens(b *testing.B) {
	const maxTokens = 128
	for _, streams := range []int{16, 256, 1000} {
		b.Run(fmt.Sprintf("streams=%d", streams), func(b *testing.B) {
			base, _ := simulatortest.StartTest(b, simulatortest.InstantConfig())
			tr := &http.Transport{MaxIdleConnsPerHost: streams, DisableCompression: true}
			b.Cleanup(tr.CloseIdleConnections)
			client := &http.Client{Transport: tr}
			body, _ := json.Marshal(chatBody(words(32, "bench"), maxTokens, true))
			contentMark := []byte(`"delta":{"content":"`)

			var next, tokens atomic.Int64
			var wg sync.WaitGroup
			b.ResetTimer()
			begin := time.Now()
			for range streams {
				wg.Go(func() {
					for next.Add(1) <= int64(b.N) {
						req, _ := http.NewRequestWithContext(context.Background(), http.MethodPost, base+"/v1/chat/completions", bytes.NewReader(body))
						resp, err := client.Do(req)
						if err != nil {
							b.Error(err)
							return
						}
						br := bufio.NewReaderSize(resp.Body, 16<<10)
						n := 0
						for {
							line, err := br.ReadSlice('\n')
							if bytes.Contains(line, contentMark) {
								n++
							}
							if err != nil {
								break
							}
						}
						resp.Body.Close()
						if n != maxTokens {
							b.Errorf("%d tokens streamed, want %d", n, maxTokens)
							return
						}
						tokens.Add(int64(n))
					}
				})
			}
			wg.Wait()
			elapsed := time.Since(begin)
			b.ReportMetric(float64(tokens.Load())/elapsed.Seconds(), "tokens/s")
		})
	}
}
