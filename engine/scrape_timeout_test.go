package engine

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/infer-exporter/infer_exporter/internal/config"
)

// TestScrapeTimeoutLongerThanInterval: a timeout that code sets above the
// interval (the bench's prefix-cache watch: a 100 ms poll, a 1 s timeout;
// a configuration cannot) is kept, so a server that answers its metrics
// in 250 ms is read at a 50 ms poll; an unset timeout is the interval's,
// which such a server misses. Before, the scraper cut every timeout to
// the interval, and on a loaded machine every read of the watch timed out.
func TestScrapeTimeoutLongerThanInterval(t *testing.T) {
	slow := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		time.Sleep(250 * time.Millisecond)
		serveFiles(map[string]string{"/metrics": "metrics_vllm_v1.txt"}).ServeHTTP(w, r)
	})
	srv := httptest.NewServer(slow)
	defer srv.Close()
	for _, tc := range []struct {
		name    string
		timeout time.Duration
		want    time.Duration
		up      bool
	}{
		{"timeout set above the interval", 20 * time.Second, 20 * time.Second, true},
		{"timeout unset", 0, 50 * time.Millisecond, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, err := config.Parse([]byte(fmt.Sprintf("targets:\n  - {name: s, url: %s, model: m, metrics: {engine: vllm}}\n", srv.URL)), "c.yml")
			if err != nil {
				t.Fatal(err)
			}
			c.Targets[0].Metrics.Interval, c.Targets[0].Metrics.Timeout = 50*time.Millisecond, tc.timeout
			sm := NewScraper(slog.New(slog.DiscardHandler))
			defer sm.Close()
			if err := sm.ApplyConfig(context.Background(), c); err != nil {
				t.Fatal(err)
			}
			snap := waitSnapshot(t, sm, "s")
			sm.mu.Lock()
			got := sm.scrapers["s"].t.timeout
			sm.mu.Unlock()
			if got != tc.want || snap.up != tc.up {
				t.Errorf("timeout %v, first scrape up %v; want %v, up %v", got, snap.up, tc.want, tc.up)
			}
		})
	}
}
