package config

import (
	"errors"
	"strings"
	"testing"
)

// TestErrorsHaveLines: every error of a file that does not parse names a
// line, including those yaml.v3 reports without one.
func TestErrorsHaveLines(t *testing.T) {
	deep := func(open string, n int) string { return strings.Repeat(open, n) }
	for _, tc := range []struct {
		name, yaml, want string
	}{
		{"NUL byte", base + "    duration: 1s\x00\n", "c.yml:10: invalid byte 0x00 at offset 153 (binary file?)"},
		{"NUL on line 1", "\x00", "c.yml:1: invalid byte 0x00 at offset 0 (binary file?)"},
		{"ELF binary", "\x7fELF\x02\x01\x01\x00\x00\x00", "c.yml:1: invalid byte 0x7f at offset 0 (binary file?)"},
		{"PNG", "\x89PNG\r\n\x1a\n", "c.yml:1: invalid UTF-8 byte 0x89 at offset 0 (binary file?)"},
		{"invalid UTF-8", "targets:\n  - name: caf\xe9\n", "c.yml:2: invalid UTF-8 byte 0xe9 at offset 22 (binary file?)"},
		{"C1 control", "targets:\n\n  - name: a\u0080\n", "c.yml:3: invalid character U+0080 at offset 21 (binary file?)"},
		{"escape", "targets: \x1b[31m\n", "c.yml:1: invalid byte 0x1b at offset 9 (binary file?)"},
		{"deep flow nesting", deep("[", 10001), "c.yml:1: exceeded max depth of 10000"},
		{"deep flow nesting, line 3", "# a\n# b\nx: " + deep("[", 10001), "c.yml:3: exceeded max depth of 10000"},
		{"deep block nesting", deep("- ", 10001) + "x\n", "c.yml:1: exceeded max depth of 10000"},
		{"tab on line 1", "\ttargets: []\n", "c.yml:1: found character that cannot start any token"},
		{"bad token on line 1", "targets: @x\n", "c.yml:1: found character that cannot start any token"},
		{"unknown anchor", base + "    duration: *nope\n", "c.yml:10: unknown anchor 'nope' referenced"},
		{"anchor in itself", "targets:\n  - &t\n    name: a\n    headers: *t\n", "c.yml:4: anchor 't' value contains itself"},
		{"bad merge", "targets:\n  - name: a\n    <<: 1\n", "c.yml:3: map merge requires map or sequence of maps as the value"},
		{"bad binary", "targets:\n  - name: !!binary '@@@'\n", "c.yml:2: !!binary value contains invalid base64 data"},
		// yaml.v3 names where the enclosing list began (none, for the
		// first line): the error is put on the line it is on.
		{"key mis-indented on line 4", "targets:\n  - name: t\n    url: http://x:8000\n   model: m\nworkloads: []\n", "c.yml:4: did not find expected '-' indicator"},
		{"key mis-indented on line 8", "targets:\n  - name: t\n    url: http://x:8000\n    model: m\nworkloads:\n  - name: w\n    target: t\n     arrival: {}\n", "c.yml:8: mapping values are not allowed in this context"},
		{"key mis-indented, no final newline", "workloads:\n  - name: w\n    target: t\n   arrival: {}", "c.yml:4: did not find expected '-' indicator"},
		{"flow list without its , or ] after line 4", "targets:\n  - name: t\n    url: [a,\n    b\nworkloads: []\n", "c.yml:4: did not find expected ',' or ']'"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Parse([]byte(tc.yaml), "c.yml")
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error %v\nwant %q", err, tc.want)
			}
			var ce *Error
			if !errors.As(err, &ce) || ce.Line == 0 {
				t.Errorf("error %v has no line", err)
			}
		})
	}
	// UTF-16 is yaml.v3's to decode, byte order mark and all.
	utf16 := []byte{0xFF, 0xFE}
	for _, r := range "targets:\n" {
		utf16 = append(utf16, byte(r), 0)
	}
	if _, err := Parse(utf16, "c.yml"); err != nil {
		t.Errorf("UTF-16: %v", err)
	}
	// A UTF-8 byte order mark and printable Unicode are fine.
	if _, err := Parse([]byte("\ufefftargets:\n  - {name: a, url: 'http://h', model: \"é\u2028😀\"}\n"), "c.yml"); err != nil {
		t.Errorf("UTF-8: %v", err)
	}
}

// TestEmptyAndMultiDocument: a file with nothing in it, and a second YAML
// document, are refused with the reason.
func TestEmptyAndMultiDocument(t *testing.T) {
	const empty = "c.yml: empty configuration: no targets, workloads or modules"
	for _, tc := range []struct {
		name, yaml, want string
	}{
		{"empty", "", empty},
		{"blank lines", "\n\n  \n", empty},
		{"comments only", "# nothing yet\n# really\n", empty},
		{"document start only", "---\n", empty},
		{"document start and end", "--- # c\n...\n", empty},
		{"null", "~\n", empty},
		{"empty mapping", "{}\n", empty},
		{"second document", base + "---\ntargets: []\n", "c.yml:10: a second YAML document (---): the configuration is one document"},
		{"second document after an explicit first", "---\n" + base + "---\n# more\nworkloads: []\n", "c.yml:11: a second YAML document (---): the configuration is one document"},
		{"empty first, second with content", "---\n---\n" + base, "c.yml:2: a second YAML document (---): the configuration is one document"},
		{"content after the end marker", base + "...\nworkloads: []\n", "c.yml:10: after the first YAML document: did not find expected <document start>: the configuration is one document"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Parse([]byte(tc.yaml), "c.yml")
			if err == nil || err.Error() != tc.want {
				t.Fatalf("error %v\nwant %q", err, tc.want)
			}
		})
	}
	// Still fine: only targets; a trailing empty document; an end marker.
	for _, y := range []string{"targets:\n", "targets: []\n", base + "---\n", base + "---\n# the end\n", base + "...\n"} {
		if _, err := Parse([]byte(y), "c.yml"); err != nil {
			t.Errorf("%q: %v", y, err)
		}
	}
}
