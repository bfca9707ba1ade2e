package memwatch

import (
	"testing"
)

var sink [][]byte

func TestWatchSeesGrowth(t *testing.T) {
	tests := []struct {
		name     string
		alloc    int // bytes held while watched
		limit    uint64
		exceeded bool
	}{
		{"under the limit", 1 << 20, 64 << 20, false},
		{"over the limit", 32 << 20, 8 << 20, true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			calls := 0
			w := Start(tc.limit, func() { calls++ })
			for i := 0; i < tc.alloc; i += 1 << 20 {
				sink = append(sink, make([]byte, 1<<20))
			}
			peak, over := w.Stop()
			sink = nil
			if peak < uint64(tc.alloc) {
				t.Errorf("peak %d bytes, below the %d held", peak, tc.alloc)
			}
			if over != tc.exceeded || (calls == 1) != tc.exceeded || calls > 1 {
				t.Errorf("exceeded %v with %d calls, want %v", over, calls, tc.exceeded)
			}
		})
	}
}
