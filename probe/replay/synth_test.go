package replay

import (
	"crypto/sha256"
	"encoding/hex"
	"strings"
	"testing"
)

// TestVocabularyPinned: synthesised prompts and shadow fillers index the
// replay vocabulary, so its words and their order are pinned (the list as
// it stood when it became prompt.Vocabulary less leftOut). A change here
// changes every synthesised prompt.
func TestVocabularyPinned(t *testing.T) {
	sum := sha256.Sum256([]byte(strings.Join(vocabulary, " ")))
	if got, want := hex.EncodeToString(sum[:]), "76a4a523d688abf383920bed8cb93634ac82d0d11c250d44a9157335b10de625"; len(vocabulary) != 487 || got != want {
		t.Fatalf("vocabulary: %d words, sha256 %s; want 487 words, sha256 %s", len(vocabulary), got, want)
	}
}
