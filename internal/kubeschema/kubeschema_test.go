package kubeschema

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"
)

// swagger is a hand-written OpenAPI v2 document in the Kubernetes
// document's shape: a kind (example.io/v1 Widget) whose properties reach a
// nested object, the int-or-string and Quantity definitions, ObjectMeta, a
// map, a self-reference; and a definition nothing reaches.
const swagger = `{
  "swagger": "2.0",
  "definitions": {
    "io.example.v1.Widget": {
      "description": "A widget.",
      "type": "object",
      "properties": {
        "apiVersion": {"type": "string"},
        "kind": {"type": "string"},
        "metadata": {"$ref": "#/definitions/io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta"},
        "spec": {"$ref": "#/definitions/io.example.v1.WidgetSpec"}
      },
      "x-kubernetes-group-version-kind": [{"group": "example.io", "kind": "Widget", "version": "v1"}]
    },
    "io.example.v1.WidgetSpec": {
      "type": "object",
      "required": ["port"],
      "properties": {
        "port": {"$ref": "#/definitions/io.k8s.apimachinery.pkg.util.intstr.IntOrString", "description": "The port."},
        "size": {"$ref": "#/definitions/io.k8s.apimachinery.pkg.api.resource.Quantity"},
        "labels": {"type": "object", "additionalProperties": {"type": "string"}},
        "parts": {"type": "array", "items": {"$ref": "#/definitions/io.example.v1.WidgetSpec"}},
        "replicas": {"type": "integer", "format": "int32", "maximum": 9007199254740993}
      }
    },
    "io.example.v1.Unused": {"type": "object", "properties": {"x": {"type": "string"}}},
    "io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta": {
      "type": "object",
      "properties": {"name": {"type": "string"}, "labels": {"type": "object", "additionalProperties": {"type": "string"}}}
    },
    "io.k8s.apimachinery.pkg.util.intstr.IntOrString": {"type": "string", "format": "int-or-string"},
    "io.k8s.apimachinery.pkg.api.resource.Quantity": {"type": "string", "description": "A quantity."},
    "io.k8s.api.core.v1.Pod": {
      "type": "object",
      "properties": {"kind": {"type": "string"}},
      "x-kubernetes-group-version-kind": [{"group": "", "kind": "Pod", "version": "v1"}]
    }
  }
}`

// crds holds a CustomResourceDefinition with a served and an unserved
// version, and a document of another kind that AddCRDs skips.
const crds = `apiVersion: v1
kind: ConfigMap
metadata: {name: not-a-crd}
---
apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata: {name: gadgets.example.io}
spec:
  group: example.io
  names: {kind: Gadget, plural: gadgets}
  scope: Namespaced
  versions:
    - name: v1
      served: true
      storage: true
      schema:
        openAPIV3Schema:
          description: A gadget.
          type: object
          properties:
            apiVersion: {type: string}
            kind: {type: string}
            metadata: {type: object}
            spec:
              type: object
              properties:
                port:
                  anyOf: [{type: integer}, {type: string}]
                  x-kubernetes-int-or-string: true
                bare:
                  x-kubernetes-int-or-string: true
                note: {type: string, nullable: true}
                # A property named like a keyword is a property, not a keyword.
                description: {type: string}
                raw:
                  type: object
                  x-kubernetes-preserve-unknown-fields: true
                  properties:
                    known: {type: string}
    - name: v0
      served: false
      storage: false
      schema:
        openAPIV3Schema: {type: object}
`

// schema renders g and decodes it.
func schema(t *testing.T, s *Set, g GVK, strict bool) map[string]any {
	t.Helper()
	b, err := s.Schema(g, strict)
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatal(err)
	}
	return m
}

func dig(v any, keys ...string) any {
	for _, k := range keys {
		m, ok := v.(map[string]any)
		if !ok {
			return nil
		}
		v = m[k]
	}
	return v
}

func newSet(t *testing.T, docs ...string) *Set {
	t.Helper()
	s := New()
	for _, d := range docs {
		if strings.HasPrefix(d, "{") {
			if err := s.AddOpenAPIV2(strings.NewReader(d)); err != nil {
				t.Fatal(err)
			}
		} else if _, err := s.AddCRDs(strings.NewReader(d), "crds.yaml"); err != nil {
			t.Fatal(err)
		}
	}
	return s
}

