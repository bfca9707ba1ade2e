package client

import (
	"encoding/json"

	"github.com/infer-exporter/infer_exporter/internal/config"
)

// Attachments are what a request carries beside its prompt: tools, a
// response format, images. A workload builds them once (NewAttachments)
// and every request shares them, read only; each flavor puts them where
// its API has a field for them (kindsEncoder, in the flavor's own file),
// for the kinds its entry in config's flavor table takes (the
// configuration refuses a kind on a flavor that has none).
type Attachments struct {
	// Images go where each flavor's API takes them (kindsEncoder's
	// imageMember). Every request's body shares their bytes (pieces.go).
	Images []Image
	// members are the tools and the response format in each flavor's
	// shapes, by flavor name: the body members that carry them, encoded
	// once per workload rather than once per request.
	members map[string]map[string]json.RawMessage
}

// kindsEncoder is a Flavor whose API takes request kinds beside the
// prompt (config.FlavorFacts.Kinds). Each such flavor says in its own
// file how its body carries them.
type kindsEncoder interface {
	Flavor
	// kindMembers encodes k's tools and response format, for the kinds
	// the flavor's facts take, as the members of its body that carry
	// them (nil: none). It is called once per workload.
	kindMembers(k *config.RequestKinds) map[string]json.RawMessage
	// imageMember is the member of the flavor's body that carries the
	// images, with the prompt when the API holds them together, and its
	// value; "" when the flavor's facts take no images.
	imageMember(prompt string, images []Image) (string, *withImages)
}

// NewAttachments encodes a validated configuration's kinds, and the
// images built for them, for every flavor that takes kinds.
func NewAttachments(k *config.RequestKinds, images []Image) *Attachments {
	a := &Attachments{Images: images, members: map[string]map[string]json.RawMessage{}}
	for name, f := range flavors {
		if e, ok := f.(kindsEncoder); ok {
			if m := e.kindMembers(k); len(m) > 0 {
				a.members[name] = m
			}
		}
	}
	return a
}

// setIn puts the attachments into a body of flavor f: its tools and
// response format, and the images where f's API takes them (replacing
// the member that held the prompt alone, when the images go with it).
// Extra, merged later, may still replace any of them.
func (a *Attachments) setIn(body map[string]any, f kindsEncoder, prompt string) {
	if a == nil {
		return
	}
	for k, v := range a.members[f.Name()] {
		body[k] = v
	}
	if len(a.Images) > 0 {
		if key, v := f.imageMember(prompt, a.Images); key != "" {
			body[key] = v
		}
	}
}

// toolChoice is a tool choice's value when it is not a tool's name:
// "auto" (the default) or "required".
func toolChoice(k *config.RequestKinds) (json.RawMessage, bool) {
	switch k.ToolChoice {
	case "", config.ToolChoiceAuto:
		return mustJSON(config.ToolChoiceAuto), true
	case config.ToolChoiceRequired:
		return mustJSON(config.ToolChoiceRequired), true
	}
	return nil, false
}

// function is a tool's name, parameters and description, as the OpenAI
// APIs describe a function.
func function(t *config.Tool) map[string]any {
	fn := map[string]any{"name": t.Name, "parameters": t.ParametersJSON}
	if t.Description != "" {
		fn["description"] = t.Description
	}
	return fn
}

// mustJSON encodes a value built here of maps, strings and raw JSON, which
// cannot fail. It escapes HTML as json.Marshal does: the members it
// encodes are sent as they come out.
func mustJSON(v any) json.RawMessage {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err)
	}
	return b
}
