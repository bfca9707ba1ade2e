package observation

import (
	"slices"
	"testing"
)

// TestByOutcome: every outcome gets its own value, made up front in
// Outcomes' order; an outcome outside the set has none.
func TestByOutcome(t *testing.T) {
	var made []Outcome
	b := NewByOutcome(func(o Outcome) string {
		made = append(made, o)
		return "v-" + string(o)
	})
	if !slices.Equal(made, Outcomes) {
		t.Fatalf("made %v, want %v", made, Outcomes)
	}
	var all []Outcome
	for o, v := range b.All() {
		all = append(all, o)
		if got, ok := b.Of(o); !ok || got != v || v != "v-"+string(o) {
			t.Errorf("Of(%s) = %q, %v; All gave %q", o, got, ok, v)
		}
	}
	if !slices.Equal(all, Outcomes) {
		t.Fatalf("All gave %v, want %v", all, Outcomes)
	}
	if v, ok := b.Of("nonsense"); ok || v != "" {
		t.Errorf("Of(nonsense) = %q, %v", v, ok)
	}
	if b.At("nonsense") != nil {
		t.Errorf("At(nonsense) is not nil")
	}

	var counts ByOutcome[int]
	for _, o := range []Outcome{Timeout, Success, Timeout, Dropped} {
		*counts.At(o)++
	}
	for o, n := range counts.All() {
		want := map[Outcome]int{Timeout: 2, Success: 1, Dropped: 1}[o]
		if n != want {
			t.Errorf("count of %s = %d, want %d", o, n, want)
		}
	}
}
