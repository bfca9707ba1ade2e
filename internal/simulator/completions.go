package simulator

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/infer-exporter/infer_exporter/internal/hashmix"
	"github.com/infer-exporter/infer_exporter/internal/textcut"
)

// defaultMaxTokens is max_tokens when a request leaves it out (capped so that
// prompt + max_tokens fits the context).
const defaultMaxTokens = 256

// chatMessageJSON is one message as the API receives it.
type chatMessageJSON struct {
	Role    string          `json:"role"`
	Content json.RawMessage `json:"content"`
}

// generateRequest holds the fields of a completion or chat completion request
// that the simulator honours. Unknown fields are ignored.
type generateRequest struct {
	Model               string            `json:"model"`
	Prompt              json.RawMessage   `json:"prompt"`
	Messages            []chatMessageJSON `json:"messages"`
	MaxTokens           *int              `json:"max_tokens"`
	MaxCompletionTokens *int              `json:"max_completion_tokens"`
	MinTokens           *int              `json:"min_tokens"`
	IgnoreEOS           bool              `json:"ignore_eos"`
	N                   *int              `json:"n"`
	Stream              bool              `json:"stream"`
	StreamOptions       *struct {
		IncludeUsage bool `json:"include_usage"`
	} `json:"stream_options"`
	// Echo, Logprobs and PromptLogprobs are the completions API's
	// log-probability fields (logprobs.go); chat's boolean logprobs is
	// ignored, which is why Logprobs is raw.
	Echo           bool            `json:"echo"`
	Logprobs       json.RawMessage `json:"logprobs"`
	PromptLogprobs *int            `json:"prompt_logprobs"`
	// Tools are the functions a chat request offers, called in turn (see
	// genParams.calls).
	Tools []struct {
		Function toolFunction `json:"function"`
	} `json:"tools"`
	// ToolChoice "none" asks for a text answer despite the tools; a
	// named function ({"type":"function","function":{"name":...}}) is the
	// one called.
	ToolChoice json.RawMessage `json:"tool_choice"`
	// ResponseFormat asks for a JSON answer (structured.go).
	ResponseFormat *struct {
		Type       string `json:"type"`
		JSONSchema struct {
			Schema json.RawMessage `json:"schema"`
		} `json:"json_schema"`
	} `json:"response_format"`
}

// toolFunction is a function that a request offers as a tool: its name and
// its parameters' JSON Schema, as chat and the Responses API both give them.
type toolFunction struct {
	Name       string          `json:"name"`
	Parameters json.RawMessage `json:"parameters"`
}

// structuredRequest sets p's answer document from the request's tools or
// response format (structured.go): the called function's arguments, or
// the structured answer. Called once the output length is drawn.
func (p *genParams) structuredRequest(req *generateRequest) {
	if p.calls != nil {
		for j := range p.calls {
			params := req.Tools[p.calls[j].tool].Function.Parameters
			if len(bytes.TrimSpace(params)) == 0 {
				p.calls[j].doc = []byte("{}")
			} else {
				p.calls[j].doc = structuredDoc(params)
			}
		}
		return
	}
	if rf := req.ResponseFormat; rf != nil {
		switch rf.Type {
		case "json_schema":
			p.doc = structuredDoc(rf.JSONSchema.Schema)
		case "json_object":
			p.doc = structuredDoc(nil)
		}
	}
}

// answerPieces are a response format's document's pieces for its tokens,
// those after the reasoning, cut by the InvalidStructured fault; nil
// without a document.
func (p *genParams) answerPieces(f *Faults) [][]byte {
	if p.doc == nil {
		return nil
	}
	return docPieces(breakDoc(p.doc, p.key, f.InvalidStructured), p.target-p.reasoningOf(p.target))
}

// toolCall is one call of a chat answer that calls tools.
type toolCall struct {
	// name is the JSON string (quoted) of the function it calls.
	name []byte
	// tool is that function's index among the request's tools.
	tool int
	// doc is its arguments: a JSON document the function's parameters
	// accept (structured.go).
	doc []byte
}

// callSpan is where one call lies among an answer's tokens, and what they
// carry.
type callSpan struct {
	// start is the call's first token, which names the function.
	start int
	// pieces are its arguments' pieces, one per later token.
	pieces [][]byte
	// inline is the whole arguments of a call with no later token, in
	// its first (its name's) delta.
	inline []byte
}

// callSpans lays the calls over the answer's tokens, those after the
// reasoning, one after the other as a server streams parallel calls: the
// tokens are shared as evenly as they go, the first calls taking one more,
// and an answer of fewer tokens than calls holds one call a token. Each
// call's arguments are cut by the InvalidStructured fault on their own. Nil
// for a text answer, or one with no answer token.
func (p *genParams) callSpans(f *Faults) []callSpan {
	start := p.reasoningOf(p.target)
	answer := p.target - start
	n := min(len(p.calls), answer)
	if n <= 0 {
		return nil
	}
	out := make([]callSpan, n)
	for j := range out {
		size := answer / n
		if j < answer%n {
			size++
		}
		doc := breakDoc(p.calls[j].doc, p.key+uint64(j), f.InvalidStructured)
		out[j].start = start
		if size > 1 {
			out[j].pieces = docPieces(doc, size-1)
		} else if one := docPieces(doc, 1); len(one) == 1 {
			out[j].inline = one[0]
		}
		start += size
	}
	return out
}

