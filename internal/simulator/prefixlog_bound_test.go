package simulator

import (
	"strconv"
	"testing"
	"time"
)

// TestPrefixLogBounded: the log keeps the latest prefixLogSize requests,
// whatever the traffic; an older id is forgotten, a repeated id names its
// latest request, and a finish is recorded only on the request it ends.
func TestPrefixLogBounded(t *testing.T) {
	l := newPrefixLog()
	t0 := time.Unix(1000, 0)
	const extra = 10
	for i := range prefixLogSize + extra {
		l.admitted(&sequence{id: "r" + strconv.Itoa(i), arrival: t0.Add(time.Duration(i)), promptLen: i, logged: true}, i)
	}
	if len(l.ring) != prefixLogSize || len(l.byID) != prefixLogSize {
		t.Fatalf("ring %d, index %d entries; want %d", len(l.ring), len(l.byID), prefixLogSize)
	}
	for _, tc := range []struct {
		id   string
		want bool
	}{{"r0", false}, {"r" + strconv.Itoa(extra-1), false}, {"r" + strconv.Itoa(extra), true}, {"r" + strconv.Itoa(prefixLogSize+extra-1), true}} {
		if _, ok := l.get(tc.id); ok != tc.want {
			t.Errorf("%s kept: %v, want %v", tc.id, ok, tc.want)
		}
	}
	// The same id again: the newer request wins; the older's finish does
	// not touch it.
	older := &sequence{id: "r" + strconv.Itoa(prefixLogSize), arrival: t0.Add(time.Duration(prefixLogSize))}
	newer := &sequence{id: older.id, arrival: t0.Add(time.Hour), promptLen: 7}
	l.admitted(newer, 3)
	l.finished(older, t0.Add(2*time.Hour))
	r, ok := l.get(newer.id)
	if !ok || r.PromptTokens != 7 || r.HitTokens != 3 || !r.Finished.IsZero() {
		t.Fatalf("after a repeated id: %+v, %v", r, ok)
	}
	l.finished(newer, t0.Add(3*time.Hour))
	if r, _ := l.get(newer.id); !r.Finished.Equal(t0.Add(3 * time.Hour)) {
		t.Errorf("finished %v", r.Finished)
	}
}
