package bench

import (
	"testing"
	"time"
)

// TestWholeWindows: a duration is measured in whole windows, a remainder
// of the window's own rounding not counted as one more.
func TestWholeWindows(t *testing.T) {
	s := time.Second
	for _, tc := range []struct {
		duration, window time.Duration
		want             int
	}{
		{10 * s, 10 * s / 3, 3},
		{s, s / 3, 3},
		{60 * s, 20 * s, 3},
		{30 * s, 20 * s, 2},
		{41 * s, 20 * s, 3},
		{5 * s, 20 * s, 1},
	} {
		if got := wholeWindows(tc.duration, tc.window); got != tc.want {
			t.Errorf("wholeWindows(%v, %v) = %d, want %d", tc.duration, tc.window, got, tc.want)
		}
	}
}
