package main

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// hostileServer answers every engine's info endpoints with hand-written
// documents of the largest strings the 1 MiB read lets through: an
// Ollama's 1 MB version and forty 20 KB loaded model names, llama.cpp's
// half-MB build_info and model_path, vLLM's 1 MB version and served model,
// and a vLLM /metrics whose mapped family carries a 100 KB label.
//
// Not hostile, it is the same server with ordinary values (a version of
// a few bytes, one loaded model), the page's baseline.
func hostileServer(t *testing.T, hostile bool) *httptest.Server {
	t.Helper()
	long := func(c string, n int) string {
		if !hostile {
			return c + "1.2"
		}
		return strings.Repeat(c, n)
	}
	models := make([]map[string]any, 40)
	for i := range models {
		models[i] = map[string]any{"name": fmt.Sprintf("m%02d", i) + long("x", 20_000), "size": 1 << 30, "size_vram": 1 << 30}
	}
	if !hostile {
		models = models[:1]
	}
	docs := map[string]any{
		"/api/version": map[string]any{"version": long("9", 1_000_000)},
		"/api/ps":      map[string]any{"models": models},
		"/props": map[string]any{"build_info": long("b", 500_000), "model_path": long("/", 500_000),
			"default_generation_settings": map[string]any{"n_ctx": 4096}},
		"/version":   map[string]any{"version": long("v", 1_000_000)},
		"/v1/models": map[string]any{"data": []map[string]any{{"id": long("i", 1_000_000), "max_model_len": 8192}}},
	}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch p := r.URL.Path; {
		case p == "/metrics":
			fmt.Fprintf(w, "vllm:num_requests_running{model_name=%q} 1\n", long("l", 100_000))
		case p == "/" || p == "/health":
			fmt.Fprint(w, "ok")
		case docs[p] != nil:
			w.Header().Set("Content-Type", "application/json")
			_ = json.NewEncoder(w).Encode(docs[p])
		default:
			http.NotFound(w, r)
		}
	}))
	t.Cleanup(srv.Close)
	return srv
}

// TestMetricsPageWithHostileTargets: 17 targets whose servers send the
// largest label values they can (hostileServer), with configured models of
// the largest length allowed, against the same 17 targets served ordinary
// values. Every value a server gives is capped (engine.MaxLabelBytes) and
// a target's loaded model names are bounded in all
// (engine.MaxLoadedNameBytes), so the hostile values add at most 2 KB a
// target: an info line with two cut values (2 × 256 bytes) and at most
// 1024 bytes of loaded model names, each on two series (2 × 1024 bytes
// and their labels' overhead), for the Ollamas. Before the caps, one 1 MB
// version alone made a 1 MB line.
//
// The whole page, 17 targets served hostile values with configured model
// names of 256 bytes each (the longest a name may be), stays under 100 kB.
func TestMetricsPageWithHostileTargets(t *testing.T) {
	// Every wait ends with the test's time, the targets' scrape timeout
	// included: with an hour's interval a scrape that timed out (5 s by
	// default; on a busy machine, under the race detector, 17 targets'
	// megabyte answers took longer) left its target without info lines
	// for the rest of the test.
	deadline := testDeadline(t)
	scrapeTimeout := min(time.Until(deadline), time.Hour).Truncate(time.Second)
	page := func(hostile bool) string {
		srv := hostileServer(t, hostile)
		engines := []string{"ollama", "llamacpp", "vllm"}
		var b strings.Builder
		b.WriteString("targets:\n")
		for i := range 17 {
			model := fmt.Sprintf("model%02d-", i) + strings.Repeat("q", 256-len("model00-"))
			fmt.Fprintf(&b, "  - {name: h%02d, url: %q, model: %q, metrics: {engine: %s, interval: 1h, timeout: %s}}\n", i, srv.URL, model, engines[i%len(engines)], scrapeTimeout)
		}
		file := filepath.Join(t.TempDir(), "c.yml")
		if err := os.WriteFile(file, []byte(b.String()), 0o600); err != nil {
			t.Fatal(err)
		}
		base := startExporter(t, "--config.file="+file)
		client := &http.Client{Timeout: time.Until(deadline)}
		// Every target's first scrape done, with its info and, for the
		// Ollamas, their loaded models.
		for {
			p := get(t, client, base+"/metrics")
			if strings.Count(p, "\ninfer_server_info{") == 17 && strings.Count(p, "\ninfer_server_starts_total{") == 17 &&
				strings.Contains(p, "\ninfer_server_loaded_model_bytes{") {
				return p
			}
			if time.Now().After(deadline) {
				t.Fatalf("not every target scraped: %d info lines", strings.Count(p, "\ninfer_server_info{"))
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
	// The cold-start tracker's lines of a target's latest start
	// (infer_server_last_*) appear once it has seen one: here only when a
	// readiness poll of a target failed, which a busy machine makes happen
	// (a poll that times out while the exporter parses a 1 MB answer), not
	// the values served. They are left out of both pages, so that the
	// bounds below measure what the values do. (In a cold CI run, the race
	// step beside compiles, the hostile page was 100,689 bytes, 3.9 kB over
	// the 96.8 kB of a quiet run: about the size of 17 targets' start
	// lines.)
	ordinary, hostile := withoutLatestStarts(page(false)), withoutLatestStarts(page(true))
	t.Logf("/metrics with 17 targets: %d bytes served ordinary values, %d bytes served hostile ones", len(ordinary), len(hostile))
	if len(hostile) >= 100_000 {
		t.Errorf("/metrics of 17 hostile targets is %d bytes, want under 100 kB", len(hostile))
	}
	if grown := len(hostile) - len(ordinary); grown > 17*2048 {
		t.Errorf("hostile values grew the page by %d bytes, want at most %d (2 KB a target)", grown, 17*2048)
	}
	for _, l := range strings.Split(hostile, "\n") {
		if len(l) > 2048 {
			t.Errorf("a line of %d bytes: %.200s...", len(l), l)
		}
	}
}

// withoutLatestStarts drops the lines of the cold-start tracker's latest
// start families (samples, HELP and TYPE) from an exposition page.
func withoutLatestStarts(page string) string {
	var b strings.Builder
	for _, l := range strings.SplitAfter(page, "\n") {
		name := strings.TrimPrefix(strings.TrimPrefix(l, "# HELP "), "# TYPE ")
		if strings.HasPrefix(name, "infer_server_last_start_time_seconds") || strings.HasPrefix(name, "infer_server_last_cold_start_seconds") {
			continue
		}
		b.WriteString(l)
	}
	return b.String()
}
