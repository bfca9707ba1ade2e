package prober

import (
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"
)

// claimServer speaks the OpenAI chat API: it streams n tokens a
// millisecond apart, then a usage that claims claim of them.
func claimServer(t *testing.T, n, claim int) *httptest.Server {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/v1/chat/completions" {
			http.NotFound(w, r)
			return
		}
		_, _ = io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", "text/event-stream")
		for range n {
			time.Sleep(time.Millisecond)
			_, _ = io.WriteString(w, `data: {"choices":[{"index":0,"delta":{"content":" w"}}]}`+"\n\n")
			w.(http.Flusher).Flush()
		}
		_, _ = fmt.Fprintf(w, "data: {\"choices\":[],\"usage\":{\"prompt_tokens\":16,\"completion_tokens\":%d,\"total_tokens\":%d}}\n\ndata: [DONE]\n\n", claim, claim+16)
	}))
	t.Cleanup(srv.Close)
	return srv
}

// TestProbeUsageNotBelieved: /probe's token figures take a server's usage
// count only when it can be true of the request (probe/client's
// UsageBelievable): a server that claims 1e9 tokens for 4 streamed ones
// (once probe_output_tokens 1e+09 and a TPOT of 0), or 20 for the 16 of a
// max_tokens of 16, or that streams 20 for them, is credited at most
// max_tokens a request, its events' own TPOT, never 0; a true count is
// taken as it is.
func TestProbeUsageNotBelieved(t *testing.T) {
	const requests, maxTokens = 3, 16
	for _, tc := range []struct {
		name            string
		streamed, claim int
		perRequest      int
	}{
		{"1e9 for 4 streamed", 4, 1e9, 4},
		{"20 of max_tokens 16, 16 streamed", 16, 20, 16},
		{"20 of max_tokens 16, 20 streamed", 20, 20, 16},
		{"16 for 4 streamed: can be true", 4, 16, 16},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srv := claimServer(t, tc.streamed, tc.claim)
			cfg := loadConfig(t, fmt.Sprintf(`targets:
  - {name: liar, url: "{{URL}}", model: m}
modules:
  tokens:
    target: liar
    requests: %d
    prompt:
      input_tokens: {dist: fixed, mean: 16}
      output_tokens: {dist: fixed, mean: %d}
probe: {max_requests_per_second: 100}
`, requests, maxTokens), srv.URL)
			e := newEnv(t, cfg, nil)
			_, body := e.scrape(t, "tokens", srv.URL, "10", false)
			if !strings.Contains(body, fmt.Sprintf(`probe_requests{outcome="success"} %d`, requests)) {
				t.Fatalf("not every request succeeded:\n%s", body)
			}
			if want := fmt.Sprintf("probe_output_tokens %d\n", requests*tc.perRequest); !strings.Contains(body, want) {
				t.Errorf("want %q in:\n%s", want, body)
			}
			for i := range requests {
				if want := fmt.Sprintf("probe_request_output_tokens{request=%q} %d\n", strconv.Itoa(i), tc.perRequest); !strings.Contains(body, want) {
					t.Errorf("want %q in:\n%s", want, body)
				}
			}
			// The events came a millisecond apart at least: each
			// request's TPOT is theirs over the tokens credited, never 0.
			tpots := regexp.MustCompile(`probe_request_time_per_output_token_seconds\{request="\d+"\} (\S+)`).FindAllStringSubmatch(body, -1)
			if len(tpots) != requests {
				t.Fatalf("%d requests' TPOT, want %d:\n%s", len(tpots), requests, body)
			}
			for _, m := range tpots {
				if d, err := strconv.ParseFloat(m[1], 64); err != nil || d <= 0 {
					t.Errorf("a request's TPOT is %s, want a positive one", m[1])
				}
			}
		})
	}
}
