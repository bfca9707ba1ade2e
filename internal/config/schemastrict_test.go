package config

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestStrictSchema: with strict true (the default where the flavor sends
// the flag) a json_schema whose object schemas break OpenAI's strict rules
// (additionalProperties: false, every property required) is refused at
// load, naming the file, the line and the subschema, wherever it nests;
// strict: false sends it as it is; a flavor without the flag refuses only
// an explicit true.
func TestStrictSchema(t *testing.T) {
	const fix = "set additionalProperties: false and list every property in required"
	obj := func(props, extra string) string {
		return "{type: object, properties: {" + props + "}" + extra + "}"
	}
	for _, tc := range []struct {
		name, flavor, format, want string
	}{
		{"valid, nested", "openai-chat", "{type: json_schema, schema: " +
			obj("a: "+obj("b: {type: string}", ", required: [b], additionalProperties: false"), ", required: [a], additionalProperties: false") + "}", ""},
		{"valid, empty object", "openai-chat", "{type: json_schema, schema: {type: object, additionalProperties: false}}", ""},
		{"no additionalProperties", "openai-chat", "{type: json_schema, schema: " + obj("a: {type: string}", ", required: [a]") + "}",
			"c.yml:8: workloads[0].response_format.schema: strict is true (the default), and OpenAI's structured outputs refuse every request whose schema has an object that lacks additionalProperties: false: " + fix},
		{"additionalProperties true", "openai-chat", "{type: json_schema, schema: " + obj("a: {type: string}", ", required: [a], additionalProperties: true") + "}",
			"workloads[0].response_format.schema: strict is true (the default), and OpenAI's structured outputs refuse every request whose schema has an object that lacks additionalProperties: false: "},
		{"additionalProperties a schema", "openai-chat", "{type: json_schema, schema: {type: object, additionalProperties: {type: string}}}",
			"an object that lacks additionalProperties: false: "},
		{"not all required", "openai-chat", "{type: json_schema, schema: " + obj("a: {type: string}, b: {type: string}, c: {}", ", required: [b], additionalProperties: false") + "}",
			`workloads[0].response_format.schema: strict is true (the default), and OpenAI's structured outputs refuse every request whose schema has an object that lacks "a", "c" in required: `},
		{"both", "openai-chat", "{type: json_schema, schema: " + obj("a: {type: string}", "") + "}",
			`an object that lacks additionalProperties: false and "a" in required: `},
		{"properties without type", "openai-chat", "{type: json_schema, schema: {properties: {a: {type: string}}, required: [a]}}",
			"an object that lacks additionalProperties: false"},
		{"nullable object", "openai-chat", "{type: json_schema, schema: {type: [object, 'null']}}", "an object that lacks additionalProperties: false"},
		{"nested in properties", "openai-chat", "{type: json_schema, schema: " + obj("a: {type: object}", ", required: [a], additionalProperties: false") + "}",
			"c.yml:8: workloads[0].response_format.schema.properties.a: strict is true"},
		{"nested in items and anyOf", "openai-chat", "{type: json_schema, schema: " +
			obj("l: {type: array, items: {anyOf: [{type: string}, {type: object, properties: {x: {}}, additionalProperties: false}]}}", ", required: [l], additionalProperties: false") + "}",
			`workloads[0].response_format.schema.properties.l.items.anyOf[1]: strict is true (the default), and OpenAI's structured outputs refuse every request whose schema has an object that lacks "x" in required`},
		{"in $defs", "openai-chat", `{type: json_schema, schema: {$defs: {node: {type: object}}, type: array, items: {$ref: "#/$defs/node"}}}`,
			"workloads[0].response_format.schema.$defs.node: strict is true"},
		{"counted past the first", "openai-chat", "{type: json_schema, schema: " + obj("a: {type: object}, b: {type: object}", ", required: [a, b]") + "}",
			"or set strict: false (and 2 more)"},
		{"data is not a schema", "openai-chat", "{type: json_schema, schema: " +
			obj("a: {const: {x: 1}, default: {y: 2}, enum: [{type: object}]}", ", required: [a], additionalProperties: false") + "}", ""},
		{"explicit true", "openai-chat", "{type: json_schema, strict: true, schema: {type: object}}",
			"workloads[0].response_format.schema: strict is true, and OpenAI's structured outputs refuse"},
		{"strict false", "openai-chat", "{type: json_schema, strict: false, schema: {type: object}}", ""},
		{"responses", "openai-responses", "{type: json_schema, schema: {type: object}}", "workloads[0].response_format.schema: strict is true (the default)"},
		{"completions", "openai-completions", "{type: json_schema, schema: {type: object}}", "workloads[0].response_format.schema: strict is true (the default)"},
		{"responses, strict false", "openai-responses", "{type: json_schema, strict: false, schema: {type: object}}", ""},
		{"ollama sends none", "ollama-chat", "{type: json_schema, schema: {type: object}}", ""},
		{"ollama, false", "ollama-generate", "{type: json_schema, strict: false, schema: {type: object}}", ""},
		{"ollama, true", "ollama-chat", "{type: json_schema, strict: true, schema: {type: object, additionalProperties: false}}",
			"c.yml:8: workloads[0].response_format.strict: flavor ollama-chat sends no strict flag (its format is the schema itself); flavors that do: [openai-chat openai-completions openai-responses]"},
		{"json_object", "openai-chat", "{type: json_object, strict: false}", "workloads[0].response_format.strict: only with type json_schema"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			y := strings.Replace(base, "    model: m\n", "    model: m\n    flavor: "+tc.flavor+"\n", 1)
			y = strings.Replace(y, "  - name: w\n", "  - name: w\n    response_format: "+tc.format+"\n", 1)
			c, err := Parse([]byte(y), "c.yml")
			switch {
			case tc.want == "" && err != nil:
				t.Fatalf("refused: %v", err)
			case tc.want == "":
				if rf := c.Workloads[0].Kinds.ResponseFormat; rf.Type == ResponseJSONSchema && rf.Compiled == nil {
					t.Error("loaded, but not compiled")
				}
			case err == nil:
				t.Fatalf("loaded; want %q", tc.want)
			case !strings.Contains(err.Error(), tc.want):
				t.Errorf("error %q\nwant %q", err, tc.want)
			}
		})
	}
}

