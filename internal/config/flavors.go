package config

import (
	"slices"
	"strings"
)

// Flavor names the HTTP API a target speaks. Its facts (FlavorFacts) are
// one entry of flavorTable; its wire format is a probe/client Flavor of
// the same name.
type Flavor string

// FlavorOpenAIChat is the default flavor.
const FlavorOpenAIChat Flavor = "openai-chat"

// FlavorFacts is what the exporter knows of one flavor besides its wire
// format: every fact that a package outside probe/client reads by the
// flavor's name. It lives here, in the leaf every other package imports,
// because the configuration itself needs two of the facts at load (the
// name, and whether the servers return prompt log-probabilities); the
// client, the quality probe, prompt calibration and the OTLP push read the
// same entry. TestFlavorFacts fails on an entry that lacks a fact.
type FlavorFacts struct {
	// Name is the flavor's configuration name.
	Name Flavor
	// Prompt is how the API takes the prompt: PromptChat (a chat message,
	// to which the server applies the model's chat template) or PromptText
	// (raw text). The client builds its request body by it, prompt
	// calibration counts the template's tokens by it, and the OTLP push
	// names the operation by it ("chat" or "text_completion").
	Prompt PromptKind
	// Provider is the OpenTelemetry GenAI conventions' gen_ai.provider.name
	// of the flavor's requests: "openai" for the OpenAI APIs, as an OpenAI
	// client library reports whatever server it talks to, else the engine
	// whose API the flavor speaks (values of our own, which the
	// conventions allow where none of theirs applies).
	Provider string
	// PerplexityDialect is how probe/quality asks the flavor's servers for
	// a prompt's log-probabilities: one of that package's Dialect
	// constants (a test there checks it speaks each). Empty when the
	// servers cannot return them; NoPerplexity then says why.
	PerplexityDialect string
	// NoPerplexity says why the flavor's servers cannot be scored: the
	// reason of the load error of a quality block or a perplexity module
	// on such a target. Set exactly when PerplexityDialect is empty.
	NoPerplexity string
	// Kinds are the request kinds (RequestKinds: tools, a response
	// format, images) the API has a field for, or KindsNone. A workload
	// or module asking the flavor for another kind is refused at load:
	// the flavor would drop it, and its answers would be judged against
	// a request that was never made. probe/client puts each kind where
	// the flavor's API takes it, in the flavor's own file.
	Kinds Kinds
	// BodyPrompt and BodyMaxTokens are, for an OpenAI API, the members of
	// its request body that hold the prompt ("messages", "prompt",
	// "input") and cap the output tokens: a body recorded from one of
	// these APIs (a replay's jsonl trace) is told apart by them
	// (RecordedBodyFlavor). Empty for the other flavors, whose recorded
	// bodies are not replayed.
	BodyPrompt    string
	BodyMaxTokens string
	// Path is, for an OpenAI API, the path of its generation endpoint
	// under the target's base URL ("/chat/completions", "/completions",
	// "/responses"): a request recorded with its path (a replay's jsonl
	// trace, a shadow capture) is told apart by it (RecordedPathFlavor),
	// and the shadow proxy captures the requests to these paths. Empty
	// for the other flavors.
	Path string
}

// Kinds is a set of request kinds a flavor's API takes beside the prompt.
type Kinds uint8

// The request kinds.
const (
	// KindTools: functions the model may call, and the tool choice.
	KindTools Kinds = 1 << iota
	// KindResponseFormat: a JSON answer, of a schema or of any shape.
	KindResponseFormat
	// KindImages: images sent with the prompt.
	KindImages
	// KindsNone states that the API takes none of them, so that an
	// entry that forgot its kinds is told from one that has none.
	KindsNone
)

// Takes says whether the flavor's API has a field for every kind of k.
func (f FlavorFacts) Takes(k Kinds) bool { return f.Kinds&k == k && k != 0 }

// SendsStrict says whether the flavor's json_schema response format
// carries OpenAI's strict flag (ResponseFormat.Strict): the OpenAI APIs'
// do; Ollama's format is the schema itself.
func (f FlavorFacts) SendsStrict() bool { return f.OpenAIAPI() && f.Takes(KindResponseFormat) }

