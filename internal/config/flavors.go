package config

import "slices"

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
}

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

// OpenAIFlavors are the flavors of which OpenAIAPI holds, sorted.
func OpenAIFlavors() []string { return flavorNames(FlavorFacts.OpenAIAPI) }

// flavorTable is every flavor this version speaks, one entry each, sorted
// by name. Adding a flavor is one entry here, with every fact, and its wire
// format in probe/client (CONTRIBUTING.md, "Adding an engine flavor").
var flavorTable = []FlavorFacts{
	{
		Name: "llamacpp", Prompt: PromptText, Provider: "llama_cpp",
		NoPerplexity: "llama.cpp's /completion returns probabilities (n_probs) of generated tokens only, and its /v1/completions has no echo of prompt log-probabilities",
	},
	{
		Name: "ollama-chat", Prompt: PromptChat, Provider: "ollama",
		NoPerplexity: noOllamaPerplexity,
	},
	{
		Name: "ollama-generate", Prompt: PromptText, Provider: "ollama",
		NoPerplexity: noOllamaPerplexity,
	},
	{Name: "openai-chat", Prompt: PromptChat, Provider: "openai", PerplexityDialect: "openai-echo"},
	{Name: "openai-completions", Prompt: PromptText, Provider: "openai", PerplexityDialect: "openai-echo"},
	{
		Name: "openai-responses", Prompt: PromptChat, Provider: "openai",
		NoPerplexity: "the Responses API returns log-probabilities (include message.output_text.logprobs) of generated tokens only, and has no echo of the prompt's",
	},
	{Name: "sglang", Prompt: PromptText, Provider: "sglang", PerplexityDialect: "sglang"},
	{Name: "tgi", Prompt: PromptText, Provider: "tgi", PerplexityDialect: "tgi"},
	{
		Name: "triton", Prompt: PromptText, Provider: "triton",
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

func flavorNames(keep func(FlavorFacts) bool) []string {
	var names []string
	for _, f := range flavorTable {
		if keep(f) {
			names = append(names, string(f.Name))
		}
	}
	return names
}