var (
	widget = GVK{Group: "example.io", Version: "v1", Kind: "Widget"}
	gadget = GVK{Group: "example.io", Version: "v1", Kind: "Gadget"}
	pod    = GVK{Version: "v1", Kind: "Pod"}
)

func TestKinds(t *testing.T) {
	got := newSet(t, swagger, crds).Kinds()
	// Sorted by apiVersion then kind; the unserved v0 is not there.
	want := []GVK{gadget, widget, pod}
	if !slices.Equal(got, want) {
		t.Errorf("Kinds() = %v, want %v", got, want)
	}
}

// TestPath: the file names follow Location as kubeconform fills it: .Group
// is the apiVersion's part before the slash (the version for the core
// group), .ResourceKind the kind in lower case.
func TestPath(t *testing.T) {
	for _, tc := range []struct {
		g      GVK
		strict bool
		want   string
	}{
		{pod, false, "v1/pod_v1.json"},
		{pod, true, "v1/pod_v1-strict.json"},
		{GVK{"apps", "v1", "Deployment"}, true, "apps/deployment_v1-strict.json"},
		{GVK{"monitoring.coreos.com", "v1", "PodMonitor"}, false, "monitoring.coreos.com/podmonitor_v1.json"},
		{GVK{"monitoring.coreos.com", "v1alpha1", "ScrapeConfig"}, true, "monitoring.coreos.com/scrapeconfig_v1alpha1-strict.json"},
	} {
		if got := Path(tc.g, tc.strict); got != tc.want {
			t.Errorf("Path(%v, %v) = %q, want %q", tc.g, tc.strict, got, tc.want)
		}
	}
}

// TestOpenAPIV2Schema: the kind's definition at the root, exactly the
// definitions it reaches, the int-or-string and Quantity rewrites, no
// descriptions, integers kept exact; strict closes the objects that list
// properties and leaves maps alone.
func TestOpenAPIV2Schema(t *testing.T) {
	s := newSet(t, swagger)
	for _, strict := range []bool{false, true} {
		m := schema(t, s, widget, strict)
		defs, _ := m["definitions"].(map[string]any)
		var names []string
		for n := range defs {
			names = append(names, n)
		}
		slices.Sort(names)
		wantNames := []string{
			"io.example.v1.WidgetSpec",
			"io.k8s.apimachinery.pkg.api.resource.Quantity",
			"io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta",
			"io.k8s.apimachinery.pkg.util.intstr.IntOrString",
		}
		if !slices.Equal(names, wantNames) {
			t.Errorf("strict=%v: definitions %v, want %v", strict, names, wantNames)
		}
		if m["$schema"] != "http://json-schema.org/draft-04/schema#" {
			t.Errorf("strict=%v: $schema = %v", strict, m["$schema"])
		}
		if dig(m, "properties", "spec", "$ref") != "#/definitions/io.example.v1.WidgetSpec" {
			t.Errorf("strict=%v: spec is %v, want the reference kept", strict, dig(m, "properties", "spec"))
		}
		ios := dig(defs, "io.k8s.apimachinery.pkg.util.intstr.IntOrString")
		wantIOS := map[string]any{"anyOf": []any{map[string]any{"type": "integer"}, map[string]any{"type": "string"}}}
		if !reflect.DeepEqual(ios, wantIOS) {
			t.Errorf("strict=%v: IntOrString = %v, want %v", strict, ios, wantIOS)
		}
		q := dig(defs, "io.k8s.apimachinery.pkg.api.resource.Quantity")
		wantQ := map[string]any{"anyOf": []any{map[string]any{"type": "string"}, map[string]any{"type": "number"}}}
		if !reflect.DeepEqual(q, wantQ) {
			t.Errorf("strict=%v: Quantity = %v, want %v", strict, q, wantQ)
		}
		b, _ := s.Schema(widget, strict)
		if strings.Contains(string(b), "description") {
			t.Errorf("strict=%v: a description is left: %s", strict, b)
		}
		if !strings.Contains(string(b), `"maximum":9007199254740993`) {
			t.Errorf("strict=%v: the integer maximum lost its exact value: %s", strict, b)
		}
		spec := defs["io.example.v1.WidgetSpec"]
		closed := map[string]any{
			"root":          m["additionalProperties"],
			"spec":          dig(spec, "additionalProperties"),
			"ObjectMeta":    dig(defs, "io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta", "additionalProperties"),
			"a map (spec)":  dig(spec, "properties", "labels", "additionalProperties"),
			"a scalar prop": dig(spec, "properties", "replicas", "additionalProperties"),
		}
		want := map[string]any{
			"root": nil, "spec": nil, "ObjectMeta": nil,
			"a map (spec)":  map[string]any{"type": "string"},
			"a scalar prop": nil,
		}
		if strict {
			want["root"], want["spec"], want["ObjectMeta"] = false, false, false
		}
		if !reflect.DeepEqual(closed, want) {
			t.Errorf("strict=%v: additionalProperties %v, want %v", strict, closed, want)
		}
	}
}

