package quality_test

import (
	"slices"
	"testing"

	"github.com/infer-exporter/infer_exporter/internal/config"
	"github.com/infer-exporter/infer_exporter/probe/quality"
)

// TestEveryFlavorsDialect: every scorable flavor's dialect is one this
// package speaks, and every dialect it speaks is some flavor's.
func TestEveryFlavorsDialect(t *testing.T) {
	used := map[string]bool{}
	for _, f := range config.AllFlavors() {
		if f.PerplexityDialect == "" {
			continue
		}
		if !slices.Contains(quality.Dialects, f.PerplexityDialect) {
			t.Errorf("flavor %s: dialect %q is not one of %v", f.Name, f.PerplexityDialect, quality.Dialects)
		}
		if d, err := quality.DialectFor(string(f.Name)); err != nil || d != f.PerplexityDialect {
			t.Errorf("DialectFor(%s) = %q, %v; want %q", f.Name, d, err, f.PerplexityDialect)
		}
		used[f.PerplexityDialect] = true
	}
	for _, d := range quality.Dialects {
		if !used[d] {
			t.Errorf("dialect %s is no flavor's", d)
		}
	}
}
