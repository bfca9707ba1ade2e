package live

import (
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	dto "github.com/prometheus/client_model/go"

	"github.com/infer-exporter/infer_exporter/internal/config"
	"github.com/infer-exporter/infer_exporter/probe/observation"
)

// TestReasoningTokensOneRule: the live reasoning-token counter reads the
// rule /probe and the bench read (observation.Request.Reasoning): a stream
// that reasoned for 7 events without a server count adds 7, where it added
// 0 (and /probe and the bench 7); one whose 200 reasoning tokens were
// counted but hidden adds 200 to both counters, and its TPOT is its
// visible pace.
func TestReasoningTokensOneRule(t *testing.T) {
	base := time.Unix(1000, 0)
	at := func(ms int) time.Time { return base.Add(time.Duration(ms) * time.Millisecond) }
	streamed := observation.Request{Scheduled: at(0), Sent: at(0), FirstToken: at(100), FirstAnswer: at(800), End: at(1500),
		Outcome: observation.Success, OutputTokens: 15, ReasoningEvents: 7, ContentEvents: 15, TokenSource: observation.TokensFromUsage}
	for i := range 15 {
		streamed.TokenTimes = append(streamed.TokenTimes, at(100+100*i))
	}
	hidden := observation.Request{Scheduled: at(0), Sent: at(0), FirstToken: at(1000), FirstAnswer: at(1000), End: at(1385),
		Outcome: observation.Success, OutputTokens: 220, ReasoningTokens: 200, ContentEvents: 20, TokenSource: observation.TokensFromUsage}
	for i := range 20 {
		hidden.TokenTimes = append(hidden.TokenTimes, at(1000+20*i))
	}
	s := NewMetrics(prometheus.NewRegistry()).Series("t", "m", "w", config.SLO{})
	s.Observe(&streamed)
	if got := testutil.ToFloat64(s.reasoningTokens); got != float64(streamed.Reasoning()) || got != 7 {
		t.Errorf("streamed, not counted: reasoning tokens %v, want 7 (Reasoning %d)", got, streamed.Reasoning())
	}
	s.Observe(&hidden)
	if got := testutil.ToFloat64(s.reasoningTokens); got != 7+200 {
		t.Errorf("reasoning tokens %v, want 7 + 200", got)
	}
	if got := testutil.ToFloat64(s.hiddenReasoning); got != 200 {
		t.Errorf("hidden reasoning tokens %v, want 200", got)
	}
	// TPOT: 1400 ms over 14 tokens, then the hidden request's 20 ms pace.
	var m dto.Metric
	if err := s.tpot.Write(&m); err != nil {
		t.Fatal(err)
	}
	if n, sum := m.GetHistogram().GetSampleCount(), m.GetHistogram().GetSampleSum(); n != 2 || sum < 0.1+0.02-1e-9 || sum > 0.1+0.02+1e-9 {
		t.Errorf("TPOT: %d observations summing %v s, want 2 summing 0.12", n, sum)
	}
}
