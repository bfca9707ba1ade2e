// Package simulator is an OpenAI-compatible inference server, as vLLM serves
// it, with a continuous-batching timing model and ground truth. The
// exporter's --demo mode and its tests run against it; `infer_exporter
// simulate` serves it on its own (see Serve and AddFlags).
//
// # API
//
//   - POST /v1/completions and POST /v1/chat/completions, streaming (SSE:
//     "data: {json}" events separated by a blank line, ending with
//     "data: [DONE]") and not. The first chat chunk carries the role only
//     (delta {"role":"assistant","content":""}, as vLLM sends it); every
//     following content chunk carries exactly one token; the last content
//     chunk carries finish_reason ("length" when completion_tokens ==
//     max_tokens, else "stop"). stream_options.include_usage adds a final
//     chunk with "choices":[] and usage {prompt_tokens, total_tokens,
//     completion_tokens}; with it, the other chunks carry "usage":null.
//     Honoured fields: model (empty, the served name or a LoRA adapter's;
//     another name is a 404, see LoRA adapters), prompt (a string, an
//     array of token ids, or an array of one string), messages (content a
//     string, an array of text and image_url parts, or null; see Images),
//     max_tokens (max_completion_tokens wins for chat), min_tokens,
//     ignore_eos, stream, stream_options.include_usage, n (only 1), and, for
//     /v1/completions without streaming, echo, logprobs and prompt_logprobs
//     (see Log-probabilities). Other fields (temperature, stop, ...) are
//     ignored. Malformed JSON and invalid
//     values get a 400 with vLLM's body
//     {"error":{"message":...,"type":"BadRequestError","param":null,"code":400}}.
//   - GET /v1/models, GET /health, GET /version ({"version": Version}),
//     POST /tokenize ({"prompt": ...} or {"messages": ...,
//     "add_generation_prompt": true} gives {count, max_model_len, tokens}).
//   - GET /metrics: vLLM v1 series with a model_name label (see Metrics).
//   - GET /admin/faults returns the fault injection as JSON; PUT or POST
//     /admin/faults replaces it (see Faults).
//
// Output length: with ignore_eos a request generates exactly max_tokens
// (default min(256, max_model_len - prompt)). Otherwise it stops after k
// tokens, k drawn uniformly from [max(min_tokens, 1), max_tokens] by a hash
// of Config.Seed and the prompt's token ids, so the same request always
// gets the same length and the same words. prompt + max_tokens above
// max_model_len is a 400, as in vLLM.
//
// # Reasoning mode
//
// With Config.ReasoningTokens N > 0 (--sim.reasoning-tokens) the model
// reasons before it answers, as vLLM serves a reasoning model with a
// reasoning parser. In every chat generation (/v1/chat/completions, and
// Ollama's /api/chat and /api/generate) the first N generated tokens are
// reasoning and the rest are the answer; /v1/completions and the other
// native APIs do not reason. Streamed, after the role chunk, each
// reasoning token is one chunk whose delta holds only the reasoning field,
// {"reasoning":" word"} or, with Config.ReasoningField "reasoning_content"
// (--sim.reasoning-field), {"reasoning_content":" word"}, with no content
// member; each answer token is then one {"content":" word"} chunk as
// without reasoning. Ollama streams the reasoning in "thinking"
// (/api/generate) or message.thinking (/api/chat), beside an empty
// response or message.content. A non-streaming chat body holds the answer
// in message.content (null when there is none) and the reasoning text in
// message.<field>.
//
// max_tokens counts both kinds, as in vLLM: with ignore_eos a request
// generates max_tokens tokens, of which min(N, max_tokens) are reasoning.
// Without it the EOS point is drawn from [max(min_tokens, N+1),
// max_tokens], so that the model stops only after at least one answer
// token; a max_tokens of N or less leaves no room for an answer, and the
// request generates max_tokens reasoning tokens and ends with "length".
// Usage counts every token in completion_tokens and adds
// "completion_tokens_details": {"reasoning_tokens": R}, R the reasoning
// tokens among them (R = min(N, completion_tokens)); Ollama's eval_count
// counts both, with no separate count, as Ollama does. The ground truth is
// unchanged: every chunk, reasoning or answer, carries its
// sim_emit_unix_nano, so a client's time to first token is the first
// reasoning chunk's stamp and its time to first answer token the first
// content chunk's. The engine's timing model and metrics do not tell the
// two kinds apart (each is one generated token).
//
// # Tool calls
//
// A /v1/chat/completions request that offers "tools" (and whose
// tool_choice is not "none") is answered with a call of the first tool's
// function, as vLLM streams one with a tool-call
// parser: after the role chunk (and any reasoning), the first answer token
// is one chunk whose delta is {"tool_calls":[{"index":0,"id":"call_0",
// "type":"function","function":{"name":"<name>","arguments":""}}]}, and
// each later token one {"tool_calls":[{"index":0,"function":{"arguments":
// "<piece>"}}]} chunk, with no content member; a generation that stops
// says finish_reason "tool_calls". Each is one generated token at the
// decode step, as a content token is, stamped alike, and usage counts them
// all. The arguments are a JSON document the function's parameters accept
// (structured.go), a piece a token. A non-streaming body holds the call in
// message.tool_calls (content null). Ollama's native APIs ignore tools.
//
// With Config.ToolTurns (--sim.tool-turns) set, the simulator plays an
// agent's model: a request is answered with a call only while its messages
// hold fewer than ToolTurns rounds of tool results (runs of role "tool"
// messages: one round answers all of a turn's calls), then with text.
//
// With Config.ToolCalls (--sim.tool-calls) above 1, an answer that calls
// tools holds that many parallel calls, streamed one after the other as
// vLLM streams them: call j's first delta opens it under "index": j with
// the id call_<j> and the name of offered tool j modulo their number (or
// of the one a named tool_choice names), its later deltas carry its
// arguments under the same index. The answer tokens are shared among the
// calls as evenly as they go, the first calls taking one more; an answer
// of fewer tokens than calls holds a call a token, its arguments whole in
// it. Each call's arguments are a document its function's parameters
// accept, cut by invalid_structured on their own. A body holds them all in
// message.tool_calls. The Responses API answers with one call whatever
// ToolCalls says.
//
// # Responses API
//
// With the vLLM engines, POST /v1/responses serves the OpenAI Responses API
// as vLLM does. Its request is a chat generation: "instructions" is a
// system message and "input" a user message (a string) or a list of items,
// messages (content a string or an array of input_text, output_text or
// text parts) and function_call_output items (a tool message), other items
// ignored; it reasons in reasoning mode. Honoured fields: model, input,
// instructions, max_output_tokens (as max_tokens), stream, tools and
// tool_choice (a tool's name and parameters are read at its top level, or
// in "function"; the call is of the first tool, or of the one tool_choice
// {"type":"function","name":...} names), text.format (json_schema or
// json_object, as chat's response_format), and, as the simulator's length
// controls, ignore_eos and min_tokens (vLLM's /v1/responses has neither).
// A call's arguments and a text.format answer are a JSON document its
// schema accepts, spread over the answer tokens (structured.go), cut by
// invalid_structured as for chat; a call's name is its first answer token,
// as chat's is. Streamed, each event is an
// "event: <type>" line and a "data:" line whose JSON has that "type", the
// next "sequence_number" from 0 and a sim_emit_unix_nano, then a blank
// line: response.created and response.in_progress, written before the
// first token; for the reasoning (in reasoning mode) a reasoning item's
// response.output_item.added and response.content_part.added, one
// response.reasoning_text.delta per reasoning token, its .done, the part's
// and the item's done events; then the answer's item: a message with one
// response.output_text.delta per token, or, for a request with tools, a
// function_call item, whose output_item.added names it and is the first
// answer token, then one response.function_call_arguments.delta per token
// (so that each generated token is one event; a call of a single answer
// token has its added event and one delta with the whole arguments); its done
// events, which repeat the text (without pad_content_bytes' padding); and
// response.completed, or response.incomplete with incomplete_details
// {"reason": "max_output_tokens"} when the generation ended at its length,
// carrying the response with its output and usage {input_tokens,
// output_tokens, output_tokens_details.reasoning_tokens, total_tokens}.
// There is no [DONE]. Not streamed, the answer is that response object,
// with sim_arrival_unix_nano and sim_emit_unix_nano. The malformed-chunk
// fault writes a response.output_text.delta event whose data is
// "{not json".
//
// # LoRA adapters
//
// Config.LoRAAdapters (--sim.lora-adapters=a,b, repeatable; at most
// MaxLoRAAdapters, and they need Config.MaxLoRA >= 1) are model names
// served beside Config.Model, as vLLM serves --lora-modules. A request
// whose model is an adapter's, on /v1/completions, /v1/chat/completions,
// /v1/responses and /tokenize, is served as the base model's (same
// lengths, words and timing model), and its answer names the adapter in
// "model", as vLLM's does; the native APIs of the other engines serve the
// base model only. Any other name is vLLM's 404 ("The model `x` does not
// exist.", type NotFoundError). GET /v1/models lists the base model, then
// each adapter as vLLM's serving_models does: id and root the adapter's
// name (vLLM's root is the adapter's path; the simulator has none), parent
// the base model, max_model_len null. The metrics keep the base model's
// model_name, as vLLM's do.
//
// A running batch holds requests of at most MaxLoRA distinct adapters: a
// request of another adapter is skipped at admission and waits (those
// behind it may be admitted), as vLLM's scheduler skips it; base-model
// requests are not limited. The prefix cache keys an adapter's blocks by
// its name (the hash chain starts from adapterKey instead of 0), so that
// a prompt cached for the base model or another adapter is no hit, as in
// vLLM.
//
// # Images
//
// A chat message's content parts {"type":"image_url","image_url":{"url":
// ...}} (the url may also be the part's image_url string), Responses'
// {"type":"input_image","image_url":...} parts, and Ollama's base64
// "images" (a chat message's, or /api/generate's) are images: each is
// Config.ImageTokens prompt tokens (--sim.image-tokens, DefaultImageTokens
// = 576 as LLaVA-1.5's 336 px CLIP encoder gives; 0: images add nothing),
// placed after the words of the message that carries it (see Tokenizer).
// They count wherever prompt tokens count: usage.prompt_tokens (Responses'
// input_tokens, Ollama's prompt_eval_count), /tokenize, the context-length
// check, the prefill's cost and chunks, the KV cache and prefix cache
// (equal images are equal tokens: a repeated image hits), and
// vllm:prompt_tokens_total and vllm:request_prompt_tokens. The image is not
// decoded: its identity is a hash of its base64 data (or of its URL when it
// is no data URL). A request with more than MaxPromptImages (64) images is
// a 400 ("At most 64 image(s) may be provided in one prompt.", as vLLM
// refuses more than --limit-mm-per-prompt), and so is an image part
// without a url or an empty Ollama image.
//
// # Tokenizer
//
// Specified in tokenizer.go: tokens are strings.Fields words, ids are FNV-1a
// 32 of the word modulo VocabSize; a chat message adds 3 template tokens and
// the generation prompt 1; an image is Config.ImageTokens tokens after its
// message's words; generated tokens are words of OutputVocabulary
// with a leading space, so output text tokenizes back to completion_tokens.
// A prompt of exactly N tokens is N words.
//
// # Ground truth
//
// Every streamed chunk's JSON carries a top-level "sim_emit_unix_nano"
// (int64): the server's wall clock in Unix nanoseconds, read while the chunk
// is rendered, immediately before it is written to the connection. The
// tokens that are ready together are written back to back and flushed
// once, so a chunk reaches the socket within microseconds of its stamp.
// The [DONE] event and the malformed-chunk fault carry no stamp. Every
// response carries the header X-Sim-Arrival-Unix-Nano: the instant the
// handler received the request. Non-streaming bodies also carry
// "sim_arrival_unix_nano" and "sim_emit_unix_nano". OpenAI clients ignore
// unknown fields, so they are unaffected.
//
// # Timing model
//
// One engine goroutine runs steps, as vLLM's engine core does. Each step:
//
//  1. Running sequences, in admission order, get their next tokens within
//     the step's token budget (MaxBatchedTokens): one token for a decode,
//     the next chunk for an unfinished prefill (chunked prefill). When a
//     sequence needs a KV block and none is free, the most recently admitted
//     running sequence is preempted (recompute: it returns to the front of
//     the queue, loses its blocks and later recomputes its prompt and the
//     tokens it had generated; a client sees a pause, not lost tokens).
//  2. If nothing was preempted, waiting sequences are admitted in FCFS
//     order while there are fewer than MaxNumSeqs running, budget is left
//     and the KV cache has room for the chunk to compute; the first that
//     does not fit waits, and so does everyone behind it.
//  3. The step costs DecodeStep + DecodePerSeq × (sequences that sample a
//     token) + (prefill tokens) / PrefillTokensPerSecond, where prefill
//     tokens are all tokens computed except the single input token of each
//     decode. Its wall duration is that cost × TimeScale × Faults.Slowdown.
//  4. The loop sleeps until the step's end instant, measured from the step's
//     start, and the step's start is the previous step's end while the
//     engine stays busy (so durations do not drift; after a lag of more
//     than 10ms the clock restarts from now). With TimeScale 0 steps run back
//     to back.
//  5. Then every sequence whose prompt (or recomputation) is complete
//     samples a token: the step that computes the last prompt chunk also
//     yields the first token, as in vLLM. The handler writes it at once.
//
// So a request's TTFT (from arrival) is its time in the queue, plus every
// step from its admission to the end of the step that completes its
// prefill (the steps it shares with other sequences' decodes and prefills
// included). Each later token costs one step.
//
// # Prefix cache and KV accounting
//
// The KV cache has KVBlocks blocks of BlockSize tokens. Full prompt blocks
// are identified by a hash chain over token ids (block j hashes block j-1's
// hash and its own ids), so two prompts share block j only if they share
// every token up to its end. A block enters the cache at the end of the
// step that computes its last token. At admission a sequence looks up its
// leading full prompt blocks, stopping at the first miss; the block that
// holds the last token to compute is never looked up (at least one token
// is computed, for logits): at most floor((tokens-1)/BlockSize) blocks hit.
// Then vllm:prefix_cache_queries_total grows by the sequence's tokens
// (prompt, plus generated tokens for a recomputation) and
// vllm:prefix_cache_hits_total by hit blocks × BlockSize. Without
// preemption (vllm:num_preemptions_total == 0) every request is counted
// once, at its first admission. Blocks of generated tokens are not cached.
// Blocks stay cached after their sequence ends and are evicted in LRU order
// (a sequence's tail blocks first) only when a block is needed for new
// content. vllm:kv_cache_usage_perc is the fraction of blocks referenced by
// a running sequence (cached, unreferenced blocks count as free).
//
// Per request, the same figures are ground truth: Simulator.PrefixRecord
// gives, for a request sent with an X-Request-Id, its prompt tokens, the
// tokens its first admission found cached (hit blocks × BlockSize), its
// arrival, first admission, first and last tokens' instants and its
// generated tokens (the latest 4096 such requests are kept). Since only prompt blocks are cached, and the chat
// template's generation prompt (<|assistant|>) is not the rendered
// assistant message's first token (<|im_start|>), a chat turn whose
// messages extend the previous turn's hits that turn's prompt less its
// last token, in whole blocks, and none of its reply; a completions
// prompt that extends the previous prompt and its reply hits the previous
// prompt, in whole blocks.
//
// # Metrics
//
// vllm:num_requests_running, vllm:num_requests_waiting,
// vllm:kv_cache_usage_perc (0..1), vllm:prefix_cache_queries_total,
// vllm:prefix_cache_hits_total, vllm:num_preemptions_total,
// vllm:prompt_tokens_total (added when a request samples its first token),
// vllm:generation_tokens_total (every sampled token),
// vllm:lora_requests_info (with Config.MaxLoRA above 0, 1 by default:
// max_lora, and running_lora_adapters and waiting_lora_adapters the
// adapters with requests running and waiting, each comma-joined in
// Config.LoRAAdapters' order, "" for none; as vLLM does, each change sets
// a new series and the old ones stay, at most 64 of them, the oldest
// forgotten; the value is the wall-clock time the series was last set, and
// the current series is set at every scrape, so the series of the highest
// value is the state at the scrape),
// vllm:request_success_total{finished_reason="stop"|"length"|"abort"}
// (abort: the client went away before the engine finished the request),
// and the histograms vllm:time_to_first_token_seconds,
// vllm:inter_token_latency_seconds and vllm:e2e_request_latency_seconds,
// measured in wall time by the engine at the end of the step that sampled
// the token (aborted requests observe no e2e). When a request finishes
// (not when it is aborted), vllm:request_queue_time_seconds (arrival to
// the start of the step that first admitted it), _prefill_time_seconds
// (that instant to its first token), _decode_time_seconds (first token to
// last) and vllm:request_prompt_tokens and _generation_tokens (buckets 1,
// 2, 5, 10, ... up to MaxModelLen, as vLLM's); PrefixRecord holds the
// same instants per request. Injected errors and 4xx never
// reach the engine and are not counted.
//
// # Faults
//
// Set by --fault.* flags (Config.Faults) and at run time through
// /admin/faults, whose JSON is
//
//	{"slowdown": 1, "error_rate": 0, "error_status": 503,
//	 "stall_before_first_token": "0s", "stall_mid_stream": "0s",
//	 "stall_after_tokens": 0, "disconnect_after_tokens": 0,
//	 "malformed_after_tokens": 0, "slow_headers": "0s",
//	 "logprob_penalty": 0}
//
// A PUT or POST replaces the whole set: fields left out are off; unknown
// fields or invalid values are a 400. Durations are wall time, not scaled.
// A request keeps the faults in force when it arrived; slowdown applies to
// the steps that start after the change. For a completion request, in order:
//
//   - error_rate: the request is answered at once with error_status (429,
//     500 or 503) and an OpenAI error body; it never reaches the engine. The
//     draws come from a generator seeded by Config.Seed.
//   - slow_headers: the handler waits this long before the response headers
//     are written; the request is not yet queued.
//   - stall_before_first_token: after the headers (and their flush, when
//     streaming), the request waits this long before it joins the queue; it
//     holds no engine resources meanwhile. TTFT grows by the stall.
//   - stall_mid_stream with stall_after_tokens N >= 1: after the step that
//     samples token N, the sequence is paused in the engine for the stall
//     (it keeps its KV blocks and batch slot; other sequences go on). The
//     gap between chunk N and N+1 is at least the stall; later tokens come
//     at the normal pace. No effect if the request has no token N+1.
//   - disconnect_after_tokens N: after the N-th content chunk is written
//     and flushed, the connection is closed abruptly (no usage chunk, no
//     [DONE], no terminating chunk). Non-streaming: when the completion has
//     at least N tokens the connection is closed instead of answering.
//     The engine counts the request as an abort if it had not finished.
//   - malformed_after_tokens N: after the N-th content chunk one event
//     "data: {not json" is written, then the stream continues normally to
//     [DONE]. Non-streaming: when the completion has at least N tokens the
//     body is "{not json" (status 200).
//
// A fault keyed on N has no effect on a request that generates fewer than N
// tokens. logprob_penalty (nats, 0 to MaxLogprobPenalty) subtracts that much
// from every log-probability the request's answer reports (see
// Log-probabilities): a degraded model, whose perplexity over any text is
// exp(logprob_penalty) times the healthy one.
//
// # Log-probabilities
//
// Every token after the first of a sequence has a deterministic
// log-probability, a function of Config.Seed, the token and every token
// before it (logprobs.go specifies it); the first has none (null), as in
// every engine. TokenLogprobs computes them and ExpectedPerplexity the
// perplexity a client should find over a text, so that a perplexity probe
// can be checked against the truth. They are reported without streaming
// only (a streamed request that asks for them is a 400), in three dialects:
//
//   - vLLM, POST /v1/completions: "echo": true repeats the prompt before
//     the generated text; "logprobs": N (0..20) adds
//     choices[0].logprobs {tokens, token_logprobs, top_logprobs,
//     text_offset}, over the echoed prompt's tokens (null for the first)
//     and then the generated ones; "prompt_logprobs": N adds
//     choices[0].prompt_logprobs, [null, {"<id>": {"logprob", "rank": 1,
//     "decoded_token"}}, ...]. top_logprobs holds the token itself only.
//   - SGLang, POST /generate without "stream": {"text", "meta_info"}; with
//     "return_logprob": true, meta_info.input_token_logprobs lists
//     [logprob, token id, text] from prompt position logprob_start_len (the
//     last prompt token when absent or -1), the first entry's logprob null
//     as SGLang pads it, and meta_info.output_token_logprobs the generated
//     tokens'; the texts are null unless "return_text_in_logprobs".
//   - TGI, POST /generate: {"generated_text", "details"}; with
//     parameters.details, details.tokens lists the generated tokens with
//     their logprob, and with parameters.decoder_input_details
//     details.prefill lists the prompt's tokens {id, text, logprob}, the
//     first's null.
package simulator
