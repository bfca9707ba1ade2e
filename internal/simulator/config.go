package simulator

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/alecthomas/kingpin/v2"
)

// Config holds every parameter of the simulated server. The zero value is not
// usable; start from DefaultConfig.
type Config struct {
	// Model is the served model name, as /v1/models lists it and as the
	// model_name label of /metrics carries it.
	Model string
	// MaxModelLen is the context length: prompt plus max_tokens of a request
	// may not exceed it. It must fit in the KV cache (KVBlocks*BlockSize), so
	// that any single request can always run.
	MaxModelLen int

	// TimeScale multiplies every step duration: 1 is real time, 0.1 runs ten
	// times faster, 0 is instant (steps run back to back without sleeping).
	TimeScale float64
	// DecodeStep is the fixed cost of one engine step (one forward pass).
	DecodeStep time.Duration
	// DecodePerSeq is the extra cost, per step, of each sequence that samples
	// a token in that step.
	DecodePerSeq time.Duration
	// PrefillTokensPerSecond is the prefill throughput: a step costs
	// prefill_tokens/PrefillTokensPerSecond on top of the rest.
	PrefillTokensPerSecond float64
	// MaxLoRA is vLLM's --max-loras: with it above 0 the simulator
	// exposes vllm:lora_requests_info as vLLM with --enable-lora does,
	// and a running batch holds requests of at most MaxLoRA distinct
	// adapters (a request of another adapter waits, as in vLLM's
	// scheduler).
	MaxLoRA int
	// LoRAAdapters are the names of the LoRA adapters served on top of
	// Model (vLLM's --lora-modules name=path): a request whose model is one
	// of them is served as the base model is, and /v1/models lists it with
	// Model as its parent. At most MaxLoRAAdapters, each a distinct name
	// other than Model of at most MaxAdapterNameBytes bytes, valid UTF-8
	// without white space, control characters or commas (the LoRA gauge
	// joins names with commas). They need MaxLoRA >= 1.
	LoRAAdapters []string
	// ImageTokens is how many prompt tokens the simulated vision encoder
	// makes of each image a chat request carries (an image_url content
	// part, an Ollama image): 576 by default, as LLaVA-1.5's CLIP
	// ViT-L/14 at 336 px gives (24 x 24 patches); 0 makes images add
	// nothing. At most MaxImageTokens.
	ImageTokens int
	// MaxNumSeqs is the largest number of running sequences (vLLM's
	// max_num_seqs).
	MaxNumSeqs int
	// MaxBatchedTokens is the token budget of one step (vLLM's
	// max_num_batched_tokens); long prompts are prefilled in chunks of it.
	MaxBatchedTokens int
	// KVBlocks is the KV-cache capacity, in blocks of BlockSize tokens.
	KVBlocks int
	// BlockSize is the number of tokens per KV block, and the granularity of
	// the prefix cache.
	BlockSize int

	// Seed makes generated text, EOS points, request ids and injected errors
	// reproducible.
	Seed uint64

	// Faults is the initial fault injection, changeable at run time through
	// /admin/faults.
	Faults Faults

	// Engine is the inference server the simulator impersonates (see
	// Engines): its native generation API, info and tokenizer endpoints,
	// and the names of its /metrics. Empty means EngineVLLM.
	Engine string

	// ReasoningTokens (0 = off) makes the simulated model reason first, as
	// a reasoning parser shows it: the first ReasoningTokens tokens of every
	// chat generation (/v1/chat/completions, and Ollama's /api/chat and
	// /api/generate) are reasoning, streamed apart from the answer, and the
	// tokens after them are the answer. max_tokens counts both, as in vLLM.
	ReasoningTokens int
	// ToolTurns (0 = off) plays an agent's model: a chat request that
	// offers tools is answered with a tool call only while its messages
	// hold fewer than ToolTurns rounds of tool results (runs of role
	// "tool" messages, one round however many calls it answers), then
	// with a text answer, so that an agent's job ends after ToolTurns+1 turns and
	// a test knows it. Off, every such request is answered with a call.
	ToolTurns int
	// ToolCalls is how many tool calls (1 to MaxToolCalls) an answer with
	// calls holds: parallel calls, as a model that fans work out to
	// several tools at once emits them, each naming one of the offered
	// tools in turn.
	ToolCalls int
	// ReasoningField is the delta (and message) field of reasoning text in
	// OpenAI chat chunks: ReasoningFieldReasoning (vLLM 0.11 and later) or
	// ReasoningFieldReasoningContent (older vLLM, SGLang, llama.cpp,
	// DeepSeek). Empty means ReasoningFieldReasoning. Ollama's native API
	// always uses "thinking".
	ReasoningField string

	// LoadDelay (0 = none) is the model load: for this long after New the
	// simulator is up but not ready, as a real server loading its weights
	// (load.go). It is wall-clock time, not multiplied by TimeScale. At
	// most MaxLoadDelay.
	LoadDelay time.Duration
	// LoadMode is what a client sees during the load: LoadRefuse (Serve
	// does not listen until loaded: connections are refused, as vLLM's
	// OpenAI server does) or LoadUnready (it listens at once and answers
	// 503, /health included, as llama.cpp's server does). Empty means the
	// engine's own (EngineLoadMode).
	LoadMode string

	// RequestMetrics answers each request with its own times in the
	// engine (request_metrics.go), as vLLM does with
	// --enable-per-request-metrics: vLLM's "metrics" object on the final
	// usage chunk, in a body and in a Responses answer; llama.cpp's
	// prompt_ms and predicted_ms when impersonating llama.cpp. Ollama
	// reports its durations whether asked or not.
	RequestMetrics bool
}

