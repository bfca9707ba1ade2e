// Package engine reads each target's own /metrics and info endpoints and
// normalises them to infer_server_*: one schema (requests running and
// waiting, KV cache usage, prefix-cache hits and queries, preemptions, the
// engine's per-request histograms (its TTFT, queue, prefill and decode
// times, prompt and generation lengths: histogram.go), finished requests by
// normalised reason, and the engine's name, version, served model and
// context length) for vLLM,
// SGLang, TGI, llama.cpp, Ollama, Triton, trtllm-serve and NIM.
//
// A Scraper reads every target in the background, one goroutine per target,
// into an immutable snapshot swapped atomically. Its Prometheus Collect
// renders the latest snapshots, and Snapshot / Snapshots return the same
// snapshots typed (Info), for readers such as the bench, so that the two
// cannot disagree. server.go holds the scraper, parse.go the reading of a
// metrics body (a stream of which only the mapped families are parsed,
// bounded in series, bytes and time, duplicate series refused),
// engines.go the mapping from each engine's metric names (and its health
// endpoint), readiness.go
// what each poll found of the server's life: whether it answered, whether
// its health endpoint says it is ready, and its process start, told to a
// PollObserver (the cold-start tracker, probe/coldstart). While a server
// is not ready it is polled every ReadyPollInterval between scrapes.
//
// It is not one of the host collectors of package collector: it needs the
// configuration's targets (ApplyConfig, Apply on reload), not flags.
package engine
