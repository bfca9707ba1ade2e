package client

import (
	"slices"
	"testing"

	"github.com/infer-exporter/infer_exporter/internal/config"
)

// TestConfigFlavors: the configuration accepts exactly the flavors this
// package speaks, so that a flavor cannot be added to one list only.
func TestConfigFlavors(t *testing.T) {
	if got, want := config.Flavors, FlavorNames(); !slices.Equal(got, want) {
		t.Errorf("config.Flavors = %v, want client.FlavorNames() = %v", got, want)
	}
}

func TestFlavorChat(t *testing.T) {
	chat := map[string]bool{"openai-chat": true, "ollama-chat": true}
	for _, name := range FlavorNames() {
		f, err := ParseFlavor(name)
		if err != nil {
			t.Fatal(err)
		}
		if got := f.Chat(); got != chat[name] {
			t.Errorf("%s: Chat() = %v, want %v", name, got, chat[name])
		}
	}
}