// Bounds of the LoRA adapters and images.
const (
	// MaxLoRAAdapters bounds Config.LoRAAdapters.
	MaxLoRAAdapters = 32
	// MaxAdapterNameBytes bounds an adapter's name, as the exporter bounds
	// a model name (config.MaxModelBytes).
	MaxAdapterNameBytes = 256
	// DefaultImageTokens is Config.ImageTokens by default: LLaVA-1.5's
	// 336 px CLIP encoder gives 24 x 24 patches.
	DefaultImageTokens = 576
	// MaxImageTokens bounds Config.ImageTokens.
	MaxImageTokens = 16384
	// MaxPromptImages is the most images one request may carry (vLLM's
	// --limit-mm-per-prompt); a request with more is a 400.
	MaxPromptImages = 64
)

// MaxToolCalls bounds Config.ToolCalls: a model's parallel calls are a
// few, and each answer token beyond the first of every call carries its
// arguments.
const MaxToolCalls = 16

// The OpenAI chat fields that carry reasoning text.
const (
	ReasoningFieldReasoning        = "reasoning"
	ReasoningFieldReasoningContent = "reasoning_content"
)

// DefaultConfig resembles a mid-size model on one 80 GB GPU: about 20 ms per
// decode step at batch 1, prefill at 10,000 tokens/s, 8192 blocks of 16
// tokens of KV cache, vLLM's default max_num_seqs.
func DefaultConfig() Config {
	return Config{
		Model:                  "sim-model",
		MaxModelLen:            32768,
		TimeScale:              1,
		DecodeStep:             20 * time.Millisecond,
		DecodePerSeq:           50 * time.Microsecond,
		PrefillTokensPerSecond: 10000,
		MaxNumSeqs:             256,
		MaxLoRA:                1,
		ImageTokens:            DefaultImageTokens,
		MaxBatchedTokens:       8192,
		KVBlocks:               8192,
		BlockSize:              16,
		Seed:                   1,
		Faults:                 NoFaults(),
		Engine:                 EngineVLLM,
		ToolCalls:              1,
	}
}

