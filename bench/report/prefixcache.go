package report

// PrefixCache is a repeat's (or a cell's, the median of its repeats')
// prefix-cache hit ratio seen three ways over the measured windows, for a
// shape with a declared cache_hit_rate (docs/bench.md): the client's, from
// the answers' usage; the server's, from its own counters; and the best the
// prompts sent allow. Ratios are NaN (null) where their counts are
// missing.
type PrefixCache struct {
	// DeclaredRate is the shape's cache_hit_rate (0 for none).
	DeclaredRate float64 `json:"declared_rate"`
	// PromptTokens and CachedTokens are the usage's prompt tokens and
	// cached prompt tokens (prompt_tokens_details.cached_tokens) of the
	// successful requests that ended within the measured windows;
	// ClientRatio is CachedTokens / PromptTokens.
	PromptTokens int `json:"prompt_tokens"`
	CachedTokens int `json:"cached_tokens"`
	ClientRatio  Num `json:"client_hit_ratio"`
	// ServerHits and ServerQueries are the increase of the engine's
	// prefix-cache counters (infer_server_prefix_cache_{hits,queries}_total,
	// in its unit) over the measured windows, read from its /metrics
	// through the repeat and interpolated to the windows' start and end;
	// ServerRatio is their ratio. NaN when the server reports none.
	ServerHits    Num `json:"server_hits"`
	ServerQueries Num `json:"server_queries"`
	ServerRatio   Num `json:"server_hit_ratio"`
	// BestRatio is the hit ratio of a cache that holds the whole prefix
	// pool over the same requests: the prompt tokens whose prefix an
	// earlier prompt of the set sent (a prefix's first use is a miss),
	// over the prompt tokens.
	BestRatio Num `json:"best_hit_ratio"`
	// Gap is BestRatio less the measured ratio: the server's, or the
	// client's where the server reports none.
	Gap Num `json:"gap"`
	// PromptsSent counts the repeat's prompts sent by the windows' end,
	// warm-up included; Pool is the shape's prefix pool. Evicted is the
	// exporter's eviction rule (prompt.Evicted) over the measured ratio,
	// the best, PromptsSent and Pool: the cache did not keep the pool.
	PromptsSent int  `json:"prompts_sent"`
	Pool        int  `json:"prefix_pool"`
	Evicted     bool `json:"eviction"`
	// Paired is the key of the cell of the same target and load whose
	// shape has this one's lengths and kinds at cache_hit_rate 0, when
	// the matrix has one (the first such shape); ThroughputRatio is this
	// cell's output tokens per second over the paired one's, TTFTP50Ratio
	// its TTFT p50 over the paired one's: what the cache bought. Cells
	// only; absent without a pair.
	Paired          string `json:"paired_cell,omitempty"`
	ThroughputRatio Num    `json:"throughput_ratio,omitempty"`
	TTFTP50Ratio    Num    `json:"ttft_p50_ratio,omitempty"`
}
