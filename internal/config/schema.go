package config

import (
	"fmt"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	yaml "go.yaml.in/yaml/v3"
)

// The schema check walks the document's nodes beside the Go type they
// decode into, before yaml.v3 decodes them, so that a mistake of form is
// reported in this project's words: the YAML path, what was expected and,
// for an unknown key, the nearest known one. yaml.v3 says the same in Go's
// words ("field timout not found in type config.Target", "cannot unmarshal
// !!int `500` into time.Duration"), without a path. What this walk cannot
// judge (a type with its own UnmarshalYAML, a value of any type) it leaves
// to yaml.v3, whose errors are still reported with their line.

var (
	durationType    = reflect.TypeFor[time.Duration]()
	unmarshalerType = reflect.TypeFor[yaml.Unmarshaler]()
)

// schemaErrors checks root against the type of v (a pointer) and returns
// the problems found, at most MaxErrors + 1 of them.
func schemaErrors(root *yaml.Node, v any, file string) []error {
	t := reflect.TypeOf(v)
	if t == nil || root == nil {
		return nil
	}
	s := &schemaWalk{file: file}
	n := root
	if n.Kind == yaml.DocumentNode {
		if len(n.Content) == 0 {
			return nil
		}
		n = n.Content[0]
	}
	s.walk(n, t, path{})
	if s.more > 0 {
		s.errs = append(s.errs, moreErrors(s.more))
	}
	return s.errs
}

type schemaWalk struct {
	file string
	errs []error // the first MaxErrors
	more int     // and how many more
}

func (s *schemaWalk) add(n *yaml.Node, p path, reason string) {
	if len(s.errs) >= MaxErrors {
		s.more++
		return
	}
	s.errs = append(s.errs, &Error{File: s.file, Line: n.Line, Field: p.String(), Reason: reason})
}

func (s *schemaWalk) walk(n *yaml.Node, t reflect.Type, p path) {
	if n.Kind == yaml.AliasNode {
		// An alias decodes as its anchor's value, which is checked where
		// the anchor stands.
		return
	}
	if n.ShortTag() == "!!null" {
		return // the zero value, for every type
	}
	if reflect.PointerTo(t).Implements(unmarshalerType) || t.Implements(unmarshalerType) {
		return // its own rules, its own errors
	}
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
		if reflect.PointerTo(t).Implements(unmarshalerType) {
			return
		}
	}
	switch t.Kind() {
	case reflect.Struct:
		if n.Kind != yaml.MappingNode {
			s.add(n, p, "expected a mapping (key: value lines, or {key: value}), got "+describe(n))
			return
		}
		fields := yamlFields(t)
		for i := 0; i+1 < len(n.Content); i += 2 {
			k, val := n.Content[i], n.Content[i+1]
			if k.Value == "<<" {
				continue // a merge key: yaml.v3 checks what it merges
			}
			ft, ok := fields[k.Value]
			kp := append(append(path{}, p...), k.Value)
			if !ok {
				s.add(k, kp, unknownField(k.Value, fields))
				continue
			}
			s.walk(val, ft, kp)
		}
	case reflect.Map:
		if n.Kind != yaml.MappingNode {
			s.add(n, p, "expected a mapping (key: value lines, or {key: value}), got "+describe(n))
			return
		}
		for i := 0; i+1 < len(n.Content); i += 2 {
			s.walk(n.Content[i+1], t.Elem(), append(append(path{}, p...), n.Content[i].Value))
		}
	case reflect.Slice, reflect.Array:
		if n.Kind != yaml.SequenceNode {
			s.add(n, p, "expected a list (- item lines, or [a, b]), got "+describe(n))
			return
		}
		for i, item := range n.Content {
			s.walk(item, t.Elem(), append(append(path{}, p...), i))
		}
	case reflect.Interface:
		// Any value will do (a request's extra fields).
	default:
		s.scalar(n, t, p)
	}
}