// Validate reports the first invalid parameter.
func (c Config) Validate() error {
	switch {
	case c.Model == "":
		return errors.New("model name is empty")
	case c.MaxModelLen < 2:
		return fmt.Errorf("max model length %d is below 2", c.MaxModelLen)
	case c.TimeScale < 0:
		return fmt.Errorf("time scale %v is negative", c.TimeScale)
	case c.DecodeStep < 0 || c.DecodePerSeq < 0:
		return errors.New("step costs must not be negative")
	case !(c.PrefillTokensPerSecond > 0):
		return fmt.Errorf("prefill tokens per second %v must be positive", c.PrefillTokensPerSecond)
	case c.MaxNumSeqs < 1:
		return fmt.Errorf("max num seqs %d is below 1", c.MaxNumSeqs)
	case c.MaxBatchedTokens < 1:
		return fmt.Errorf("max batched tokens %d is below 1", c.MaxBatchedTokens)
	case c.BlockSize < 1:
		return fmt.Errorf("block size %d is below 1", c.BlockSize)
	case c.KVBlocks < 1:
		return fmt.Errorf("kv blocks %d is below 1", c.KVBlocks)
	case c.Engine != "" && !validEngine(c.Engine):
		return fmt.Errorf("engine %q is not one of %v", c.Engine, Engines())
	case c.ReasoningTokens < 0:
		return fmt.Errorf("reasoning tokens %d is negative", c.ReasoningTokens)
	case c.ToolTurns < 0:
		return fmt.Errorf("tool turns %d is negative", c.ToolTurns)
	case c.ToolCalls < 1 || c.ToolCalls > MaxToolCalls:
		return fmt.Errorf("tool calls %d is outside 1..%d", c.ToolCalls, MaxToolCalls)
	case c.ReasoningField != "" && c.ReasoningField != ReasoningFieldReasoning && c.ReasoningField != ReasoningFieldReasoningContent:
		return fmt.Errorf("reasoning field %q is not %q or %q", c.ReasoningField, ReasoningFieldReasoning, ReasoningFieldReasoningContent)
	case c.LoadDelay < 0 || c.LoadDelay > MaxLoadDelay:
		return fmt.Errorf("load delay %v is outside 0..%v", c.LoadDelay, MaxLoadDelay)
	case c.LoadMode != "" && c.LoadMode != LoadRefuse && c.LoadMode != LoadUnready:
		return fmt.Errorf("load mode %q is not %q or %q", c.LoadMode, LoadRefuse, LoadUnready)
	case c.MaxLoRA < 0:
		return fmt.Errorf("max lora %d is negative", c.MaxLoRA)
	case c.ImageTokens < 0 || c.ImageTokens > MaxImageTokens:
		return fmt.Errorf("image tokens %d is outside 0..%d", c.ImageTokens, MaxImageTokens)
	case int64(c.KVBlocks)*int64(c.BlockSize) < int64(c.MaxModelLen):
		// A request of MaxModelLen tokens must fit alone, or it could be
		// preempted forever.
		return fmt.Errorf("kv cache of %d blocks x %d tokens cannot hold max model length %d",
			c.KVBlocks, c.BlockSize, c.MaxModelLen)
	}
	if err := c.validateAdapters(); err != nil {
		return err
	}
	return c.Faults.normalized().Validate()
}

// validateAdapters checks the LoRA adapters' names and count.
func (c Config) validateAdapters() error {
	if len(c.LoRAAdapters) == 0 {
		return nil
	}
	if len(c.LoRAAdapters) > MaxLoRAAdapters {
		return fmt.Errorf("%d lora adapters: at most %d", len(c.LoRAAdapters), MaxLoRAAdapters)
	}
	if c.MaxLoRA < 1 {
		return errors.New("lora adapters need max lora >= 1")
	}
	seen := make(map[string]bool, len(c.LoRAAdapters))
	for _, name := range c.LoRAAdapters {
		switch {
		case name == "":
			return errors.New("a lora adapter name is empty")
		case len(name) > MaxAdapterNameBytes:
			return fmt.Errorf("a lora adapter name of %d bytes: at most %d", len(name), MaxAdapterNameBytes)
		case !utf8.ValidString(name):
			return fmt.Errorf("lora adapter name %q is not valid UTF-8", name)
		case strings.IndexFunc(name, func(r rune) bool { return r == ',' || unicode.IsSpace(r) || unicode.IsControl(r) }) >= 0:
			return fmt.Errorf("lora adapter name %q has a comma, a space or a control character", name)
		case name == c.Model:
			return fmt.Errorf("lora adapter name %q is the base model's", name)
		case seen[name]:
			return fmt.Errorf("lora adapter %q is named twice", name)
		}
		seen[name] = true
	}
	return nil
}

// commaList is a repeatable flag whose every value is a comma-separated
// list: --sim.lora-adapters=a,b --sim.lora-adapters=c gives [a b c].
type commaList struct{ dst *[]string }

func (l commaList) Set(v string) error {
	for _, s := range strings.Split(v, ",") {
		if s = strings.TrimSpace(s); s != "" {
			*l.dst = append(*l.dst, s)
		}
	}
	return nil
}

