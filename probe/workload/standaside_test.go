package workload

import (
	"testing"
	"time"
)

// TestStandAside: the preparation waits only around a send instant: from
// sendGuard before it to sendSettle after it, never otherwise, and never
// longer than sendGuard + sendSettle.
func TestStandAside(t *testing.T) {
	now := time.Unix(100, 0)
	ns := func(d time.Duration) int64 { return now.Add(d).UnixNano() }
	for _, tc := range []struct {
		name string
		due  int64
		want time.Duration
	}{
		{"no send yet", 0, 0},
		{"far ahead", ns(50 * time.Millisecond), 0},
		{"just beyond the guard", ns(sendGuard + time.Microsecond), 0},
		{"within the guard", ns(time.Millisecond), time.Millisecond + sendSettle},
		{"at the instant", ns(0), sendSettle},
		{"just sent", ns(-time.Millisecond), sendSettle - time.Millisecond},
		{"long past", ns(-sendSettle - time.Microsecond), 0},
	} {
		if got := standAside(tc.due, now); got != tc.want {
			t.Errorf("%s: %v, want %v", tc.name, got, tc.want)
		}
		if got := standAside(tc.due, now); got > sendGuard+sendSettle {
			t.Errorf("%s: %v exceeds the bound", tc.name, got)
		}
	}
}
