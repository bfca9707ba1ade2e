// Package kubeschema turns the Kubernetes API's own OpenAPI v2 document
// (api/openapi-spec/swagger.json of k8s.io/kubernetes) and
// CustomResourceDefinitions (the Prometheus Operator's, for example) into
// standalone JSON schemas in a directory layout kubeconform reads with
// -schema-location, so that manifests can be validated without fetching
// pre-converted schemas from the network.
//
// Each schema is one file: the kind's definition at the root and, under
// "definitions", every definition it reaches through "$ref", so that no file
// refers to another. The strict variant forbids properties the API does not
// define (additionalProperties: false wherever an object lists its
// properties and does not keep unknown fields), which is what kubeconform's
// -strict means.
package kubeschema

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"

	yaml "go.yaml.in/yaml/v3"
)

// MaxInputBytes bounds one document read by AddOpenAPIV2 or AddCRDs. The
// Kubernetes API's swagger.json is about 4 MB and the largest Prometheus
// Operator CRD file under 2 MB; 64 MiB leaves room without letting a wrong
// file exhaust memory.
const MaxInputBytes = 64 << 20

// Location is the -schema-location template for a directory written by
// WriteDir (prefix it with the directory and a slash). kubeconform fills
// .Group with the part of apiVersion before the slash, so the core group's
// directory is its version ("v1/pod_v1.json"), and .ResourceKind is the
// kind in lower case.
const Location = "{{ .Group }}/{{ .ResourceKind }}_{{ .ResourceAPIVersion }}{{ .StrictSuffix }}.json"

// The Kubernetes definitions the conversion treats by name.
const (
	objectMetaDef = "io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta"
	// Quantity is a string in the OpenAPI document, but its JSON decoder
	// also takes a number ("cpu: 1" in YAML), so the schema accepts both.
	quantityDef = "io.k8s.apimachinery.pkg.api.resource.Quantity"
)

const defPrefix = "#/definitions/"

// GVK names a kind of resource: the core group is "".
type GVK struct {
	Group, Version, Kind string
}

// APIVersion is the resource's apiVersion field: "v1" or "apps/v1".
func (g GVK) APIVersion() string {
	if g.Group == "" {
		return g.Version
	}
	return g.Group + "/" + g.Version
}

func (g GVK) String() string { return g.APIVersion() + " " + g.Kind }

// Path is where WriteDir puts g's schema, relative to its directory: the
// file that Location names for a resource of that apiVersion and kind.
func Path(g GVK, strict bool) string {
	dir := g.Group
	if dir == "" {
		dir = g.Version
	}
	suffix := ""
	if strict {
		suffix = "-strict"
	}
	return dir + "/" + strings.ToLower(g.Kind) + "_" + g.Version + suffix + ".json"
}

// root is one kind's schema: a Kubernetes definition by name, or a CRD
// version's openAPIV3Schema.
type root struct {
	def    string
	schema map[string]any
	source string // for error messages
}

// Set holds the schemas of every kind added to it. It is not safe for
// concurrent use while adding.
type Set struct {
	defs     map[string]any // Kubernetes definitions by name, normalised
	roots    map[GVK]root
	maxInput int64 // MaxInputBytes; smaller in tests
}

// New returns an empty Set.
func New() *Set {
	return &Set{defs: map[string]any{}, roots: map[GVK]root{}, maxInput: MaxInputBytes}
}

// readBounded reads all of r, failing past s.maxInput.
func (s *Set) readBounded(r io.Reader, what string) ([]byte, error) {
	b, err := io.ReadAll(io.LimitReader(r, s.maxInput+1))
	if err != nil {
		return nil, fmt.Errorf("%s: %w", what, err)
	}
	if int64(len(b)) > s.maxInput {
		return nil, fmt.Errorf("%s: larger than %d bytes", what, s.maxInput)
	}
	return b, nil
}

func (s *Set) addRoot(g GVK, r root) error {
	if prev, ok := s.roots[g]; ok {
		return fmt.Errorf("%s: defined twice (%s and %s)", g, prev.source, r.source)
	}
	s.roots[g] = r
	return nil
}