func (l commaList) String() string   { return strings.Join(*l.dst, ",") }
func (commaList) IsCumulative() bool { return true }

// Faults is the fault injection. The zero value injects nothing. Except for
// Slowdown, which applies to every engine step that starts after a change, a
// change applies to requests that arrive after it. Durations are wall-clock
// time: they are not multiplied by Config.TimeScale.
type Faults struct {
	// Slowdown multiplies every step duration (1 or 0 = none). It has no
	// effect with TimeScale 0.
	Slowdown float64
	// ErrorRate is the probability (0..1) that a completion request is
	// answered at once with ErrorStatus and an OpenAI-style error body,
	// without reaching the engine.
	ErrorRate float64
	// ErrorStatus is 429, 500 or 503 (0 = 503).
	ErrorStatus int
	// StallBeforeFirstToken holds a request for this long, after its
	// response headers are written and before it joins the engine's queue.
	StallBeforeFirstToken time.Duration
	// StallMidStream pauses a sequence in the engine for this long once it
	// has generated StallAfterTokens tokens (it keeps its KV blocks and its
	// batch slot); generation then resumes at the normal pace.
	StallMidStream   time.Duration
	StallAfterTokens int
	// DisconnectAfterTokens (0 = off) closes the connection abruptly after
	// the N-th content chunk has been written: no [DONE], no terminating
	// chunk. A non-streaming response is replaced by the closed connection.
	DisconnectAfterTokens int
	// MalformedAfterTokens (0 = off) writes one event "data: {not json"
	// after the N-th content chunk; the stream then continues normally to
	// [DONE]. A non-streaming response body is replaced by "{not json".
	MalformedAfterTokens int
	// SlowHeaders waits this long after arrival before the response headers
	// are written (and before the request joins the engine's queue).
	SlowHeaders time.Duration
	// LogprobPenalty (0 = off) subtracts this many nats from the
	// log-probability of every token the simulator reports (logprobs.go):
	// a degraded model, whose perplexity over any text is exp(penalty)
	// times the healthy one.
	LogprobPenalty float64
	// PadContentBytes (0 = off) appends this many bytes of text ("x") to
	// every streamed content token's text: a server whose answers are far
	// larger than their token counts, which the client's bounds on kept
	// text must hold against. Streaming responses of every flavor; at most
	// MaxPadContentBytes.
	PadContentBytes int
	// InvalidStructured (0..1, 0 = off) is the fraction of structured
	// answers (a response_format's, a tool call's arguments) whose JSON is
	// cut by its last byte, so that it no longer parses. Which answers is
	// a hash of the seed and the prompt: a rerun breaks the same ones.
	InvalidStructured float64
}

// MaxPadContentBytes bounds PadContentBytes: past the client's 1 MiB line
// bound an event is refused whole, which the padding need not reach far
// beyond.
const MaxPadContentBytes = 4 << 20

// NoFaults is the fault injection that injects nothing, with its neutral
// values spelled out (Slowdown 1, ErrorStatus 503).
func NoFaults() Faults { return Faults{Slowdown: 1, ErrorStatus: 503} }

// normalized replaces the zero values that mean "default" by the default.
func (f Faults) normalized() Faults {
	if f.Slowdown == 0 {
		f.Slowdown = 1
	}
	if f.ErrorStatus == 0 {
		f.ErrorStatus = 503
	}
	return f
}

