package live

import (
	"testing"
	"time"

	"golang.org/x/time/rate"

	"github.com/infer-exporter/infer_exporter/probe/plan"
	"github.com/infer-exporter/infer_exporter/probe/replay"
)

// TestReplayLateClientLosesRows holds docs/replay.md's "A late client
// loses rows": a trace of 190 rows at 10 a second gets the default ceiling
// of 100 req/s and no group of rows at one instant, so the wire ceiling the
// runner builds for it (plan.ReplayCeiling, with the degraded lag as its
// tolerance) holds 2 sends; a client stopped for 1 s finds the 10 rows due
// meanwhile overdue at once, sends 2 and drops 8, and the next row, on
// time, goes. A degraded lag of 2 s, or a max_rate of 1000 (a bucket of
// 11), sends all 10. The dispatcher's instants are given to the bucket,
// not read from the clock.
func TestReplayLateClientLosesRows(t *testing.T) {
	recs := make([]replay.Record, 190)
	for i := range recs {
		recs[i] = replay.Record{Offset: time.Duration(i) * 100 * time.Millisecond, InputTokens: 32, OutputTokens: 4}
	}
	for _, tc := range []struct {
		name    string
		maxRate float64 // the replay's max_rate; 0: its default
		lag     time.Duration
		ceiling float64
		dropped int
	}{
		{"the default ceiling and lag", 0, plan.DefaultDegradedLag, 100, 8},
		{"--probe.degraded-lag=2s", 0, 2 * time.Second, 100, 0},
		{"max_rate: 1000", 1000, plan.DefaultDegradedLag, 1000, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			src, err := replay.NewSource(&replay.Trace{Records: recs}, replay.Options{Speed: 1, Sample: 1, MaxRate: tc.maxRate})
			if err != nil {
				t.Fatal(err)
			}
			if src.MaxRate() != tc.ceiling || src.Burst() != 1 {
				t.Fatalf("ceiling %v req/s, burst %d; want %v and 1", src.MaxRate(), src.Burst(), tc.ceiling)
			}
			lim, ok := plan.ReplayCeiling(src.MaxRate(), tc.lag, src.Burst()).(*rate.Limiter)
			if !ok {
				t.Fatal("the wire ceiling is not a token bucket")
			}
			// Rows 0..49 on time; the client stops just after row 49's
			// send and resumes 1 s later, rows 50..59 overdue.
			start := time.Unix(1_700_000_000, 0)
			at := func(row int) time.Time { return start.Add(recs[row].Offset) }
			for row := 0; row < 50; row++ {
				if !lim.AllowN(at(row), 1) {
					t.Fatalf("row %d, on time, refused", row)
				}
			}
			resumed := at(49).Add(time.Second + time.Millisecond)
			dropped := 0
			for row := 50; row < 60; row++ {
				if !lim.AllowN(resumed, 1) {
					dropped++
				}
			}
			if dropped != tc.dropped {
				t.Errorf("%d of the 10 overdue rows dropped, want %d", dropped, tc.dropped)
			}
			if !lim.AllowN(at(60), 1) {
				t.Error("the next row, on time after the pause, refused")
			}
		})
	}
}
