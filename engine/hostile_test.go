package engine

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/common/expfmt"

	"github.com/infer-exporter/infer_exporter/internal/textcut"
)

// hostileRoutes answers a server's info endpoints with hand-written JSON
// documents (not recordings) whose strings are huge: values a server may
// send, each bounded only by the 1 MiB read before label caps.
func hostileRoutes(routes map[string]any) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		v, ok := routes[r.URL.Path]
		if !ok {
			http.NotFound(w, r)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(v)
	})
}

// big is a string of n bytes (under the 1 MiB info read with its JSON).
func big(c string, n int) string { return strings.Repeat(c, n) }

// TestServerLabelValuesCapped: a server's version, served model, build
// info, model path and loaded model names become label values of at most
// MaxLabelBytes, cut with the ellipsis, each label warned about once per
// target; two loaded models whose names are cut alike are one series, and
// the loaded models' names are bounded in all (MaxLoadedNameBytes).
func TestServerLabelValuesCapped(t *testing.T) {
	const mb = 1_000_000
	manyModels := make([]map[string]any, 0, 40)
	for i := range 40 {
		manyModels = append(manyModels, map[string]any{"name": fmt.Sprintf("m%02d", i) + big("x", 20_000), "size": 1, "size_vram": 1})
	}
	for _, tc := range []struct {
		name, engine string
		routes       map[string]any
		labels       []string // the labels warned about
	}{
		{"ollama version and loaded models", "ollama", map[string]any{
			"/api/version": map[string]any{"version": big("9", mb)},
			"/api/ps":      map[string]any{"models": manyModels},
		}, []string{"version", "loaded_model"}},
		{"ollama one loaded model of 1 MB", "ollama", map[string]any{
			"/api/version": map[string]any{"version": "0.9.0"},
			"/api/ps":      map[string]any{"models": []map[string]any{{"name": big("n", mb), "size": 5, "size_vram": 5}}},
		}, []string{"model", "loaded_model"}},
		{"llamacpp build info and model path", "llamacpp", map[string]any{
			"/props": map[string]any{"build_info": big("b", mb/2), "model_path": big("/", mb/2), "default_generation_settings": map[string]any{"n_ctx": 4096}},
		}, []string{"version", "model"}},
		{"vllm version and served model", "vllm", map[string]any{
			"/version":   map[string]any{"version": big("v", mb)},
			"/v1/models": map[string]any{"data": []map[string]any{{"id": big("i", mb), "max_model_len": 8192}}},
		}, []string{"version", "model"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srv := httptest.NewServer(hostileRoutes(tc.routes))
			defer srv.Close()
			var logs logBuffer
			sm := NewScraper(slog.New(slog.NewTextHandler(&logs, nil)))
			defer sm.Close()
			sc := startScraper(t, sm, srv.URL, ", engine: "+tc.engine)
			// A second scrape reads the info again (Ollama: every
			// scrape): no second warning.
			sc.infoAge = infoRefresh
			sc.scrape(context.Background())

			info, ok := sm.Snapshot("s")
			if !ok || !info.HasInfo {
				t.Fatalf("no info: %+v", info)
			}
			values := []string{info.Version, info.ServedModel}
			for _, m := range info.LoadedModels {
				values = append(values, m.Name)
			}
			cut := 0
			for _, v := range values {
				if len(v) > MaxLabelBytes {
					t.Errorf("a label value of %d bytes, want at most %d", len(v), MaxLabelBytes)
				}
				if len(v) == MaxLabelBytes && strings.HasSuffix(v, textcut.Ellipsis) {
					cut++
				}
			}
			if cut == 0 {
				t.Errorf("no value cut with the marker: %q", values)
			}
			names := 0
			for _, m := range info.LoadedModels {
				names += len(m.Name)
			}
			if names > MaxLoadedNameBytes {
				t.Errorf("loaded model names take %d bytes, want at most %d", names, MaxLoadedNameBytes)
			}
			for _, l := range tc.labels {
				want := "label=" + l + " "
				if n := strings.Count(logs.String(), want); n != 1 {
					t.Errorf("%d warnings for label %s after two scrapes, want 1:\n%s", n, l, logs.String())
				}
			}
			// What /metrics shows of this target is small.
			reg := prometheus.NewPedanticRegistry()
			reg.MustRegister(sm)
			mfs, err := reg.Gather()
			if err != nil {
				t.Fatal(err)
			}
			var page bytes.Buffer
			for _, mf := range mfs {
				if _, err := expfmt.MetricFamilyToText(&page, mf); err != nil {
					t.Fatal(err)
				}
			}
			if page.Len() > 5000 {
				t.Errorf("the target's series take %d bytes of /metrics, want at most 5000", page.Len())
			}
		})
	}
}