// Validate reports the first invalid fault setting.
func (f Faults) Validate() error {
	switch {
	case !(f.Slowdown > 0):
		return fmt.Errorf("slowdown %v must be positive", f.Slowdown)
	case !(f.ErrorRate >= 0 && f.ErrorRate <= 1):
		return fmt.Errorf("error_rate %v is outside 0..1", f.ErrorRate)
	case f.ErrorStatus != 429 && f.ErrorStatus != 500 && f.ErrorStatus != 503:
		return fmt.Errorf("error_status %d is not 429, 500 or 503", f.ErrorStatus)
	case f.StallBeforeFirstToken < 0 || f.StallMidStream < 0 || f.SlowHeaders < 0:
		return errors.New("fault durations must not be negative")
	case f.StallAfterTokens < 0 || f.DisconnectAfterTokens < 0 || f.MalformedAfterTokens < 0:
		return errors.New("fault token counts must not be negative")
	case f.PadContentBytes < 0 || f.PadContentBytes > MaxPadContentBytes:
		return fmt.Errorf("pad_content_bytes %d is outside 0..%d", f.PadContentBytes, MaxPadContentBytes)
	case f.StallMidStream > 0 && f.StallAfterTokens < 1:
		return errors.New("stall_mid_stream needs stall_after_tokens >= 1")
	case !(f.InvalidStructured >= 0 && f.InvalidStructured <= 1):
		return fmt.Errorf("invalid_structured %v is outside 0..1", f.InvalidStructured)
	case !(f.LogprobPenalty >= 0 && f.LogprobPenalty <= MaxLogprobPenalty):
		return fmt.Errorf("logprob_penalty %v is outside 0..%d nats", f.LogprobPenalty, MaxLogprobPenalty)
	}
	return nil
}

// faultsJSON is the wire form of Faults: durations are Go duration strings.
type faultsJSON struct {
	Slowdown              float64 `json:"slowdown"`
	ErrorRate             float64 `json:"error_rate"`
	ErrorStatus           int     `json:"error_status"`
	StallBeforeFirstToken string  `json:"stall_before_first_token"`
	StallMidStream        string  `json:"stall_mid_stream"`
	StallAfterTokens      int     `json:"stall_after_tokens"`
	DisconnectAfterTokens int     `json:"disconnect_after_tokens"`
	MalformedAfterTokens  int     `json:"malformed_after_tokens"`
	SlowHeaders           string  `json:"slow_headers"`
	LogprobPenalty        float64 `json:"logprob_penalty"`
	PadContentBytes       int     `json:"pad_content_bytes"`
	InvalidStructured     float64 `json:"invalid_structured"`
}

// MarshalJSON writes durations as Go duration strings ("1.5s").
func (f Faults) MarshalJSON() ([]byte, error) {
	return json.Marshal(faultsJSON{
		Slowdown:              f.Slowdown,
		ErrorRate:             f.ErrorRate,
		ErrorStatus:           f.ErrorStatus,
		StallBeforeFirstToken: f.StallBeforeFirstToken.String(),
		StallMidStream:        f.StallMidStream.String(),
		StallAfterTokens:      f.StallAfterTokens,
		DisconnectAfterTokens: f.DisconnectAfterTokens,
		MalformedAfterTokens:  f.MalformedAfterTokens,
		SlowHeaders:           f.SlowHeaders.String(),
		LogprobPenalty:        f.LogprobPenalty,
		PadContentBytes:       f.PadContentBytes,
		InvalidStructured:     f.InvalidStructured,
	})
}

// UnmarshalJSON is strict: unknown fields are an error. Fields left out take
// their "off" values (NoFaults). It does not validate ranges; call Validate.
func (f *Faults) UnmarshalJSON(data []byte) error {
	off := NoFaults()
	w := faultsJSON{Slowdown: off.Slowdown, ErrorStatus: off.ErrorStatus}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&w); err != nil {
		return err
	}
	out := Faults{
		Slowdown:              w.Slowdown,
		ErrorRate:             w.ErrorRate,
		ErrorStatus:           w.ErrorStatus,
		StallAfterTokens:      w.StallAfterTokens,
		DisconnectAfterTokens: w.DisconnectAfterTokens,
		MalformedAfterTokens:  w.MalformedAfterTokens,
		LogprobPenalty:        w.LogprobPenalty,
		PadContentBytes:       w.PadContentBytes,
		InvalidStructured:     w.InvalidStructured,
	}
	for _, d := range []struct {
		name string
		s    string
		dst  *time.Duration
	}{
		{"stall_before_first_token", w.StallBeforeFirstToken, &out.StallBeforeFirstToken},
		{"stall_mid_stream", w.StallMidStream, &out.StallMidStream},
		{"slow_headers", w.SlowHeaders, &out.SlowHeaders},
	} {
		if d.s == "" {
			continue
		}
		v, err := time.ParseDuration(d.s)
		if err != nil {
			return fmt.Errorf("%s: %w", d.name, err)
		}
		*d.dst = v
	}
	*f = out
	return nil
}