// scalar checks a value that decodes into a Go scalar.
func (s *schemaWalk) scalar(n *yaml.Node, t reflect.Type, p path) {
	if n.Kind != yaml.ScalarNode {
		s.add(n, p, fmt.Sprintf("expected %s, got %s", expected(t), describe(n)))
		return
	}
	tag := n.ShortTag()
	switch {
	case t == durationType:
		if tag == "!!int" && isZero(n.Value) {
			return // DecodeStrict writes it as 0s
		}
		if tag == "!!str" {
			if _, err := time.ParseDuration(n.Value); err == nil {
				return
			}
		}
		hint := ""
		if tag == "!!int" || tag == "!!float" {
			hint = fmt.Sprintf(": write %sms for milliseconds or %ss for seconds", n.Value, n.Value)
		}
		s.add(n, p, fmt.Sprintf("expected %s, got %s%s", expected(t), quote(n.Value), hint))
	case t.Kind() == reflect.Bool:
		if tag != "!!bool" {
			s.add(n, p, fmt.Sprintf("expected %s, got %s", expected(t), quote(n.Value)))
		}
	case t.Kind() >= reflect.Int && t.Kind() <= reflect.Int64, t.Kind() >= reflect.Uint && t.Kind() <= reflect.Uint64:
		if tag != "!!int" {
			s.add(n, p, fmt.Sprintf("expected %s, got %s", expected(t), quote(n.Value)))
		}
	case t.Kind() == reflect.Float32 || t.Kind() == reflect.Float64:
		if tag != "!!int" && tag != "!!float" {
			s.add(n, p, fmt.Sprintf("expected %s, got %s", expected(t), quote(n.Value)))
		}
	}
	// Strings take any scalar, as yaml.v3 decodes them.
}

// isZero: an integer zero as YAML writes it (0, +0, -0, 0x0, 0o0).
func isZero(s string) bool {
	v, err := strconv.ParseInt(strings.ReplaceAll(s, "_", ""), 0, 64)
	return err == nil && v == 0
}

// expected names the form a Go type takes in the file.
func expected(t reflect.Type) string {
	switch {
	case t == durationType:
		return "a duration such as 500ms, 30s or 5m (0 for none)"
	case t.Kind() == reflect.Bool:
		return "true or false"
	case t.Kind() >= reflect.Int && t.Kind() <= reflect.Uint64:
		return "a whole number"
	case t.Kind() == reflect.Float32 || t.Kind() == reflect.Float64:
		return "a number"
	case t.Kind() == reflect.String:
		return "a string"
	}
	return "a value"
}

// describe names what a node is, for "got ...".
func describe(n *yaml.Node) string {
	switch n.Kind {
	case yaml.MappingNode:
		return "a mapping"
	case yaml.SequenceNode:
		return "a list"
	}
	return quote(n.Value)
}

// yamlFields maps the keys of a struct type, as yaml.v3 names them, to
// their field types, inlined structs included.
func yamlFields(t reflect.Type) map[string]reflect.Type {
	out := map[string]reflect.Type{}
	for i := range t.NumField() {
		f := t.Field(i)
		tag := f.Tag.Get("yaml")
		name, opts, _ := strings.Cut(tag, ",")
		if tag == "-" || (!f.IsExported() && !f.Anonymous) {
			continue
		}
		if strings.Contains(","+opts+",", ",inline,") {
			ft := f.Type
			for ft.Kind() == reflect.Pointer {
				ft = ft.Elem()
			}
			if ft.Kind() == reflect.Struct {
				for k, v := range yamlFields(ft) {
					out[k] = v
				}
			}
			continue
		}
		if !f.IsExported() {
			continue
		}
		if name == "" {
			name = strings.ToLower(f.Name)
		}
		out[name] = f.Type
	}
	return out
}

// unknownField says that key is not one of fields, naming the nearest
// known key when one is close (a typo), else the known keys.
func unknownField(key string, fields map[string]reflect.Type) string {
	known := make([]string, 0, len(fields))
	for k := range fields {
		known = append(known, k)
	}
	slices.Sort(known)
	if best := nearest(key, known); best != "" {
		return fmt.Sprintf("unknown field %s; did you mean %s?", quote(key), best)
	}
	if len(known) > 12 {
		known = append(known[:12:12], "...")
	}
	return fmt.Sprintf("unknown field %s; known here: %s", quote(key), strings.Join(known, ", "))
}

// nearest is the name of known that got is a typo of, or "" when none is
// close: at most a third of its letters wrong, and at most 3.
func nearest(got string, known []string) string {
	best, bestD := "", 0
	lower := strings.ToLower(got)
	for _, k := range known {
		d := editDistance(lower, strings.ToLower(k))
		// On a tie, a name the typo is missing letters of ("sped":
		// speed, not seed) is the likelier one.
		if best == "" || d < bestD || (d == bestD && subsequence(lower, k) && !subsequence(lower, best)) {
			best, bestD = k, d
		}
	}
	if best != "" && bestD <= min(3, max(1, utf8.RuneCountInString(got)/3)) {
		return best
	}
	return ""
}

