package simulator

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// The native generation APIs. Each parses its engine's request into the
// same genParams (so lengths, EOS points and generated words follow the
// same model as /v1/completions) and streams the engine's own frames. Every
// frame that carries a token, and every final frame, has a top-level
// "sim_emit_unix_nano" stamped immediately before it is written, as the
// OpenAI frames do. Native endpoints always stream: a request that asks
// not to is refused with 400.

// nativeProtocol renders one engine's streamed frames for one request.
type nativeProtocol interface {
	contentType() string
	// token appends the frame of generated token i (0-based), whose text is
	// piece. last is set on the request's last token, reason then being the
	// finish reason.
	token(dst []byte, i int, piece string, last bool, reason string) []byte
	// end appends what follows the last token (an end marker or a final
	// frame with the counts); produced is the number of tokens generated.
	end(dst []byte, produced int, reason string) []byte
	// malformed is the frame the malformed-chunk fault writes.
	malformed() []byte
}

// bodyProtocol is a native protocol that can also answer without
// streaming, with one JSON body once the request has finished (SGLang's
// /generate without "stream", TGI's /generate). It is how those APIs
// return prompt log-probabilities (logprobs.go).
type bodyProtocol interface {
	nativeProtocol
	// streams says whether the request asked for a stream.
	streams() bool
	// body appends the whole answer of a request that produced tokens and
	// finished for reason; penalty is its LogprobPenalty fault.
	body(dst []byte, produced int, reason string, penalty float64) []byte
}

// respondNative waits for the whole generation and writes a body
// protocol's one JSON body, with the same faults as respond: a disconnect
// or malformed fault keyed on N applies when the completion has at least N
// tokens. It reports whether the request finished in the engine.
func (s *Simulator) respondNative(ctx context.Context, w http.ResponseWriter, q *sequence, f *Faults, bp bodyProtocol) bool {
	produced, reason, ok := s.awaitCompletion(ctx, w, q)
	if !ok {
		return false
	}
	if bodyFault(w, f, produced) {
		return true
	}
	s.withTimings(bp, q)
	w.Write(bp.body(make([]byte, 0, 1024), produced, reason, f.LogprobPenalty))
	return true
}

// stamp appends the emit-time member and closes the JSON object.
func stamp(b []byte) []byte {
	b = append(b, emitField...)
	b = strconv.AppendInt(b, time.Now().UnixNano(), 10)
	return append(b, '}')
}

// streamNative relays a native streaming response. It reports whether the
// request finished in the engine.
func (s *Simulator) streamNative(ctx context.Context, w http.ResponseWriter, p *genParams, q *sequence, f *Faults, np nativeProtocol) bool {
	rc := http.NewResponseController(w)
	buf := make([]byte, 0, 512)
	write := func(b []byte) bool {
		_, err := w.Write(b)
		return err == nil
	}
	written, reason := 0, ""
	pad := contentPad(f)
	if bp, ok := np.(interface{ begin([]byte) []byte }); ok {
		// What a protocol writes before the first token (the Responses
		// API's response.created).
		if !write(bp.begin(buf[:0])) {
			return false
		}
		if err := rc.Flush(); err != nil {
			return false
		}
	}
	malformed := np.malformed
	for {
		produced, finished, why, ok := nextProgress(ctx, q)
		if !ok {
			return false
		}
		if produced > written {
			withCached(np, q) // known from the first admission on
		}
		for written < produced {
			last := finished && written == produced-1
			buf = np.token(buf[:0], written, outputPiece(p.key, written)+pad, last, why)
			if !write(buf) {
				return false
			}
			written++
			if !streamFaults(w, rc, f, written, malformed) {
				return false
			}
		}
		if finished {
			reason = why
			break
		}
		if err := rc.Flush(); err != nil {
			return false
		}
	}
	s.withTimings(np, q)
	if b := np.end(buf[:0], written, reason); len(b) > 0 {
		write(b)
	}
	rc.Flush()
	return true
}

