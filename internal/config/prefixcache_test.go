package config

import (
	"strings"
	"testing"
)

func TestPrefixCacheErrors(t *testing.T) {
	prompt := func(lines string) string { return base + "    prompt:\n      input_tokens: {mean: 1024}\n" + lines }
	for _, tc := range []struct {
		name, yaml, want string
	}{
		{"rate above 0.99", prompt("      cache_hit_rate: 1\n"), "c.yml:12: workloads[0].prompt.cache_hit_rate: must be in [0, 0.99], got 1"},
		{"negative rate", prompt("      cache_hit_rate: -0.1\n"), "c.yml:12: workloads[0].prompt.cache_hit_rate: must be in [0, 0.99]"},
		{"negative pool", prompt("      cache_hit_rate: 0.5\n      prefix_pool: -1\n"), "c.yml:13: workloads[0].prompt.prefix_pool: must be in [1, 65536]"},
		{"pool too large", prompt("      cache_hit_rate: 0.5\n      prefix_pool: 70000\n"), "c.yml:13: workloads[0].prompt.prefix_pool: must be in [1, 65536]"},
		{"pool over its tokens", prompt("      cache_hit_rate: 0.9\n      prefix_pool: 60000\n"), "c.yml:13: workloads[0].prompt.prefix_pool: 60000 prefixes of up to 912 tokens are 54720000 tokens; at most 4194304"},
		{"bad block size", prompt("      cache_hit_rate: 0.5\n      block_size: 5000\n"), "c.yml:13: workloads[0].prompt.block_size: must be in [1, 4096]"},
		{"pool without a rate", prompt("      prefix_pool: 8\n"), "c.yml:10: workloads[0].prompt.cache_hit_rate: is required with prefix_pool or block_size"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Parse([]byte(tc.yaml), "c.yml")
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error %v, want %q", err, tc.want)
			}
		})
	}
	c, err := Parse([]byte(prompt("      cache_hit_rate: 0.5\n      prefix_pool: 8\n      block_size: 32\n")), "c.yml")
	if err != nil {
		t.Fatal(err)
	}
	if p := c.Workloads[0].Prompt; p.CacheHitRate != 0.5 || p.PrefixPool != 8 || p.BlockSize != 32 {
		t.Errorf("prompt %+v", p)
	}
}

func TestPrefixTokens(t *testing.T) {
	for _, tc := range []struct {
		rate      float64
		bs, n     int
		want      int
		wantPool  int
		poolGiven int
	}{
		{0, 0, 1024, 0, 1, 0},
		{0.5, 0, 1024, 512, 64, 0},
		{0.9, 0, 1024, 912, 35, 0}, // round(921.6) = 922, down to 912
		{0.9, 1, 1024, 922, 35, 0},
		{0.99, 16, 20, 16, 2048, 0},
		{0.99, 16, 16, 0, 1, 0}, // one block would leave the prompt nothing of its own
		{0.5, 0, 1024, 512, 7, 7},
	} {
		p := Prompt{InputTokens: Distribution{Dist: "fixed", Mean: float64(tc.n)}, CacheHitRate: tc.rate, BlockSize: tc.bs, PrefixPool: tc.poolGiven}
		if got := p.PrefixTokens(tc.n); got != tc.want {
			t.Errorf("rate %g block %d: prefix of %d tokens is %d, want %d", tc.rate, tc.bs, tc.n, got, tc.want)
		}
		if got := p.PrefixPoolOrDefault(); got != tc.wantPool {
			t.Errorf("rate %g block %d n %d: pool %d, want %d", tc.rate, tc.bs, tc.n, got, tc.wantPool)
		}
	}
}

// TestSizedToServer: the unset pool takes half the server's cache in the
// typical prompt's prefixes, the unset block size the server's; what the
// configuration sets stays, and a workload without a rate is unchanged.
func TestSizedToServer(t *testing.T) {
	p := Prompt{InputTokens: Distribution{Dist: "fixed", Mean: 1024}, CacheHitRate: 0.5}
	got := p.SizedToServer(16384, 32)
	if got.BlockSize != 32 || got.PrefixPool != 16 {
		t.Errorf("block %d pool %d, want 32 16 (8,192 tokens in prefixes of 512)", got.BlockSize, got.PrefixPool)
	}
	set := p
	set.PrefixPool, set.BlockSize = 3, 16
	if got := set.SizedToServer(16384, 32); got != set {
		t.Errorf("configured values changed: %+v", got)
	}
	if got := p.SizedToServer(100, 32); got.PrefixPool != 1 {
		t.Errorf("a cache smaller than a prefix: pool %d, want 1", got.PrefixPool)
	}
	if got := p.SizedToServer(1<<40, 16); got.PrefixPool*got.PrefixTokens(1024) > MaxPrefixPoolTokens || got.PrefixPool > MaxPrefixPool {
		t.Errorf("a huge cache: pool %d over the bounds", got.PrefixPool)
	}
	none := Prompt{InputTokens: p.InputTokens}
	if got := none.SizedToServer(16384, 32); got != none {
		t.Errorf("a workload without a rate changed: %+v", got)
	}
}
