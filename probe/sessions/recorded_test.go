package sessions

import (
	"testing"
	"time"

	"github.com/infer-exporter/infer_exporter/internal/config"
)

// TestRecordedArrivals: the jobs arrive at their offsets over the speed,
// in order; the rate counts them over the span before an instant, and
// the peak is the busiest second's.
func TestRecordedArrivals(t *testing.T) {
	tr := &config.AgentTrace{Sessions: []config.AgentSession{
		{Offset: 0, Turns: make([]config.AgentTurn, 1)},
		{Offset: time.Second, Turns: make([]config.AgentTurn, 1)},
		{Offset: 1200 * time.Millisecond, Turns: make([]config.AgentTurn, 1)},
		{Offset: 10 * time.Second, Turns: make([]config.AgentTurn, 1)},
	}}
	a := newRecordedArrivals(&recordedJobs{trace: tr, speed: 2})
	var got []time.Duration
	for {
		off, ok := a.Next()
		if !ok {
			break
		}
		got = append(got, off)
	}
	want := []time.Duration{0, 500 * time.Millisecond, 600 * time.Millisecond, 5 * time.Second}
	if len(got) != len(want) {
		t.Fatalf("arrivals %v, want %v", got, want)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("arrival %d at %v, want %v", i, got[i], want[i])
		}
	}
	if p := a.peak(); p != 3 {
		t.Errorf("peak %v jobs/s, want 3", p)
	}
	// The window (elapsed-span, elapsed] leaves out its start's arrival.
	if r := a.Rate(time.Second); r != 2 {
		t.Errorf("rate over the first second %v, want 2", r)
	}
	if r := a.Rate(5 * time.Second); r != 3.0/5 {
		t.Errorf("rate at 5 s %v, want 0.6", r)
	}
}

// TestNewRecordedRefuses: a replay needs a job, a finite positive speed
// and room for one job.
func TestNewRecordedRefuses(t *testing.T) {
	tr := &config.AgentTrace{Sessions: []config.AgentSession{{Turns: make([]config.AgentTurn, 1)}}}
	for _, o := range []RecordedOptions{
		{Trace: &config.AgentTrace{}, Speed: 1, MaxActive: 1},
		{Trace: tr, Speed: 0, MaxActive: 1},
		{Trace: tr, Speed: 1, MaxActive: 0},
	} {
		if _, err := NewRecorded(o); err == nil {
			t.Errorf("%+v: built", o)
		}
	}
	s, err := NewRecorded(RecordedOptions{Trace: tr, Speed: 1, MaxActive: 1})
	if err != nil || !s.Jobs() || s.MaxRate() != 1 {
		t.Errorf("built %v, %v; want jobs at a peak of 1/s", s, err)
	}
}
