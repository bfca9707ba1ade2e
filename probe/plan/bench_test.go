package plan

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/infer-exporter/infer_exporter/probe/observation"
)

// BenchmarkCheck is the CPU and memory of one answer's check
// (docs/benchmarks.md, docs/limits.md):
//
//	go test -run '^$' -bench Check -benchmem ./probe/plan/
func BenchmarkCheck(b *testing.B) {
	recursive := `    response_format:
      type: json_schema
      schema: {type: array, items: {$ref: "#"}}
`
	// A union of 30 object types, each through a $ref, as the items of
	// an array: 61 evaluations at each item, within
	// config.MaxSchemaEvaluations; each item below fails all 30.
	defs, refs := make([]string, 30), make([]string, 30)
	for i := range defs {
		defs[i] = fmt.Sprintf(`"t%d": {type: object, properties: {kind: {const: t%d}, v: {type: integer}}, required: [kind]}`, i, i)
		refs[i] = fmt.Sprintf(`{$ref: "#/$defs/t%d"}`, i)
	}
	// strict: false: its objects leave additional properties open, as
	// the figures in the docs were measured with.
	union := "    response_format:\n      type: json_schema\n      strict: false\n      schema: {$defs: {" + strings.Join(defs, ", ") + "}, type: array, items: {anyOf: [" + strings.Join(refs, ", ") + "]}}\n"
	item := `{"kind":"x","v":0},`
	items := strings.Repeat(item, (64<<10)/len(item)-1) // 64 KiB: client.DefaultMaxTextBytes
	for _, bc := range []struct {
		name, kinds, text string
		calls             []observation.ToolCall
		want              string
	}{
		{"normal answer", answerSchema, `{"n": 42, "tags": ["red", "green", "blue"]}`, nil, observation.Valid},
		{"normal tool call", weatherTool, "", calls("get_weather", `{"city": "Paris", "days": 3}`), ""},
		{"nested 9990, 20 KB", recursive, nested(9990, "0"), nil, observation.InvalidJSON},
		{"nested 128, the bound, valid", recursive, nested(128, ""), nil, observation.Valid},
		{"nested 128, the bound, not valid", recursive, nested(128, "0"), nil, observation.SchemaMismatch},
		{"64 KiB against a union of 30", union, "[" + strings.TrimSuffix(items, ",") + "]", nil, observation.SchemaMismatch},
	} {
		b.Run(bc.name, func(b *testing.B) {
			c := kindsConfig(b, "http://127.0.0.1:1", "openai-chat", bc.kinds)
			k, err := NewKinds(&c.Workloads[0].Kinds)
			if err != nil {
				b.Fatal(err)
			}
			ctx := context.Background()
			n := len(bc.text)
			for _, c := range bc.calls {
				n += len(c.Name) + len(c.Arguments)
			}
			b.SetBytes(int64(n))
			b.ReportAllocs()
			for b.Loop() {
				o := observation.Request{Outcome: observation.Success, Text: bc.text, Calls: bc.calls}
				k.Check(ctx, &o)
				if o.StructuredCheck != bc.want {
					b.Fatalf("%q, want %q", o.StructuredCheck, bc.want)
				}
			}
		})
	}
}
