package engine

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/infer-exporter/infer_exporter/internal/config"
	"github.com/infer-exporter/infer_exporter/internal/simulator/simulatortest"
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

// TestLoRASimulatorInFlight: the simulator serving the adapter sql-lora
// (and chat-lora) with --max-loras 1, two sql-lora requests and one
// chat-lora request held in flight (each stalls in the engine after its
// first token): the scraper's normalised gauge shows the truth, 1 adapter
// running and 1 waiting, and max_lora 1; once they end, none. A request for
// a model the server does not serve is still vLLM's 404.
func TestLoRASimulatorInFlight(t *testing.T) {
	cfg := simulatortest.InstantConfig()
	cfg.LoRAAdapters = []string{"sql-lora", "chat-lora"}
	cfg.MaxLoRA = 1
	cfg.Faults.StallMidStream = time.Minute
	cfg.Faults.StallAfterTokens = 1
	url, sim := simulatortest.StartTest(t, cfg)

	resp, err := http.Post(url+"/v1/chat/completions", "application/json",
		strings.NewReader(`{"model":"other-lora","messages":[{"role":"user","content":"hi"}]}`))
	if err != nil {
		t.Fatal(err)
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusNotFound {
		t.Errorf("unknown model: status %d, want 404", resp.StatusCode)
	}

	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	defer wg.Wait()
	defer cancel()
	send := func(model string) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			req, _ := http.NewRequestWithContext(ctx, http.MethodPost, url+"/v1/chat/completions", strings.NewReader(
				`{"model":"`+model+`","messages":[{"role":"user","content":"hi"}],"max_tokens":4,"ignore_eos":true,"stream":true}`))
			req.Header.Set("Content-Type", "application/json")
			if resp, err := http.DefaultClient.Do(req); err == nil {
				_, _ = io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
			}
		}()
	}
	// The simulator's own state, before the scraper looks: both sql-lora
	// requests running, chat-lora's waiting. chat-lora's is sent once
	// sql-lora runs, so that the order of arrival is the test's, not the
	// scheduler's.
	simLoRA := func() (running, waiting string) {
		mfs, _ := sim.Registry().Gather()
		best := -1.0
		for _, mf := range mfs {
			if mf.GetName() != "vllm:lora_requests_info" {
				continue
			}
			for _, m := range mf.Metric {
				if v := m.GetGauge().GetValue(); v > best {
					best = v
					running, _ = labelValue(m, "running_lora_adapters")
					waiting, _ = labelValue(m, "waiting_lora_adapters")
				}
			}
		}
		return running, waiting
	}
	inFlight := func() bool {
		r, w := simLoRA()
		return r == "sql-lora" && w == "chat-lora"
	}
	send("sql-lora")
	send("sql-lora")
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(5 * time.Millisecond) {
		if r, _ := simLoRA(); r == "sql-lora" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("sql-lora not running within 10 s")
		}
	}
	send("chat-lora")
	for deadline := time.Now().Add(10 * time.Second); !inFlight(); time.Sleep(5 * time.Millisecond) {
		if time.Now().After(deadline) {
			r, w := simLoRA()
			t.Fatalf("the simulator runs %q and queues %q, want sql-lora and chat-lora", r, w)
		}
	}

	scrapeLoRA := func() map[string]float64 {
		sm := NewScraper(slog.New(slog.DiscardHandler))
		defer sm.Close()
		c, err := config.Parse([]byte("targets:\n  - name: sim\n    url: "+url+"\n    model: sim-model\n"), "c.yml")
		if err != nil {
			t.Fatal(err)
		}
		if err := sm.ApplyConfig(context.Background(), c); err != nil {
			t.Fatal(err)
		}
		waitSnapshot(t, sm, "sim")
		got := gatherServer(t, sm)
		info := ""
		for k := range got {
			if strings.HasPrefix(k, "infer_server_info{") {
				info = k
			}
		}
		if !strings.Contains(info, ",max_lora=1,") {
			t.Errorf("info series %q, want max_lora=1", info)
		}
		return got
	}
	got := scrapeLoRA()
	for k, v := range map[string]float64{
		"infer_server_lora_adapters{engine=vllm,model=sim-model,state=running,target=sim}": 1,
		"infer_server_lora_adapters{engine=vllm,model=sim-model,state=waiting,target=sim}": 1,
	} {
		if g, ok := got[k]; !ok || g != v {
			t.Errorf("in flight: %s = %v (present %v), want %v", k, g, ok, v)
		}
	}

	cancel()
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(5 * time.Millisecond) {
		if r, w := simLoRA(); r == "" && w == "" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("adapters still in flight after the clients left")
		}
	}
	got = scrapeLoRA()
	for _, state := range []string{"running", "waiting"} {
		k := "infer_server_lora_adapters{engine=vllm,model=sim-model,state=" + state + ",target=sim}"
		if g, ok := got[k]; !ok || g != 0 {
			t.Errorf("after: %s = %v (present %v), want 0", k, g, ok)
		}
	}
}
