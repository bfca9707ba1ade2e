package simulator

import (
	"encoding/json"
	"math"
	"sort"
	"strings"
	"unicode/utf8"

	"github.com/infer-exporter/infer_exporter/internal/hashmix"
)

// A structured answer (doc.go, "Structured answers"): a request with a
// response_format, or whose answer is a tool call, is answered with a JSON
// document that its schema accepts, spread over the answer's tokens. The
// instance is built from the schema's common keywords (type, properties,
// required, items, minItems, enum, const, minimum, maximum, minLength,
// anyOf, oneOf, allOf); a schema built on others ($ref, pattern, format)
// gets the instance of what it has of these, which it may refuse.

// maxInstanceDepth bounds the instance's nesting (and the work of a
// hostile schema).
const maxInstanceDepth = 16

// structuredDoc is the answer of a schema (nil: any JSON object will do).
func structuredDoc(schema json.RawMessage) []byte {
	var s any
	if len(schema) > 0 && json.Unmarshal(schema, &s) == nil {
		b, err := json.Marshal(instanceOf(s, 0))
		if err == nil {
			return b
		}
	}
	return []byte(`{"answer":"ok"}`)
}

// instanceOf is a value that schema s accepts, as far as its keywords go.
func instanceOf(s any, depth int) any {
	m, ok := s.(map[string]any)
	if !ok || depth > maxInstanceDepth {
		return map[string]any{}
	}
	if c, ok := m["const"]; ok {
		return c
	}
	if e, ok := m["enum"].([]any); ok && len(e) > 0 {
		return e[0]
	}
	for _, k := range []string{"anyOf", "oneOf", "allOf"} {
		if alts, ok := m[k].([]any); ok && len(alts) > 0 {
			return instanceOf(alts[0], depth+1)
		}
	}
	typ, _ := m["type"].(string)
	if ts, ok := m["type"].([]any); ok && len(ts) > 0 {
		typ, _ = ts[0].(string)
	}
	if typ == "" {
		if _, ok := m["properties"]; ok {
			typ = "object"
		}
	}
	num := func(def float64) float64 {
		v := def
		if lo, ok := m["minimum"].(float64); ok {
			v = math.Max(v, lo)
		}
		if lo, ok := m["exclusiveMinimum"].(float64); ok && v <= lo {
			v = math.Floor(lo) + 1
		}
		if hi, ok := m["maximum"].(float64); ok {
			v = math.Min(v, hi)
		}
		return v
	}
	switch typ {
	case "object":
		out := map[string]any{}
		props, _ := m["properties"].(map[string]any)
		names := make([]string, 0, len(props))
		for k := range props {
			names = append(names, k)
		}
		sort.Strings(names)
		for _, k := range names {
			out[k] = instanceOf(props[k], depth+1)
		}
		return out
	case "array":
		n := 1
		if lo, ok := m["minItems"].(float64); ok {
			n = max(n, int(lo))
		}
		if hi, ok := m["maxItems"].(float64); ok {
			n = min(n, int(hi))
		}
		n = min(n, 64)
		out := make([]any, n)
		for i := range out {
			out[i] = instanceOf(m["items"], depth+1)
		}
		return out
	case "string":
		n := 2
		if lo, ok := m["minLength"].(float64); ok {
			n = max(n, int(min(lo, 4096)))
		}
		if hi, ok := m["maxLength"].(float64); ok {
			n = min(n, int(hi))
		}
		return strings.Repeat("o", n)
	case "integer":
		return int64(num(1))
	case "number":
		return num(1.5)
	case "boolean":
		return true
	case "null":
		return nil
	}
	return map[string]any{}
}

// breakDoc cuts doc by its last byte for the fraction of requests that
// the InvalidStructured fault draws, by the request's key.
func breakDoc(doc []byte, key uint64, fraction float64) []byte {
	if fraction <= 0 || len(doc) == 0 {
		return doc
	}
	if float64(hashmix.Mix64(key^0x5ec7ed)>>11)/(1<<53) < fraction {
		return doc[:len(doc)-1]
	}
	return doc
}

// docPieces splits doc over n tokens, as JSON string bodies (escaped,
// without quotes): every token a non-empty piece, so that each is a
// content event. A doc shorter than n is padded with spaces, which JSON
// allows after a value; a piece never splits a UTF-8 sequence.
func docPieces(doc []byte, n int) [][]byte {
	if n < 1 {
		return nil
	}
	if len(doc) < n {
		doc = append(append([]byte{}, doc...), strings.Repeat(" ", n-len(doc))...)
	}
	out := make([][]byte, 0, n)
	start := 0
	for i := range n {
		end := (i + 1) * len(doc) / n
		for end < len(doc) && !utf8.RuneStart(doc[end]) {
			end++
		}
		if end <= start && i < n-1 {
			out = append(out, []byte(" ")) // a rune longer than its share: keep the token
			continue
		}
		q, _ := json.Marshal(string(doc[start:max(end, start)]))
		out = append(out, q[1:len(q)-1])
		start = max(end, start)
	}
	return out
}
