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

// TestFlavorsEncodeStrict: a json_schema response format carries its
// strict flag (true when unset, as before it could be set) exactly in the
// flavors that config says send one (FlavorFacts.SendsStrict), where
// config checks the schema against OpenAI's strict rules; the others send
// no flag.
func TestFlavorsEncodeStrict(t *testing.T) {
	f, tr := false, true
	for _, facts := range config.AllFlavors() {
		if !facts.Takes(config.KindResponseFormat) {
			continue
		}
		t.Run(string(facts.Name), func(t *testing.T) {
			fl, err := ParseFlavor(string(facts.Name))
			if err != nil {
				t.Fatal(err)
			}
			e := fl.(kindsEncoder)
			for _, tc := range []struct {
				name   string
				strict *bool
				want   any
			}{{"unset", nil, true}, {"true", &tr, true}, {"false", &f, false}} {
				k := config.RequestKinds{ResponseFormat: &config.ResponseFormat{Type: config.ResponseJSONSchema, Name: "a",
					SchemaJSON: json.RawMessage(`{"type":"object","additionalProperties":false}`), Strict: tc.strict}}
				got, found := strictMember(t, e.kindMembers(&k))
				switch {
				case !facts.SendsStrict() && found:
					t.Errorf("strict %s: sent %v; the flavor sends no flag", tc.name, got)
				case facts.SendsStrict() && (!found || got != tc.want):
					t.Errorf("strict %s: sent %v (found %v), want %v", tc.name, got, found, tc.want)
				}
			}
		})
	}
}

// strictMember is the value of the "strict" member found at any depth of
// the encoded members, and whether there is one.
func strictMember(t *testing.T, members map[string]json.RawMessage) (any, bool) {
	t.Helper()
	var find func(v any) (any, bool)
	find = func(v any) (any, bool) {
		switch v := v.(type) {
		case map[string]any:
			if s, ok := v["strict"]; ok {
				return s, true
			}
			for _, x := range v {
				if s, ok := find(x); ok {
					return s, true
				}
			}
		case []any:
			for _, x := range v {
				if s, ok := find(x); ok {
					return s, true
				}
			}
		}
		return nil, false
	}
	for _, raw := range members {
		var v any
		if err := json.Unmarshal(raw, &v); err != nil {
			t.Fatal(err)
		}
		if s, ok := find(v); ok {
			return s, true
		}
	}
	return nil, false
}