// toolCalls are the calls of an answer to req, which offers tools:
// Config.ToolCalls of them, naming the offered tools in turn from the
// first, or all the one a named tool_choice names.
func (s *Simulator) toolCalls(req *generateRequest) []toolCall {
	named := -1
	var choice struct {
		Function struct {
			Name string `json:"name"`
		} `json:"function"`
	}
	if json.Unmarshal(req.ToolChoice, &choice) == nil && choice.Function.Name != "" {
		for i, t := range req.Tools {
			if t.Function.Name == choice.Function.Name {
				named = i
			}
		}
	}
	calls := make([]toolCall, max(s.cfg.ToolCalls, 1))
	for j := range calls {
		tool := j % len(req.Tools)
		if named >= 0 {
			tool = named
		}
		name := req.Tools[tool].Function.Name
		if name == "" {
			name = "tool"
		}
		calls[j].name, _ = json.Marshal(name)
		calls[j].tool = tool
	}
	return calls
}

// callsTool says whether a chat request offering tools is answered with a
// call: always, unless Config.ToolTurns is set and msgs hold that many
// rounds of tool results already. A round is a run of tool messages, the
// results of one answer's calls, however many it made.
func (s *Simulator) callsTool(msgs []chatMessageJSON) bool {
	if s.cfg.ToolTurns == 0 {
		return true
	}
	rounds := 0
	for i := range msgs {
		if msgs[i].Role == "tool" && (i == 0 || msgs[i-1].Role != "tool") {
			rounds++
		}
	}
	return rounds < s.cfg.ToolTurns
}

// maxLogprobsParam is the largest logprobs and prompt_logprobs a request may
// ask for, vLLM's default max_logprobs.
const maxLogprobsParam = 20

// chatMessages reduces API messages to text and images: a string content
// as is, an array content as its text parts joined by a space and its
// image parts ({"type":"image_url","image_url":{"url":...}}, or the url as
// a string) as images, a null content as nothing. images[i] holds the keys
// (imageKey) of message i's images; images is nil when there are none.
// Other parts are ignored.
func chatMessages(in []chatMessageJSON) (msgs []ChatMessage, images [][]uint64, err error) {
	out := make([]ChatMessage, len(in))
	for i, m := range in {
		out[i].Role = m.Role
		c := bytes.TrimSpace(m.Content)
		switch {
		case len(c) == 0 || string(c) == "null":
		case c[0] == '"':
			if err := json.Unmarshal(c, &out[i].Content); err != nil {
				return nil, nil, fmt.Errorf("messages[%d].content: %w", i, err)
			}
		case c[0] == '[':
			var parts []struct {
				Type     string          `json:"type"`
				Text     string          `json:"text"`
				ImageURL json.RawMessage `json:"image_url"`
			}
			if err := json.Unmarshal(c, &parts); err != nil {
				return nil, nil, fmt.Errorf("messages[%d].content: %w", i, err)
			}
			texts := make([]string, 0, len(parts))
			for j, p := range parts {
				switch p.Type {
				case "text":
					texts = append(texts, p.Text)
				case "image_url":
					url, err := imagePartURL(p.ImageURL)
					if err != nil {
						return nil, nil, fmt.Errorf("messages[%d].content[%d].image_url: %w", i, j, err)
					}
					if images == nil {
						images = make([][]uint64, len(in))
					}
					images[i] = append(images[i], imageKey(url))
				}
			}
			out[i].Content = strings.Join(texts, " ")
		default:
			return nil, nil, fmt.Errorf("messages[%d].content must be a string, an array of parts or null", i)
		}
	}
	return out, images, nil
}

// imagePartURL reads an image_url part's image: {"url": "..."}, as OpenAI
// sends it, or the URL as a string, which vLLM also takes.
func imagePartURL(raw json.RawMessage) (string, error) {
	raw = bytes.TrimSpace(raw)
	var url string
	if len(raw) > 0 && raw[0] == '"' {
		if err := json.Unmarshal(raw, &url); err != nil {
			return "", err
		}
	} else {
		var obj struct {
			URL string `json:"url"`
		}
		if len(raw) > 0 && raw[0] == '{' {
			if err := json.Unmarshal(raw, &obj); err != nil {
				return "", err
			}
		}
		url = obj.URL
	}
	if url == "" {
		return "", errors.New("an image part needs a url")
	}
	return url, nil
}

// countImages is the number of images of a chat prompt.
func countImages(images [][]uint64) int {
	n := 0
	for _, im := range images {
		n += len(im)
	}
	return n
}