// serveNative validates the lengths of a parsed native request and serves
// it; fail writes an error in the engine's own error format.
func (s *Simulator) serveNative(w http.ResponseWriter, r *http.Request, arrival time.Time, ids []int, maxTokens, minTokens *int, ignoreEOS bool, chat bool, np nativeProtocol, fail func(int, string)) {
	select {
	case <-s.closing:
		fail(http.StatusServiceUnavailable, "the simulator is shutting down")
		return
	default:
	}
	p := &genParams{chat: chat, stream: true, ids: ids}
	if bp, ok := np.(bodyProtocol); ok && !bp.streams() {
		p.stream = false
	}
	if a, ok := np.(interface{ adapter() int }); ok {
		// A protocol that serves LoRA adapters: the request's model.
		p.lora = a.adapter()
	}
	if r, ok := np.(interface{ reasons() bool }); ok && r.reasons() {
		// A protocol that carries reasoning text apart from the answer.
		p.reasoning = s.cfg.ReasoningTokens
	}
	if len(ids) == 0 {
		fail(http.StatusBadRequest, "the prompt must contain at least one token")
		return
	}
	if status, err := s.limitParams(p, maxTokens, minTokens, ignoreEOS); err != nil {
		fail(status, err.Error())
		return
	}
	if pp, ok := np.(interface{ setParams(*genParams) }); ok {
		pp.setParams(p) // before serveGenerate drops p.ids
	}
	s.serveGenerate(w, r, arrival, p, np)
}

// positive turns the "no limit" values engines use (-1, 0, absent) into nil.
func positive(v *int) *int {
	if v == nil || *v <= 0 {
		return nil
	}
	return v
}

// --- TGI: POST /generate_stream ---

func (s *Simulator) handleTGIGenerateStream(w http.ResponseWriter, r *http.Request, arrival time.Time) {
	s.handleTGI(w, r, arrival, true)
}

// handleTGIGenerate is TGI's POST /generate: the same request, answered
// with one JSON body, {"generated_text", "details"}. With details and
// decoder_input_details, details.prefill lists the prompt's tokens with
// their log-probabilities (null for the first), as TGI does when started
// with prefill log-probabilities enabled.
func (s *Simulator) handleTGIGenerate(w http.ResponseWriter, r *http.Request, arrival time.Time) {
	s.handleTGI(w, r, arrival, false)
}

// handleTGI reads a TGI generate request and serves it streamed or as one
// body.
func (s *Simulator) handleTGI(w http.ResponseWriter, r *http.Request, arrival time.Time, stream bool) {
	var req struct {
		Inputs     *string `json:"inputs"`
		Parameters struct {
			MaxNewTokens        *int `json:"max_new_tokens"`
			Details             bool `json:"details"`
			DecoderInputDetails bool `json:"decoder_input_details"`
		} `json:"parameters"`
	}
	fail := func(status int, msg string) { writeTGIError(w, status, msg) }
	if err := decodeBody(w, r, &req); err != nil {
		fail(http.StatusUnprocessableEntity, err.Error())
		return
	}
	if req.Inputs == nil {
		fail(http.StatusUnprocessableEntity, "Input validation error: `inputs` is required")
		return
	}
	np := &tgiProto{details: req.Parameters.Details}
	if !stream {
		np.nonStream, np.seed = true, s.cfg.Seed
		if req.Parameters.DecoderInputDetails {
			np.prefill = strings.Fields(*req.Inputs)
		}
	}
	s.serveNative(w, r, arrival, AppendTokenIDs(nil, *req.Inputs), req.Parameters.MaxNewTokens, nil, false, false, np, fail)
}

// tgiProto renders TGI's frames:
// data:{"index":N,"token":{"id":..,"text":..,"logprob":..,"special":false},"generated_text":null,"details":null}
// with generated_text (and details, when asked for) on the last one. TGI
// sends no end marker after it.
type tgiProto struct {
	details bool
	p       *genParams
	// nonStream: POST /generate, one body (see body).
	nonStream bool
	seed      uint64
	// prefill holds the prompt's words when decoder_input_details asked
	// for their log-probabilities; ids the prompt of a non-streamed
	// request, kept by setParams for the log-probabilities.
	prefill []string
	ids     []int
}

func (t *tgiProto) setParams(p *genParams) {
	t.p = p
	if t.nonStream {
		t.ids = p.ids
	}
}
func (t *tgiProto) streams() bool { return !t.nonStream }

// tgiFinishReason is TGI's name of a finish reason.
func tgiFinishReason(reason string) string {
	if reason == finishStop {
		return "eos_token"
	}
	return "length"
}

