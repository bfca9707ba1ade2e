package bench

import (
	"testing"

	"github.com/infer-exporter/infer_exporter/internal/config"
)

// TestPromptSetHashCoversKinds: two shapes of the same prompt texts, one
// sending tools and one asking for JSON, hash apart (they send other
// requests); a shape without kinds keeps its texts' hash; the same kinds
// hash alike.
func TestPromptSetHashCoversKinds(t *testing.T) {
	const texts = "9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08"
	tools := config.RequestKinds{Tools: []config.Tool{{Name: "get_weather", Description: "w",
		Parameters: map[string]any{"type": "object", "properties": map[string]any{"city": map[string]any{"type": "string"}, "unit": map[string]any{"type": "string"}}}}}}
	json := config.RequestKinds{ResponseFormat: &config.ResponseFormat{Type: "json_object"}}
	none := config.RequestKinds{}
	a, b := withKinds(texts, &tools), withKinds(texts, &json)
	if a == b || a == texts || b == texts {
		t.Errorf("tools %s, json %s, texts %s: a kind's shape shares a hash", a, b, texts)
	}
	if got := withKinds(texts, &none); got != texts {
		t.Errorf("a shape without kinds: %s, want its texts' hash %s", got, texts)
	}
	for range 5 {
		again := config.RequestKinds{Tools: []config.Tool{{Name: "get_weather", Description: "w",
			Parameters: map[string]any{"type": "object", "properties": map[string]any{"unit": map[string]any{"type": "string"}, "city": map[string]any{"type": "string"}}}}}}
		if withKinds(texts, &again) != a {
			t.Fatal("the same tools hash differently")
		}
	}
}
