// Package hashmix scrambles structured 64-bit keys into well-spread ones.
package hashmix

// Mix64 is SplitMix64's finaliser (Steele, Lea and Flood, "Fast splittable
// pseudorandom number generators", 2014): a bijection of uint64 in which
// every input bit affects every output bit. It turns structured keys (a seed,
// a counter, a position, a hash id, xor-ed or chained) into values that look
// random, so that reproducible per-key choices (a word, a length, an id) are
// spread evenly, at the cost of two multiplications and no state.
//
// Its output is part of what the callers reproduce (synthesised prompts,
// simulated answers, redacted fillers): changing it changes their output.
func Mix64(x uint64) uint64 {
	x ^= x >> 30
	x *= 0xbf58476d1ce4e5b9
	x ^= x >> 27
	x *= 0x94d049bb133111eb
	x ^= x >> 31
	return x
}