// contextError is vLLM's answer to a prompt of promptLen tokens that does
// not fit a context of maxLen.
func contextError(maxLen, promptLen int) error {
	return fmt.Errorf(
		"This model's maximum context length is %d tokens. However, your request has %d input tokens. Please reduce the length of the input messages.",
		maxLen, promptLen)
}

// checkImages refuses a request of more than MaxPromptImages images, as
// vLLM refuses more than --limit-mm-per-prompt, and one whose images alone
// cannot fit the context (before their tokens are made).
func (s *Simulator) checkImages(n, textTokens int) error {
	if n > MaxPromptImages {
		return fmt.Errorf("At most %d image(s) may be provided in one prompt.", MaxPromptImages)
	}
	if promptLen := textTokens + n*s.cfg.ImageTokens; n > 0 && promptLen >= s.cfg.MaxModelLen {
		return contextError(s.cfg.MaxModelLen, promptLen)
	}
	return nil
}

// chatTokenIDs tokenizes a chat prompt with its images, each
// Config.ImageTokens tokens (tokenizer.go).
func (s *Simulator) chatTokenIDs(msgs []ChatMessage, images [][]uint64, addGenerationPrompt bool) ([]int, error) {
	if images == nil {
		return AppendChatTokenIDs(nil, msgs, addGenerationPrompt), nil
	}
	if err := s.checkImages(countImages(images), CountChatTokens(msgs, addGenerationPrompt)); err != nil {
		return nil, err
	}
	return appendChatImageTokenIDs(nil, msgs, images, s.cfg.ImageTokens, addGenerationPrompt), nil
}

// promptTokenIDs tokenizes a completions prompt: a string, an array of token
// ids, or an array holding one string.
func promptTokenIDs(raw json.RawMessage) ([]int, error) {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || string(raw) == "null" {
		return nil, errors.New("prompt is required")
	}
	var text string
	if raw[0] == '"' {
		if err := json.Unmarshal(raw, &text); err != nil {
			return nil, fmt.Errorf("prompt: %w", err)
		}
		return AppendTokenIDs(nil, text), nil
	}
	var ids []int
	if err := json.Unmarshal(raw, &ids); err == nil {
		for _, id := range ids {
			if id < 0 || id >= VocabSize {
				return nil, fmt.Errorf("prompt token id %d is outside the vocabulary [0, %d)", id, VocabSize)
			}
		}
		return ids, nil
	}
	var texts []string
	if err := json.Unmarshal(raw, &texts); err == nil && len(texts) == 1 {
		return AppendTokenIDs(nil, texts[0]), nil
	}
	return nil, errors.New("prompt must be a string, an array of token ids or an array of one string (batched prompts are not supported)")
}

// genParams is a validated generation request.
type genParams struct {
	// lora is the request's model: 0 the base model, i+1 LoRA adapter i.
	lora         int
	chat         bool
	stream       bool
	includeUsage bool
	ids          []int
	maxTokens    int
	target       int
	reason       string
	key          uint64
	// reasoning is how many leading tokens of the generation are
	// reasoning (Config.ReasoningTokens for a chat generation, else 0); a
	// generation shorter than that is reasoning only.
	reasoning int
	// calls, for a chat request that offers tools, are the calls its
	// answer makes (Config.ToolCalls of them): the answer is then tool
	// calls, streamed as vLLM streams them (doc.go, "Tool calls"). Nil:
	// the answer is text.
	calls []toolCall
	// doc, when set, is a response format's answer (structured.go).
	doc []byte

	// Log-probabilities of a completions request (logprobs.go): echo the
	// prompt in the answer; logprobs and promptLogprobs are the requested
	// counts, -1 when not asked for. promptIDs and promptText keep the
	// prompt for them (ids is dropped once the request is queued), and are
	// set only when one of them is asked for.
	echo           bool
	logprobs       int
	promptLogprobs int
	promptIDs      []int
	promptText     *string
}

// wantsLogprobs says whether the answer carries log-probabilities or echoes
// the prompt, so that the prompt must be kept.
func (p *genParams) wantsLogprobs() bool {
	return p.echo || p.logprobs >= 0 || p.promptLogprobs >= 0
}

// reasoningOf is how many of the first produced tokens are reasoning.
func (p *genParams) reasoningOf(produced int) int { return min(p.reasoning, produced) }

