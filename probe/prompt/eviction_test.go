package prompt

import "testing"

// TestEvictionRule: the rule's bounds.
func TestEvictionRule(t *testing.T) {
	for _, tc := range []struct {
		server, best float64
		sent, pool   int
		want         bool
	}{
		{0.1, 0.8, 100, 16, true},
		{0.45, 0.8, 100, 16, false}, // above half the best
		{0.1, 0.8, 47, 16, false},   // not yet twice the pool past the warm-up
		{0, 0.04, 100, 16, false},   // a best too small to judge
		{0.39, 0.8, 48, 16, true},
	} {
		if got := Evicted(tc.server, tc.best, tc.sent, tc.pool); got != tc.want {
			t.Errorf("Evicted(%v, %v, %d, %d) = %v, want %v", tc.server, tc.best, tc.sent, tc.pool, got, tc.want)
		}
	}
}
