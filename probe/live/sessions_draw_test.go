package live

import (
	"testing"

	"github.com/infer-exporter/infer_exporter/internal/config"
)

// TestTurnLabel: turns 1 to 8 have their own label, the rest share "9+".
func TestTurnLabel(t *testing.T) {
	for _, tc := range []struct {
		turn int
		want string
	}{{0, "1"}, {1, "1"}, {2, "2"}, {8, "8"}, {9, "9+"}, {config.MaxSessionTurns, "9+"}} {
		if got := TurnLabel(tc.turn); got != tc.want {
			t.Errorf("TurnLabel(%d) = %q, want %q", tc.turn, got, tc.want)
		}
	}
	if len(TurnLabels) != 9 {
		t.Errorf("%d turn labels, want 9", len(TurnLabels))
	}
}
