package prompt

// Eviction: a server's prefix-cache hit ratio is far below the best a
// workload's prompts allow when it is less than EvictionShare of it, once
// the workload has sent EvictionWarmups times its pool past the pool's
// warm-up and a best of at least EvictionMinBest. Exact counters on a
// cache that holds the pool give the best itself, less the prompts the
// server had not admitted when it was read, which the best at the
// reading's instant leaves out; half is far beyond that. The live
// exporter (probe/live) and the bench judge by this one rule.
const (
	EvictionShare   = 0.5
	EvictionWarmups = 2
	EvictionMinBest = 0.05
)

// Evicted is the eviction rule over a reading: the server's ratio, the
// best at the reading's instant, the prompts sent by then and the pool's
// size.
func Evicted(server, best float64, sent, pool int) bool {
	return sent >= (1+EvictionWarmups)*pool && best >= EvictionMinBest && server < EvictionShare*best
}