// didYouMean is "; did you mean X?" when got is a typo of one of known
// (see nearest), else "": the suffix of an enum value's error, as an
// unknown field's error names the field meant.
func didYouMean[S ~string](got string, known []S) string {
	names := make([]string, len(known))
	for i, k := range known {
		names[i] = string(k)
	}
	if best := nearest(got, names); best != "" && best != got {
		return fmt.Sprintf("; did you mean %s?", quote(best))
	}
	return ""
}

// subsequence: every byte of a appears in b, in order.
func subsequence(a, b string) bool {
	i := 0
	for j := 0; i < len(a) && j < len(b); j++ {
		if a[i] == b[j] {
			i++
		}
	}
	return i == len(a)
}

// editDistance is the Levenshtein distance of a and b, in bytes (keys are
// ASCII); a key longer than MaxNameBytes is compared by its first bytes.
func editDistance(a, b string) int {
	a, b = a[:min(len(a), MaxNameBytes)], b[:min(len(b), MaxNameBytes)]
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev, cur = cur, prev
	}
	return prev[len(b)]
}

// zeroDurations rewrites, in data, every integer zero that decodes into a
// time.Duration as "0s", which yaml.v3 accepts (it refuses integers for
// durations). Only the bytes of those scalars change, on their own lines,
// so every line number stays what it was.
func zeroDurations(data []byte, root *yaml.Node, v any) []byte {
	var at []*yaml.Node
	var walk func(n *yaml.Node, t reflect.Type)
	walk = func(n *yaml.Node, t reflect.Type) {
		if n == nil || n.Kind == yaml.AliasNode {
			return
		}
		if reflect.PointerTo(t).Implements(unmarshalerType) || t.Implements(unmarshalerType) {
			return
		}
		for t.Kind() == reflect.Pointer {
			t = t.Elem()
		}
		switch {
		case t == durationType:
			if n.Kind == yaml.ScalarNode && n.ShortTag() == "!!int" && isZero(n.Value) && n.Style == 0 {
				at = append(at, n)
			}
		case t.Kind() == reflect.Struct && n.Kind == yaml.MappingNode:
			fields := yamlFields(t)
			for i := 0; i+1 < len(n.Content); i += 2 {
				if ft, ok := fields[n.Content[i].Value]; ok {
					walk(n.Content[i+1], ft)
				}
			}
		case t.Kind() == reflect.Map && n.Kind == yaml.MappingNode:
			for i := 0; i+1 < len(n.Content); i += 2 {
				walk(n.Content[i+1], t.Elem())
			}
		case (t.Kind() == reflect.Slice || t.Kind() == reflect.Array) && n.Kind == yaml.SequenceNode:
			for _, item := range n.Content {
				walk(item, t.Elem())
			}
		}
	}
	n := root
	if n.Kind == yaml.DocumentNode && len(n.Content) > 0 {
		n = n.Content[0]
	}
	walk(n, reflect.TypeOf(v))
	if len(at) == 0 {
		return data
	}
	lines := strings.SplitAfter(string(data), "\n")
	// Later columns first, so that an earlier rewrite on the same line
	// does not move a later one.
	slices.SortFunc(at, func(a, b *yaml.Node) int {
		if a.Line != b.Line {
			return a.Line - b.Line
		}
		return b.Column - a.Column
	})
	for _, z := range at {
		if z.Line < 1 || z.Line > len(lines) {
			continue
		}
		line := lines[z.Line-1]
		off := runeOffset(line, z.Column-1)
		if off < 0 || !strings.HasPrefix(line[off:], z.Value) {
			continue // not where the parser said: leave it to yaml.v3
		}
		lines[z.Line-1] = line[:off] + "0s" + line[off+len(z.Value):]
	}
	return []byte(strings.Join(lines, ""))
}

// runeOffset is the byte offset of the col-th character (0-based) of line,
// or -1.
func runeOffset(line string, col int) int {
	i := 0
	for k := range line {
		if i == col {
			return k
		}
		i++
	}
	if i == col {
		return len(line)
	}
	return -1
}
