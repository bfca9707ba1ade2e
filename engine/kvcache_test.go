package engine

import (
	"context"
	"testing"

	"github.com/infer-exporter/infer_exporter/internal/config"
	"github.com/infer-exporter/infer_exporter/internal/simulator/simulatortest"
)

// TestKVCacheOneShot: before the scraper's first poll has described the
// cache, KVCache reads the target's metrics once itself; a target not
// scraped has none.
func TestKVCacheOneShot(t *testing.T) {
	cfg := simulatortest.InstantConfig()
	cfg.BlockSize, cfg.KVBlocks, cfg.MaxModelLen = 8, 300, 2048
	url, _ := simulatortest.StartTest(t, cfg)
	sm := NewScraper(nil)
	defer sm.Close()
	c, err := config.Parse([]byte("targets:\n  - name: sim\n    url: "+url+"\n    model: sim-model\n"), "c.yml")
	if err != nil {
		t.Fatal(err)
	}
	if err := sm.ApplyConfig(context.Background(), c); err != nil {
		t.Fatal(err)
	}
	// Stop the background poll and forget its result: only the one-shot
	// read can answer.
	sc := sm.scrapers["sim"]
	sc.stop()
	sc.snap.Store(nil)
	kv, ok := sm.KVCache(context.Background(), "sim")
	if want := (KVCache{BlockSize: 8, Blocks: 300}); !ok || kv != want || kv.Tokens() != 2400 {
		t.Fatalf("KVCache = %+v %v, want %+v true", kv, ok, want)
	}
	if _, ok := sm.KVCache(context.Background(), "other"); ok {
		t.Errorf("a target not scraped has a KV cache")
	}
}

// TestReadKVCacheLabels: the block count and size are believed only as
// positive whole numbers, the smallest rank's blocks count, and ranks of
// different block sizes are not believed.
func TestReadKVCacheLabels(t *testing.T) {
	for _, tc := range []struct {
		name, body string
		want       KVCache
	}{
		{"one", `vllm:cache_config_info{block_size="16",num_gpu_blocks="1000",engine="0"} 1`, KVCache{16, 1000}},
		{"before profiling", `vllm:cache_config_info{block_size="16",num_gpu_blocks="None",engine="0"} 1`, KVCache{}},
		{"ranks", "vllm:cache_config_info{block_size=\"16\",num_gpu_blocks=\"900\",engine=\"0\"} 1\nvllm:cache_config_info{block_size=\"16\",num_gpu_blocks=\"700\",engine=\"1\"} 1", KVCache{16, 700}},
		{"ranks disagree", "vllm:cache_config_info{block_size=\"16\",num_gpu_blocks=\"900\",engine=\"0\"} 1\nvllm:cache_config_info{block_size=\"32\",num_gpu_blocks=\"700\",engine=\"1\"} 1", KVCache{}},
		{"huge", `vllm:cache_config_info{block_size="16",num_gpu_blocks="100000000000000"} 1`, KVCache{}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			fams, err := parseMetrics([]byte("# TYPE vllm:cache_config_info gauge\n" + tc.body + "\n"))
			if err != nil {
				t.Fatal(err)
			}
			if got := normalize(engineVLLM, fams, "").kvCache; got != tc.want {
				t.Errorf("got %+v, want %+v", got, tc.want)
			}
		})
	}
}