// AddOpenAPIV2 adds the definitions of a Kubernetes OpenAPI v2 document and
// a kind for every group, version and kind a definition declares
// (x-kubernetes-group-version-kind).
func (s *Set) AddOpenAPIV2(r io.Reader) error {
	b, err := s.readBounded(r, "OpenAPI v2 document")
	if err != nil {
		return err
	}
	var doc struct {
		Swagger     string         `json:"swagger"`
		Definitions map[string]any `json:"definitions"`
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber() // integers stay exact (minimum, maximum)
	if err := dec.Decode(&doc); err != nil {
		return fmt.Errorf("OpenAPI v2 document: %w", err)
	}
	if doc.Swagger != "2.0" || len(doc.Definitions) == 0 {
		return fmt.Errorf("OpenAPI v2 document: swagger %q with %d definitions, want 2.0 with some", doc.Swagger, len(doc.Definitions))
	}
	for name, d := range doc.Definitions {
		if _, ok := s.defs[name]; ok {
			return fmt.Errorf("OpenAPI v2 document: definition %s added twice", name)
		}
		m, ok := d.(map[string]any)
		if !ok {
			return fmt.Errorf("definition %s: not an object", name)
		}
		if name == quantityDef {
			m = map[string]any{"anyOf": []any{
				map[string]any{"type": "string"},
				map[string]any{"type": "number"},
			}}
		}
		gvks, err := declaredGVKs(name, m["x-kubernetes-group-version-kind"])
		if err != nil {
			return err
		}
		s.defs[name] = normalise(m)
		for _, g := range gvks {
			if err := s.addRoot(g, root{def: name, source: "definition " + name}); err != nil {
				return err
			}
		}
	}
	return nil
}

func declaredGVKs(name string, v any) ([]GVK, error) {
	if v == nil {
		return nil, nil
	}
	list, ok := v.([]any)
	if !ok {
		return nil, fmt.Errorf("definition %s: x-kubernetes-group-version-kind is not a list", name)
	}
	var out []GVK
	for _, e := range list {
		m, _ := e.(map[string]any)
		g, _ := m["group"].(string)
		ver, _ := m["version"].(string)
		k, _ := m["kind"].(string)
		if ver == "" || k == "" {
			return nil, fmt.Errorf("definition %s: a group-version-kind without version or kind", name)
		}
		out = append(out, GVK{Group: g, Version: ver, Kind: k})
	}
	return out, nil
}

// AddCRDs adds a kind for every served version of every
// CustomResourceDefinition (apiextensions.k8s.io/v1) in a YAML stream;
// other documents are ignored. It returns how many kinds it added.
func (s *Set) AddCRDs(r io.Reader, source string) (int, error) {
	b, err := s.readBounded(r, source)
	if err != nil {
		return 0, err
	}
	type crd struct {
		APIVersion string `yaml:"apiVersion"`
		Kind       string `yaml:"kind"`
		Spec       struct {
			Group string `yaml:"group"`
			Names struct {
				Kind string `yaml:"kind"`
			} `yaml:"names"`
			Versions []struct {
				Name   string `yaml:"name"`
				Served bool   `yaml:"served"`
				Schema struct {
					OpenAPIV3Schema map[string]any `yaml:"openAPIV3Schema"`
				} `yaml:"schema"`
			} `yaml:"versions"`
		} `yaml:"spec"`
	}
	dec := yaml.NewDecoder(bytes.NewReader(b))
	added := 0
	for i := 0; ; i++ {
		var c crd
		err := dec.Decode(&c)
		if errors.Is(err, io.EOF) {
			return added, nil
		}
		if err != nil {
			return added, fmt.Errorf("%s: document %d: %w", source, i+1, err)
		}
		if c.APIVersion != "apiextensions.k8s.io/v1" || c.Kind != "CustomResourceDefinition" {
			continue
		}
		if c.Spec.Group == "" || c.Spec.Names.Kind == "" {
			return added, fmt.Errorf("%s: document %d: a CustomResourceDefinition without spec.group or spec.names.kind", source, i+1)
		}
		for _, v := range c.Spec.Versions {
			if !v.Served {
				continue
			}
			g := GVK{Group: c.Spec.Group, Version: v.Name, Kind: c.Spec.Names.Kind}
			sch := v.Schema.OpenAPIV3Schema
			if sch == nil {
				return added, fmt.Errorf("%s: %s has no openAPIV3Schema", source, g)
			}
			if err := stringKeyed(sch); err != nil {
				return added, fmt.Errorf("%s: %s: %w", source, g, err)
			}
			if err := s.addRoot(g, root{schema: normalise(sch).(map[string]any), source: source}); err != nil {
				return added, err
			}
			added++
		}
	}
}

// stringKeyed checks that a decoded YAML tree has only string keys, so that
// it renders as JSON.
func stringKeyed(v any) error {
	switch t := v.(type) {
	case map[string]any:
		for _, e := range t {
			if err := stringKeyed(e); err != nil {
				return err
			}
		}
	case []any:
		for _, e := range t {
			if err := stringKeyed(e); err != nil {
				return err
			}
		}
	case map[any]any:
		return errors.New("a mapping with a key that is not a string")
	}
	return nil
}

// Kinds lists the kinds of the Set, sorted by apiVersion then kind.
func (s *Set) Kinds() []GVK {
	out := make([]GVK, 0, len(s.roots))
	for g := range s.roots {
		out = append(out, g)
	}
	slices.SortFunc(out, func(a, b GVK) int {
		if c := strings.Compare(a.APIVersion(), b.APIVersion()); c != 0 {
			return c
		}
		return strings.Compare(a.Kind, b.Kind)
	})
	return out
}

// Schema renders g's standalone JSON schema (draft 4, which kubeconform
// assumes).
func (s *Set) Schema(g GVK, strict bool) ([]byte, error) {
	r, ok := s.roots[g]
	if !ok {
		return nil, fmt.Errorf("%s: no such kind", g)
	}
	var top map[string]any
	if r.def != "" {
		top = s.defs[r.def].(map[string]any)
	} else {
		top = r.schema
		// A CRD's schema says only "type: object" for metadata; the API
		// server checks it as ObjectMeta, so the schema does too when the
		// Kubernetes definitions are in the Set.
		if props, ok := top["properties"].(map[string]any); ok && props["metadata"] != nil && s.defs[objectMetaDef] != nil {
			top = shallowWith(top, "properties", shallowWith(props, "metadata", map[string]any{"$ref": defPrefix + objectMetaDef}))
		}
	}
	defs := map[string]any{}
	if err := s.closure(top, defs, strict); err != nil {
		return nil, fmt.Errorf("%s: %w", g, err)
	}
	out := rewrite(top, strict).(map[string]any)
	out = shallowWith(out, "$schema", "http://json-schema.org/draft-04/schema#")
	if len(defs) > 0 {
		out["definitions"] = defs
	}
	return json.Marshal(out)
}

// shallowWith returns a copy of m with key set to v.
func shallowWith(m map[string]any, key string, v any) map[string]any {
	c := make(map[string]any, len(m)+1)
	for k, e := range m {
		c[k] = e
	}
	c[key] = v
	return c
}

// closure adds to defs, rewritten, every definition that node reaches.
func (s *Set) closure(node any, defs map[string]any, strict bool) error {
	var err error
	eachSchema(node, func(n map[string]any) {
		ref, ok := n["$ref"].(string)
		if !ok || err != nil {
			return
		}
		name, local := strings.CutPrefix(ref, defPrefix)
		if !local {
			err = fmt.Errorf("reference %q is not to a local definition", ref)
			return
		}
		if _, done := defs[name]; done {
			return
		}
		d, ok := s.defs[name]
		if !ok {
			err = fmt.Errorf("reference to an undefined definition %s", name)
			return
		}
		defs[name] = rewrite(d, strict)
		err = s.closure(d, defs, strict)
	})
	return err
}

// WriteDir writes the lax and strict schemas of the given kinds (every
// kind of the Set when none is given) under dir, at their Path, and returns
// how many files it wrote. A given kind the Set lacks is left out, so that
// kubeconform reports it as a resource without a schema.
func (s *Set) WriteDir(ctx context.Context, dir string, kinds ...GVK) (int, error) {
	if len(kinds) == 0 {
		kinds = s.Kinds()
	}
	n := 0
	for _, g := range kinds {
		if _, ok := s.roots[g]; !ok {
			continue
		}
		for _, strict := range []bool{false, true} {
			if err := ctx.Err(); err != nil {
				return n, err
			}
			b, err := s.Schema(g, strict)
			if err != nil {
				return n, err
			}
			p := filepath.Join(dir, filepath.FromSlash(Path(g, strict)))
			if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
				return n, err
			}
			if err := os.WriteFile(p, b, 0o644); err != nil {
				return n, err
			}
			n++
		}
	}
	return n, nil
}