// parseGenerate validates a request the way vLLM does, returning an HTTP
// status and message on failure.
func (s *Simulator) parseGenerate(w http.ResponseWriter, r *http.Request, chat bool) (*genParams, int, error) {
	var req generateRequest
	if err := decodeBody(w, r, &req); err != nil {
		return nil, http.StatusBadRequest, err
	}
	lora, status, err := s.checkModel(req.Model)
	if err != nil {
		return nil, status, err
	}
	p := &genParams{lora: lora, chat: chat, stream: req.Stream, logprobs: -1, promptLogprobs: -1}
	if chat {
		p.reasoning = s.cfg.ReasoningTokens
	}
	p.includeUsage = req.Stream && req.StreamOptions != nil && req.StreamOptions.IncludeUsage
	if req.N != nil && *req.N != 1 {
		return nil, http.StatusBadRequest, errors.New("only n=1 is supported")
	}
	if chat && len(req.Tools) > 0 && string(bytes.TrimSpace(req.ToolChoice)) != `"none"` && s.callsTool(req.Messages) {
		p.calls = s.toolCalls(&req)
	}
	if chat {
		if len(req.Messages) == 0 {
			return nil, http.StatusBadRequest, errors.New("messages must not be empty")
		}
		msgs, images, err := chatMessages(req.Messages)
		if err != nil {
			return nil, http.StatusBadRequest, err
		}
		if p.ids, err = s.chatTokenIDs(msgs, images, true); err != nil {
			return nil, http.StatusBadRequest, err
		}
	} else {
		ids, err := promptTokenIDs(req.Prompt)
		if err != nil {
			return nil, http.StatusBadRequest, err
		}
		if len(ids) == 0 {
			return nil, http.StatusBadRequest, errors.New("prompt must contain at least one token")
		}
		p.ids = ids
		if err := completionLogprobParams(p, &req); err != nil {
			return nil, http.StatusBadRequest, err
		}
	}
	maxTokens := req.MaxTokens
	if chat && req.MaxCompletionTokens != nil {
		maxTokens = req.MaxCompletionTokens
	}
	if status, err := s.limitParams(p, maxTokens, req.MinTokens, req.IgnoreEOS); err != nil {
		return nil, status, err
	}
	p.structuredRequest(&req)
	return p, 0, nil
}

// limitParams validates the lengths of a request whose prompt ids are set,
// as vLLM does, and draws its output length. Every API the simulator speaks
// goes through it, so they share one length model.
func (s *Simulator) limitParams(p *genParams, maxTokens, minTokensPtr *int, ignoreEOS bool) (int, error) {
	promptLen, maxLen := len(p.ids), s.cfg.MaxModelLen
	if promptLen >= maxLen {
		return http.StatusBadRequest, contextError(maxLen, promptLen)
	}
	if maxTokens == nil {
		p.maxTokens = min(defaultMaxTokens, maxLen-promptLen)
	} else {
		p.maxTokens = *maxTokens
		if p.maxTokens < 1 {
			return http.StatusBadRequest, fmt.Errorf("max_tokens must be at least 1, got %d.", p.maxTokens)
		}
		if promptLen+p.maxTokens > maxLen {
			return http.StatusBadRequest, fmt.Errorf(
				"This model's maximum context length is %d tokens. However, you requested %d tokens (%d in the messages, %d in the completion). Please reduce the length of the messages or completion.",
				maxLen, promptLen+p.maxTokens, promptLen, p.maxTokens)
		}
	}
	minTokens := 0
	if minTokensPtr != nil {
		minTokens = *minTokensPtr
	}
	if minTokens < 0 || minTokens > p.maxTokens {
		return http.StatusBadRequest, fmt.Errorf("min_tokens must be between 0 and max_tokens (%d), got %d", p.maxTokens, minTokens)
	}

	// Output length: exactly max_tokens with ignore_eos; otherwise an EOS
	// point k drawn uniformly from [max(min_tokens,1), max_tokens] by a hash
	// of the seed and the prompt. k < max_tokens finishes with "stop",
	// k == max_tokens with "length". A reasoning model stops only once it
	// has answered: k is at least reasoning+1, or max_tokens when that
	// leaves no room for an answer (the reasoning is cut by the length).
	p.key = promptKey(s.cfg.Seed, p.ids)
	p.target = p.maxTokens
	if !ignoreEOS {
		lo := max(minTokens, 1)
		if p.reasoning > 0 {
			lo = max(lo, min(p.reasoning+1, p.maxTokens))
		}
		p.target = lo + int(hashmix.Mix64(p.key^0xe05e05e05)%uint64(p.maxTokens-lo+1))
	}
	p.reason = finishLength
	if p.target < p.maxTokens {
		p.reason = finishStop
	}
	return 0, nil
}

func (s *Simulator) handleCompletions(w http.ResponseWriter, r *http.Request, arrival time.Time) {
	s.handleGenerate(w, r, arrival, false)
}

func (s *Simulator) handleChatCompletions(w http.ResponseWriter, r *http.Request, arrival time.Time) {
	s.handleGenerate(w, r, arrival, true)
}

// handleGenerate validates an OpenAI completion or chat completion request
// and serves it.
func (s *Simulator) handleGenerate(w http.ResponseWriter, r *http.Request, arrival time.Time, chat bool) {
	select {
	case <-s.closing:
		writeError(w, http.StatusServiceUnavailable, "the simulator is shutting down")
		return
	default:
	}
	p, status, err := s.parseGenerate(w, r, chat)
	if err != nil {
		writeError(w, status, err.Error())
		return
	}
	s.serveGenerate(w, r, arrival, p, nil)
}

