package bench

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/infer-exporter/infer_exporter/bench/render"
	"github.com/infer-exporter/infer_exporter/bench/report"
)

// liarServer speaks the OpenAI chat API: it streams 4 tokens a
// millisecond apart and claims 1e9 of them in its usage.
func liarServer(t *testing.T) *httptest.Server {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/v1/chat/completions" {
			http.NotFound(w, r)
			return
		}
		io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", "text/event-stream")
		for _, tok := range []string{"a", " b", " c", " d"} {
			time.Sleep(time.Millisecond)
			io.WriteString(w, `data: {"choices":[{"index":0,"delta":{"content":"`+tok+`"}}]}`+"\n\n")
			w.(http.Flusher).Flush()
		}
		io.WriteString(w, `data: {"choices":[],"usage":{"prompt_tokens":16,"completion_tokens":1000000000,"total_tokens":1000000016}}`+"\n\ndata: [DONE]\n\n")
	}))
	t.Cleanup(srv.Close)
	return srv
}

// TestUsageNotBelievedInReports: a server whose usage claims 1e9 output
// tokens for 4 streamed ones (once 4e9 output tokens/s, a TPOT of 0 and the
// first rank) has its events counted: no throughput takes the claim (each
// request's output tokens are at most its max_tokens), TPOT is the
// events' own, and every output says how many requests' usage was not
// believed.
func TestUsageNotBelievedInReports(t *testing.T) {
	t.Parallel() // mostly waits on real time: beside the package's other such tests
	srv := liarServer(t)
	out := filepath.Join(t.TempDir(), "out")
	code, stdout, stderr := runCLI(t, context.Background(), "bench", "--target.url="+srv.URL, "--model=m", "--rate=10",
		"--input-tokens=16", "--output-tokens=16", "--duration=2s", "--output.dir="+out)
	if code != ExitOK {
		t.Fatalf("exit %d\n%s\n%s", code, stdout, stderr)
	}
	c := readReport(t, out).Cells[0]
	s := c.Summary
	// Every success carried the claim (a request the ceiling dropped on a
	// busy machine carried none).
	if s.Successes == 0 || s.UsageNotBelieved != s.Successes {
		t.Fatalf("%d requests' usage not believed, want the %d successes'", s.UsageNotBelieved, s.Successes)
	}
	// Every completion in the windows delivered at most max_tokens: the
	// tokens per completion, and the throughput at the offered rate.
	if per := s.OutputTokens / float64(max(s.Successes, 1)); per > 16 {
		t.Errorf("%.0f output tokens a request, above max_tokens 16", per)
	}
	if s.OutputTokensPerSecond > 16*s.OfferedPerSecond*1.5 || s.TotalTokensPerSecond > 32*s.OfferedPerSecond*1.5 {
		t.Errorf("output %.0f tokens/s, total %.0f, at %.1f req/s of at most 16 + 16 tokens", s.OutputTokensPerSecond, s.TotalTokensPerSecond, s.OfferedPerSecond)
	}
	// The events came a millisecond apart at least: the client's delays
	// only add.
	if s.TPOT.Count == 0 || s.TPOT.P50 < 0.0009 {
		t.Errorf("TPOT %+v, want the events' own, at least 1 ms", s.TPOT)
	}
	for _, want := range []string{"Usage not believed (requests):", "usage not believed:"} {
		if !strings.Contains(stdout, want) {
			t.Errorf("the console lacks %q:\n%s", want, stdout)
		}
	}
	for file, want := range map[string]string{CSVFile: "usage_not_believed", render.MarkdownFile: "usage not believed", HTMLFile: "usage not believed"} {
		b, err := os.ReadFile(filepath.Join(out, file))
		if err != nil || !strings.Contains(string(b), want) {
			t.Errorf("%s lacks %q (%v)", file, want, err)
		}
	}
	if got := report.ColumnNamed("usage_not_believed").CSV(&c); got != report.ColumnNamed("successes").CSV(&c) {
		t.Errorf("usage_not_believed column %s, want the successes' %s", got, report.ColumnNamed("successes").CSV(&c))
	}
}