func (t *tgiProto) body(b []byte, produced int, reason string, penalty float64) []byte {
	b = append(b, `{"generated_text":"`...)
	for i := range produced {
		b = append(b, outputPiece(t.p.key, i)...)
	}
	b = append(b, '"')
	if t.details {
		lps := sequenceLogprobs(t.seed, t.p.key, t.ids, produced, penalty)
		b = append(b, `,"details":{"finish_reason":"`...)
		b = append(b, tgiFinishReason(reason)...)
		b = append(b, `","generated_tokens":`...)
		b = strconv.AppendInt(b, int64(produced), 10)
		b = append(b, `,"seed":null,"prefill":[`...)
		for i, id := range t.ids {
			if t.prefill == nil {
				break // not asked for: TGI sends an empty prefill
			}
			if i > 0 {
				b = append(b, ',')
			}
			text, _ := json.Marshal(t.prefill[i])
			b = append(b, `{"id":`...)
			b = strconv.AppendInt(b, int64(id), 10)
			b = append(b, `,"text":`...)
			b = append(b, text...)
			b = append(b, `,"logprob":`...)
			b = append(appendLogprob(b, lps[i]), '}')
		}
		b = append(b, `],"tokens":[`...)
		for i := range produced {
			if i > 0 {
				b = append(b, ',')
			}
			piece := outputPiece(t.p.key, i)
			b = append(b, `{"id":`...)
			b = strconv.AppendInt(b, int64(TokenID(piece[1:])), 10)
			b = append(b, `,"text":"`...)
			b = append(b, piece...)
			b = append(b, `","logprob":`...)
			b = appendLogprob(b, lps[len(t.ids)+i])
			b = append(b, `,"special":false}`...)
		}
		b = append(b, "]}"...)
	}
	return stamp(b)
}

func (*tgiProto) contentType() string { return "text/event-stream" }
func (*tgiProto) malformed() []byte   { return []byte("data:{not json\n\n") }

func (t *tgiProto) token(b []byte, i int, piece string, last bool, reason string) []byte {
	b = append(b, `data:{"index":`...)
	b = strconv.AppendInt(b, int64(i+1), 10)
	b = append(b, `,"token":{"id":`...)
	b = strconv.AppendInt(b, int64(TokenID(piece[1:])), 10)
	b = append(b, `,"text":"`...)
	b = append(b, piece...)
	b = append(b, `","logprob":-1.0,"special":false},"generated_text":`...)
	if !last {
		b = append(b, `null,"details":null`...)
	} else {
		b = append(b, '"')
		for k := 0; k <= i; k++ {
			b = append(b, outputPiece(t.p.key, k)...)
		}
		b = append(b, `","details":`...)
		if t.details {
			b = append(b, `{"finish_reason":"`...)
			b = append(b, tgiFinishReason(reason)...)
			b = append(b, `","generated_tokens":`...)
			b = strconv.AppendInt(b, int64(i+1), 10)
			b = append(b, `,"seed":null}`...)
		} else {
			b = append(b, "null"...)
		}
	}
	return append(stamp(b), "\n\n"...)
}

func (*tgiProto) end(b []byte, _ int, _ string) []byte { return b }

// --- llama.cpp: POST /completion ---

func (s *Simulator) handleLlamaCppCompletion(w http.ResponseWriter, r *http.Request, arrival time.Time) {
	var req struct {
		Prompt    json.RawMessage `json:"prompt"`
		NPredict  *int            `json:"n_predict"`
		IgnoreEOS bool            `json:"ignore_eos"`
		Stream    bool            `json:"stream"`
	}
	fail := func(status int, msg string) { writeError(w, status, msg) }
	if err := decodeBody(w, r, &req); err != nil {
		fail(http.StatusBadRequest, err.Error())
		return
	}
	if !req.Stream {
		fail(http.StatusBadRequest, "the simulator serves /completion streaming only (\"stream\": true)")
		return
	}
	ids, err := promptTokenIDs(req.Prompt)
	if err != nil {
		fail(http.StatusBadRequest, err.Error())
		return
	}
	np := &llamaCppProto{model: s.modelJSON}
	s.serveNative(w, r, arrival, ids, positive(req.NPredict), nil, req.IgnoreEOS, false, np, fail)
}

// llamaCppProto renders llama.cpp's frames: data: {"content":..,"stop":false,...}
// per token, then a final frame with "stop": true and the counts.
type llamaCppProto struct {
	model     []byte
	p         *genParams
	promptLen int
	requestMetrics
}

func (l *llamaCppProto) setParams(p *genParams) { l.p, l.promptLen = p, len(p.ids) }
func (*llamaCppProto) contentType() string      { return "text/event-stream" }
func (*llamaCppProto) malformed() []byte        { return []byte("data: {not json\n\n") }