// TestCRDSchema: a served version's openAPIV3Schema becomes the root, its
// metadata becomes ObjectMeta when the Kubernetes definitions are in the
// Set, nullable and a bare int-or-string become draft 4, and an object
// that keeps unknown fields stays open under strict.
func TestCRDSchema(t *testing.T) {
	for _, tc := range []struct {
		name     string
		docs     []string
		metadata any
		defs     []string
	}{
		{"with Kubernetes definitions", []string{swagger, crds},
			map[string]any{"$ref": "#/definitions/io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta"},
			[]string{"io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta"}},
		{"CRDs alone", []string{crds}, map[string]any{"type": "object"}, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := newSet(t, tc.docs...)
			m := schema(t, s, gadget, true)
			if got := dig(m, "properties", "metadata"); !reflect.DeepEqual(got, tc.metadata) {
				t.Errorf("metadata = %v, want %v", got, tc.metadata)
			}
			var names []string
			defs, _ := m["definitions"].(map[string]any)
			for n := range defs {
				names = append(names, n)
			}
			slices.Sort(names)
			if !slices.Equal(names, tc.defs) {
				t.Errorf("definitions %v, want %v", names, tc.defs)
			}
			spec := dig(m, "properties", "spec")
			for _, c := range []struct {
				what string
				got  any
				want any
			}{
				{"root closed", m["additionalProperties"], false},
				{"spec closed", dig(spec, "additionalProperties"), false},
				{"preserve-unknown-fields open", dig(spec, "properties", "raw", "additionalProperties"), nil},
				{"nullable", dig(spec, "properties", "note", "type"), []any{"string", "null"}},
				{"nullable keyword gone", dig(spec, "properties", "note", "nullable"), nil},
				{"bare int-or-string", dig(spec, "properties", "bare", "anyOf"), []any{map[string]any{"type": "integer"}, map[string]any{"type": "string"}}},
				{"int-or-string anyOf kept", dig(spec, "properties", "port", "anyOf"), []any{map[string]any{"type": "integer"}, map[string]any{"type": "string"}}},
				{"description gone", m["description"], nil},
				{"a property named description kept", dig(spec, "properties", "description"), map[string]any{"type": "string"}},
			} {
				if !reflect.DeepEqual(c.got, c.want) {
					t.Errorf("%s: got %v, want %v", c.what, c.got, c.want)
				}
			}
			if lax := schema(t, s, gadget, false); lax["additionalProperties"] != nil || dig(lax, "properties", "spec", "additionalProperties") != nil {
				t.Errorf("the lax schema is closed: %v", lax)
			}
		})
	}
}

// TestSchemaNotShared: rendering never changes the Set, so a strict
// rendering does not leak into a later lax one.
func TestSchemaNotShared(t *testing.T) {
	s := newSet(t, swagger, crds)
	for _, g := range []GVK{widget, gadget} {
		before, _ := s.Schema(g, false)
		_, _ = s.Schema(g, true)
		after, _ := s.Schema(g, false)
		if string(before) != string(after) {
			t.Errorf("%v: the lax schema changed after a strict rendering:\n%s\n%s", g, before, after)
		}
	}
}

// repeat is an endless reader of one byte.
type repeat byte

func (r repeat) Read(p []byte) (int, error) {
	for i := range p {
		p[i] = byte(r)
	}
	return len(p), nil
}

