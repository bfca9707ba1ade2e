package client

import (
	"encoding/json"
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

// TestFlavorsEncodeTheirKinds: a flavor puts in its body exactly the
// request kinds its entry in config's table says its API takes, so that
// the configuration, which refuses the others, and the body agree.
func TestFlavorsEncodeTheirKinds(t *testing.T) {
	params := json.RawMessage(`{"type":"object"}`)
	kinds := []struct {
		kind config.Kinds
		k    config.RequestKinds
	}{
		{config.KindTools, config.RequestKinds{Tools: []config.Tool{{Name: "f", ParametersJSON: params}}}},
		{config.KindResponseFormat, config.RequestKinds{ResponseFormat: &config.ResponseFormat{Type: config.ResponseJSONObject}}},
		{config.KindResponseFormat, config.RequestKinds{ResponseFormat: &config.ResponseFormat{Type: config.ResponseJSONSchema, Name: "a", SchemaJSON: params}}},
	}
	images := []Image{NewImage("image/png", []byte("ABC"))}
	for _, facts := range config.AllFlavors() {
		t.Run(string(facts.Name), func(t *testing.T) {
			f, err := ParseFlavor(string(facts.Name))
			if err != nil {
				t.Fatal(err)
			}
			e, ok := f.(kindsEncoder)
			if !ok {
				if facts.Kinds != config.KindsNone {
					t.Fatalf("takes %b but encodes no kinds", facts.Kinds)
				}
				return
			}
			for _, tc := range kinds {
				if got := len(e.kindMembers(&tc.k)) > 0; got != facts.Takes(tc.kind) {
					t.Errorf("kind %b: encoded %v, the table says %v", tc.kind, got, facts.Takes(tc.kind))
				}
			}
			if key, v := e.imageMember("p", images); (key != "" && v != nil) != facts.Takes(config.KindImages) {
				t.Errorf("images in %q, the table says %v", key, facts.Takes(config.KindImages))
			}
		})
	}
}
