package simulator

import (
	"hash/fnv"
	"strings"
	"testing"
)

func TestTokenIDIsFNV1a32(t *testing.T) {
	for _, w := range []string{"a", "hello", "<|im_start|>", "日本語", "x1234567890", ""} {
		h := fnv.New32a()
		h.Write([]byte(w))
		if want := int(h.Sum32() % VocabSize); TokenID(w) != want {
			t.Errorf("TokenID(%q) = %d, want %d", w, TokenID(w), want)
		}
	}
	if got, want := roleTokenID("user"), TokenID("<|user|>"); got != want {
		t.Errorf("roleTokenID(user) = %d, want TokenID(<|user|>) = %d", got, want)
	}
}

func TestCountTokens(t *testing.T) {
	tests := []struct {
		text string
		want int
	}{
		{"", 0},
		{"   \n\t", 0},
		{"a", 1},
		{"a b c", 3},
		{"  a  b\nc\t", 3},
		{"a\u00a0b\u2003c", 3}, // Unicode spaces separate, as in strings.Fields
		{"héllo wörld", 2},
		{"a,b.c", 1}, // punctuation does not split
	}
	for _, tc := range tests {
		if got := CountTokens(tc.text); got != tc.want || got != len(strings.Fields(tc.text)) {
			t.Errorf("CountTokens(%q) = %d, want %d", tc.text, got, tc.want)
		}
		if got := len(AppendTokenIDs(nil, tc.text)); got != tc.want {
			t.Errorf("AppendTokenIDs(%q) has %d ids, want %d", tc.text, got, tc.want)
		}
	}
}

func TestChatTemplate(t *testing.T) {
	tests := []struct {
		name   string
		msgs   []ChatMessage
		addGen bool
		want   int
	}{
		{"one user message", []ChatMessage{{"user", "a b c"}}, true, 7},
		{"without generation prompt", []ChatMessage{{"user", "a b c"}}, false, 6},
		{"system and user", []ChatMessage{{"system", "be brief"}, {"user", "hi"}}, true, 3 + 2 + 3 + 1 + 1},
		{"empty content", []ChatMessage{{"assistant", ""}}, true, 4},
		{"no messages", nil, true, 1},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := CountChatTokens(tc.msgs, tc.addGen); got != tc.want {
				t.Errorf("CountChatTokens = %d, want %d", got, tc.want)
			}
			ids := AppendChatTokenIDs(nil, tc.msgs, tc.addGen)
			if len(ids) != tc.want {
				t.Errorf("AppendChatTokenIDs gave %d ids, want %d", len(ids), tc.want)
			}
			for _, id := range ids {
				if id < 0 || id >= VocabSize {
					t.Errorf("id %d outside the vocabulary", id)
				}
			}
		})
	}
	// The template tokens are what the documentation says.
	got := AppendChatTokenIDs(nil, []ChatMessage{{"user", "a b"}}, true)
	want := []int{TokenID("<|im_start|>"), TokenID("<|user|>"), TokenID("a"), TokenID("b"), TokenID("<|im_end|>"), TokenID("<|assistant|>")}
	if len(got) != len(want) {
		t.Fatalf("ids %v, want %v", got, want)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("id %d = %d, want %d", i, got[i], want[i])
		}
	}
}

func TestOutputTextTokenizesBack(t *testing.T) {
	for _, key := range []uint64{0, 1, 42, 1 << 63} {
		var b strings.Builder
		for i := range 300 {
			p := outputPiece(key, i)
			if !strings.HasPrefix(p, " ") || CountTokens(p) != 1 || strings.ContainsAny(p, `"\`) {
				t.Fatalf("piece %q is not one space-led, JSON-safe token", p)
			}
			b.WriteString(p)
		}
		if n := CountTokens(b.String()); n != 300 {
			t.Errorf("key %d: 300 pieces tokenize to %d", key, n)
		}
	}
	if outputPiece(1, 0) == outputPiece(1, 1) && outputPiece(1, 1) == outputPiece(1, 2) {
		t.Error("output words do not vary")
	}
}

func TestBlockHashes(t *testing.T) {
	a := ids(100, "x")
	b := append(append([]int{}, a[:40]...), ids(60, "y")...)
	ha, hb := blockHashes(a, 16), blockHashes(b, 16)
	if len(ha) != 6 || len(hb) != 6 {
		t.Fatalf("%d and %d full blocks, want 6", len(ha), len(hb))
	}
	// 40 shared tokens: blocks 0 and 1 (tokens 0..31) are equal, block 2
	// (32..47) differs, and so does every later block, because of the chain.
	for j := range 6 {
		if (ha[j] == hb[j]) != (j < 2) {
			t.Errorf("block %d: equal=%v", j, ha[j] == hb[j])
		}
	}
	// A block with the same tokens at a different position hashes differently.
	c := append(append([]int{}, a[16:32]...), a[16:32]...)
	hc := blockHashes(c, 16)
	if hc[0] == hc[1] {
		t.Error("equal blocks after different prefixes hash the same")
	}
	if blockHashes(a[:15], 16) != nil {
		t.Error("a partial block has a hash")
	}
}

func TestPromptKeyDependsOnSeedAndPrompt(t *testing.T) {
	p := ids(10, "k")
	if promptKey(1, p) != promptKey(1, p) {
		t.Error("promptKey is not deterministic")
	}
	if promptKey(1, p) == promptKey(2, p) || promptKey(1, p) == promptKey(1, p[:9]) {
		t.Error("promptKey ignores the seed or the prompt")
	}
}
