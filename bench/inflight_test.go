package bench

import (
	"math"
	"strings"
	"testing"
	"time"

	"github.com/infer-exporter/infer_exporter/bench/merge"
	"github.com/infer-exporter/infer_exporter/bench/report"
	"github.com/infer-exporter/infer_exporter/internal/config"
	"github.com/infer-exporter/infer_exporter/probe/observation"
)

// TestRecorderInFlight: the requests in flight at the start and end of the
// windows, against what was sent and completed in them, tell a queue
// growing (overloaded) and a backlog draining (a warm-up too short for a
// server slow at first) from a steady state.
func TestRecorderInFlight(t *testing.T) {
	w0 := time.Unix(1000, 0)
	at := func(s float64) time.Time { return w0.Add(time.Duration(s * float64(time.Second))) }
	req := func(sent, end float64) *observation.Request {
		return &observation.Request{Scheduled: at(sent), Sent: at(sent), FirstToken: at(end), End: at(end),
			TokenTimes: []time.Time{at(end)}, ContentEvents: 1, OutputTokens: 1, Outcome: observation.Success}
	}
	for _, tc := range []struct {
		name                 string
		reqs                 []*observation.Request
		start, end           int
		overloaded, draining bool
	}{
		{
			// 10 a second, each 0.5 s long: 5 in flight at each boundary.
			name: "steady", start: 5, end: 5,
			reqs: func() (rs []*observation.Request) {
				for i := -5; i < 20; i++ {
					rs = append(rs, req(float64(i)/10, float64(i)/10+0.5))
				}
				return rs
			}(),
		},
		{
			// 10 a second, none completes before 3 s.
			name: "growing", start: 0, end: 20, overloaded: true,
			reqs: func() (rs []*observation.Request) {
				for i := 0; i < 20; i++ {
					rs = append(rs, req(float64(i)/10, 3))
				}
				return rs
			}(),
		},
		{
			// 20 sent in the warm-up end in the first window, beside 10
			// short ones sent in the windows.
			name: "draining", start: 20, end: 0, draining: true,
			reqs: func() (rs []*observation.Request) {
				for i := 0; i < 20; i++ {
					rs = append(rs, req(-0.5, 0.5))
				}
				for i := 0; i < 10; i++ {
					rs = append(rs, req(float64(i)/10, float64(i)/10+0.1))
				}
				return rs
			}(),
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rc := newRecorderAt(w0, time.Second, config.SLO{}, 1000, 1000, 1)
			for _, r := range tc.reqs {
				rc.observe(r)
			}
			st, _ := rc.finish(2, 0)
			if st.InFlightAtStart != tc.start || st.InFlightAtEnd != tc.end || st.Overloaded != tc.overloaded || st.Draining != tc.draining {
				t.Errorf("in flight %d at the start, %d at the end, overloaded %v, draining %v; want %d, %d, %v, %v (%s%s)",
					st.InFlightAtStart, st.InFlightAtEnd, st.Overloaded, st.Draining, tc.start, tc.end, tc.overloaded, tc.draining, st.OverloadNote, st.DrainingNote)
			}
			if tc.draining && !strings.Contains(st.DrainingNote, "lengthen the warm-up") {
				t.Errorf("note %q", st.DrainingNote)
			}
		})
	}
}

