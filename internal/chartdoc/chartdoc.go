// Package chartdoc writes the table of values of a Helm chart's README from
// the chart's values.yaml and values.schema.json: our small generator in
// place of helm-docs, for charts/infer-exporter (`make chart-readme`, and a
// test that fails when the README is stale).
//
// A key of values.yaml is documented by a comment that starts with "# --"
// just above it (the lines after it, up to the key, continue it), as
// helm-docs reads them. Its row gives the key's dotted path, its type from
// the schema, its default from values.yaml (or the text of a last comment
// line "# @default -- TEXT", for a default too long for a table) and the
// description. Every value must be documented, by its own comment or by
// an ancestor's, and every documented key must be in the schema, and the
// schema's properties in values.yaml: Check says which are not.
package chartdoc

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"sort"
	"strings"

	yaml "go.yaml.in/yaml/v3"
)

// The README's generated part lies between these two lines.
const (
	Begin = "<!-- values: generated from values.yaml and values.schema.json by `make chart-readme`; do not edit -->"
	End   = "<!-- end of values -->"
)

// Value is one documented key of values.yaml.
type Value struct {
	Key         string // dotted path: bench.results.size
	Type        string // from the schema: string, integer, boolean or null...
	Default     string // as a table cell shows it, without the backquotes
	Description string
	literal     bool // Default is the comment's text, not a value
}

// Values reads the documented keys of values.yaml, in the file's order,
// and every key path of the file (documented or not).
func Values(values []byte) (documented []Value, paths []string, err error) {
	var doc yaml.Node
	if err := yaml.Unmarshal(values, &doc); err != nil {
		return nil, nil, err
	}
	if len(doc.Content) != 1 || doc.Content[0].Kind != yaml.MappingNode {
		return nil, nil, errors.New("values.yaml is not a mapping")
	}
	var walk func(prefix string, m *yaml.Node) error
	walk = func(prefix string, m *yaml.Node) error {
		for i := 0; i+1 < len(m.Content); i += 2 {
			k, v := m.Content[i], m.Content[i+1]
			key := prefix + k.Value
			paths = append(paths, key)
			if desc, def, ok := comment(k.HeadComment); ok {
				val := Value{Key: key, Description: desc, Default: def, literal: def != ""}
				if !val.literal {
					var x any
					if err := v.Decode(&x); err != nil {
						return fmt.Errorf("%s: %v", key, err)
					}
					b, err := json.Marshal(x)
					if err != nil {
						return fmt.Errorf("%s: %v", key, err)
					}
					val.Default = string(b)
				}
				documented = append(documented, val)
			}
			if v.Kind == yaml.MappingNode {
				if err := walk(key+".", v); err != nil {
					return err
				}
			}
		}
		return nil
	}
	if err := walk("", doc.Content[0]); err != nil {
		return nil, nil, err
	}
	return documented, paths, nil
}

// comment reads a key's head comment: the description that follows its
// last "# --" line, and the text of an "# @default --" line.
func comment(head string) (desc, def string, ok bool) {
	lines := strings.Split(head, "\n")
	start := -1
	for i, l := range lines {
		if strings.HasPrefix(strings.TrimSpace(l), "# --") {
			start = i
		}
	}
	if start < 0 {
		return "", "", false
	}
	var words []string
	for i, l := range lines[start:] {
		l = strings.TrimSpace(l)
		if i == 0 {
			l = strings.TrimPrefix(l, "# --")
		} else if rest, ok := strings.CutPrefix(l, "# @default --"); ok {
			def = strings.TrimSpace(rest)
			continue
		} else {
			l = strings.TrimPrefix(l, "#")
		}
		if l = strings.TrimSpace(l); l != "" {
			words = append(words, l)
		}
	}
	return strings.Join(words, " "), def, true
}

