package config

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestRequestKindsGood(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "answer.json"), []byte(`{"type":"object","properties":{"city":{"type":"string"}},"required":["city"]}`), 0o600); err != nil {
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
      schema: {type: object, required: [n], properties: {n: {type: integer}}}
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
		{"openai-responses", "    tools: [{name: f}]\n    tool_choice: f\n    response_format: {type: json_schema, schema: {type: object}}\n    images: {count: 1, width: 8, height: 8}\n", ""},
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