// FlagAdder is what AddFlags registers flags on: a *kingpin.CmdClause or a
// *kingpin.Application.
type FlagAdder interface {
	Flag(name, help string) *kingpin.FlagClause
}

// AddFlags registers the --sim.* and --fault.* flags on cmd and returns the
// Config they fill when the command line is parsed. Defaults are those of
// DefaultConfig.
func AddFlags(cmd FlagAdder) *Config {
	d := DefaultConfig()
	c := &Config{}
	ff := func(v float64) string { return strconv.FormatFloat(v, 'g', -1, 64) }
	it := strconv.Itoa

	cmd.Flag("sim.model", "Served model name.").Default(d.Model).StringVar(&c.Model)
	cmd.Flag("sim.max-lora", "vLLM's --max-loras: distinct LoRA adapters one batch holds, exposed in vllm:lora_requests_info (0: no LoRA gauge).").Default(strconv.Itoa(d.MaxLoRA)).IntVar(&c.MaxLoRA)
	cmd.Flag("sim.lora-adapters", "LoRA adapters served beside --sim.model (vLLM's --lora-modules names): comma-separated, repeatable; at most 32, needing --sim.max-lora >= 1.").PlaceHolder("NAME,...").SetValue(commaList{&c.LoRAAdapters})
	cmd.Flag("sim.image-tokens", "Prompt tokens the simulated vision encoder makes of each image of a chat request (576: LLaVA-1.5's 336 px CLIP; 0: images add nothing).").Default(it(d.ImageTokens)).IntVar(&c.ImageTokens)
	cmd.Flag("sim.max-model-len", "Context length in tokens (prompt + max_tokens).").Default(it(d.MaxModelLen)).IntVar(&c.MaxModelLen)
	cmd.Flag("sim.time-scale", "Multiplier on every step duration: 1 = real time, 0.1 = ten times faster, 0 = instant.").Default(ff(d.TimeScale)).Float64Var(&c.TimeScale)
	cmd.Flag("sim.decode-step", "Fixed cost of one engine step (forward pass).").Default(d.DecodeStep.String()).DurationVar(&c.DecodeStep)
	cmd.Flag("sim.decode-per-seq", "Extra step cost per sequence that samples a token in the step.").Default(d.DecodePerSeq.String()).DurationVar(&c.DecodePerSeq)
	cmd.Flag("sim.prefill-tokens-per-second", "Prefill throughput in tokens per second.").Default(ff(d.PrefillTokensPerSecond)).Float64Var(&c.PrefillTokensPerSecond)
	cmd.Flag("sim.max-num-seqs", "Maximum number of running sequences.").Default(it(d.MaxNumSeqs)).IntVar(&c.MaxNumSeqs)
	cmd.Flag("sim.max-batched-tokens", "Token budget of one engine step (chunked prefill).").Default(it(d.MaxBatchedTokens)).IntVar(&c.MaxBatchedTokens)
	cmd.Flag("sim.kv-blocks", "KV cache capacity in blocks.").Default(it(d.KVBlocks)).IntVar(&c.KVBlocks)
	cmd.Flag("sim.block-size", "Tokens per KV block; the prefix cache's granularity.").Default(it(d.BlockSize)).IntVar(&c.BlockSize)
	cmd.Flag("sim.engine", "Inference server to impersonate: "+strings.Join(Engines(), ", ")+" (native API, info endpoints, metric names).").Default(d.Engine).EnumVar(&c.Engine, Engines()...)
	cmd.Flag("sim.seed", "Seed for generated text, EOS points and injected errors.").Default(strconv.FormatUint(d.Seed, 10)).Uint64Var(&c.Seed)
	cmd.Flag("sim.tool-turns", "Agent model: a chat request offering tools is answered with a tool call while its messages hold fewer than N rounds of tool results (runs of tool messages), then with text (0 = always a call).").Default(it(d.ToolTurns)).IntVar(&c.ToolTurns)
	cmd.Flag("sim.tool-calls", "Agent model: tool calls in each answer that calls tools (parallel calls, 1 to "+it(MaxToolCalls)+"), naming the offered tools in turn.").Default(it(d.ToolCalls)).IntVar(&c.ToolCalls)
	cmd.Flag("sim.reasoning-tokens", "Reasoning model: each chat generation streams N reasoning tokens, then its answer (0 = off; max_tokens counts both).").Default(it(d.ReasoningTokens)).IntVar(&c.ReasoningTokens)
	// No default value: empty means "reasoning", so that the parsed flags
	// equal DefaultConfig. The placeholder and the enum stand in for it in
	// --help (else kingpin shows SIM.REASONING-FIELD) and refuse a typo at
	// parse time.
	cmd.Flag("sim.reasoning-field", "OpenAI chat delta field of reasoning tokens: reasoning (vLLM >= 0.11; the default) or reasoning_content. Ollama uses thinking.").PlaceHolder(ReasoningFieldReasoning).EnumVar(&c.ReasoningField, ReasoningFieldReasoning, ReasoningFieldReasoningContent)
	cmd.Flag("sim.request-metrics", "Answer each request with its true queue, prefill and decode times in the engine's format (vLLM's per-request metrics; llama.cpp's timings).").Default(strconv.FormatBool(d.RequestMetrics)).BoolVar(&c.RequestMetrics)
	cmd.Flag("sim.load-delay", "Model load time: for this long after start the server is up but not ready (wall clock, not scaled; 0 = none).").Default(d.LoadDelay.String()).DurationVar(&c.LoadDelay)
	// No default value: empty means the engine's own mode; the placeholder
	// names the two it may be.
	cmd.Flag("sim.load-mode", "During --sim.load-delay: refuse (do not listen until loaded, as vLLM) or unready (listen, answer 503 and /health 503, as llama.cpp). Default: the engine's own.").PlaceHolder(LoadRefuse+"|"+LoadUnready).EnumVar(&c.LoadMode, LoadRefuse, LoadUnready)

	f := &c.Faults
	cmd.Flag("fault.slowdown", "Factor on every engine step duration (1 = none).").Default(ff(d.Faults.Slowdown)).Float64Var(&f.Slowdown)
	cmd.Flag("fault.error-rate", "Fraction (0..1) of completion requests answered with --fault.error-status.").Default(ff(d.Faults.ErrorRate)).Float64Var(&f.ErrorRate)
	cmd.Flag("fault.error-status", "HTTP status of injected errors: 429, 500 or 503.").Default(it(d.Faults.ErrorStatus)).IntVar(&f.ErrorStatus)
	cmd.Flag("fault.stall-before-first-token", "Hold each request this long after its headers, before it is queued.").Default(d.Faults.StallBeforeFirstToken.String()).DurationVar(&f.StallBeforeFirstToken)
	cmd.Flag("fault.stall-mid-stream", "Pause each sequence this long after --fault.stall-after-tokens tokens.").Default(d.Faults.StallMidStream.String()).DurationVar(&f.StallMidStream)
	cmd.Flag("fault.stall-after-tokens", "Token count after which --fault.stall-mid-stream pauses a sequence.").Default(it(d.Faults.StallAfterTokens)).IntVar(&f.StallAfterTokens)
	cmd.Flag("fault.disconnect-after-tokens", "Close the connection abruptly after N content chunks (0 = off).").Default(it(d.Faults.DisconnectAfterTokens)).IntVar(&f.DisconnectAfterTokens)
	cmd.Flag("fault.malformed-after-tokens", "Emit one malformed event after N content chunks, then continue (0 = off).").Default(it(d.Faults.MalformedAfterTokens)).IntVar(&f.MalformedAfterTokens)
	cmd.Flag("fault.slow-headers", "Wait this long before writing response headers.").Default(d.Faults.SlowHeaders.String()).DurationVar(&f.SlowHeaders)
	cmd.Flag("fault.logprob-penalty", "Subtract this many nats from every reported log-probability: perplexity rises exp(penalty) times (0 = off).").Default(ff(d.Faults.LogprobPenalty)).Float64Var(&f.LogprobPenalty)
	cmd.Flag("fault.invalid-structured", "Fraction (0..1) of structured answers and tool-call arguments whose JSON is cut by its last byte (0 = off).").Default(ff(d.Faults.InvalidStructured)).Float64Var(&f.InvalidStructured)
	cmd.Flag("fault.pad-content-bytes", "Append this many bytes of text to every streamed content token: answers far larger than their tokens (0 = off).").Default(it(d.Faults.PadContentBytes)).IntVar(&f.PadContentBytes)
	return c
}
