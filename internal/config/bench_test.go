package config

import (
	"context"
	"strings"
	"testing"
)

// BenchmarkCompileSchema is a schema's load, to the verdict
// (docs/limits.md):
//
//	go test -run '^$' -bench CompileSchema -benchmem ./internal/config/
func BenchmarkCompileSchema(b *testing.B) {
	for _, bc := range []struct {
		name, schema string
		ok           bool
	}{
		// The issue's: 65 KB, 6,553 levels deep; refused.
		{"65 KB nested 6553 deep", nestedSchema(`{"items":`, `}`, 6553), false},
		// The costliest the bounds let through: a chain of properties
		// near MaxSchemaDepth, then as many subschemas as are left.
		{"63 levels and 1000 subschemas", deepAndWide(), true},
		{"1000 subschemas", wideSchema(MaxSubschemas, "{}"), true},
		{"a tool's parameters", `{"type":"object","properties":{"city":{"type":"string","minLength":1},"days":{"type":"integer","minimum":1}},"required":["city","days"]}`, true},
	} {
		b.Run(bc.name, func(b *testing.B) {
			if len(bc.schema) > MaxSchemaBytes {
				b.Fatalf("%d bytes", len(bc.schema))
			}
			b.SetBytes(int64(len(bc.schema)))
			b.ReportAllocs()
			for b.Loop() {
				v := &validator{}
				_, s := compileSchemaJSON(context.Background(), v, path{"schema"}, "", []byte(bc.schema))
				if (s != nil) != bc.ok {
					b.Fatalf("compiled %v: %v", s != nil, v.paths)
				}
			}
		})
	}
}

// deepAndWide is a chain of properties 58 levels deep whose innermost
// object holds wideSchema's groups of properties, which bring the schema
// to MaxSubschemas, their leaves at level 63: most subschemas at the
// bottom, where their locations are longest.
func deepAndWide() string {
	const chain = 29 // {"properties":{"a": ... }} is two levels each
	inner := wideSchema(MaxSubschemas-2*chain, "{}")
	return strings.Repeat(`{"properties":{"a":`, chain) + inner + strings.Repeat(`}}`, chain)
}