func TestErrors(t *testing.T) {
	dupCRD := strings.Replace(crds, "Gadget", "Widget", 1)
	for _, tc := range []struct {
		name string
		add  func(*Set) error
		want string
	}{
		{"not swagger 2.0", func(s *Set) error { return s.AddOpenAPIV2(strings.NewReader(`{"openapi": "3.0.0"}`)) }, "want 2.0"},
		{"not JSON", func(s *Set) error { return s.AddOpenAPIV2(strings.NewReader(`swagger: "2.0"`)) }, "OpenAPI v2 document"},
		{"larger than the bound", func(s *Set) error {
			s.maxInput = 1 << 10
			return s.AddOpenAPIV2(io.LimitReader(repeat(' '), 1<<10+1))
		}, "larger than 1024 bytes"},
		{"a CRD file larger than the bound", func(s *Set) error {
			s.maxInput = 1 << 10
			_, err := s.AddCRDs(io.LimitReader(repeat('#'), 1<<10+1), "big.yaml")
			return err
		}, "big.yaml: larger than 1024 bytes"},
		{"a kind defined twice", func(s *Set) error {
			if err := s.AddOpenAPIV2(strings.NewReader(swagger)); err != nil {
				return err
			}
			_, err := s.AddCRDs(strings.NewReader(dupCRD), "dup.yaml")
			return err
		}, "example.io/v1 Widget: defined twice"},
		{"a CRD without a schema", func(s *Set) error {
			doc := strings.Replace(crds, "served: false", "served: true", 1)
			doc = strings.Replace(doc, "schema:\n        openAPIV3Schema: {type: object}", "schema: {}", 1)
			_, err := s.AddCRDs(strings.NewReader(doc), "x.yaml")
			return err
		}, "has no openAPIV3Schema"},
		{"a CRD without a group", func(s *Set) error {
			_, err := s.AddCRDs(strings.NewReader(strings.Replace(crds, "group: example.io", "group: ''", 1)), "x.yaml")
			return err
		}, "without spec.group"},
		{"bad YAML", func(s *Set) error { _, err := s.AddCRDs(strings.NewReader("a: [1"), "x.yaml"); return err }, "x.yaml: document 1"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.add(New())
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("error %v, want one containing %q", err, tc.want)
			}
		})
	}

	// References that cannot be resolved fail when the schema is rendered.
	for _, tc := range []struct{ name, ref, want string }{
		{"undefined", "#/definitions/io.example.v1.Missing", "undefined definition io.example.v1.Missing"},
		{"not local", "other.json#/definitions/X", "not to a local definition"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			doc := strings.Replace(swagger, "#/definitions/io.example.v1.WidgetSpec\"}\n", tc.ref+"\"}\n", 1)
			s := newSet(t, doc)
			if _, err := s.Schema(widget, true); err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("error %v, want one containing %q", err, tc.want)
			}
		})
	}
	if _, err := New().Schema(widget, false); err == nil {
		t.Error("Schema of a kind not in the Set: no error")
	}
}

func TestWriteDir(t *testing.T) {
	s := newSet(t, swagger, crds)
	dir := t.TempDir()
	n, err := s.WriteDir(context.Background(), dir)
	if err != nil {
		t.Fatal(err)
	}
	if n != 2*len(s.Kinds()) {
		t.Errorf("wrote %d files, want %d (lax and strict of %d kinds)", n, 2*len(s.Kinds()), len(s.Kinds()))
	}
	for _, g := range s.Kinds() {
		for _, strict := range []bool{false, true} {
			b, err := os.ReadFile(filepath.Join(dir, Path(g, strict)))
			if err != nil {
				t.Fatal(err)
			}
			want, _ := s.Schema(g, strict)
			if string(b) != string(want) {
				t.Errorf("%s: the file differs from Schema", Path(g, strict))
			}
		}
	}

	// Only the kinds asked for; one the Set lacks is left out.
	some := t.TempDir()
	if n, err := s.WriteDir(context.Background(), some, pod, GVK{"example.io", "v9", "Missing"}); err != nil || n != 2 {
		t.Errorf("WriteDir(pod, a missing kind) = %d, %v; want the 2 files of pod", n, err)
	}
	if files := listDir(t, some); !slices.Equal(files, []string{Path(pod, true), Path(pod, false)}) {
		t.Errorf("WriteDir(pod, a missing kind) wrote %v", files)
	}

	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := s.WriteDir(ctx, t.TempDir()); !errors.Is(err, context.Canceled) {
		t.Errorf("WriteDir with a cancelled context: %v, want context.Canceled", err)
	}
}

// listDir lists the files under dir, relative and slash-separated, sorted.
func listDir(t *testing.T, dir string) []string {
	t.Helper()
	var out []string
	err := filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		r, _ := filepath.Rel(dir, p)
		out = append(out, filepath.ToSlash(r))
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	slices.Sort(out)
	return out
}
