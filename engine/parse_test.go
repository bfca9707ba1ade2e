package engine

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestParseMetricsMatchesReference: for every recorded scrape, the families
// kept are exactly expfmt's, and the engine detected from the stream is
// detectEngine's over every family.
func TestParseMetricsMatchesReference(t *testing.T) {
	files, err := filepath.Glob("testdata/server/metrics_*.txt")
	if err != nil || len(files) == 0 {
		t.Fatalf("no recorded scrapes: %v", err)
	}
	for _, file := range files {
		t.Run(filepath.Base(file), func(t *testing.T) {
			b, err := os.ReadFile(file)
			if err != nil {
				t.Fatal(err)
			}
			ref, err := referenceParse(b)
			if err != nil {
				t.Fatal(err)
			}
			got, err := parseMetricsBody(context.Background(), bytes.NewReader(b))
			if err != nil {
				t.Fatal(err)
			}
			if got.engine != detectEngine(ref) {
				t.Errorf("engine %q, detectEngine says %q", got.engine, detectEngine(ref))
			}
			checkAgainstReference(t, b)
		})
	}
}

// TestParseMetricsBody: what a body gives, kept families and refusals.
func TestParseMetricsBody(t *testing.T) {
	mapped := "# TYPE vllm:num_requests_running gauge\nvllm:num_requests_running{model_name=\"m\"} 3\n"
	var many strings.Builder
	for i := range maxSeriesPerFamily + 1 {
		fmt.Fprintf(&many, "vllm:num_requests_waiting{engine=\"%d\"} 1\n", i)
	}
	var wide strings.Builder
	for i := range maxKeptBytes / 1000 {
		fmt.Fprintf(&wide, "vllm:kv_cache_usage_perc{engine=\"%d\",pad=\"%s\"} 1\n", i, strings.Repeat("x", 1000))
	}
	for _, tc := range []struct {
		name, body string
		// families kept, or the error's text (refused: errRefused).
		fams    []string
		err     string
		refused bool
	}{
		{"mapped kept, others dropped", mapped + "# TYPE other gauge\nother{a=\"1\"} 1\nother{a=\"1\"} 2\n", []string{"vllm:num_requests_running"}, "", false},
		{"no newline at the end", strings.TrimSuffix(mapped, "\n"), []string{"vllm:num_requests_running"}, "", false},
		{"process start kept", "process_start_time_seconds 1.7e9\n", []string{"process_start_time_seconds"}, "", false},
		{"base of a wanted _count name kept", "# TYPE nv_inference_pending_request histogram\nnv_inference_pending_request_count 2\n", []string{"nv_inference_pending_request"}, "", false},
		{"duplicate series", "vllm:num_requests_running 3\nvllm:num_requests_running 4\n", nil, "duplicate series vllm:num_requests_running{}", true},
		{"duplicate series, labels in another order", "tgi_queue_size{a=\"1\",b=\"2\"} 1\ntgi_queue_size{b=\"2\",a=\"1\"} 1\n", nil, `duplicate series tgi_queue_size{a="1",b="2"}`, true},
		{"an empty label is its absence", "tgi_queue_size{a=\"1\"} 1\ntgi_queue_size{a=\"1\",b=\"\"} 1\n", nil, `duplicate series tgi_queue_size{a="1"}`, true},
		{"the same labels in two families", "tgi_queue_size{a=\"1\"} 1\ntgi_batch_current_size{a=\"1\"} 1\n", []string{"tgi_queue_size", "tgi_batch_current_size"}, "", false},
		{"duplicates in a dropped family are not read", "other 1\nother 2\n", nil, "", false},
		{"a family over the series cap", many.String(), nil, fmt.Sprintf("family \"vllm:num_requests_waiting\" has more than %d series", maxSeriesPerFamily), true},
		{"mapped families over the kept bytes", wide.String(), nil, fmt.Sprintf("take more than %d bytes", maxKeptBytes), true},
		{"not the text format", "Not Found\n", nil, "expected float as value", false},
		{"an HTML page", "<html>\n<body>hello</body>\n", nil, "invalid metric name", false},
		{"an error in a dropped line is told at its line", mapped + "other{a=\"1\" 1\n", nil, "line 3:", false},
		{"an error in a kept line is told at its line", "other 1\n# c\n\nvllm:num_requests_running{a=1} 2\n", nil, "line 4:", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := parseMetricsBody(context.Background(), strings.NewReader(tc.body))
			if tc.err != "" || tc.refused {
				if err == nil || !strings.Contains(err.Error(), tc.err) || errors.Is(err, errRefused) != tc.refused {
					t.Fatalf("error %v, want one with %q (refused %v)", err, tc.err, tc.refused)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if len(got.fams) != len(tc.fams) {
				t.Errorf("kept %v, want %v", sortedNames(got.fams), tc.fams)
			}
			for _, n := range tc.fams {
				if got.fams[n] == nil {
					t.Errorf("%s not kept; kept %v", n, sortedNames(got.fams))
				}
			}
			checkAgainstReference(t, []byte(tc.body))
		})
	}
}

// TestParseMetricsBounds: a body over maxMetricsBytes is refused, and the
// read stops when the scrape's context ends.
func TestParseMetricsBounds(t *testing.T) {
	long := bytes.Repeat([]byte("other_family_with_a_long_name 1\n"), maxMetricsBytes/32+1)
	if _, err := parseMetricsBody(context.Background(), bytes.NewReader(long)); err == nil || !strings.Contains(err.Error(), "body longer than") {
		t.Errorf("error %v for a body of %d bytes, want body longer than %d", err, len(long), maxMetricsBytes)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	body := bytes.Repeat([]byte("other 1\n"), 2*ctxCheckLines)
	if _, err := parseMetricsBody(ctx, bytes.NewReader(body)); !errors.Is(err, context.Canceled) {
		t.Errorf("error %v after the context ended, want context.Canceled", err)
	}
}

// TestServerMetricsDuplicateSeries: a scrape with the same series twice is
// refused (up 0, no engine series, a warning with the reason) rather than
// summed (3 then 4 gave infer_server_requests_running 7).
func TestServerMetricsDuplicateSeries(t *testing.T) {
	body := "# TYPE vllm:num_requests_running gauge\nvllm:num_requests_running{model_name=\"m\"} 3\nvllm:num_requests_running{model_name=\"m\"} 4\n"
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/metrics" {
			http.NotFound(w, r)
			return
		}
		w.Write([]byte(body))
	}))
	defer srv.Close()
	var logs logBuffer
	sm := NewScraper(slog.New(slog.NewTextHandler(&logs, nil)))
	defer sm.Close()
	sc := startScraper(t, sm, srv.URL, ", engine: vllm")
	s := sc.snap.Load()
	if s.up || s.values.has[qRunning] {
		t.Errorf("up %v, running %v (present %v); want up 0 and no running", s.up, s.values.v[qRunning], s.values.has[qRunning])
	}
	got := gatherServer(t, sm)
	if v, ok := got["infer_server_up{engine=vllm,model=m,target=s}"]; !ok || v != 0 {
		t.Errorf("infer_server_up = %v (present %v), want 0; got %v", v, ok, got)
	}
	for k := range got {
		if strings.HasPrefix(k, "infer_server_requests_running") {
			t.Errorf("%s exposed from a refused scrape", k)
		}
	}
	for _, w := range []string{"level=WARN", "scrape refused", `duplicate series vllm:num_requests_running{model_name=\"m\"}`} {
		if !strings.Contains(logs.String(), w) {
			t.Errorf("no %q in the log:\n%s", w, logs.String())
		}
	}
	sc.scrape(context.Background())
	if n := strings.Count(logs.String(), "level=WARN"); n != 1 {
		t.Errorf("%d warnings after two refused scrapes, want 1", n)
	}
}
