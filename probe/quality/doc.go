// Package quality is the quality probe: the perplexity of a target's model
// over a fixed reference text, computed from the log-probabilities the
// server gives the text's own tokens. A quantised, swapped or otherwise
// damaged model answers as fast as ever and its known-answer checks may
// still pass; its perplexity over the same bytes rises.
//
// # The figure
//
// The text (Reference, or any Text) is sent as a completion prompt; the
// server tokenizes it (adding a BOS token if its tokenizer does) and
// returns, for every prompt token, its log-probability given the tokens
// before it. The first token has no context, and no log-probability: it is
// not scored. Every other token must have one; an answer that lacks any
// (a server that does not recompute its prefix cache's tokens) is a failure
// (ReasonIncomplete), not a perplexity over fewer tokens, because that would
// not be comparable. With N scored tokens of log-probabilities lp_i (nats):
//
//	perplexity = exp(-(lp_1 + ... + lp_N) / N)
//
// Tokens is N, and Text.SHA256 names the bytes: two perplexities compare
// only over the same text and the same tokenizer (a model's perplexity
// depends on how its tokenizer splits the text; compare a model with its own
// earlier self, or models of one tokenizer).
//
// # Dialects
//
// One request, not streamed, generating one token:
//
//   - openai-chat and openai-completions targets (vLLM, and servers that
//     implement the OpenAI completions API's echo): POST /v1/completions
//     {"prompt", "echo": true, "logprobs": 1, "max_tokens": 1}, read from
//     choices[0].logprobs.token_logprobs, the first usage.prompt_tokens
//     entries. vLLM computes the prompt's log-probabilities with its prefix
//     cache bypassed, so every token is scored every time.
//   - sglang: POST /generate {"text", "return_logprob": true,
//     "logprob_start_len": 0}, read from meta_info.input_token_logprobs.
//   - tgi: POST /generate {"inputs", "parameters": {"details": true,
//     "decoder_input_details": true}}, read from details.prefill. TGI 3 and
//     later fill it only when started with --enable-prefill-logprobs.
//
// llama.cpp, Ollama and Triton cannot be scored (config.PerplexityUnsupported
// says why). Memory is bounded: the answer is read up to MaxResponseBytes,
// at most MaxTokens entries are read from it, one at a time, and summed as
// they are read.
//
// # Where it runs
//
// Monitor scores each target with a quality block at its interval (the live
// gauge infer_probe_perplexity); the /probe module kind perplexity scores
// once per scrape (package prober); the bench scores every target before
// its matrix (package bench).
package quality
