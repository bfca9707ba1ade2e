package bench

import (
	"context"
	"encoding/json"
	"fmt"
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

// liarServer speaks the OpenAI chat API: it streams n tokens a
// millisecond apart and claims claim of them in its usage.
// liarGap is what liarServer waits before each event. The client times an
// event when it reads it, so a late read of the first brings the events
// closer than they were sent (on a busy machine under the race detector,
// 4 events 1 ms apart were once timed 0.94 ms apart on average): 50 ms
// apart, a TPOT under 1 ms needs a read 147 ms late.
const liarGap = 50 * time.Millisecond

func liarServer(t *testing.T, n, claim int) *httptest.Server {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/v1/chat/completions" {
			http.NotFound(w, r)
			return
		}
		io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", "text/event-stream")
		for range n {
			time.Sleep(liarGap)
			io.WriteString(w, `data: {"choices":[{"index":0,"delta":{"content":" w"}}]}`+"\n\n")
			w.(http.Flusher).Flush()
		}
		fmt.Fprintf(w, "data: {\"choices\":[],\"usage\":{\"prompt_tokens\":16,\"completion_tokens\":%d,\"total_tokens\":%d}}\n\ndata: [DONE]\n\n", claim, claim+16)
	}))
	t.Cleanup(srv.Close)
	return srv
}

// TestUsageNotBelievedInReports: a server whose usage claims 1e9 output
// tokens for 4 streamed ones (once 4e9 output tokens/s, a TPOT of 0 and the
// first rank) has its events counted: no throughput takes the claim (each
// request's output tokens are at most its max_tokens), TPOT is the
// events' own, and every output says how many requests' usage was not
// believed. The same for a server that streams 20 tokens for a max_tokens
// of 16 and claims them: a count the events could carry, above what was
// asked.
func TestUsageNotBelievedInReports(t *testing.T) {
	t.Parallel() // mostly waits on real time: beside the package's other such tests
	for _, tc := range []struct {
		name            string
		streamed, claim int
		perRequest      float64
	}{
		{"1e9 for 4 streamed", 4, 1e9, 4},
		{"20 of max_tokens 16, 20 streamed", 20, 20, 16},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			usageNotBelievedInReports(t, liarServer(t, tc.streamed, tc.claim), tc.perRequest)
		})
	}
}

// usageNotBelievedInReports runs the bench against srv (liarServer), with
// max_tokens 16, and checks its outputs: perRequest output tokens a
// success.
func usageNotBelievedInReports(t *testing.T, srv *httptest.Server, perRequest float64) {
	out := filepath.Join(t.TempDir(), "out")
	records := filepath.Join(t.TempDir(), "requests.jsonl")
	code, stdout, stderr := runCLI(t, context.Background(), "bench", "--target.url="+srv.URL, "--model=m", "--rate=10",
		"--input-tokens=16", "--output-tokens=16", "--duration=2s", "--output.dir="+out, "--output.requests="+records)
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
	// Each successful request is credited perRequest tokens, at most
	// max_tokens, with a TPOT (the record's, as the cells measure it) of
	// at least the 1 ms between events over them, not 0; and the
	// throughput at the offered rate is of at most max_tokens a request.
	b, err := os.ReadFile(records)
	if err != nil {
		t.Fatal(err)
	}
	successes := 0
	for _, line := range strings.Split(strings.TrimSpace(string(b)), "\n") {
		var rec RequestRecord
		if err := json.Unmarshal([]byte(line), &rec); err != nil {
			t.Fatalf("%q: %v", line, err)
		}
		if rec.Outcome != "success" {
			continue
		}
		successes++
		if float64(rec.OutputTokens) != perRequest || rec.OutputTokens > 16 {
			t.Errorf("request %s: %d output tokens, want %v, at most max_tokens 16", rec.ID, rec.OutputTokens, perRequest)
		}
		// The claim's TPOT would be under 1e-10 s; the events' own, sent
		// liarGap apart, is at least 1 ms however late the client read the
		// first (liarGap says why not liarGap itself).
		if rec.TPOT == nil || *rec.TPOT < 0.001 {
			t.Errorf("request %s: TPOT %v (nil: none), want the events' own, at least 1 ms", rec.ID, fmtSeconds(rec.TPOT))
		}
	}
	if successes == 0 {
		t.Fatal("no successful request recorded")
	}
	if s.OutputTokensPerSecond > 16*s.OfferedPerSecond*1.5 || s.TotalTokensPerSecond > 32*s.OfferedPerSecond*1.5 {
		t.Errorf("output %.0f tokens/s, total %.0f, at %.1f req/s of at most 16 + 16 tokens", s.OutputTokensPerSecond, s.TotalTokensPerSecond, s.OfferedPerSecond)
	}
	if s.TPOT.Count == 0 || s.TPOT.P50 < 0.001 {
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

// fmtSeconds prints a record's optional figure.
func fmtSeconds(p *float64) string {
	if p == nil {
		return "nil"
	}
	return fmt.Sprint(*p)
}
