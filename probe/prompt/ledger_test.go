package prompt

import "testing"

// TestPrefixLedger: the ledger counts a prefix's tokens as repeated only
// when an earlier prompt that was sent carried them. A prompt whose
// arrival was dropped sent nothing: the next use of its prefix is the
// first (RepeatTokens, counted as drawn, said it was a repeat, and the
// bench's best ratio stood above what any cache could serve).
func TestPrefixLedger(t *testing.T) {
	p := func(index, tokens int) Prompt { return Prompt{PrefixIndex: index, PrefixTokens: tokens} }
	for _, tc := range []struct {
		name string
		sent []Prompt
		want []int
	}{
		{"first use, then repeats", []Prompt{p(1, 64), p(1, 64), p(1, 64)}, []int{0, 64, 64}},
		{"two prefixes", []Prompt{p(1, 64), p(2, 64), p(2, 64), p(1, 64)}, []int{0, 0, 64, 64}},
		// Prefix 1's first draw was dropped (not in sent): its next
		// use is its first.
		{"the first use dropped", []Prompt{p(2, 64), p(1, 64), p(1, 64)}, []int{0, 0, 64}},
		{"a longer prefix repeats the shorter's tokens", []Prompt{p(1, 32), p(1, 64), p(1, 48)}, []int{0, 32, 48}},
		{"no shared prefix", []Prompt{{}, p(0, 64), p(1, 0)}, []int{0, 0, 0}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var l PrefixLedger
			for i, q := range tc.sent {
				if got := l.Sent(q); got != tc.want[i] {
					t.Errorf("prompt %d: %d tokens repeated, want %d", i, got, tc.want[i])
				}
			}
		})
	}
}
