package report

// ServerTimings is where the measured successful requests' time went by
// the engine's own account (its per-request timings, read from each
// answer: docs/metrics.md), joined to the client's clock: the engine's
// queue, its own time to first token and its generation, and the client
// overhead, the client's TTFT less the engine's queue and TTFT (the
// network, a gateway, the server's front end, this client). One repeat's,
// from its records (the reservoir sample when Stats.Sampled), or their
// medians over repeats; absent when no measured successful request's
// answer carried any timings.
type ServerTimings struct {
	// Successes are the measured successful requests the figures come
	// from; Decomposed of them had their TTFT split (the engine gave its
	// TTFT), DecomposedRatio = Decomposed / Successes.
	Successes       int     `json:"successes"`
	Decomposed      int     `json:"decomposed"`
	DecomposedRatio float64 `json:"decomposed_ratio"`
	// Each part's p50 and p99 over the requests whose answer gave it (an
	// engine that reports no queue, llama.cpp's, has none), in seconds.
	Queue          TimingPart `json:"queue_seconds"`
	EngineTTFT     TimingPart `json:"engine_ttft_seconds"`
	Generation     TimingPart `json:"generation_seconds"`
	ClientOverhead TimingPart `json:"client_overhead_seconds"`
}

// TimingPart is one part of the requests' time: how many requests had it,
// and its p50 and p99 (null without any).
type TimingPart struct {
	Count int `json:"count"`
	P50   Num `json:"p50"`
	P99   Num `json:"p99"`
}

// ServerParts are one request's timings by the engine's account, in
// seconds, NaN where the answer did not give the part: a Record's, and as
// is a shard report's, which the merge pools.
type ServerParts struct {
	Queue          Num `json:"q"`
	EngineTTFT     Num `json:"f"`
	Generation     Num `json:"g"`
	ClientOverhead Num `json:"o"`
}