// TestServerMetricsLongLineWarns: a 3 MB line in a mapped vLLM family
// passes the kept text's bound; the scrape is refused with that reason
// (not the parser's "unexpected end of input stream" of the cut text), at
// warning level, once while it lasts, and its recovery is told.
func TestServerMetricsLongLineWarns(t *testing.T) {
	var body atomic.Value
	body.Store("vllm:num_requests_running{model_name=\"" + big("m", 3_000_000) + "\"} 1\n")
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/metrics" {
			http.NotFound(w, r)
			return
		}
		_, _ = w.Write([]byte(body.Load().(string)))
	}))
	defer srv.Close()
	var logs logBuffer
	sm := NewScraper(slog.New(slog.NewTextHandler(&logs, nil)))
	defer sm.Close()
	sc := startScraper(t, sm, srv.URL, ", engine: vllm")
	if s := sc.snap.Load(); s.up {
		t.Fatal("up after a refused scrape")
	}
	sc.scrape(context.Background())
	got := logs.String()
	if n := strings.Count(got, "level=WARN"); n != 1 {
		t.Errorf("%d warnings after two refused scrapes, want 1:\n%s", n, got)
	}
	for _, w := range []string{"scrape refused", "the mapped families take more than 2097152 bytes (at line 1)"} {
		if !strings.Contains(got, w) {
			t.Errorf("the warning lacks %q:\n%s", w, got)
		}
	}
	if strings.Contains(got, "unexpected end of input stream") {
		t.Errorf("the parser's complaint instead of the reason:\n%s", got)
	}
	body.Store("vllm:num_requests_running{model_name=\"m\"} 1\n")
	sc.scrape(context.Background())
	if s := sc.snap.Load(); !s.up || !strings.Contains(logs.String(), "scrape recovered") {
		t.Errorf("up %v after a good scrape; log:\n%s", s.up, logs.String())
	}
}

// TestOllamaPsFailureVisible: an Ollama whose /api/ps cannot be read (an
// HTML page, an error status, the wrong types, a body over 1 MiB) is
// infer_server_up 0, with the reason at warning level once; a good answer
// brings it back to 1.
func TestOllamaPsFailureVisible(t *testing.T) {
	for _, tc := range []struct {
		name   string
		ps     func(w http.ResponseWriter)
		reason string
	}{
		{"html", func(w http.ResponseWriter) {
			w.Header().Set("Content-Type", "text/html")
			_, _ = w.Write([]byte("<html>proxy error</html>"))
		}, `Content-Type \"text/html\", want application/json`},
		{"500", func(w http.ResponseWriter) { http.Error(w, "boom", http.StatusInternalServerError) }, "HTTP 500"},
		{"wrong types", func(w http.ResponseWriter) {
			w.Header().Set("Content-Type", "application/json")
			_, _ = w.Write([]byte(`{"models":[{"name":7,"size":"big"}]}`))
		}, "cannot unmarshal number"},
		{"over 1 MiB", func(w http.ResponseWriter) {
			w.Header().Set("Content-Type", "application/json")
			_, _ = w.Write([]byte(`{"models":[{"name":"` + big("n", 1<<20) + `"}]}`))
		}, "body larger than 1048576 bytes"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var good atomic.Bool
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				switch r.URL.Path {
				case "/api/version":
					w.Header().Set("Content-Type", "application/json")
					_, _ = w.Write([]byte(`{"version":"0.9.0"}`))
				case "/api/ps":
					if good.Load() {
						w.Header().Set("Content-Type", "application/json")
						_, _ = w.Write([]byte(`{"models":[{"name":"m","size":10,"size_vram":5}]}`))
						return
					}
					tc.ps(w)
				default:
					http.NotFound(w, r)
				}
			}))
			defer srv.Close()
			var logs logBuffer
			sm := NewScraper(slog.New(slog.NewTextHandler(&logs, nil)))
			defer sm.Close()
			sc := startScraper(t, sm, srv.URL, ", engine: ollama")
			sc.scrape(context.Background())
			got := gatherServer(t, sm)
			if v, ok := got["infer_server_up{engine=ollama,model=m,target=s}"]; !ok || v != 0 {
				t.Errorf("infer_server_up = %v (present %v), want 0", v, ok)
			}
			log := logs.String()
			if n := strings.Count(log, "level=WARN"); n != 1 {
				t.Errorf("%d warnings after two failed scrapes, want 1:\n%s", n, log)
			}
			if !strings.Contains(log, "/api/ps") || !strings.Contains(log, tc.reason) {
				t.Errorf("the warning lacks /api/ps and %q:\n%s", tc.reason, log)
			}
			good.Store(true)
			sc.scrape(context.Background())
			got = gatherServer(t, sm)
			if v := got["infer_server_up{engine=ollama,model=m,target=s}"]; v != 1 {
				t.Errorf("infer_server_up = %v after a good answer, want 1", v)
			}
			if v, ok := got["infer_server_loaded_model_bytes{engine=ollama,loaded_model=m,memory=total,target=s}"]; !ok || v != 10 {
				t.Errorf("loaded model bytes %v (present %v), want 10", v, ok)
			}
		})
	}
}