// Subschema positions: a keyword whose value is a schema, a list of
// schemas, or a map of names to schemas. Other keywords (enum, default,
// required, x-kubernetes-*) hold data and are left alone.
var (
	schemaKeys    = []string{"items", "additionalProperties", "not"}
	schemaListKey = []string{"allOf", "anyOf", "oneOf", "items"}
	schemaMapKeys = []string{"properties", "patternProperties", "definitions"}
)

// eachSchema calls f on node and on every schema below it.
func eachSchema(node any, f func(map[string]any)) {
	n, ok := node.(map[string]any)
	if !ok {
		return
	}
	f(n)
	for _, k := range schemaKeys {
		eachSchema(n[k], f)
	}
	for _, k := range schemaListKey {
		if l, ok := n[k].([]any); ok {
			for _, e := range l {
				eachSchema(e, f)
			}
		}
	}
	for _, k := range schemaMapKeys {
		if m, ok := n[k].(map[string]any); ok {
			for _, e := range m {
				eachSchema(e, f)
			}
		}
	}
}

// mapSchema returns node with f applied to it and, first, to every schema
// below it, copying each schema map it changes or descends through.
func mapSchema(node any, f func(map[string]any) map[string]any) any {
	n, ok := node.(map[string]any)
	if !ok {
		return node
	}
	c := make(map[string]any, len(n))
	for k, v := range n {
		c[k] = v
	}
	for _, k := range schemaKeys {
		if v, ok := c[k]; ok {
			c[k] = mapSchema(v, f)
		}
	}
	for _, k := range schemaListKey {
		if l, ok := c[k].([]any); ok {
			nl := make([]any, len(l))
			for i, e := range l {
				nl[i] = mapSchema(e, f)
			}
			c[k] = nl
		}
	}
	for _, k := range schemaMapKeys {
		if m, ok := c[k].(map[string]any); ok {
			nm := make(map[string]any, len(m))
			for name, e := range m {
				nm[name] = mapSchema(e, f)
			}
			c[k] = nm
		}
	}
	return f(c)
}

