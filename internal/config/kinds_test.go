package config

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestRequestKindsGood(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "answer.json"), []byte(`{"type":"object","properties":{"city":{"type":"string"}},"required":["city"],"additionalProperties":false}`), 0o600); err != nil {
		t.Fatal(err)
	}
	c, err := Parse([]byte(base+`    tools:
      - name: get_weather
        description: The weather in a city.
        parameters:
          type: object
          properties:
            city: {type: string}
          required: [city]
      - name: noargs
    tool_choice: get_weather
    response_format: {type: json_schema, schema_file: answer.json}
    images: {count: 2, width: 64, height: 32, format: jpeg}
modules:
  json:
    response_format:
      type: json_schema
      schema: {type: object, required: [n], properties: {n: {type: integer}}, additionalProperties: false}
  obj:
    response_format: {type: json_object}
`), filepath.Join(dir, "c.yml"))
	if err != nil {
		t.Fatal(err)
	}
	k := c.Workloads[0].Kinds
	if k.Tools[0].Schema == nil || k.Tools[1].Schema == nil || string(k.Tools[1].ParametersJSON) != `{"type":"object"}` {
		t.Errorf("tools not compiled: %+v", k.Tools)
	}
	if k.ToolChoice != "get_weather" || k.ResponseFormat.Compiled == nil || k.ResponseFormat.Name != "answer" {
		t.Errorf("kinds = %+v, response format %+v", k, k.ResponseFormat)
	}
	if k.Images.Format != ImageJPEG {
		t.Errorf("images = %+v", k.Images)
	}
	// The schema is compiled once, at load: it validates as it will for
	// every answer.
	if err := k.Tools[0].Schema.Validate(map[string]any{"city": 3}); err == nil {
		t.Error("a number for a string property validated")
	}
	if m := c.Modules["json"]; m.Kinds.ResponseFormat.Compiled == nil {
		t.Error("module schema not compiled")
	}
	if m := c.Modules["obj"]; m.Kinds.ResponseFormat.Compiled != nil {
		t.Error("json_object has a schema")
	}
}

func TestRequestKindsDefaults(t *testing.T) {
	c, err := Parse([]byte(base+"    tools: [{name: f}]\n    images: {count: 1, width: 8, height: 8}\n"), "c.yml")
	if err != nil {
		t.Fatal(err)
	}
	if k := c.Workloads[0].Kinds; k.ToolChoice != ToolChoiceAuto || k.Images.Format != ImagePNG {
		t.Errorf("defaults: tool_choice %q, format %q", k.ToolChoice, k.Images.Format)
	}
}

