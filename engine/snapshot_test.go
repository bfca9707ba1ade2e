package engine

import (
	"context"
	"fmt"
	"log/slog"
	"net/http/httptest"
	"strconv"
	"testing"

	"github.com/infer-exporter/infer_exporter/internal/config"
)

// TestSnapshotsMatchCollect: Snapshot, Snapshots and the rendered series
// tell the same thing, engine gauges and info included.
func TestSnapshotsMatchCollect(t *testing.T) {
	vllm := httptest.NewServer(serveFiles(map[string]string{"/metrics": "metrics_vllm_v1.txt", "/version": "version_vllm.json"}))
	defer vllm.Close()
	ollama := httptest.NewServer(serveFiles(map[string]string{"/api/version": "ollama_api_version.json", "/api/ps": "ollama_api_ps.json"}))
	defer ollama.Close()
	sm := NewScraper(slog.New(slog.DiscardHandler))
	defer sm.Close()
	c, err := config.Parse([]byte(fmt.Sprintf("targets:\n  - name: v\n    url: %s\n    model: facebook/opt-125m\n  - name: o\n    url: %s\n    model: tiny\n",
		vllm.URL, ollama.URL)), "c.yml")
	if err != nil {
		t.Fatal(err)
	}
	if err := sm.ApplyConfig(context.Background(), c); err != nil {
		t.Fatal(err)
	}
	waitSnapshot(t, sm, "v")
	waitSnapshot(t, sm, "o")

	if _, ok := sm.Snapshot("absent"); ok {
		t.Error("a snapshot of a target that is not scraped")
	}
	v, ok := sm.Snapshot("v")
	if !ok || v.Target != "v" || v.Engine != "vllm" || v.Model != "facebook/opt-125m" || !v.Up || v.At.IsZero() {
		t.Fatalf("vllm snapshot %+v", v)
	}
	if !v.HasInfo || v.Version != "0.4.3" || v.ServedModel != "facebook/opt-125m" || v.MaxContextLength != 0 {
		t.Errorf("vllm info %+v", v)
	}
	if v.PrefixCacheHits != (Reading{64, true}) || v.PrefixCacheQueries != (Reading{117, true}) || v.Running != (Reading{0, true}) {
		t.Errorf("vllm values %+v", v)
	}
	o, ok := sm.Snapshot("o")
	if !ok || o.Engine != "ollama" || !o.Up || !o.HasInfo || o.ServedModel != "tiny:latest" || o.MaxContextLength != 2048 || o.Running.OK || o.KVCacheUsage.OK {
		t.Errorf("ollama snapshot %+v", o)
	}

	all := sm.Snapshots()
	if len(all) != 2 || all[0].Target != "o" || all[1].Target != "v" {
		t.Fatalf("snapshots %+v", all)
	}
	// Every snapshot field that Collect renders is in the series.
	got := gatherServer(t, sm)
	for _, i := range all {
		lv := fmt.Sprintf("{engine=%s,model=%s,target=%s}", i.Engine, i.Model, i.Target)
		up := 0.0
		if i.Up {
			up = 1
		}
		want := map[string]float64{"infer_server_up" + lv: up}
		for name, r := range map[string]Reading{
			"requests_running": i.Running, "requests_waiting": i.Waiting, "kv_cache_usage_ratio": i.KVCacheUsage,
			"prefix_cache_hits_total": i.PrefixCacheHits, "prefix_cache_queries_total": i.PrefixCacheQueries, "preemptions_total": i.Preemptions,
			"prompt_tokens_total": i.PromptTokensTotal, "generation_tokens_total": i.GenerationTokensTotal,
		} {
			if r.OK {
				want["infer_server_"+name+lv] = r.Value
			} else if _, present := got["infer_server_"+name+lv]; present {
				t.Errorf("%s: infer_server_%s rendered but absent from the snapshot", i.Target, name)
			}
		}
		ctxLen := ""
		if i.MaxContextLength > 0 {
			ctxLen = strconv.Itoa(i.MaxContextLength)
		}
		maxLoRA := ""
		if i.MaxLoRA > 0 {
			maxLoRA = strconv.Itoa(i.MaxLoRA)
		}
		want[fmt.Sprintf("infer_server_info{engine=%s,max_context_length=%s,max_lora=%s,model=%s,target=%s,version=%s}", i.Engine, ctxLen, maxLoRA, i.ServedModel, i.Target, i.Version)] = 1
		want["infer_server_scrape_duration_seconds{target="+i.Target+"}"] = i.Duration.Seconds()
		for k, w := range want {
			if g, ok := got[k]; !ok || g != w {
				t.Errorf("%s = %v (present %v), want %v from the snapshot", k, g, ok, w)
			}
		}
	}
}
