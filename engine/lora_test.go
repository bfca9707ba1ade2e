package engine

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/infer-exporter/infer_exporter/internal/config"
)

// loraFrame is hand-written in vLLM's shape (docs/design/metrics.md, "LoRA
// Metrics"; the recorded scrapes have no LoRA): vLLM keeps every label set
// it ever set, each at the wall-clock time it was last set, so the series
// of the highest value is the state now.
const loraFrame = `# HELP vllm:lora_requests_info Running stats on lora requests.
# TYPE vllm:lora_requests_info gauge
vllm:lora_requests_info{max_lora="4",running_lora_adapters="",waiting_lora_adapters=""} 1.7e+09
vllm:lora_requests_info{max_lora="4",running_lora_adapters="finance, support",waiting_lora_adapters="legal"} 1.8e+09
vllm:lora_requests_info{max_lora="4",running_lora_adapters="old",waiting_lora_adapters="a,b,c"} 1.75e+09
# TYPE vllm:num_requests_running gauge
vllm:num_requests_running{model_name="base"} 2
`

func TestLoRALatestSeries(t *testing.T) {
	fams, err := parseMetrics([]byte(loraFrame))
	if err != nil {
		t.Fatal(err)
	}
	vs := normalize(engineVLLM, fams, "base")
	if !vs.hasLoRA || vs.loraRunning != 2 || vs.loraWaiting != 1 || vs.maxLoRA != 4 {
		t.Errorf("lora %v running %d waiting %d max %d; want true 2 1 4", vs.hasLoRA, vs.loraRunning, vs.loraWaiting, vs.maxLoRA)
	}
}

// TestLoRADataParallel: each data-parallel rank (vLLM's engine label) has
// its own latest series; an adapter running on two ranks is one adapter.
// A max_lora that is not a bounded whole number is left out.
func TestLoRADataParallel(t *testing.T) {
	fams, err := parseMetrics([]byte(`# TYPE vllm:lora_requests_info gauge
vllm:lora_requests_info{engine="0",max_lora="huge",running_lora_adapters="a,b",waiting_lora_adapters=""} 2e+09
vllm:lora_requests_info{engine="0",max_lora="huge",running_lora_adapters="z",waiting_lora_adapters="z"} 1e+09
vllm:lora_requests_info{engine="1",max_lora="99999999",running_lora_adapters="b,c",waiting_lora_adapters=""} 1.5e+09
`))
	if err != nil {
		t.Fatal(err)
	}
	vs := normalize(engineVLLM, fams, "")
	if !vs.hasLoRA || vs.loraRunning != 3 || vs.loraWaiting != 0 || vs.maxLoRA != 0 {
		t.Errorf("lora %v running %d waiting %d max %d; want true 3 0 0", vs.hasLoRA, vs.loraRunning, vs.loraWaiting, vs.maxLoRA)
	}
	// No LoRA family: nothing.
	fams, _ = parseMetrics([]byte("# TYPE vllm:num_requests_running gauge\nvllm:num_requests_running 1\n"))
	if vs := normalize(engineVLLM, fams, ""); vs.hasLoRA {
		t.Error("LoRA reported without vllm:lora_requests_info")
	}
}

// TestLoRASeries: the scraper renders the counts by state and max_lora in
// the info series.
func TestLoRASeries(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/metrics":
			w.Header().Set("Content-Type", "text/plain; version=0.0.4")
			fmt.Fprint(w, loraFrame)
		case "/version":
			w.Header().Set("Content-Type", "application/json")
			fmt.Fprint(w, `{"version":"0.10.1"}`)
		default:
			http.NotFound(w, r)
		}
	}))
	defer srv.Close()
	sm := NewScraper(slog.New(slog.DiscardHandler))
	defer sm.Close()
	c, err := config.Parse([]byte(fmt.Sprintf("targets:\n  - name: v\n    url: %s\n    model: base\n", srv.URL)), "c.yml")
	if err != nil {
		t.Fatal(err)
	}
	if err := sm.ApplyConfig(context.Background(), c); err != nil {
		t.Fatal(err)
	}
	waitSnapshot(t, sm, "v")
	got := gatherServer(t, sm)
	for k, v := range map[string]float64{
		"infer_server_lora_adapters{engine=vllm,model=base,state=running,target=v}": 2,
		"infer_server_lora_adapters{engine=vllm,model=base,state=waiting,target=v}": 1,
	} {
		if g, ok := got[k]; !ok || g != v {
			t.Errorf("%s = %v (present %v), want %v", k, g, ok, v)
		}
	}
	info := ""
	for k := range got {
		if strings.HasPrefix(k, "infer_server_info{") {
			info = k
		}
	}
	if !strings.Contains(info, ",max_lora=4,") {
		t.Errorf("info series %q, want max_lora=4", info)
	}
}
