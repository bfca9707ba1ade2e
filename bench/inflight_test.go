package bench

import (
	"strings"
	"testing"
	"time"

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
