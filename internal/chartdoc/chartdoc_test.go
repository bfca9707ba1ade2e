package chartdoc

import (
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

var update = flag.Bool("update", false, "rewrite charts/infer-exporter/README.md's table of values (make chart-readme)")

// chart is the chart whose README this package writes, from this directory.
const chart = "../../charts/infer-exporter"

// TestChartReadme: charts/infer-exporter/README.md's table of values is
// what values.yaml and values.schema.json make of it (`make chart-readme`
// rewrites it), every value is documented, and the schema and values.yaml
// hold the same keys.
func TestChartReadme(t *testing.T) {
	read := func(name string) []byte {
		b, err := os.ReadFile(filepath.Join(chart, name))
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	values, schema, readme := read("values.yaml"), read("values.schema.json"), read("README.md")
	problems, err := Check(values, schema)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range problems {
		t.Error(p)
	}
	want, err := Render(readme, values, schema)
	if err != nil {
		t.Fatal(err)
	}
	if *update {
		if err := os.WriteFile(filepath.Join(chart, "README.md"), want, 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	if string(want) != string(readme) {
		t.Errorf("charts/infer-exporter/README.md's table of values is stale: run make chart-readme")
	}
}

// TestValues: descriptions, defaults and types as the table gives them,
// and what Check reports.
func TestValues(t *testing.T) {
	values := []byte(`# The file's own comment.

# -- What runs.
# Continued here.
mode: deployment
image:
  # -- The image's tag.
  tag: latest
# A comment that documents nothing.
# -- A long default.
# @default -- see values.yaml
config:
  targets: [{name: a}]
undocumented: 1
`)
	schema := []byte(`{"properties": {"mode": {"type": "string"}, "image": {"type": "object", "properties": {"tag": {"type": "string"}}},
	  "config": {"type": "object"}, "undocumented": {"type": ["integer", "null"]}, "extra": {"type": "string"}}}`)
	table, err := Table(values, schema)
	if err != nil {
		t.Fatal(err)
	}
	want := "| key | type | default | description |\n| --- | --- | --- | --- |\n" +
		"| `mode` | string | `\"deployment\"` | What runs. Continued here. |\n" +
		"| `image.tag` | string | `\"latest\"` | The image's tag. |\n" +
		"| `config` | object | see values.yaml | A long default. |\n"
	if string(table) != want {
		t.Errorf("table:\n%s\nwant:\n%s", table, want)
	}
	problems, err := Check(values, schema)
	if err != nil {
		t.Fatal(err)
	}
	wantProblems := []string{
		"values.schema.json has a property extra, which values.yaml lacks",
		`values.yaml: undocumented has no "# --" comment, nor has a key above it`,
	}
	if strings.Join(problems, "\n") != strings.Join(wantProblems, "\n") {
		t.Errorf("problems:\n%s\nwant:\n%s", strings.Join(problems, "\n"), strings.Join(wantProblems, "\n"))
	}
}

// TestSchemaRefs: a property that refers to one of the schema's
// definitions has the definition's type, as have the definition's own
// properties under it; a definition that refers to itself ends the walk,
// and a reference to no definition is an error rather than a row typed
// "any".
func TestSchemaRefs(t *testing.T) {
	schema := []byte(`{"properties": {
	    "name": {"$ref": "#/definitions/dnsLabel"},
	    "securityContext": {"$ref": "#/definitions/securityContext"},
	    "tree": {"$ref": "#/definitions/tree"}},
	  "definitions": {
	    "dnsLabel": {"type": "string", "pattern": "^[a-z0-9]+$"},
	    "securityContext": {"type": "object", "properties": {"runAsUser": {"type": "integer"}, "seLinuxOptions": {"$ref": "#/definitions/seLinux"}}},
	    "seLinux": {"type": "object", "properties": {"level": {"$ref": "#/definitions/dnsLabel"}}},
	    "tree": {"type": "object", "properties": {"child": {"$ref": "#/definitions/tree"}}}}}`)
	types, err := schemaTypes(schema)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{
		"name":                                 "string",
		"securityContext":                      "object",
		"securityContext.runAsUser":            "integer",
		"securityContext.seLinuxOptions":       "object",
		"securityContext.seLinuxOptions.level": "string",
		"tree":                                 "object",
		"tree.child":                           "object",
	}
	if fmt.Sprint(types) != fmt.Sprint(want) {
		t.Errorf("types %v, want %v", types, want)
	}
	if _, err := schemaTypes([]byte(`{"properties": {"x": {"$ref": "#/definitions/missing"}}}`)); err == nil || !strings.Contains(err.Error(), `x: $ref "#/definitions/missing"`) {
		t.Errorf("a reference to no definition: %v, want an error naming it", err)
	}
}