// serveGenerate runs a validated request: maybe inject an error, apply the
// header and first-token faults, queue the sequence, then relay its tokens
// as the engine produces them, in the OpenAI format or, when native is set,
// in an engine's native streaming format.
func (s *Simulator) serveGenerate(w http.ResponseWriter, r *http.Request, arrival time.Time, p *genParams, native nativeProtocol) {
	faults := *s.faults.Load() // this request's faults, fixed at arrival
	if s.logger.Enabled(r.Context(), slog.LevelDebug) {
		// As a server that continues W3C traces would: vLLM with
		// --otlp-traces-endpoint makes its request spans children of
		// the incoming traceparent. A client's traces can be checked
		// against this line (e2e/otlp_test.go). Before the injected
		// errors, which a real server would have received too.
		s.logger.Debug("request received", "request_id", requestID(r), "traceparent", textcut.Cut(r.Header.Get(TraceparentHeader), maxTraceparentBytes))
	}
	if s.injectError(&faults) {
		writeError(w, faults.ErrorStatus, "injected fault: simulated error")
		return
	}
	q := &sequence{
		st:          newStream(),
		arrival:     arrival,
		promptLen:   len(p.ids),
		blockHashes: seededBlockHashes(p.ids, s.cfg.BlockSize, s.adapterKeys[p.lora]),
		target:      p.target,
		reason:      p.reason,
		stallAfter:  faults.StallAfterTokens,
		stallFor:    faults.StallMidStream,
		id:          requestID(r),
		lora:        p.lora,
	}
	p.ids = nil

	ctx := r.Context()
	if !s.sleep(ctx, faults.SlowHeaders) {
		s.cut(w, p.stream)
		return
	}
	if p.stream {
		h := w.Header()
		if native != nil {
			h.Set("Content-Type", native.contentType())
		} else {
			h.Set("Content-Type", "text/event-stream; charset=utf-8")
		}
		h.Set("Cache-Control", "no-cache")
		w.WriteHeader(http.StatusOK)
		http.NewResponseController(w).Flush()
	}
	if !s.sleep(ctx, faults.StallBeforeFirstToken) || !s.engine.submit(q) {
		s.cut(w, p.stream)
		return
	}
	done := false
	defer func() {
		if !done {
			s.engine.abort(q)
		}
	}()
	switch {
	case native != nil && !p.stream:
		// serveNative clears stream only for a body protocol.
		done = s.respondNative(ctx, w, q, &faults, native.(bodyProtocol))
	case native != nil:
		done = s.streamNative(ctx, w, p, q, &faults, native)
	case p.stream:
		done = s.stream(ctx, w, p, q, &faults, arrival)
	default:
		done = s.respond(ctx, w, p, q, &faults, arrival)
	}
}

// cut ends a request that cannot go on: a stream's connection is closed
// abruptly (the client must not take a cut stream for a complete one); a
// non-streaming request gets a 503 when the simulator is closing. When the
// client itself went away, nothing is written.
func (s *Simulator) cut(w http.ResponseWriter, stream bool) {
	select {
	case <-s.closing:
	default:
		return
	}
	if stream {
		panic(http.ErrAbortHandler)
	}
	writeError(w, http.StatusServiceUnavailable, "the simulator is shutting down")
}

// chunkHead renders the fields common to every chunk of a response:
// `{"id":...,"object":...,"created":...,"model":...,`.
func (s *Simulator) chunkHead(dst []byte, object string, p *genParams, arrival time.Time) []byte {
	dst = append(dst, `{"id":"`...)
	if p.chat {
		dst = append(dst, "chatcmpl-"...)
	} else {
		dst = append(dst, "cmpl-"...)
	}
	dst = strconv.AppendUint(dst, hashmix.Mix64(s.cfg.Seed^s.reqs.Add(1)*0x9e3779b97f4a7c15), 16)
	dst = append(dst, `","object":"`...)
	dst = append(dst, object...)
	dst = append(dst, `","created":`...)
	dst = strconv.AppendInt(dst, arrival.Unix(), 10)
	dst = append(dst, `,"model":`...)
	dst = append(dst, s.modelName(p.lora)...)
	dst = append(dst, ',')
	return dst
}

// Streamed chunk pieces. A chunk is "data: " + head + one of the choice
// renderings + the emit time + "}\n\n".
const (
	sseData         = "data: "
	sseDone         = "data: [DONE]\n\n"
	sseMalformed    = "data: {not json\n\n"
	emitField       = `,"sim_emit_unix_nano":`
	arrivalField    = `,"sim_arrival_unix_nano":`
	choiceOpen      = `"choices":[{"index":0,`
	roleDelta       = `"delta":{"role":"assistant","content":""},"logprobs":null,"finish_reason":null}]`
	chatDeltaOpen   = `"delta":{"content":"`
	chatDeltaClose  = `"},"logprobs":null,"finish_reason":`
	textOpen        = `"text":"`
	textClose       = `","logprobs":null,"finish_reason":`
	textStopReason  = `,"stop_reason":null`
	choiceEnd       = `}]`
	usageNullField  = `,"usage":null`
	finishNull      = `null`
	chatChunkObject = "chat.completion.chunk"
	textObject      = "text_completion"

	// A tool call's deltas, as vLLM streams them: the first names the
	// function, the others carry pieces of its arguments. The call's
	// index (and its id, call_<index>) follows toolCallIndex.
	toolCallIndex      = `"delta":{"tool_calls":[{"index":`
	toolCallID         = `,"id":"call_`
	toolCallName       = `","type":"function","function":{"name":`
	toolCallFirstClose = `,"arguments":""}}]},"logprobs":null,"finish_reason":`
	toolArgsOpen       = `,"function":{"arguments":"`
	toolArgsClose      = `"}}]},"logprobs":null,"finish_reason":`
)