// normalise turns the OpenAPI dialects' extensions into JSON schema draft 4
// once, as the schemas are added: descriptions are dropped (they are most
// of the bytes and no validator reads them); int-or-string (OpenAPI v2's
// format, v3's x-kubernetes-int-or-string) becomes anyOf integer or string;
// nullable (OpenAPI v3) adds null to the type.
func normalise(node any) any {
	return mapSchema(node, func(n map[string]any) map[string]any {
		delete(n, "description")
		intOrString := n["format"] == "int-or-string" || n["x-kubernetes-int-or-string"] == true
		if intOrString && n["anyOf"] == nil && n["oneOf"] == nil {
			delete(n, "type")
			delete(n, "format")
			n["anyOf"] = []any{map[string]any{"type": "integer"}, map[string]any{"type": "string"}}
		}
		if n["nullable"] == true {
			if t, ok := n["type"].(string); ok {
				n["type"] = []any{t, "null"}
			}
			delete(n, "nullable")
		}
		return n
	})
}

// rewrite returns the schema as written: the strict variant closes every
// object that lists its properties, leaves additionalProperties alone where
// it is set, and keeps objects that preserve unknown fields open.
func rewrite(node any, strict bool) any {
	if !strict {
		return node
	}
	return mapSchema(node, func(n map[string]any) map[string]any {
		_, hasProps := n["properties"]
		_, hasAdditional := n["additionalProperties"]
		if hasProps && !hasAdditional && n["x-kubernetes-preserve-unknown-fields"] != true {
			n["additionalProperties"] = false
		}
		return n
	})
}