// TestCapOverloadNote: the note of arrivals the in-flight cap dropped names
// the cap and says who limited the load. A cap of 16 below what the
// offered 20 req/s needs at a flat 1.5 s E2E (30 in flight, Little's law)
// drops arrivals from a server that kept up: the client's cap limited the
// load, and the note says to raise it. The same cap above what the rate
// needs at the mean E2E, reached while the server stalled, is the server's
// doing. A merge adds the shards' caps up.
func TestCapOverloadNote(t *testing.T) {
	w0 := time.Unix(1000, 0)
	at := func(s float64) time.Time { return w0.Add(time.Duration(s * float64(time.Second))) }
	for _, tc := range []struct {
		name     string
		end      func(sent float64) float64 // when the server ends a request sent then
		want     []string
		wantNot  string
		needLow  float64 // rate × mean E2E within [needLow, needHigh]
		needHigh float64
	}{
		{
			name: "cap below rate × E2E, flat latency",
			end:  func(s float64) float64 { return s + 1.5 },
			want: []string{"the in-flight cap dropped", "reached the cap of 16", "the client's cap limited the load, not the server",
				"needs about 30 in flight (Little's law)", "raise bench.max_in_flight above 30"},
			wantNot: "the server did not keep up", needLow: 29.9, needHigh: 30.1,
		},
		{
			// 0.2 s, except that nothing ends in [1 s, 2.5 s): the
			// requests pile up to the cap while the server stalls.
			name: "server stalled, cap above rate × mean E2E",
			end: func(s float64) float64 {
				if e := s + 0.2; e < 1 || e >= 2.5 {
					return e
				}
				return 2.5
			},
			want:    []string{"the in-flight cap dropped", "reached the cap of 16, above the", "the server did not keep up with the offered rate"},
			wantNot: "client's cap", needLow: 4, needHigh: 16,
		},
		{
			// A server of 10 req/s (0.5 s alone, one ending every 0.1 s
			// at most, first come first served) offered 20: its queue
			// fills the cap, and the mean E2E, mostly the queue's, is
			// above cap / rate; the first requests' (0.5 to 0.85 s)
			// shows the server alone (on a GPU engine offered 20 req/s
			// the note blamed the client's cap of 512).
			name: "server queueing, cap below rate × mean E2E",
			end: func() func(float64) float64 {
				last := math.Inf(-1)
				return func(s float64) float64 {
					last = max(s+0.5, last+0.1)
					return last
				}
			}(),
			want: []string{"the in-flight cap dropped", "reached the cap of 16, above the", "the E2E of the first requests sent, before any queue,",
				"the server did not keep up with the offered rate"},
			wantNot: "client's cap", needLow: 20, needHigh: 40,
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			const rate, capacity = 20.0, 16
			rc := newRecorderAt(w0, time.Second, config.SLO{}, 10000, 10000, 1)
			rc.inFlightCap = capacity
			var ends []float64
			for i := -60; i < 80; i++ { // 20 a second over [-3 s, 4 s)
				s := float64(i) / rate
				inFlight := 0
				for _, e := range ends {
					if e > s {
						inFlight++
					}
				}
				if inFlight >= capacity {
					rc.observe(&observation.Request{Scheduled: at(s), Outcome: observation.Dropped, DropReason: "in_flight_cap"})
					continue
				}
				e := tc.end(s)
				ends = append(ends, e)
				rc.observe(&observation.Request{Scheduled: at(s), Sent: at(s), FirstToken: at(e), End: at(e),
					TokenTimes: []time.Time{at(e)}, ContentEvents: 1, OutputTokens: 1, Outcome: observation.Success})
			}
			st, _ := rc.finish(4, 0)
			need := st.OfferedPerSecond * meanOf(rc.recs)
			if !st.Overloaded || need < tc.needLow || need > tc.needHigh {
				t.Fatalf("overloaded %v, rate × mean E2E %.1f (want [%v, %v]): %q", st.Overloaded, need, tc.needLow, tc.needHigh, st.OverloadNote)
			}
			t.Logf("%s", st.OverloadNote)
			for _, w := range tc.want {
				if !strings.Contains(st.OverloadNote, w) {
					t.Errorf("note without %q: %q", w, st.OverloadNote)
				}
			}
			if strings.Contains(st.OverloadNote, tc.wantNot) {
				t.Errorf("note says %q: %q", tc.wantNot, st.OverloadNote)
			}
		})
	}
	if got := merge.PoolStates([]report.RecorderState{{InFlightCap: 16}, {InFlightCap: 16}}).InFlightCap; got != 32 {
		t.Errorf("two shards' caps of 16 pooled: %d, want 32", got)
	}
}
