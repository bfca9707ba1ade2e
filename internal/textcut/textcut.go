// Package textcut bounds text quoted in logs, errors and records.
package textcut

import "unicode/utf8"

// Ellipsis marks a cut.
const Ellipsis = "…"

// Cut returns s when it is at most n bytes long, else its first n bytes or
// fewer, ending at a character boundary (a cut never splits a UTF-8
// sequence), followed by Ellipsis. The result is at most n+len(Ellipsis)
// bytes. Bytes of s that are not valid UTF-8 are kept as they are. n < 0 is
// taken as 0.
func Cut(s string, n int) string {
	if len(s) <= n {
		return s
	}
	n = max(n, 0)
	// Back up at most utf8.UTFMax-1 bytes to the start of the character
	// that byte n falls in; invalid UTF-8 is cut where it is.
	for i := n; i > 0 && i > n-utf8.UTFMax; i-- {
		if utf8.RuneStart(s[i]) {
			n = i
			break
		}
	}
	return s[:n] + Ellipsis
}
