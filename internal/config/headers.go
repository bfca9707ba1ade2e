package config

import (
	"fmt"
	"slices"
	"strings"
)

// checkHeaders validates the headers of the target or module at p: at most
// MaxHeaders, no Authorization (bearer_token_file carries the key), names
// that are HTTP tokens and values without control characters (RFC 9110
// 5.1 and 5.5). Go's transport refuses a request whose header breaks
// those rules before sending it; unchecked, every request would be
// counted as the server's disconnection, though no byte reached it.
func (v *validator) checkHeaders(p path, headers map[string]string) {
	v.checkCount(p, "headers", len(headers), MaxHeaders, "headers", "MaxHeaders")
	names := make([]string, 0, len(headers))
	for k := range headers {
		names = append(names, k)
	}
	slices.Sort(names) // errors in a stable order
	hp := append(append(path{}, p...), "headers")
	for _, k := range names {
		switch {
		case strings.EqualFold(k, "Authorization"):
			v.add(p, "headers", "must not set Authorization: use bearer_token_file")
		case !validHeaderName(k):
			v.add(hp, k, fmt.Sprintf("header name %s is not an HTTP token (letters, digits and !#$%%&'*+-.^_`|~, no spaces)", quote(k)))
		default:
			if i := strings.IndexFunc(headers[k], invalidHeaderValueRune); i >= 0 {
				v.add(hp, k, fmt.Sprintf("header value has a control character (%q at byte %d): no CR, LF, NUL or other control characters", headers[k][i], i))
			}
		}
	}
}

// validHeaderName: a non-empty RFC 9110 token.
func validHeaderName(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case 'a' <= c && c <= 'z', 'A' <= c && c <= 'Z', '0' <= c && c <= '9':
		case strings.IndexByte("!#$%&'*+-.^_`|~", c) >= 0:
		default:
			return false
		}
	}
	return true
}

// invalidHeaderValueRune: a control character other than horizontal tab
// (DEL included), which no field value may hold.
func invalidHeaderValueRune(r rune) bool {
	return (r < 0x20 && r != '\t') || r == 0x7f
}
