package client

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"sort"

	"github.com/infer-exporter/infer_exporter/internal/config"
	"github.com/infer-exporter/infer_exporter/probe/observation"
)

// Flavor is one inference HTTP API: how to ask for a streamed generation and
// how to read the answer. A flavor knows the wire format only; the Client owns
// the clock, the outcome and the observation, so that every flavor is measured
// the same way. Its facts (its name, whether it is a chat API) are its entry
// in config's flavor table, which an implementation embeds (factsOf). Adding
// a flavor means adding that entry, an implementation in a file of its own,
// and its line in flavors (TestConfigFlavors checks the table and flavors
// hold the same names).
type Flavor interface {
	// Name is the flavor's configuration name, such as "openai-chat".
	Name() string
	// Chat says the flavor wraps the prompt in a chat message, so that the
	// server applies the model's chat template to it.
	Chat() bool
	// NewRequest builds the HTTP request for r against t. It must ask the
	// server to stream, and must not log or wrap t.BearerToken into errors.
	NewRequest(ctx context.Context, t *Target, r *Request) (*http.Request, error)
	// NewDecoder returns a Decoder for one 2xx response. body is bounded by
	// nothing but the request's context; the decoder must bound its own
	// memory by maxLineBytes.
	NewDecoder(body io.Reader, header http.Header, maxLineBytes int) Decoder
}

// Decoder turns a response body into frames (an SSE event, an NDJSON line, a
// whole JSON body). The Client calls Next, reads the clock once, then calls
// Decode: the read instant of a frame is thus taken after the frame's last
// byte arrived and before any JSON decoding, and costs one clock read.
type Decoder interface {
	// Next blocks until the next frame is complete. It returns io.EOF when
	// the body ended cleanly at a frame boundary, a *ProtocolError when the
	// body breaks the protocol's framing (an over-long line), and the
	// underlying read error otherwise (io.ErrUnexpectedEOF for a body cut in
	// the middle of a frame).
	Next() error
	// Decode interprets the frame that Next just completed into c, which
	// the caller has reset. It returns a *ProtocolError for a malformed frame
	// or an error the server reported inside the stream.
	Decode(c *Chunk) error
}

// Chunk is what one frame says. Its byte slices are valid only until the
// next call to Next.
type Chunk struct {
	// Content is generated answer text carried by this frame.
	Content []byte
	// Reasoning is generated reasoning ("thinking") text carried by this
	// frame. Reasoning tokens are output tokens: they count for the first
	// token and for token times, but are not part of the answer text.
	Reasoning []byte
	// ToolCall is tool-call text carried by this frame: the name and the
	// arguments of the calls the model generated (OpenAI tool_calls
	// deltas, Ollama message.tool_calls; in the Responses API a call's
	// name opens it in response.output_item.added, its arguments follow
	// in deltas). A tool call is the model's
	// answer: it counts for the first token, the first answer and token
	// times, but it is not answer text.
	ToolCall []byte
	// Calls are the same tool-call text told apart by call: each part
	// belongs to one call, named by its index or id, so that calls whose
	// fragments alternate in a stream (parallel calls) are put together
	// each from its own (callSet). Their names and arguments are, in
	// order, the bytes of ToolCall. The slice is the decoder's.
	Calls []CallPart
	// HasUsage says the frame carried a token count; PromptTokens and
	// CompletionTokens are then the server's cumulative counts.
	HasUsage         bool
	PromptTokens     int
	CompletionTokens int
	// ReasoningTokens is the server's cumulative count of reasoning tokens
	// among CompletionTokens (OpenAI usage
	// completion_tokens_details.reasoning_tokens); 0 when the frame has
	// none. It is read whether or not HasUsage is set.
	ReasoningTokens int
	// CachedTokens is the server's count of the prompt tokens its prefix
	// cache served (usage prompt_tokens_details.cached_tokens, the
	// Responses API's input_tokens_details, SGLang's meta_info); 0 when
	// the frame has none. It is read whether or not HasUsage is set.
	CachedTokens int
	// Server is the engine's own timings of the request that the frame
	// carried (timings.go); zero when it carried none. A later frame's
	// figures replace an earlier one's.
	Server observation.ServerTimings
	// Done says the frame is the protocol's end marker (for OpenAI SSE,
	// "data: [DONE]"; for a non-streamed JSON body, the body itself).
	Done bool
}

