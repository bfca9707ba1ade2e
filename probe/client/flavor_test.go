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
	chat := map[string]bool{"openai-chat": true, "ollama-chat": true, "openai-responses": true}
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

// TestFlavorsSpeakTheirFacts: every flavor of config's table has a wire
// format here, whose name and chat-ness are the table's.
func TestFlavorsSpeakTheirFacts(t *testing.T) {
	for _, facts := range config.AllFlavors() {
		t.Run(string(facts.Name), func(t *testing.T) {
			f, err := ParseFlavor(string(facts.Name))
			if err != nil {
				t.Fatalf("no wire format: %v", err)
			}
			if f.Name() != string(facts.Name) || f.Chat() != facts.Chat() {
				t.Errorf("Name() %q, Chat() %v; the table says %q, %v", f.Name(), f.Chat(), facts.Name, facts.Chat())
			}
		})
	}
}