// TestStrictSchemaWhere: a refusal names the line of the subschema that
// breaks the rules, inline; in a schema file, its JSON Pointer; in a
// bench shape (CheckKinds), its path below the shape.
func TestStrictSchemaWhere(t *testing.T) {
	y := base + `    response_format:
      type: json_schema
      schema:
        type: object
        additionalProperties: false
        required: [address]
        properties:
          address:
            type: object
            properties: {city: {type: string}}
`
	_, err := Parse([]byte(y), "c.yml")
	if want := "c.yml:17: workloads[0].response_format.schema.properties.address: strict is true (the default)"; err == nil || !strings.Contains(err.Error(), want) {
		t.Errorf("error %v\nwant %q", err, want)
	}

	dir := t.TempDir()
	schema := `{"type":"object","additionalProperties":false,"required":["a/b"],"properties":{"a/b":{"type":"object","properties":{}}}}`
	if err := os.WriteFile(filepath.Join(dir, "s.json"), []byte(schema), 0o600); err != nil {
		t.Fatal(err)
	}
	_, err = Parse([]byte(base+"    response_format: {type: json_schema, schema_file: s.json}\n"), filepath.Join(dir, "c.yml"))
	want := filepath.Join(dir, "c.yml") + ":10: workloads[0].response_format.schema_file: " + filepath.Join(dir, "s.json") +
		": at #/properties/a~1b: strict is true (the default), and OpenAI's structured outputs refuse every request whose schema has an object that lacks additionalProperties: false"
	if err == nil || !strings.Contains(err.Error(), want) {
		t.Errorf("error %v\nwant %q", err, want)
	}

	k := &RequestKinds{ResponseFormat: &ResponseFormat{Type: ResponseJSONSchema, Schema: map[string]any{"type": "object"}}}
	problems := CheckKinds(context.Background(), k, FlavorOpenAIChat, dir)
	if len(problems) != 1 || PathString(problems[0].Path) != "response_format.schema" || !strings.Contains(problems[0].Reason, "strict is true (the default)") {
		t.Errorf("CheckKinds: %+v", problems)
	}
	// The same shape for an Ollama target: no flag, nothing to refuse,
	// and the format's Strict is left unset for the next target's check.
	if problems := CheckKinds(context.Background(), k, "ollama-chat", dir); len(problems) != 0 || k.ResponseFormat.Strict != nil {
		t.Errorf("CheckKinds for ollama-chat: %+v, strict %v", problems, k.ResponseFormat.Strict)
	}
}

// TestStrictSchemaDefault: unset, strict is true, as it was before it
// could be set.
func TestStrictSchemaDefault(t *testing.T) {
	f, tr := false, true
	for _, tc := range []struct {
		strict *bool
		want   bool
	}{{nil, true}, {&tr, true}, {&f, false}} {
		if got := (&ResponseFormat{Strict: tc.strict}).StrictSchema(); got != tc.want {
			t.Errorf("Strict %v: StrictSchema() = %v, want %v", tc.strict, got, tc.want)
		}
	}
}
