package main

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/infer-exporter/infer_exporter/internal/config"
	"github.com/infer-exporter/infer_exporter/probe/observation"
)

// TestRecentStats: the last minute of a workload, by a fake clock: rates
// over the workload's life while it is younger than the window, old
// requests forgotten, the count bounded, TTFT from successes only.
func TestRecentStats(t *testing.T) {
	now := time.Unix(1000, 0)
	s := newRecentStats()
	s.now = func() time.Time { return now }
	add := func(at time.Duration, oc observation.Outcome, ttft time.Duration) {
		o := &observation.Request{Outcome: oc, Scheduled: now.Add(at), Sent: now.Add(at), End: now.Add(at + time.Second)}
		if ttft > 0 {
			o.FirstToken = o.Sent.Add(ttft)
		}
		if oc == observation.Disconnected {
			o.Err = errors.New("connection refused")
		}
		if oc == observation.Dropped {
			recentObserver{s: s, workload: "w"}.Dropped(o)
			return
		}
		recentObserver{s: s, workload: "w"}.Done(o)
	}
	for i := range 8 {
		add(time.Duration(i)*time.Millisecond, observation.Success, time.Duration(10+i)*time.Millisecond)
	}
	add(0, observation.Disconnected, 0)
	add(0, observation.Dropped, 0)
	now = now.Add(2 * time.Second)
	r := s.summary("w")
	if r.Span != 2*time.Second || r.Ended != 9 || r.Successes != 8 || r.Failed != 1 || r.Dropped != 1 {
		t.Fatalf("summary %+v", r)
	}
	if r.OfferedPerSecond != 5 || r.AchievedPerSecond != 4 || r.TTFTp50 != 13*time.Millisecond || r.TTFTp99 != 17*time.Millisecond {
		t.Errorf("rates %.2f / %.2f, ttft %v / %v; want 5 / 4, 13ms / 17ms", r.OfferedPerSecond, r.AchievedPerSecond, r.TTFTp50, r.TTFTp99)
	}
	if r.LastError != "disconnected: connection refused" {
		t.Errorf("last error %q", r.LastError)
	}
	now = now.Add(2 * time.Minute)
	if r := s.summary("w"); r.Ended != 0 || r.Span != 0 || r.LastError == "" {
		t.Errorf("after two minutes: %+v; want nothing but the last error", r)
	}
	for range recentMax + 10 {
		add(0, observation.Success, time.Millisecond)
	}
	if n := len(s.by["w"].live()); n != recentMax {
		t.Errorf("%d requests kept, want at most %d", n, recentMax)
	}
}

// TestRecentTPOTAndSLO: the last minute's TPOT quantiles come from the
// successes that have one, and SLO met counts the successes within every
// threshold of the workload's SLO over the requests that ended.
func TestRecentTPOTAndSLO(t *testing.T) {
	now := time.Unix(1000, 0)
	s := newRecentStats()
	s.now = func() time.Time { return now }
	obs := recentObserver{s: s, workload: "w", slo: config.SLO{TTFT: 100 * time.Millisecond}}
	add := func(oc observation.Outcome, ttft, tpot time.Duration) {
		o := &observation.Request{Outcome: oc, Scheduled: now, Sent: now, FirstToken: now.Add(ttft), OutputTokens: 11}
		o.End = o.FirstToken.Add(10 * tpot)
		obs.Done(o)
	}
	add(observation.Success, 50*time.Millisecond, 2*time.Millisecond)  // met
	add(observation.Success, 80*time.Millisecond, 4*time.Millisecond)  // met
	add(observation.Success, 300*time.Millisecond, 6*time.Millisecond) // TTFT over the SLO
	add(observation.HTTP5xx, 0, 0)
	now = now.Add(time.Second)
	r := s.summary("w")
	if !r.HasSLO || r.SLOMet != 2 || r.Ended != 4 {
		t.Errorf("SLO met %d of %d (has SLO %v), want 2 of 4", r.SLOMet, r.Ended, r.HasSLO)
	}
	if r.TPOTp50 != 4*time.Millisecond || r.TPOTp99 != 6*time.Millisecond {
		t.Errorf("TPOT p50 / p99 %v / %v, want 4ms / 6ms", r.TPOTp50, r.TPOTp99)
	}
	var b strings.Builder
	writeSLOMet(&b, r)
	if b.String() != "<td>50.0% of 4</td>" {
		t.Errorf("SLO met cell %q", b.String())
	}
	b.Reset()
	writeSLOMet(&b, recentSummary{HasRatio: true, Ended: 3, Successes: 3, SLOMet: 3})
	if b.String() != "<td>no SLO</td>" {
		t.Errorf("SLO met cell of a workload without an SLO %q", b.String())
	}
}

// TestLandingQuantilesKeepTheirDigits: a TPOT of a fraction of a
// millisecond reads as such, not as 0s.
func TestLandingQuantilesKeepTheirDigits(t *testing.T) {
	for _, tc := range []struct {
		p50, p99 time.Duration
		want     string
	}{
		{87 * time.Microsecond, 412 * time.Microsecond, "<td>87µs / 412µs</td>"},
		{4340 * time.Microsecond, 9120 * time.Microsecond, "<td>4.3ms / 9.1ms</td>"},
		{95690 * time.Microsecond, 136270 * time.Microsecond, "<td>96ms / 136ms</td>"},
		{0, 0, "<td>&mdash;</td>"},
	} {
		var b strings.Builder
		writeQuantiles(&b, tc.p50, tc.p99)
		if b.String() != tc.want {
			t.Errorf("%v / %v: %q, want %q", tc.p50, tc.p99, b.String(), tc.want)
		}
	}
}