// toolFinish is a tool call's finish_reason: "tool_calls" where a text
// answer would say "stop", as vLLM says it.
func toolFinish(fr string) string {
	if fr == `"`+finishStop+`"` {
		return `"tool_calls"`
	}
	return fr
}

// contentPad is the text PadContentBytes appends to every streamed content
// token ("" when off).
func contentPad(f *Faults) string {
	return strings.Repeat("x", f.PadContentBytes)
}

// stream relays a streaming response. It reports whether the request
// finished in the engine (so that it need not be aborted).
func (s *Simulator) stream(ctx context.Context, w http.ResponseWriter, p *genParams, q *sequence, f *Faults, arrival time.Time) bool {
	rc := http.NewResponseController(w)
	c := s.newChunkWriter(w, p, f, arrival)
	malformed := func() []byte { return []byte(sseMalformed) }
	written, roleSent := 0, !p.chat
	for {
		produced, finished, why, ok := nextProgress(ctx, q)
		if !ok {
			return false
		}
		for written < produced {
			if !roleSent {
				if !c.writeRole() {
					return false
				}
				roleSent = true
			}
			fr := finishNull
			if finished && written == produced-1 {
				fr = `"` + why + `"`
			}
			if !c.writeToken(written, fr) {
				return false
			}
			written++
			if !streamFaults(w, rc, f, written, malformed) {
				return false
			}
		}
		if err := rc.Flush(); err != nil {
			return false
		}
		if finished {
			break
		}
	}
	if p.includeUsage && !c.writeUsage(q.promptLen, q.st.cachedTokens(), written, s.appendRequestMetrics(nil, q, q.promptLen)) {
		return true
	}
	c.write([]byte(sseDone))
	rc.Flush()
	return true
}

// nextProgress waits for q's next progress and returns it; ok is false when
// the client went away. A request that the simulator's close cut aborts the
// handler: the client must not take a cut stream for a complete one.
func nextProgress(ctx context.Context, q *sequence) (produced int, finished bool, why string, ok bool) {
	select {
	case <-q.st.ready:
	case <-ctx.Done():
		return 0, false, "", false
	}
	produced, finished, why, closed := q.st.snapshot()
	if closed {
		panic(http.ErrAbortHandler)
	}
	return produced, finished, why, true
}

// streamFaults applies the faults keyed on a stream's length once its
// written-th token is written: a disconnect aborts the handler, the tokens
// before it flushed; a malformed chunk (malformed's) is written. It reports
// whether the stream can go on.
func streamFaults(w http.ResponseWriter, rc *http.ResponseController, f *Faults, written int, malformed func() []byte) bool {
	if f.DisconnectAfterTokens == written {
		rc.Flush()
		panic(http.ErrAbortHandler)
	}
	if f.MalformedAfterTokens == written {
		_, err := w.Write(malformed())
		return err == nil
	}
	return true
}

// chunkWriter writes one streamed response's chunks, rendered into one
// buffer that every chunk reuses.
type chunkWriter struct {
	w    http.ResponseWriter
	p    *genParams
	head []byte // "data: " and the fields common to every chunk (chunkHead)
	buf  []byte
	// reasoningOpen opens a reasoning token's delta: the configured
	// field, and no content.
	reasoningOpen string
	pad           string // contentPad's
	// pieces are a response format's document's tokens (answerPieces),
	// from docStart on.
	pieces   [][]byte
	docStart int
	// spans are the answer's tool calls (callSpans), call the one the
	// last token written belongs to.
	spans []callSpan
	call  int
}

func (s *Simulator) newChunkWriter(w http.ResponseWriter, p *genParams, f *Faults, arrival time.Time) *chunkWriter {
	object := textObject
	if p.chat {
		object = chatChunkObject
	}
	pieces := p.answerPieces(f)
	return &chunkWriter{
		w:             w,
		p:             p,
		head:          s.chunkHead(append(make([]byte, 0, 160), sseData...), object, p, arrival),
		buf:           make([]byte, 0, 512),
		reasoningOpen: `"delta":{"` + s.cfg.ReasoningField + `":"`,
		pad:           contentPad(f),
		pieces:        pieces,
		docStart:      p.target - len(pieces), // the first token that carries the document
		spans:         p.callSpans(f),
	}
}

// write writes b and reports whether it could.
func (c *chunkWriter) write(b []byte) bool {
	_, err := c.w.Write(b)
	return err == nil
}

