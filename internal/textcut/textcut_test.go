package textcut

import (
	"strings"
	"testing"
	"unicode/utf8"
)

func TestCut(t *testing.T) {
	for _, c := range []struct {
		s    string
		n    int
		want string
	}{
		{"", 0, ""},
		{"abc", 3, "abc"},
		{"abc", 10, "abc"},
		{"abcdef", 3, "abc…"},
		{"abc", 0, "…"},
		{"abc", -1, "…"},
		// é is 2 bytes, 日 is 3, 😀 is 4: a cut inside one backs up to its start.
		{"aéb", 2, "a…"},
		{"aéb", 3, "aé…"},
		{"日本語", 4, "日…"},
		{"日本語", 5, "日…"},
		{"日本語", 6, "日本…"},
		{"x😀y", 4, "x…"},
		{"x😀y", 5, "x😀…"},
		// Invalid UTF-8 is cut where it is, not backed up past.
		{"\xff\xff\xff\xff\xff", 3, "\xff\xff\xff…"},
		{"a\x80\x80\x80\x80b", 4, "a\x80\x80\x80…"},
	} {
		if got := Cut(c.s, c.n); got != c.want {
			t.Errorf("Cut(%q, %d) = %q, want %q", c.s, c.n, got, c.want)
		}
	}
}

// TestCutKeepsUTF8: a valid string stays valid, and within the bound,
// whatever the cut.
func TestCutKeepsUTF8(t *testing.T) {
	s := strings.Repeat("aé日😀", 8)
	for n := range len(s) + 2 {
		got := Cut(s, n)
		if !utf8.ValidString(got) {
			t.Fatalf("Cut(s, %d) = %q: not valid UTF-8", n, got)
		}
		if len(got) > n+len(Ellipsis) {
			t.Fatalf("Cut(s, %d) is %d bytes", n, len(got))
		}
		if n < len(s) && (!strings.HasSuffix(got, Ellipsis) || !strings.HasPrefix(s, strings.TrimSuffix(got, Ellipsis))) {
			t.Fatalf("Cut(s, %d) = %q: not a prefix of s and the ellipsis", n, got)
		}
	}
}