// PromptKind is how a flavor's API takes the prompt.
type PromptKind string

// The prompt kinds.
const (
	// PromptChat: as a chat message; the server applies the model's chat
	// template.
	PromptChat PromptKind = "chat"
	// PromptText: as raw text, tokenized as it is.
	PromptText PromptKind = "text"
)

// Chat says the flavor wraps the prompt in a chat message, so that the
// server applies the model's chat template to it.
func (f FlavorFacts) Chat() bool { return f.Prompt == PromptChat }

// OpenAIAPI says the flavor speaks one of the OpenAI APIs (its Provider is
// "openai"), so that a request body recorded from such an API (a replay's
// jsonl trace) can be sent to it as it was.
func (f FlavorFacts) OpenAIAPI() bool { return f.Provider == "openai" }

// RecordedBodyFlavor is the OpenAI API whose request body has the
// members that has reports, as far as its members tell: the API with a
// member of its own that caps the output (BodyMaxTokens that no other
// API's body has); else the API whose prompt member is the only one of
// the APIs' the body has; else the default flavor, and told is false. A
// recorded body is sent as it was; a replay forcing its length sets the
// cap member of the API it is for.
func RecordedBodyFlavor(has func(member string) bool) (f FlavorFacts, told bool) {
	var prompted []FlavorFacts
	for _, f := range flavorTable {
		if f.BodyPrompt == "" {
			continue
		}
		if has(f.BodyMaxTokens) && ownBodyMember(f) {
			return f, true
		}
		if has(f.BodyPrompt) {
			prompted = append(prompted, f)
		}
	}
	if len(prompted) == 1 {
		return prompted[0], true
	}
	def, _ := FlavorOpenAIChat.Facts()
	return def, false
}

// RecordedPathFlavor is the OpenAI API a request to path (as recorded:
// "/v1/chat/completions") was for: the one whose Path ends it, the longest
// such ("/chat/completions" rather than "/completions"); false when path
// is none of the APIs'.
func RecordedPathFlavor(path string) (FlavorFacts, bool) {
	var best FlavorFacts
	for _, f := range flavorTable {
		if f.Path != "" && strings.HasSuffix(path, f.Path) && len(f.Path) > len(best.Path) {
			best = f
		}
	}
	return best, best.Path != ""
}

// ownBodyMember says whether f's cap member is no other API's.
func ownBodyMember(f FlavorFacts) bool {
	for _, g := range flavorTable {
		if g.Name != f.Name && g.BodyMaxTokens == f.BodyMaxTokens {
			return false
		}
	}
	return true
}

// BodyMaxTokensMembers are the members that cap the output tokens in a
// body of the OpenAI APIs, each once, in the table's order.
func BodyMaxTokensMembers() []string {
	var out []string
	for _, f := range flavorTable {
		if f.BodyMaxTokens != "" && !slices.Contains(out, f.BodyMaxTokens) {
			out = append(out, f.BodyMaxTokens)
		}
	}
	return out
}

// OpenAIFlavors are the flavors of which OpenAIAPI holds, sorted.
func OpenAIFlavors() []string { return flavorNames(FlavorFacts.OpenAIAPI) }