// CallPart is one frame's part of a tool call: a fragment of a streamed
// call, or a whole call.
type CallPart struct {
	// Index is the call's place in the answer (chat's
	// tool_calls[].index, the Responses API's output_index); -1 when the
	// frame does not say.
	Index int
	// ID names the call (chat's tool_calls[].id, sent with a call's first
	// fragment; the Responses API's item id, sent with each); empty when
	// the frame does not say.
	ID []byte
	// Name and Arguments are the part's text of the call's name and of
	// its arguments.
	Name, Arguments []byte
	// Whole says the part is a call of its own, never a fragment of
	// another: Ollama's calls, the items of a Responses body.
	Whole bool
}

// Reset clears c for the next frame, keeping nothing that aliases a decoder.
func (c *Chunk) Reset() { *c = Chunk{} }

// ProtocolError is a response body that breaks its protocol: a malformed
// frame, an over-long line, or an error object the server sent inside the
// stream. The Client reports it as the stream_error outcome.
type ProtocolError struct {
	Msg string
	Err error // the underlying cause, if any
}

func (e *ProtocolError) Error() string {
	if e.Err != nil {
		return "stream error: " + e.Msg + ": " + e.Err.Error()
	}
	return "stream error: " + e.Msg
}

func (e *ProtocolError) Unwrap() error { return e.Err }

// facts is a flavor's entry in config's flavor table. Every implementation
// embeds the entry of its name, so that its Name and Chat, and the body it
// builds by Chat, are the table's and cannot disagree with what the
// configuration, the quality probe, prompt calibration and the OTLP push
// read there.
type facts struct{ f config.FlavorFacts }

func (x facts) Name() string { return string(x.f.Name) }

func (x facts) Chat() bool { return x.f.Chat() }

// takes says whether the flavor's API takes request kind k.
func (x facts) takes(k config.Kinds) bool { return x.f.Takes(k) }

// factsOf is the table's entry for name. A name without one is a
// programming error, which stops the package's initialisation: no flavor
// can be spoken without its facts.
func factsOf(name config.Flavor) facts {
	f, ok := name.Facts()
	if !ok {
		panic("client: flavor " + string(name) + " has no entry in config's flavor table")
	}
	return facts{f}
}

// The flavors this version speaks.
var (
	// OpenAIChat is POST /v1/chat/completions with "stream": true.
	OpenAIChat Flavor = openAIFlavor{facts: factsOf("openai-chat"), path: "/chat/completions"}
	// OpenAICompletions is POST /v1/completions with "stream": true.
	OpenAICompletions Flavor = openAIFlavor{facts: factsOf("openai-completions"), path: "/completions"}
)

var flavors = map[string]Flavor{
	OpenAIChat.Name():        OpenAIChat,
	OpenAICompletions.Name(): OpenAICompletions,
	OpenAIResponses.Name():   OpenAIResponses,
	TGI.Name():               TGI,
	LlamaCpp.Name():          LlamaCpp,
	OllamaGenerate.Name():    OllamaGenerate,
	OllamaChat.Name():        OllamaChat,
	Triton.Name():            Triton,
	SGLang.Name():            SGLang,
}

// ParseFlavor returns the flavor with the given configuration name.
func ParseFlavor(name string) (Flavor, error) {
	if f, ok := flavors[name]; ok {
		return f, nil
	}
	return nil, fmt.Errorf("unknown API flavor %q (known: %v)", name, FlavorNames())
}

// FlavorNames lists the known flavor names, sorted.
func FlavorNames() []string {
	names := make([]string, 0, len(flavors))
	for n := range flavors {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}
