package config

import (
	"bytes"
	"fmt"
	"regexp"
	"strings"
	"unicode/utf8"

	yaml "go.yaml.in/yaml/v3"
)

// checkBytes refuses the first byte that YAML does not allow, with its line
// and offset: yaml.v3 names neither for these (its reader errors carry only
// an offset it does not print). The rules are yaml.v3's reader's: tab, line
// feed, carriage return and printable characters, in UTF-8. A file with a
// UTF-16 byte order mark is left to yaml.v3, which decodes it.
func checkBytes(data []byte, file string) error {
	if bytes.HasPrefix(data, []byte{0xFE, 0xFF}) || bytes.HasPrefix(data, []byte{0xFF, 0xFE}) {
		return nil
	}
	for i := 0; i < len(data); {
		c := data[i]
		if c < utf8.RuneSelf {
			if c == '\t' || c == '\n' || c == '\r' || (c >= 0x20 && c <= 0x7E) {
				i++
				continue
			}
			return byteError(file, data, i, fmt.Sprintf("invalid byte 0x%02x", c))
		}
		r, size := utf8.DecodeRune(data[i:])
		switch {
		case r == utf8.RuneError && size == 1:
			return byteError(file, data, i, fmt.Sprintf("invalid UTF-8 byte 0x%02x", c))
		case r == 0x85, r >= 0xA0 && r <= 0xD7FF, r >= 0xE000 && r <= 0xFFFD, r >= 0x10000 && r <= 0x10FFFF:
			i += size
		default:
			return byteError(file, data, i, fmt.Sprintf("invalid character U+%04X", r))
		}
	}
	return nil
}

func byteError(file string, data []byte, off int, what string) error {
	return &Error{File: file, Line: lineAt(data, off), Reason: fmt.Sprintf("%s at offset %d (binary file?)", what, off)}
}

// lineAt is the 1-based line of byte offset off.
func lineAt(data []byte, off int) int {
	return 1 + bytes.Count(data[:off], []byte{'\n'})
}

var (
	unknownAnchorRE = regexp.MustCompile(`^unknown anchor '(.*)' referenced$`)
	selfAnchorRE    = regexp.MustCompile(`^anchor '(.*)' value contains itself$`)
)

// errorLine finds the line of a yaml.v3 error whose message has none.
// yaml.v3 leaves the line out of a parser error on the first line (it
// prints "line N" only for N > 0, counting from 0 there), and out of its
// decoder's errors about aliases, merges and !!binary. root is the node
// tree when the document parsed (a decoder error), else nil (a parser
// error). It is never 0: the document's first line stands in for a place
// it cannot find.
func errorLine(msg string, data []byte, root *yaml.Node) int {
	if root == nil {
		if m := unknownAnchorRE.FindStringSubmatch(msg); m != nil {
			if l := aliasLine(data, m[1]); l > 0 {
				return l
			}
		}
		return 1
	}
	var match func(n *yaml.Node) bool
	switch {
	case selfAnchorRE.MatchString(msg):
		name := selfAnchorRE.FindStringSubmatch(msg)[1]
		match = func(n *yaml.Node) bool { return n.Kind == yaml.AliasNode && n.Value == name }
	case strings.Contains(msg, "aliasing"):
		match = func(n *yaml.Node) bool { return n.Kind == yaml.AliasNode }
	case strings.Contains(msg, "merge"):
		match = func(n *yaml.Node) bool { return n.Kind == yaml.ScalarNode && n.Tag == "!!merge" }
	case strings.Contains(msg, "!!binary"):
		match = func(n *yaml.Node) bool { return n.Tag == "!!binary" }
	}
	if match != nil {
		if n := findNode(root, match); n != nil && n.Line > 0 {
			return n.Line
		}
	}
	if n := root; n.Kind == yaml.DocumentNode && len(n.Content) > 0 && n.Content[0].Line > 0 {
		return n.Content[0].Line
	}
	return 1
}

// parseErrorLine is the line a YAML parser error is on: the first line k
// such that the document's first k lines alone fail to parse with the same
// reason (yaml.v3 stops at its first error, so every longer prefix fails
// with it too, and the search is a bisection: some 20 parses of a file of
// MaxFileBytes). 0 when no prefix fails so, as when the error is about a
// second document, which yaml.Unmarshal does not read.
func parseErrorLine(data []byte, reason string) int {
	ends := make([]int, 0, bytes.Count(data, []byte("\n"))+1)
	for off := 0; off < len(data); {
		i := bytes.IndexByte(data[off:], '\n')
		if i < 0 {
			ends = append(ends, len(data))
			break
		}
		off += i + 1
		ends = append(ends, off)
	}
	fails := func(k int) bool {
		var n yaml.Node
		err := yaml.Unmarshal(data[:ends[k-1]], &n)
		if err == nil {
			return false
		}
		msg := strings.TrimPrefix(err.Error(), "yaml: ")
		if m := yamlLineError.FindStringSubmatch(msg); m != nil {
			msg = m[2]
		}
		return msg == reason
	}
	if len(ends) == 0 || !fails(len(ends)) {
		return 0
	}
	lo, hi := 1, len(ends) // fails(hi); the answer is in [lo, hi]
	for lo < hi {
		mid := lo + (hi-lo)/2
		if fails(mid) {
			hi = mid
		} else {
			lo = mid + 1
		}
	}
	return lo
}

// findNode is the first node of the tree, in document order, that match
// accepts. It does not follow aliases.
func findNode(n *yaml.Node, match func(*yaml.Node) bool) *yaml.Node {
	if match(n) {
		return n
	}
	for _, c := range n.Content {
		if f := findNode(c, match); f != nil {
			return f
		}
	}
	return nil
}

// aliasLine is the line of the first "*name" alias in data, or 0.
func aliasLine(data []byte, name string) int {
	needle := []byte("*" + name)
	for off := 0; ; {
		i := bytes.Index(data[off:], needle)
		if i < 0 {
			return 0
		}
		end := off + i + len(needle)
		// An alias name ends at a blank or a flow indicator.
		if end == len(data) || bytes.IndexByte([]byte(" \t\r\n,[]{}"), data[end]) >= 0 {
			return lineAt(data, off+i)
		}
		off = end
	}
}