func (l *llamaCppProto) token(b []byte, i int, piece string, _ bool, _ string) []byte {
	b = append(b, `data: {"index":0,"content":"`...)
	b = append(b, piece...)
	b = append(b, `","tokens":[`...)
	b = strconv.AppendInt(b, int64(TokenID(piece[1:])), 10)
	b = append(b, `],"stop":false,"id_slot":0,"tokens_predicted":`...)
	b = strconv.AppendInt(b, int64(i+1), 10)
	b = append(b, `,"tokens_evaluated":`...)
	b = strconv.AppendInt(b, int64(l.promptLen), 10)
	return append(stamp(b), "\n\n"...)
}

func (l *llamaCppProto) end(b []byte, produced int, reason string) []byte {
	stopType := "limit"
	if reason == finishStop {
		stopType = "eos"
	}
	prompt := int64(l.promptLen)
	b = append(b, `data: {"index":0,"content":"","tokens":[],"id_slot":0,"stop":true,"model":`...)
	b = append(b, l.model...)
	b = append(b, `,"tokens_predicted":`...)
	b = strconv.AppendInt(b, int64(produced), 10)
	b = append(b, `,"tokens_evaluated":`...)
	b = strconv.AppendInt(b, prompt, 10)
	b = append(b, `,"has_new_line":false,"truncated":false,"stop_type":"`...)
	b = append(b, stopType...)
	b = append(b, `","stopping_word":"","tokens_cached":`...)
	b = strconv.AppendInt(b, prompt+int64(produced)-1, 10)
	b = append(b, `,"timings":{"prompt_n":`...)
	b = strconv.AppendInt(b, prompt, 10)
	b = append(b, `,"predicted_n":`...)
	b = strconv.AppendInt(b, int64(produced), 10)
	if l.on {
		b = appendLlamaMillis(b, l.t)
	}
	b = append(b, '}')
	return append(stamp(b), "\n\n"...)
}

// --- Ollama: POST /api/generate and /api/chat (NDJSON) ---

func (s *Simulator) handleOllamaGenerate(w http.ResponseWriter, r *http.Request, arrival time.Time) {
	s.handleOllama(w, r, arrival, false)
}

func (s *Simulator) handleOllamaChat(w http.ResponseWriter, r *http.Request, arrival time.Time) {
	s.handleOllama(w, r, arrival, true)
}

func (s *Simulator) handleOllama(w http.ResponseWriter, r *http.Request, arrival time.Time, chat bool) {
	var req struct {
		Model    string  `json:"model"`
		Prompt   *string `json:"prompt"`
		Messages []struct {
			chatMessageJSON
			Images []string `json:"images"`
		} `json:"messages"`
		// Images are /api/generate's, base64 each, as a chat message's.
		Images  []string `json:"images"`
		Stream  *bool    `json:"stream"`
		Options struct {
			NumPredict *int `json:"num_predict"`
		} `json:"options"`
	}
	fail := func(status int, msg string) { writeOllamaError(w, status, msg) }
	if err := decodeBody(w, r, &req); err != nil {
		fail(http.StatusBadRequest, err.Error())
		return
	}
	if req.Model != s.cfg.Model {
		fail(http.StatusNotFound, fmt.Sprintf("model '%s' not found", req.Model))
		return
	}
	if req.Stream != nil && !*req.Stream {
		fail(http.StatusBadRequest, "the simulator serves the Ollama API streaming only")
		return
	}
	// An image is base64 data (not decoded): its key and its tokens are
	// those of the same image sent as an OpenAI data URL.
	keys := func(b64 []string) ([]uint64, error) {
		var out []uint64
		for _, im := range b64 {
			if im == "" {
				return nil, errors.New("an image is empty")
			}
			out = append(out, imageKey("data:;base64,"+im))
		}
		return out, nil
	}
	var ids []int
	if chat {
		in := make([]chatMessageJSON, len(req.Messages))
		var images [][]uint64
		for i, m := range req.Messages {
			in[i] = m.chatMessageJSON
			k, err := keys(m.Images)
			if err != nil {
				fail(http.StatusBadRequest, err.Error())
				return
			}
			if k != nil && images == nil {
				images = make([][]uint64, len(req.Messages))
			}
			if k != nil {
				images[i] = k
			}
		}
		msgs, _, err := chatMessages(in)
		if err != nil || len(msgs) == 0 {
			fail(http.StatusBadRequest, "messages must be a non-empty array")
			return
		}
		if ids, err = s.chatTokenIDs(msgs, images, true); err != nil {
			fail(http.StatusBadRequest, err.Error())
			return
		}
	} else {
		if req.Prompt == nil {
			fail(http.StatusBadRequest, "prompt is required")
			return
		}
		k, err := keys(req.Images)
		if err == nil {
			err = s.checkImages(len(k), CountTokens(*req.Prompt))
		}
		if err != nil {
			fail(http.StatusBadRequest, err.Error())
			return
		}
		ids = AppendTokenIDs(nil, *req.Prompt)
		for _, h := range k {
			ids = appendImageTokenIDs(ids, h, s.cfg.ImageTokens)
		}
	}
	np := &ollamaProto{model: s.modelJSON, chat: chat, arrival: arrival}
	s.serveNative(w, r, arrival, ids, positive(req.Options.NumPredict), nil, false, chat, np, fail)
}