// schemaTypes reads the type of every property path of a JSON schema
// (nested "properties"). A property may be a reference to one of the
// schema's own "definitions" (the chart's security contexts, resources and
// name patterns are each defined once and used in several places); its
// type is the definition's. A definition met again on its own path (one
// that nests itself) gives its type and ends the walk there.
func schemaTypes(schema []byte) (map[string]string, error) {
	var root map[string]any
	if err := json.Unmarshal(schema, &root); err != nil {
		return nil, fmt.Errorf("values.schema.json: %v", err)
	}
	defs, _ := root["definitions"].(map[string]any)
	types := map[string]string{}
	var walk func(prefix string, s map[string]any, seen []string) error
	walk = func(prefix string, s map[string]any, seen []string) error {
		props, _ := s["properties"].(map[string]any)
		for k, p := range props {
			ps, _ := p.(map[string]any)
			key := prefix + k
			refs, again := seen, false
			for ps["$ref"] != nil && !again {
				ref, _ := ps["$ref"].(string)
				name, ok := strings.CutPrefix(ref, "#/definitions/")
				def, found := defs[name].(map[string]any)
				if !ok || !found {
					return fmt.Errorf("values.schema.json: %s: $ref %q is not one of its definitions", key, ref)
				}
				again = slices.Contains(refs, name)
				refs = append(slices.Clip(refs), name)
				ps = def
			}
			switch t := ps["type"].(type) {
			case string:
				types[key] = t
			case []any:
				var names []string
				for _, n := range t {
					names = append(names, fmt.Sprint(n))
				}
				types[key] = strings.Join(names, " or ")
			default:
				types[key] = "any"
			}
			if again {
				continue
			}
			if err := walk(key+".", ps, refs); err != nil {
				return err
			}
		}
		return nil
	}
	if err := walk("", root, nil); err != nil {
		return nil, err
	}
	return types, nil
}

// Check lists what the table would not say: a value that neither it nor an
// ancestor documents, a documented key the schema does not type, and a
// property of the schema that values.yaml lacks.
func Check(values, schema []byte) ([]string, error) {
	documented, paths, err := Values(values)
	if err != nil {
		return nil, err
	}
	types, err := schemaTypes(schema)
	if err != nil {
		return nil, err
	}
	var problems []string
	isDocumented := func(p string) bool {
		for _, d := range documented {
			if d.Key == p || strings.HasPrefix(p, d.Key+".") {
				return true
			}
		}
		return false
	}
	for _, p := range paths {
		if !isDocumented(p) && !slices.ContainsFunc(paths, func(q string) bool { return strings.HasPrefix(q, p+".") }) {
			problems = append(problems, fmt.Sprintf("values.yaml: %s has no \"# --\" comment, nor has a key above it", p))
		}
	}
	for _, d := range documented {
		if _, ok := types[d.Key]; !ok {
			problems = append(problems, fmt.Sprintf("values.schema.json has no property %s, which values.yaml documents", d.Key))
		}
	}
	for p := range types {
		if p != "global" && !slices.Contains(paths, p) && !isDocumented(p) {
			problems = append(problems, fmt.Sprintf("values.schema.json has a property %s, which values.yaml lacks", p))
		}
	}
	sort.Strings(problems)
	return problems, nil
}

// Table is the Markdown table of the documented values.
func Table(values, schema []byte) ([]byte, error) {
	documented, _, err := Values(values)
	if err != nil {
		return nil, err
	}
	types, err := schemaTypes(schema)
	if err != nil {
		return nil, err
	}
	var b bytes.Buffer
	b.WriteString("| key | type | default | description |\n| --- | --- | --- | --- |\n")
	cell := func(s string) string { return strings.ReplaceAll(s, "|", `\|`) }
	for _, d := range documented {
		def := "`" + d.Default + "`"
		if d.literal {
			def = d.Default
		}
		fmt.Fprintf(&b, "| `%s` | %s | %s | %s |\n", d.Key, types[d.Key], cell(def), cell(d.Description))
	}
	return b.Bytes(), nil
}

// Render returns readme with the part between Begin and End replaced by
// the table of values.
func Render(readme, values, schema []byte) ([]byte, error) {
	before, rest, ok := bytes.Cut(readme, []byte(Begin+"\n"))
	if !ok {
		return nil, fmt.Errorf("the README has no line %q", Begin)
	}
	_, after, ok := bytes.Cut(rest, []byte(End))
	if !ok {
		return nil, fmt.Errorf("the README has no line %q after %q", End, Begin)
	}
	table, err := Table(values, schema)
	if err != nil {
		return nil, err
	}
	var out bytes.Buffer
	out.Write(before)
	out.WriteString(Begin + "\n")
	out.Write(table)
	out.WriteString(End)
	out.Write(after)
	return out.Bytes(), nil
}