// finish renders the end of a chunk, stamping the emit time as late as
// possible: right before the write.
func (c *chunkWriter) finish(b []byte) []byte {
	if c.p.includeUsage {
		b = append(b, usageNullField...)
	}
	b = append(b, emitField...)
	b = strconv.AppendInt(b, time.Now().UnixNano(), 10)
	return append(b, "}\n\n"...)
}

// writeRole writes a chat stream's first chunk, which names the role.
func (c *chunkWriter) writeRole() bool {
	c.buf = append(append(append(c.buf[:0], c.head...), choiceOpen...), roleDelta...)
	return c.write(c.finish(c.buf))
}

// writeToken writes the chunk of token i, whose finish_reason is fr: a
// reasoning delta, a tool call's (its opening, then its arguments), a chat
// delta or a completion's text.
func (c *chunkWriter) writeToken(i int, fr string) bool {
	p := c.p
	piece := outputPiece(p.key, i)
	if c.pieces != nil && i >= c.docStart && i-c.docStart < len(c.pieces) {
		piece = string(c.pieces[i-c.docStart])
	}
	buf := append(append(c.buf[:0], c.head...), choiceOpen...)
	switch {
	case p.chat && i < p.reasoning:
		buf = append(append(append(append(buf, c.reasoningOpen...), piece...), chatDeltaClose...), fr...)
	case c.spans != nil && i >= p.reasoning:
		buf = append(c.appendCallDelta(buf, i), toolFinish(fr)...)
	case p.chat:
		buf = append(append(append(append(append(buf, chatDeltaOpen...), piece...), c.pad...), chatDeltaClose...), fr...)
	default:
		buf = append(append(append(append(append(append(buf, textOpen...), piece...), c.pad...), textClose...), fr...), textStopReason...)
	}
	c.buf = append(buf, choiceEnd...)
	return c.write(c.finish(c.buf))
}

// appendCallDelta appends the delta of answer token i of a tool-call
// answer: a call's first token opens it (its index, id, type and name,
// with empty arguments, or the whole arguments when it has no other
// token), the others carry pieces of its arguments.
func (c *chunkWriter) appendCallDelta(buf []byte, i int) []byte {
	for c.call+1 < len(c.spans) && i >= c.spans[c.call+1].start {
		c.call++
	}
	sp := &c.spans[c.call]
	buf = strconv.AppendInt(append(buf, toolCallIndex...), int64(c.call), 10)
	if i > sp.start {
		piece := sp.pieces[i-sp.start-1]
		return append(append(append(append(buf, toolArgsOpen...), piece...), c.pad...), toolArgsClose...)
	}
	buf = strconv.AppendInt(append(buf, toolCallID...), int64(c.call), 10)
	buf = append(append(buf, toolCallName...), c.p.calls[c.call].name...)
	if sp.inline != nil {
		return append(append(append(buf, `,"arguments":"`...), sp.inline...), toolArgsClose...)
	}
	return append(buf, toolCallFirstClose...)
}

// appendCalls appends a body's tool_calls array: each call's id, type,
// name and whole arguments.
func appendCalls(b []byte, p *genParams, spans []callSpan) []byte {
	b = append(b, '[')
	for j, sp := range spans {
		if j > 0 {
			b = append(b, ',')
		}
		b = strconv.AppendInt(append(b, `{"id":"call_`...), int64(j), 10)
		b = append(append(b, toolCallName...), p.calls[j].name...)
		b = append(append(b, `,"arguments":"`...), sp.inline...)
		for _, piece := range sp.pieces {
			b = append(b, piece...)
		}
		b = append(b, `"}}`...)
	}
	return append(b, ']')
}

// writeUsage writes the usage chunk that include_usage asks for, after the
// last token's, with the members of metrics (the request's times:
// appendRequestMetrics) after its usage.
func (c *chunkWriter) writeUsage(promptLen, cached, completion int, metrics []byte) bool {
	buf := append(append(c.buf[:0], c.head...), `"choices":[],"usage":`...)
	buf = appendUsage(buf, c.p, promptLen, cached, completion)
	buf = append(buf, metrics...)
	buf = append(buf, emitField...)
	buf = strconv.AppendInt(buf, time.Now().UnixNano(), 10)
	c.buf = append(buf, "}\n\n"...)
	return c.write(c.buf)
}

// appendUsage renders a usage object. completion counts every generated
// token; a reasoning generation adds completion_tokens_details with its
// reasoning tokens among them. prompt_tokens_details.cached_tokens is the
// prompt tokens the prefix cache served at the first admission, as vLLM
// reports it with --enable-prompt-tokens-details (and SGLang and OpenAI
// always): a client can then count the hits its own prompts found.
func appendUsage(b []byte, p *genParams, prompt, cached, completion int) []byte {
	b = append(b, `{"prompt_tokens":`...)
	b = strconv.AppendInt(b, int64(prompt), 10)
	b = append(b, `,"prompt_tokens_details":{"cached_tokens":`...)
	b = strconv.AppendInt(b, int64(cached), 10)
	b = append(b, '}')
	b = append(b, `,"total_tokens":`...)
	b = strconv.AppendInt(b, int64(prompt+completion), 10)
	b = append(b, `,"completion_tokens":`...)
	b = strconv.AppendInt(b, int64(completion), 10)
	if p.reasoning > 0 {
		b = append(b, `,"completion_tokens_details":{"reasoning_tokens":`...)
		b = strconv.AppendInt(b, int64(p.reasoningOf(completion)), 10)
		b = append(b, '}')
	}
	return append(b, '}')
}