// ollamaProto renders Ollama's NDJSON lines, then a "done": true line with
// the counts and durations (nanoseconds). In reasoning mode the first
// tokens go in "thinking" (generate) or message.thinking (chat), beside an
// empty response or content, as Ollama streams a thinking model; eval_count
// counts them too, and Ollama reports no separate count.
type ollamaProto struct {
	model     []byte
	chat      bool
	arrival   time.Time
	p         *genParams
	promptLen int
	// requestMetrics are the request's times: Ollama reports its prompt's
	// evaluation and its generation whether asked or not.
	requestMetrics
}

func (o *ollamaProto) setParams(p *genParams) { o.p, o.promptLen = p, len(p.ids) }
func (*ollamaProto) reasons() bool            { return true }
func (*ollamaProto) contentType() string      { return "application/x-ndjson" }
func (*ollamaProto) malformed() []byte        { return []byte("{not json\n") }

// head renders a line's start with its answer text, or, when thinking is
// set, an empty answer and that reasoning text.
func (o *ollamaProto) head(b []byte, text string, thinking bool) []byte {
	b = append(b, `{"model":`...)
	b = append(b, o.model...)
	b = append(b, `,"created_at":"`...)
	b = time.Now().UTC().AppendFormat(b, time.RFC3339Nano)
	answer := text
	if thinking {
		answer = ""
	}
	if o.chat {
		b = append(b, `","message":{"role":"assistant","content":"`...)
		b = append(b, answer...)
		if thinking {
			b = append(b, `","thinking":"`...)
			b = append(b, text...)
		}
		b = append(b, `"}`...)
	} else {
		b = append(b, `","response":"`...)
		b = append(b, answer...)
		if thinking {
			b = append(b, `","thinking":"`...)
			b = append(b, text...)
		}
		b = append(b, '"')
	}
	return b
}

func (o *ollamaProto) token(b []byte, i int, piece string, _ bool, _ string) []byte {
	b = append(o.head(b, piece, o.p != nil && i < o.p.reasoning), `,"done":false`...)
	return append(stamp(b), '\n')
}

func (o *ollamaProto) end(b []byte, produced int, reason string) []byte {
	b = append(o.head(b, "", false), `,"done":true,"done_reason":"`...)
	b = append(b, reason...)
	b = append(b, `","total_duration":`...)
	b = strconv.AppendInt(b, int64(time.Since(o.arrival)), 10)
	b = append(b, `,"load_duration":0,"prompt_eval_count":`...)
	b = strconv.AppendInt(b, int64(o.promptLen), 10)
	b = append(b, `,"prompt_eval_duration":`...)
	b = strconv.AppendInt(b, int64(o.t.prefill), 10)
	b = append(b, `,"eval_count":`...)
	b = strconv.AppendInt(b, int64(produced), 10)
	b = append(b, `,"eval_duration":`...)
	b = strconv.AppendInt(b, int64(o.t.decode), 10)
	return append(stamp(b), '\n')
}

// --- Triton: POST /v2/models/{model}/generate_stream ---