// flavorTable is every flavor this version speaks, one entry each, sorted
// by name. Adding a flavor is one entry here, with every fact, and its wire
// format in probe/client (CONTRIBUTING.md, "Adding an engine flavor").
var flavorTable = []FlavorFacts{
	{
		Name: "llamacpp", Prompt: PromptText, Provider: "llama_cpp", Kinds: KindsNone,
		NoPerplexity: "llama.cpp's /completion returns probabilities (n_probs) of generated tokens only, and its /v1/completions has no echo of prompt log-probabilities",
	},
	{
		Name: "ollama-chat", Prompt: PromptChat, Provider: "ollama",
		Kinds:        KindTools | KindResponseFormat | KindImages,
		NoPerplexity: noOllamaPerplexity,
	},
	{
		Name: "ollama-generate", Prompt: PromptText, Provider: "ollama",
		Kinds:        KindResponseFormat | KindImages,
		NoPerplexity: noOllamaPerplexity,
	},
	{
		Name: "openai-chat", Prompt: PromptChat, Provider: "openai", PerplexityDialect: "openai-echo",
		Kinds:      KindTools | KindResponseFormat | KindImages,
		BodyPrompt: "messages", BodyMaxTokens: "max_tokens", Path: "/chat/completions",
	},
	{
		Name: "openai-completions", Prompt: PromptText, Provider: "openai", PerplexityDialect: "openai-echo",
		Kinds:      KindResponseFormat,
		BodyPrompt: "prompt", BodyMaxTokens: "max_tokens", Path: "/completions",
	},
	{
		Name: "openai-responses", Prompt: PromptChat, Provider: "openai",
		Kinds:      KindTools | KindResponseFormat | KindImages,
		BodyPrompt: "input", BodyMaxTokens: "max_output_tokens", Path: "/responses",
		NoPerplexity: "the Responses API returns log-probabilities (include message.output_text.logprobs) of generated tokens only, and has no echo of the prompt's",
	},
	{Name: "sglang", Prompt: PromptText, Provider: "sglang", PerplexityDialect: "sglang", Kinds: KindsNone},
	{Name: "tgi", Prompt: PromptText, Provider: "tgi", PerplexityDialect: "tgi", Kinds: KindsNone},
	{
		Name: "triton", Prompt: PromptText, Provider: "triton", Kinds: KindsNone,
		NoPerplexity: "Triton's generate endpoint returns generated tokens' log-probabilities at most (vLLM backend); TensorRT-LLM's context logits are raw vocabulary-wide tensors, not per-token log-probabilities",
	},
}

const noOllamaPerplexity = "Ollama returns log-probabilities (logprobs, since 0.12.11) of generated tokens only, never of the prompt's"

// Facts returns the facts of flavor f, and false when f is no flavor of
// this version. A validated configuration's flavors all have facts.
func (f Flavor) Facts() (FlavorFacts, bool) {
	for _, e := range flavorTable {
		if e.Name == f {
			return e, true
		}
	}
	return FlavorFacts{}, false
}

// AllFlavors returns the facts of every flavor, sorted by name.
func AllFlavors() []FlavorFacts { return slices.Clone(flavorTable) }

// knownFlavor says whether f is one of Flavors.
func knownFlavor(f Flavor) bool {
	_, ok := f.Facts()
	return ok
}

// Views of flavorTable, in the shapes the configuration's error texts and
// older callers read. They are derived, never written.
var (
	// Flavors are the flavor names a configuration accepts, sorted. They
	// are the flavors the client package speaks (a test there checks that
	// the two lists are the same).
	Flavors = flavorNames(func(FlavorFacts) bool { return true })
	// PerplexityFlavors are the flavors whose servers can return the
	// log-probabilities of a prompt's tokens, which a perplexity needs,
	// sorted. The quality package has a request dialect for each.
	PerplexityFlavors = flavorNames(func(f FlavorFacts) bool { return f.PerplexityDialect != "" })
	// PerplexityUnsupported says, for every other flavor, why its server
	// cannot be scored. A target or module of these flavors with a
	// perplexity probe is refused at load, rather than failing at every
	// probe.
	PerplexityUnsupported = func() map[string]string {
		m := map[string]string{}
		for _, f := range flavorTable {
			if f.PerplexityDialect == "" {
				m[string(f.Name)] = f.NoPerplexity
			}
		}
		return m
	}()
)

// flavorsTaking are the flavors whose API takes kind k, sorted: the
// configuration's error texts name them.
func flavorsTaking(k Kinds) []Flavor {
	var out []Flavor
	for _, f := range flavorTable {
		if f.Takes(k) {
			out = append(out, f.Name)
		}
	}
	return out
}

func flavorNames(keep func(FlavorFacts) bool) []string {
	var names []string
	for _, f := range flavorTable {
		if keep(f) {
			names = append(names, string(f.Name))
		}
	}
	return names
}