// awaitCompletion waits until q has finished in the engine and returns what
// it produced; ok is false when the client left or the request was cut
// (its answer is then written).
func (s *Simulator) awaitCompletion(ctx context.Context, w http.ResponseWriter, q *sequence) (produced int, reason string, ok bool) {
	for {
		select {
		case <-q.st.ready:
		case <-ctx.Done():
			return 0, "", false
		}
		n, finished, why, closed := q.st.snapshot()
		if closed {
			s.cut(w, false)
			return 0, "", false
		}
		if finished {
			return n, why, true
		}
	}
}

// bodyFault applies to a one-body answer the faults keyed on the
// completion's length: a disconnect aborts the handler; a malformed body
// is written, and bodyFault reports that the answer is done. It sets the
// JSON content type either way.
func bodyFault(w http.ResponseWriter, f *Faults, produced int) bool {
	if f.DisconnectAfterTokens > 0 && produced >= f.DisconnectAfterTokens {
		panic(http.ErrAbortHandler)
	}
	w.Header().Set("Content-Type", "application/json")
	if f.MalformedAfterTokens > 0 && produced >= f.MalformedAfterTokens {
		w.Write([]byte("{not json"))
		return true
	}
	return false
}

// respond waits for the whole completion and writes one JSON body. It
// reports whether the request finished in the engine.
func (s *Simulator) respond(ctx context.Context, w http.ResponseWriter, p *genParams, q *sequence, f *Faults, arrival time.Time) bool {
	produced, reason, ok := s.awaitCompletion(ctx, w, q)
	if !ok {
		return false
	}
	if bodyFault(w, f, produced) {
		return true
	}

	var text, reasoning strings.Builder
	nr := p.reasoningOf(produced)
	for i := range nr {
		reasoning.WriteString(outputPiece(p.key, i))
	}
	spans := p.callSpans(f)
	call := spans != nil && nr < produced
	for i := nr; i < produced; i++ {
		if call && i == nr {
			continue // a tool call's first token is its name
		}
		text.WriteString(outputPiece(p.key, i))
	}
	textJSON, _ := json.Marshal(text.String())
	if p.doc != nil {
		// The document's pieces are JSON string bodies already.
		b := []byte{'"'}
		for _, piece := range p.answerPieces(f) {
			b = append(b, piece...)
		}
		textJSON = append(b, '"')
	}
	object := textObject
	if p.chat {
		object = "chat.completion"
	}
	b := s.chunkHead(make([]byte, 0, 256+len(textJSON)), object, p, arrival)
	b = append(b, choiceOpen...)
	if p.chat {
		b = append(b, `"message":{"role":"assistant","content":`...)
		switch {
		case p.reasoning > 0 && nr == produced:
			b = append(b, "null"...) // reasoning only: no answer
		case call:
			b = appendCalls(append(b, `null,"tool_calls":`...), p, spans)
			if reason == finishStop {
				reason = "tool_calls"
			}
		default:
			b = append(b, textJSON...)
		}
		if p.reasoning > 0 {
			reasoningJSON, _ := json.Marshal(reasoning.String())
			b = append(b, `,"`...)
			b = append(b, s.cfg.ReasoningField...)
			b = append(b, `":`...)
			b = append(b, reasoningJSON...)
		}
		b = append(b, `},"logprobs":null,"finish_reason":"`...)
	} else {
		if p.echo && p.promptText != nil {
			textJSON, _ = json.Marshal(*p.promptText + text.String())
		}
		b = append(b, `"text":`...)
		b = append(b, textJSON...)
		b = append(b, `,"logprobs":`...)
		b = s.appendCompletionLogprobs(b, p, produced, f.LogprobPenalty)
		b = append(b, `,"finish_reason":"`...)
	}
	b = append(b, reason...)
	b = append(b, `","stop_reason":null`...)
	if p.promptLogprobs >= 0 {
		b = append(b, `,"prompt_logprobs":`...)
		b = s.appendPromptLogprobs(b, p, f.LogprobPenalty)
	}
	b = append(b, `}],"usage":`...)
	b = appendUsage(b, p, q.promptLen, q.st.cachedTokens(), produced)
	b = s.appendRequestMetrics(b, q, q.promptLen)
	b = append(b, arrivalField...)
	b = strconv.AppendInt(b, arrival.UnixNano(), 10)
	b = append(b, emitField...)
	b = strconv.AppendInt(b, time.Now().UnixNano(), 10)
	b = append(b, '}')
	w.Write(b)
	return true
}