func (s *Simulator) handleTritonGenerateStream(w http.ResponseWriter, r *http.Request, arrival time.Time) {
	fail := func(status int, msg string) { writeTritonError(w, status, msg) }
	if r.PathValue("model") != s.cfg.Model {
		fail(http.StatusBadRequest, fmt.Sprintf("Request for unknown model: '%s' is not found", r.PathValue("model")))
		return
	}
	var req struct {
		TextInput *string `json:"text_input"`
		MaxTokens *int    `json:"max_tokens"`
	}
	if err := decodeBody(w, r, &req); err != nil {
		fail(http.StatusBadRequest, err.Error())
		return
	}
	if req.TextInput == nil {
		fail(http.StatusBadRequest, "missing input 'text_input'")
		return
	}
	np := &tritonProto{model: s.modelJSON}
	s.serveNative(w, r, arrival, AppendTokenIDs(nil, *req.TextInput), req.MaxTokens, nil, false, false, np, fail)
}

// tritonProto renders the generate extension's events; the body's end is
// the end of the stream.
type tritonProto struct{ model []byte }

func (*tritonProto) contentType() string { return "text/event-stream" }
func (*tritonProto) malformed() []byte   { return []byte("data: {not json\n\n") }

func (t *tritonProto) token(b []byte, _ int, piece string, _ bool, _ string) []byte {
	b = append(b, `data: {"model_name":`...)
	b = append(b, t.model...)
	b = append(b, `,"model_version":"1","sequence_end":false,"sequence_id":0,"sequence_start":false,"text_output":"`...)
	b = append(b, piece...)
	b = append(b, '"')
	return append(stamp(b), "\n\n"...)
}

func (*tritonProto) end(b []byte, _ int, _ string) []byte { return b }

// --- SGLang: POST /generate ---

func (s *Simulator) handleSGLangGenerate(w http.ResponseWriter, r *http.Request, arrival time.Time) {
	var req struct {
		Text           *string `json:"text"`
		InputIDs       []int   `json:"input_ids"`
		Stream         bool    `json:"stream"`
		SamplingParams struct {
			MaxNewTokens *int `json:"max_new_tokens"`
			MinNewTokens *int `json:"min_new_tokens"`
			IgnoreEOS    bool `json:"ignore_eos"`
		} `json:"sampling_params"`
		// Log-probabilities, honoured without streaming (logprobs.go).
		ReturnLogprob        bool `json:"return_logprob"`
		LogprobStartLen      *int `json:"logprob_start_len"`
		ReturnTextInLogprobs bool `json:"return_text_in_logprobs"`
	}
	fail := func(status int, msg string) { writeError(w, status, msg) }
	if err := decodeBody(w, r, &req); err != nil {
		fail(http.StatusBadRequest, err.Error())
		return
	}
	var ids []int
	switch {
	case req.Text != nil && req.InputIDs == nil:
		ids = AppendTokenIDs(nil, *req.Text)
	case req.InputIDs != nil && req.Text == nil:
		for _, id := range req.InputIDs {
			if id < 0 || id >= VocabSize {
				fail(http.StatusBadRequest, fmt.Sprintf("input id %d is outside the vocabulary", id))
				return
			}
		}
		ids = req.InputIDs
	default:
		fail(http.StatusBadRequest, "exactly one of text and input_ids is required")
		return
	}
	if req.ReturnLogprob && req.Stream {
		fail(http.StatusBadRequest, "the simulator serves return_logprob without streaming only (\"stream\": false)")
		return
	}
	sp := req.SamplingParams
	np := &sglangProto{id: strconv.FormatUint(s.reqs.Add(1), 16), stream: req.Stream, seed: s.cfg.Seed}
	if req.ReturnLogprob {
		np.logprob = &sglangLogprobs{start: -1, withText: req.ReturnTextInLogprobs, pieces: promptPieces(req.Text, ids)}
		if req.LogprobStartLen != nil {
			np.logprob.start = *req.LogprobStartLen
		}
	}
	s.serveNative(w, r, arrival, ids, sp.MaxNewTokens, sp.MinNewTokens, sp.IgnoreEOS, false, np, fail)
}

// sglangProto renders SGLang's events: the whole text so far, and
// meta_info with the running counts, then "data: [DONE]". Without "stream"
// it answers one JSON body, {"text", "meta_info"}, whose meta_info carries
// the log-probabilities when return_logprob asked for them.
type sglangProto struct {
	id        string
	text      []byte
	p         *genParams
	promptLen int
	// cached is the prompt tokens the prefix cache served (setCached).
	cached  int
	stream  bool
	seed    uint64
	logprob *sglangLogprobs // nil: not asked for
}

func (g *sglangProto) setCached(n int) { g.cached = n }

