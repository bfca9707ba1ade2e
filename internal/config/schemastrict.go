package config

import (
	"slices"
	"strconv"
	"strings"
)

// strictViolation is a subschema that breaks OpenAI's strict rules for
// structured outputs: where it is (keys and indexes from the schema's
// root) and what it lacks.
type strictViolation struct {
	at     path
	reason string
}

// strictViolations are the object schemas of doc, a JSON Schema, that
// break OpenAI's strict rules: every object must set additionalProperties
// to false and list each of its properties in required. It walks every
// place a subschema may sit (properties, items, anyOf, $defs, ...), in the
// order of their keys, so that the first is the same on every load; doc's
// shape is bounded already (MaxSchemaDepth, MaxSubschemas), and the walk
// stops past MaxSchemaDepth whatever doc is. A value under another key
// (const, enum, default, examples) is data, not a schema, and is not
// judged.
func strictViolations(doc any) []strictViolation {
	var out []strictViolation
	var walk func(s any, at path, level int)
	walk = func(s any, at path, level int) {
		m, ok := s.(map[string]any)
		if !ok || level > MaxSchemaDepth {
			return
		}
		if why := strictObjectProblem(m); why != "" {
			out = append(out, strictViolation{at, why})
		}
		under := func(x any, key ...any) {
			walk(x, append(append(path{}, at...), key...), level+len(key))
		}
		for _, key := range sortedKeys(m) {
			switch key {
			case "properties", "patternProperties", "$defs", "definitions", "dependentSchemas", "dependencies":
				members, _ := m[key].(map[string]any)
				for _, name := range sortedKeys(members) {
					under(members[name], key, name)
				}
			case "items", "prefixItems", "allOf", "anyOf", "oneOf":
				if list, ok := m[key].([]any); ok {
					for i, x := range list {
						under(x, key, i)
					}
				} else {
					under(m[key], key)
				}
			case "additionalProperties", "additionalItems", "unevaluatedProperties", "unevaluatedItems",
				"contains", "propertyNames", "not", "if", "then", "else", "contentSchema":
				under(m[key], key)
			}
		}
	}
	walk(doc, nil, 1)
	return out
}

// strictObjectProblem says what an object schema (type object, or one
// with properties) lacks under OpenAI's strict rules, "" when nothing or
// when m is not an object schema.
func strictObjectProblem(m map[string]any) string {
	if !objectSchema(m) {
		return ""
	}
	var lacks []string
	if ap, ok := m["additionalProperties"]; !ok || ap != false {
		lacks = append(lacks, "additionalProperties: false")
	}
	props, _ := m["properties"].(map[string]any)
	required := map[string]bool{}
	if list, ok := m["required"].([]any); ok {
		for _, r := range list {
			if name, ok := r.(string); ok {
				required[name] = true
			}
		}
	}
	var missing []string
	for _, name := range sortedKeys(props) {
		if !required[name] {
			missing = append(missing, strconv.Quote(name))
		}
	}
	if len(missing) > 0 {
		lacks = append(lacks, strings.Join(missing, ", ")+" in required")
	}
	if len(lacks) == 0 {
		return ""
	}
	return "an object that lacks " + strings.Join(lacks, " and ")
}

// objectSchema says whether m describes objects: its type is or includes
// object, or it has properties.
func objectSchema(m map[string]any) bool {
	switch t := m["type"].(type) {
	case string:
		if t == "object" {
			return true
		}
	case []any:
		if slices.Contains(t, any("object")) {
			return true
		}
	}
	_, ok := m["properties"]
	return ok
}

// sortedKeys are m's keys, sorted.
func sortedKeys(m map[string]any) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}

// jsonPointer is p, a path inside a schema, as a JSON Pointer fragment
// (RFC 6901): "#/properties/address".
func jsonPointer(p path) string {
	var b strings.Builder
	b.WriteString("#")
	for _, e := range p {
		b.WriteByte('/')
		switch e := e.(type) {
		case int:
			b.WriteString(strconv.Itoa(e))
		case string:
			b.WriteString(strings.NewReplacer("~", "~0", "/", "~1").Replace(e))
		}
	}
	return b.String()
}