func TestRequestKindsErrors(t *testing.T) {
	for _, tc := range []struct {
		name, yaml, want string
	}{
		{"bad tool name", "    tools: [{name: 'a b'}]\n", `c.yml:10: workloads[0].tools[0].name: "a b" must match`},
		{"duplicate tool", "    tools: [{name: f}, {name: f}]\n", `workloads[0].tools[1].name: "f" is used by another tool`},
		{"bad parameters", "    tools: [{name: f, parameters: {type: 3}}]\n", "workloads[0].tools[0].parameters: is not a valid JSON Schema"},
		{"remote ref refused", "    tools: [{name: f, parameters: {$ref: 'http://example.com/s.json'}}]\n", "workloads[0].tools[0].parameters: is not a valid JSON Schema"},
		{"choice without tools", "    tool_choice: auto\n", "workloads[0].tool_choice: only with tools"},
		{"unknown choice", "    tools: [{name: f}]\n    tool_choice: g\n", `workloads[0].tool_choice: "g" is not auto, required or the name of a tool`},
		{"format type", "    response_format: {type: xml}\n", `workloads[0].response_format.type: "xml" is not json_object or json_schema`},
		{"schema missing", "    response_format: {type: json_schema}\n", "workloads[0].response_format.schema: is required"},
		{"schema with object", "    response_format: {type: json_object, schema: {type: object}}\n", "workloads[0].response_format.schema: only with type json_schema"},
		{"schema and file", "    response_format: {type: json_schema, schema: {type: object}, schema_file: s.json}\n", "response_format.schema_file: set either schema or schema_file"},
		{"schema file missing", "    response_format: {type: json_schema, schema_file: nope.json}\n", "workloads[0].response_format.schema_file: cannot read"},
		{"image count", "    images: {count: 17, width: 8, height: 8}\n", "workloads[0].images.count: must be between 1 and 16"},
		{"image side", "    images: {count: 1, width: 5000, height: 8}\n", "workloads[0].images.width: must be between 1 and 4096"},
		{"image format", "    images: {count: 1, width: 8, height: 8, format: gif}\n", `workloads[0].images.format: "gif" is not png or jpeg`},
		{"image bytes", "    images: {count: 16, width: 4096, height: 4096}\n", "workloads[0].images.count: 16 images of 4096x4096 are 768 MiB of pixels"},
		{"unknown field", "    images: {count: 1, width: 8, height: 8, depth: 3}\n", `workloads[0].images.depth: unknown field "depth"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Parse([]byte(base+tc.yaml), "c.yml")
			if err == nil {
				t.Fatalf("accepted %s", tc.yaml)
			}
			if !strings.Contains(err.Error(), tc.want) {
				t.Errorf("error %q\nwant it to contain %q", err, tc.want)
			}
		})
	}
}

// TestRequestKindsFlavors: a kind is refused on a flavor whose wire
// format has no field for it, rather than silently dropped.
func TestRequestKindsFlavors(t *testing.T) {
	for _, tc := range []struct {
		flavor, kinds, want string
	}{
		{"tgi", "    tools: [{name: f}]\n", "workloads[0].tools: flavor tgi has no tools"},
		{"openai-completions", "    images: {count: 1, width: 8, height: 8}\n", "workloads[0].images: flavor openai-completions has no images"},
		{"triton", "    response_format: {type: json_object}\n", "workloads[0].response_format: flavor triton has no response format"},
		{"ollama-chat", "    tools: [{name: f}]\n    response_format: {type: json_object}\n    images: {count: 1, width: 8, height: 8}\n", ""},
		{"openai-completions", "    response_format: {type: json_object}\n", ""},
		{"openai-responses", "    tools: [{name: f}]\n    tool_choice: f\n    response_format: {type: json_schema, schema: {type: object, additionalProperties: false}}\n    images: {count: 1, width: 8, height: 8}\n", ""},
		{"openai-responses", "    tools: [{name: f}]\n    tool_choice: required\n    response_format: {type: json_object}\n", ""},
	} {
		y := strings.Replace(base, "    model: m\n", "    model: m\n    flavor: "+tc.flavor+"\n", 1) + tc.kinds
		_, err := Parse([]byte(y), "c.yml")
		switch {
		case tc.want == "" && err != nil:
			t.Errorf("%s refused %q: %v", tc.flavor, tc.kinds, err)
		case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
			t.Errorf("%s %q: error %v, want %q", tc.flavor, tc.kinds, err, tc.want)
		}
	}
}

func TestRequestKindsNotWithReplay(t *testing.T) {
	y := `targets: [{name: local, url: "http://127.0.0.1:8000", model: m}]
workloads:
  - name: w
    target: local
    replay: {source: jsonl, path: t.jsonl}
    tools: [{name: f}]
`
	_, err := Parse([]byte(y), "c.yml")
	if err == nil || !strings.Contains(err.Error(), "workloads[0].tools: not with replay or sessions") {
		t.Errorf("error %v", err)
	}
}

// nestedSchema is a schema nested n deep by open (a keyword and its
// brackets, closed by close at the end), innermost {}.
func nestedSchema(open, close string, n int) string {
	return strings.Repeat(open, n-1) + "{}" + strings.Repeat(close, n-1)
}

// wideSchema is a schema of n objects and booleans in all, most of them
// leaf (a property's schema: {} or true), in groups of at most 500
// properties (a YAML mapping holds at most config.MaxListItems).
func wideSchema(n int, leaf string) string {
	var groups []string
	count := 2 // the root and its properties' object
	for g := 0; count < n; g++ {
		count += 2 // the group and its properties' object
		props := make([]string, min(500, n-count))
		for i := range props {
			props[i] = fmt.Sprintf(`"p%d":%s`, i, leaf)
		}
		count += len(props)
		groups = append(groups, fmt.Sprintf(`"g%d":{"properties":{%s}}`, g, strings.Join(props, ",")))
	}
	return `{"properties":{` + strings.Join(groups, ",") + `}}`
}

// TestSchemaShapeBounds: a schema within config.MaxSchemaBytes but nested
// thousands deep, or of thousands of subschemas, is refused before it is
// compiled, naming the configuration's file and line, the schema's file
// and the bound; the deepest and the widest that the bounds allow load.
// Before the bounds, the first rows' 65 KB schemas were compiled: the
// deepest had not loaded after 500 s (the F3), which this test,
// run without the bounds, shows as a test that does not end.
func TestSchemaShapeBounds(t *testing.T) {
	for _, tc := range []struct {
		name, schema, want string
	}{
		// 6,553 levels of {"items": ...}: 65,532 bytes.
		{"deep items", nestedSchema(`{"items":`, `}`, 6553), "nested more than 64 levels deep: at most 64 (config.MaxSchemaDepth)"},
		// 4,000 levels of {"allOf": [...]}: 8,000 of JSON (within
		// encoding/json's 10,000), 48 KB.
		{"deep allOf", nestedSchema(`{"allOf":[`, `]}`, 4000), "nested more than 64 levels deep: at most 64 (config.MaxSchemaDepth)"},
		{"deep properties", nestedSchema(`{"properties":{"a":`, `}}`, 3120), "nested more than 64 levels deep: at most 64 (config.MaxSchemaDepth)"},
		{"one level too deep", nestedSchema(`{"not":`, `}`, MaxSchemaDepth+1), "(config.MaxSchemaDepth)"},
		{"deepest allowed", nestedSchema(`{"not":`, `}`, MaxSchemaDepth), ""},
		{"wide", wideSchema(6000, "{}"), "more than 1000 subschemas (objects and booleans): at most 1000 (config.MaxSubschemas)"},
		{"one subschema too many", wideSchema(MaxSubschemas+1, "{}"), "(config.MaxSubschemas)"},
		{"widest allowed", wideSchema(MaxSubschemas, "{}"), ""},
		{"booleans count", wideSchema(MaxSubschemas+1, "true"), "(config.MaxSubschemas)"},
		{"booleans allowed", wideSchema(MaxSubschemas, "true"), ""},
	} {
		if len(tc.schema) > MaxSchemaBytes {
			t.Fatalf("%s: %d bytes, over config.MaxSchemaBytes: the row would test that bound instead", tc.name, len(tc.schema))
		}
		t.Run(tc.name+", file", func(t *testing.T) {
			dir := t.TempDir()
			if err := os.WriteFile(filepath.Join(dir, "s.json"), []byte(tc.schema), 0o600); err != nil {
				t.Fatal(err)
			}
			// strict: false, as the rows' schemas are about their shape,
			// not OpenAI's strict rules.
			c, err := Parse([]byte(base+"    response_format: {type: json_schema, schema_file: s.json, strict: false}\n"), filepath.Join(dir, "c.yml"))
			checkSchemaLoad(t, c, err, tc.want, filepath.Join(dir, "c.yml")+":10: workloads[0].response_format.schema_file: "+filepath.Join(dir, "s.json")+": ")
		})
		t.Run(tc.name+", inline", func(t *testing.T) {
			// JSON is YAML: the same schema inline, as a tool's
			// parameters.
			c, err := Parse([]byte(base+"    tools: [{name: f, parameters: "+tc.schema+"}]\n"), "c.yml")
			checkSchemaLoad(t, c, err, tc.want, "c.yml:10: workloads[0].tools[0].parameters: ")
		})
	}
}

func checkSchemaLoad(t *testing.T, c *Config, err error, want, prefix string) {
	t.Helper()
	switch {
	case want == "" && err != nil:
		t.Fatalf("refused: %v", err)
	case want == "":
		k := c.Workloads[0].Kinds
		if (k.ResponseFormat == nil || k.ResponseFormat.Compiled == nil) && (len(k.Tools) == 0 || k.Tools[0].Schema == nil) {
			t.Fatal("loaded, but not compiled")
		}
	case err == nil:
		t.Fatal("loaded")
	case !strings.Contains(err.Error(), prefix) || !strings.Contains(err.Error(), want):
		t.Errorf("error %q\nwant %q and %q", err, prefix, want)
	}
}

// TestSchemaCost: a schema whose check of one answer value can take more
// than config.MaxSchemaEvaluations evaluations of its subschemas, at any
// depth up to MaxAnswerDepth, is refused at load, as is one that applies
// itself to a value again; recursive schemas that descend one subschema
// per level load. Each refused row, loaded, makes the validator's work
// grow as 2^depth with an answer's depth (9 s and 1.5 GB at 18 levels for
// the first).
func TestSchemaCost(t *testing.T) {
	const tooCostly = "(config.MaxSchemaEvaluations)"
	for _, tc := range []struct {
		name, schema, want string
	}{
		{"recursive array", `{"type":"array","items":{"$ref":"#"}}`, ""},
		{"tree", `{"type":"object","properties":{"kind":{"type":"string"},"children":{"type":"array","items":{"$ref":"#"}}}}`, ""},
		{"linked list", `{"$defs":{"node":{"type":"object","properties":{"value":{"type":"number"},"next":{"anyOf":[{"$ref":"#/$defs/node"},{"type":"null"}]}}}},"$ref":"#/$defs/node"}`, ""},
		{"dynamic anchor", `{"$dynamicAnchor":"n","type":"array","items":{"$dynamicRef":"#n"}}`, ""},
		{"if, then, else", `{"if":{"type":"array"},"then":{"items":{"$ref":"#"}},"else":{"type":"number"}}`, ""},
		{"union of 30 types", union(30, false), ""},
		{"union of 60 types", union(60, false), "checking one value 0 levels deep in an answer can take more than 100 evaluations"},
		{"anyOf of two recursions", `{"type":"array","items":{"anyOf":[{"$ref":"#"},{"$ref":"#"}]}}`, tooCostly},
		{"allOf of two recursions", `{"type":"array","items":{"allOf":[{"$ref":"#"},{"$ref":"#"}]}}`, tooCostly},
		{"items and contains", `{"type":"array","items":{"$ref":"#"},"contains":{"$ref":"#"}}`, tooCostly},
		{"union of recursive types", union(2, true), tooCostly},
		{"diamonds", diamonds(20), tooCostly},
		{"loop", `{"allOf":[{"$ref":"#"}]}`, "# applies itself to the same value again"},
		{"loop through defs", `{"$defs":{"a":{"anyOf":[{"$ref":"#/$defs/b"}]},"b":{"not":{"$ref":"#/$defs/a"}}},"properties":{"x":{"$ref":"#/$defs/a"}}}`, "applies itself to the same value again"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			// strict: false: the rows are about the schema's cost, not
			// OpenAI's strict rules.
			c, err := Parse([]byte(base+"    response_format: {type: json_schema, strict: false, schema: "+tc.schema+"}\n"), "c.yml")
			checkSchemaLoad(t, c, err, tc.want, "c.yml:10: workloads[0].response_format.schema: ")
		})
	}
}

// union is an anyOf of n object types, each through a $ref; recursive:
// each type's children are the union again.
func union(n int, recursive bool) string {
	defs := make([]string, n)
	refs := make([]string, n)
	for i := range defs {
		children := ""
		if recursive {
			children = `,"children":{"type":"array","items":{"$ref":"#"}}`
		}
		defs[i] = fmt.Sprintf(`"t%d":{"type":"object","properties":{"kind":{"const":"t%d"}%s}}`, i, i, children)
		refs[i] = fmt.Sprintf(`{"$ref":"#/$defs/t%d"}`, i)
	}
	return `{"$defs":{` + strings.Join(defs, ",") + `},"anyOf":[` + strings.Join(refs, ",") + `]}`
}

// diamonds is a chain of n definitions each of which applies the next
// twice: 2^n evaluations of one value, whatever its depth.
func diamonds(n int) string {
	defs := make([]string, n)
	for i := range defs {
		defs[i] = fmt.Sprintf(`"d%d":{"allOf":[{"$ref":"#/$defs/d%d"},{"$ref":"#/$defs/d%d"}]}`, i, i+1, i+1)
	}
	return `{"$defs":{` + strings.Join(defs, ",") + fmt.Sprintf(`,"d%d":{"type":"string"}},"$ref":"#/$defs/d0"}`, n)
}

// TestSchemaLoadStopped: a load whose context has ended (SIGTERM during
// --config.check or a load) compiles no schema, and says why, so that no
// compile outlasts the signal by more than one schema's bounded work.
func TestSchemaLoadStopped(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_, err := ParseContext(ctx, []byte(base+"    response_format: {type: json_schema, schema: {type: object}}\n"), "c.yml")
	if err == nil || !strings.Contains(err.Error(), "c.yml:10: workloads[0].response_format.schema: not compiled: the load was stopped (context canceled)") {
		t.Errorf("error %v", err)
	}
}

// TestSchemaCompiledOnce: workloads that name one schema file share its
// compiled schema, and each is refused with its own line when it is
// refused: a file named by 1000 workloads costs one compile, not 1000.
func TestSchemaCompiledOnce(t *testing.T) {
	dir := t.TempDir()
	write := func(name, body string) {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	write("s.json", `{"type":"array","items":{"$ref":"#"}}`)
	write("deep.json", nestedSchema(`{"items":`, `}`, 100))
	two := func(file string) string {
		return fmt.Sprintf(`targets: [{name: local, url: "http://127.0.0.1:8000", model: m}]
workloads:
  - {name: a, target: local, arrival: {rate: 1}, response_format: {type: json_schema, schema_file: %s}}
  - {name: b, target: local, arrival: {rate: 1}, response_format: {type: json_schema, schema_file: %s}}
`, file, file)
	}
	c, err := Parse([]byte(two("s.json")), filepath.Join(dir, "c.yml"))
	if err != nil {
		t.Fatal(err)
	}
	if a, b := c.Workloads[0].Kinds.ResponseFormat.Compiled, c.Workloads[1].Kinds.ResponseFormat.Compiled; a == nil || a != b {
		t.Errorf("compiled %p and %p, want one schema", a, b)
	}
	_, err = Parse([]byte(two("deep.json")), filepath.Join(dir, "c.yml"))
	for _, want := range []string{"c.yml:3: workloads[0].response_format.schema_file: ", "c.yml:4: workloads[1].response_format.schema_file: "} {
		if err == nil || !strings.Contains(err.Error(), want+filepath.Join(dir, "deep.json")+": nested more than 64 levels deep") {
			t.Errorf("error %v, want %q", err, want)
		}
	}
}

// TestImagesBoundedInAll: the images of every workload and module add up
// to config.MaxTotalImagePixelBytes at most, each held once while the
// configuration runs; the workload or module that takes the sum past it is
// refused with its line, those before it are not. 591x591x16 is the
// largest square count of 16 under MaxImagePixelBytes.
func TestImagesBoundedInAll(t *testing.T) {
	const most = "    images: {count: 16, width: 591, height: 591}\n"
	workload := func(name, images string) string {
		return "  - name: " + name + "\n    target: local\n    arrival: {rate: 1}\n" + images
	}
	four := base + most + workload("w2", most) + workload("w3", most) + workload("w4", most)
	for _, tc := range []struct {
		name, yaml, want string
	}{
		{"four at the most of one request", four, ""},
		{"four and a small one", four + workload("w5", "    images: {count: 1, width: 128, height: 128}\n"),
			"c.yml:26: workloads[4].images.count: these 1 images of 128x128 (48 KiB of pixels) take the images of the configuration's workloads and modules to 67111104 bytes of pixels: at most 67108864 (64 MiB) in all"},
		{"a module counts", four + "modules:\n  vision:\n    images: {count: 1, width: 256, height: 256}\n",
			"c.yml:25: modules.vision.images.count: these 1 images of 256x256 (192 KiB of pixels) take the images"},
		{"one refused already is not counted", four + workload("w5", "    images: {count: 16, width: 4096, height: 4096}\n"),
			"workloads[4].images.count: 16 images of 4096x4096 are 768 MiB of pixels"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Parse([]byte(tc.yaml), "c.yml")
			switch {
			case tc.want == "" && err != nil:
				t.Fatalf("refused: %v", err)
			case tc.want == "":
			case err == nil:
				t.Fatal("accepted")
			case !strings.Contains(err.Error(), tc.want):
				t.Errorf("error %q\nwant it to contain %q", err, tc.want)
			case strings.Contains(err.Error(), "MaxTotalImagePixelBytes") != strings.Contains(tc.want, "take the images"):
				t.Errorf("error %q: the total named or not as it should be", err)
			}
		})
	}
}