// sglangLogprobs is what return_logprob asked for: input logprobs from
// prompt position start (SGLang's logprob_start_len; -1, its default, means
// the last prompt token only), with each token's text when withText.
type sglangLogprobs struct {
	start    int
	withText bool
	pieces   []string // the prompt tokens' texts
	ids      []int    // the prompt, kept by setParams
}

func (g *sglangProto) setParams(p *genParams) {
	g.p, g.promptLen = p, len(p.ids)
	if g.logprob != nil {
		g.logprob.ids = p.ids
	}
}
func (*sglangProto) contentType() string { return "text/event-stream" }
func (*sglangProto) malformed() []byte   { return []byte(sseMalformed) }
func (g *sglangProto) streams() bool     { return g.stream }

// appendFinish renders meta_info.finish_reason of the request's last frame.
func appendSGLangFinish(b []byte, produced int, reason string) []byte {
	if reason == finishStop {
		return append(b, `{"type":"stop","matched":2}`...)
	}
	b = append(b, `{"type":"length","length":`...)
	b = strconv.AppendInt(b, int64(produced), 10)
	return append(b, '}')
}

func (g *sglangProto) body(b []byte, produced int, reason string, penalty float64) []byte {
	b = append(b, `{"text":"`...)
	for i := range produced {
		b = append(b, outputPiece(g.p.key, i)...)
	}
	b = append(b, `","meta_info":{"id":"`...)
	b = append(b, g.id...)
	b = append(b, `","finish_reason":`...)
	b = appendSGLangFinish(b, produced, reason)
	b = append(b, `,"prompt_tokens":`...)
	b = strconv.AppendInt(b, int64(g.promptLen), 10)
	b = append(b, `,"completion_tokens":`...)
	b = strconv.AppendInt(b, int64(produced), 10)
	b = append(b, `,"cached_tokens":`...)
	b = strconv.AppendInt(b, int64(g.cached), 10)
	if lp := g.logprob; lp != nil {
		lps := sequenceLogprobs(g.seed, g.p.key, lp.ids, produced, penalty)
		n := len(lp.ids)
		start := lp.start
		if start < 0 || start >= n {
			start = n - 1
		}
		entry := func(b []byte, v float64, id int, text string) []byte {
			b = appendLogprob(append(b, '['), v)
			b = append(b, ',')
			b = strconv.AppendInt(b, int64(id), 10)
			b = append(b, ',')
			if lp.withText {
				t, _ := json.Marshal(text)
				b = append(b, t...)
			} else {
				b = append(b, "null"...)
			}
			return append(b, ']')
		}
		b = append(b, `,"input_token_logprobs":[`...)
		for i := start; i < n; i++ {
			if i > start {
				b = append(b, ',')
			}
			v := lps[i]
			if i == start {
				// SGLang pads the first returned position with None,
				// whatever the start: its logprob would need the token
				// before the window.
				v = math.NaN()
			}
			b = entry(b, v, lp.ids[i], lp.pieces[i])
		}
		b = append(b, `],"output_token_logprobs":[`...)
		for i := range produced {
			if i > 0 {
				b = append(b, ',')
			}
			piece := outputPiece(g.p.key, i)
			b = entry(b, lps[n+i], TokenID(piece[1:]), piece)
		}
		b = append(b, ']')
	}
	b = append(b, '}')
	return stamp(b)
}

func (g *sglangProto) token(b []byte, i int, piece string, last bool, reason string) []byte {
	g.text = append(g.text, piece...)
	b = append(b, `data: {"text":"`...)
	b = append(b, g.text...)
	b = append(b, `","meta_info":{"id":"`...)
	b = append(b, g.id...)
	b = append(b, `","finish_reason":`...)
	if last {
		b = appendSGLangFinish(b, i+1, reason)
	} else {
		b = append(b, "null"...)
	}
	b = append(b, `,"prompt_tokens":`...)
	b = strconv.AppendInt(b, int64(g.promptLen), 10)
	b = append(b, `,"completion_tokens":`...)
	b = strconv.AppendInt(b, int64(i+1), 10)
	b = append(b, `,"cached_tokens":`...)
	b = strconv.AppendInt(b, int64(g.cached), 10)
	b = append(b, `},"index":0`...)
	return append(stamp(b), "\n\n"...)
}

func (*sglangProto) end(b []byte, _ int, _ string) []byte { return append(b, sseDone...) }
