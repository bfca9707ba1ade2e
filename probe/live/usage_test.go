package live

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/infer-exporter/infer_exporter/internal/config"
	"github.com/infer-exporter/infer_exporter/probe/client"
	"github.com/infer-exporter/infer_exporter/probe/observation"
)

// TestUsageNotBelievedCounted: a server that streams 4 tokens and claims
// 1e9 in its usage adds 4 to completion_tokens_total, not 1e9, and one
// to infer_probe_usage_not_believed_total, which exists at 0 from the
// workload's start with its HELP.
func TestUsageNotBelievedCounted(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		for _, tok := range []string{"a", " b", " c", " d"} {
			io.WriteString(w, `data: {"choices":[{"index":0,"delta":{"content":"`+tok+`"}}]}`+"\n\n")
			w.(http.Flusher).Flush()
			time.Sleep(time.Millisecond)
		}
		io.WriteString(w, `data: {"choices":[],"usage":{"prompt_tokens":3,"completion_tokens":1000000000,"total_tokens":1000000003}}`+"\n\ndata: [DONE]\n\n")
	}))
	defer srv.Close()
	reg := prometheus.NewRegistry()
	s := NewMetrics(reg).Series("t", "m", "w", config.SLO{})
	const name = "infer_probe_usage_not_believed_total"
	if n, err := testutil.GatherAndCount(reg, name); err != nil || n != 1 {
		t.Fatalf("%s: %d series (%v), want 1 at 0 from the start", name, n, err)
	}
	c := client.New(client.Options{})
	defer c.Close()
	obs := observation.Request{Scheduled: time.Now()}
	c.Do(context.Background(), &client.Target{BaseURL: srv.URL}, &client.Request{Prompt: "p", MaxTokens: 16}, &obs)
	if obs.Outcome != observation.Success {
		t.Fatalf("outcome %s: %v", obs.Outcome, obs.Err)
	}
	s.Observe(&obs)
	if got := testutil.ToFloat64(s.usageNotBelieved); got != 1 {
		t.Errorf("%s = %v, want 1", name, got)
	}
	if got := testutil.ToFloat64(s.completionTokens); got != 4 {
		t.Errorf("completion_tokens_total = %v, want the 4 streamed", got)
	}
	if d, ok := obs.TPOT(); !ok || d <= 0 {
		t.Errorf("TPOT %v %v, want the events' own", d, ok)
	}
	want := `# HELP ` + name + ` Requests whose server usage count of output tokens could not be true (above max_tokens, or beyond what was streamed); their events were counted.
# TYPE ` + name + ` counter
` + name + `{model="m",target="t",workload="w"} 1
`
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want), name); err != nil {
		t.Error(err)
	}
}
