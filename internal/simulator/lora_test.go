package simulator_test

import (
	"bufio"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/infer-exporter/infer_exporter/internal/simulator"
)

// loraSeries matches one series of vllm:lora_requests_info in the text
// exposition (labels in the order the registry sorts them).
var loraSeries = regexp.MustCompile(`^vllm:lora_requests_info\{max_lora="([^"]*)",running_lora_adapters="([^"]*)",waiting_lora_adapters="([^"]*)"\} (\S+)$`)

// loraState reads the LoRA gauge as a client of vLLM must: the series of the
// highest value is the state now. It returns that series' labels and how
// many series there are.
func loraState(t testing.TB, client *http.Client, base string) (maxLoRA, running, waiting string, series int) {
	t.Helper()
	resp, err := client.Get(base + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	best := -1.0
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		m := loraSeries.FindStringSubmatch(sc.Text())
		if m == nil {
			continue
		}
		series++
		v, err := strconv.ParseFloat(m[4], 64)
		if err != nil {
			t.Fatalf("lora value %q: %v", m[4], err)
		}
		if v == best {
			t.Fatalf("two LoRA series share the value %v: the state now is ambiguous", v)
		}
		if v > best {
			best, maxLoRA, running, waiting = v, m[1], m[2], m[3]
		}
	}
	if series == 0 {
		t.Fatal("no vllm:lora_requests_info")
	}
	return maxLoRA, running, waiting, series
}

// TestLoRAAdapters: a simulator serving two adapters beside its base model
// serves each by name on the OpenAI endpoints (the answer names the
// adapter, as vLLM's does), lists them in /v1/models as vLLM does, refuses
// any other name with vLLM's 404, and keeps adapters apart in the prefix
// cache.
func TestLoRAAdapters(t *testing.T) {
	base, _, client := start(t, func(c *simulator.Config) {
		c.LoRAAdapters = []string{"sql-lora", "chat-lora"}
		c.BlockSize = 4
	})
	var models struct {
		Data []struct {
			ID          string  `json:"id"`
			Root        string  `json:"root"`
			Parent      *string `json:"parent"`
			MaxModelLen *int    `json:"max_model_len"`
		} `json:"data"`
	}
	if st := getJSON(t, client, http.MethodGet, base+"/v1/models", nil, &models); st != 200 {
		t.Fatalf("models status %d", st)
	}
	if len(models.Data) != 3 {
		t.Fatalf("models %+v, want the base and two adapters", models.Data)
	}
	if m := models.Data[0]; m.ID != "sim-model" || m.Parent != nil || m.MaxModelLen == nil || *m.MaxModelLen != 32768 {
		t.Errorf("base model card %+v", m)
	}
	for i, name := range []string{"sql-lora", "chat-lora"} {
		m := models.Data[i+1]
		if m.ID != name || m.Root != name || m.Parent == nil || *m.Parent != "sim-model" || m.MaxModelLen != nil {
			t.Errorf("adapter card %d %+v, want id and root %s, parent sim-model, no max_model_len", i, m, name)
		}
	}

	prompt := words(40, "p")
	for _, tc := range []struct {
		path  string
		body  map[string]any
		model func(map[string]any) string
	}{
		{"/v1/chat/completions", map[string]any{"model": "sql-lora", "messages": []map[string]any{{"role": "user", "content": prompt}}, "max_tokens": 3},
			func(b map[string]any) string { s, _ := b["model"].(string); return s }},
		{"/v1/completions", map[string]any{"model": "sql-lora", "prompt": prompt, "max_tokens": 3},
			func(b map[string]any) string { s, _ := b["model"].(string); return s }},
		{"/v1/responses", map[string]any{"model": "chat-lora", "input": prompt, "max_output_tokens": 3},
			func(b map[string]any) string { s, _ := b["model"].(string); return s }},
	} {
		b, _ := json.Marshal(tc.body)
		var out map[string]any
		if st := getJSON(t, client, http.MethodPost, base+tc.path, strings.NewReader(string(b)), &out); st != 200 {
			t.Fatalf("%s for %s: status %d", tc.path, tc.body["model"], st)
		}
		if got := tc.model(out); got != tc.body["model"] {
			t.Errorf("%s answered for model %q, want %q", tc.path, got, tc.body["model"])
		}
	}
	// A stream names the adapter in every chunk.
	res := streamRequest(t, context.Background(), client, base+"/v1/chat/completions",
		map[string]any{"model": "chat-lora", "messages": []map[string]any{{"role": "user", "content": "hi"}}, "max_tokens": 2, "stream": true}, nil)
	if res.status != 200 || len(res.contents()) == 0 {
		t.Fatalf("stream status %d, %d content chunks", res.status, len(res.contents()))
	}
	for _, c := range res.contents() {
		if c.Model != "chat-lora" {
			t.Errorf("chunk model %q, want chat-lora", c.Model)
		}
	}
	// /tokenize takes an adapter's name too.
	if st := getJSON(t, client, http.MethodPost, base+"/tokenize", strings.NewReader(`{"model":"sql-lora","prompt":"a b"}`), nil); st != 200 {
		t.Errorf("tokenize for an adapter: status %d", st)
	}

	// Any other name is vLLM's 404, on every endpoint that names a model.
	for _, path := range []string{"/v1/chat/completions", "/v1/completions", "/v1/responses", "/tokenize"} {
		body := `{"model":"other-lora","messages":[{"role":"user","content":"hi"}],"prompt":"hi","input":"hi"}`
		if path == "/tokenize" {
			body = `{"model":"other-lora","prompt":"hi"}`
		}
		var e struct {
			Error struct {
				Message string `json:"message"`
				Type    string `json:"type"`
				Code    int    `json:"code"`
			} `json:"error"`
		}
		st := getJSON(t, client, http.MethodPost, base+path, strings.NewReader(body), &e)
		if st != http.StatusNotFound || e.Error.Code != 404 || e.Error.Type != "NotFoundError" || e.Error.Message != "The model `other-lora` does not exist." {
			t.Errorf("%s for an unknown model: %d %+v, want vLLM's 404", path, st, e)
		}
	}

	// The prefix cache keys blocks by the adapter, as vLLM does: a prompt
	// the base model computed is no hit for an adapter, and an adapter's
	// repeat of its own prompt is.
	hits := func() float64 { return scrape(t, client, base)["vllm:prefix_cache_hits_total"] }
	fresh := words(40, "fresh")
	send := func(model string) {
		b, _ := json.Marshal(map[string]any{"model": model, "prompt": fresh, "max_tokens": 1})
		if st := getJSON(t, client, http.MethodPost, base+"/v1/completions", strings.NewReader(string(b)), nil); st != 200 {
			t.Fatalf("completion for %s: status %d", model, st)
		}
	}
	send("sim-model")
	h0 := hits()
	send("sql-lora")
	if h := hits(); h != h0 {
		t.Errorf("an adapter hit %v tokens the base model cached, want none", h-h0)
	}
	send("sql-lora")
	if h := hits(); h-h0 != 36 { // floor((40-1)/4) blocks of 4
		t.Errorf("an adapter's repeated prompt hit %v tokens, want 36", h-h0)
	}
}

// TestLoRARequestsInfo: the LoRA gauge names the adapters with requests
// running and waiting while they are in flight, as vLLM's does, and none
// once they are gone. With --max-loras 1, a request of a second adapter
// waits while the first runs (vLLM's scheduler holds at most max_loras
// adapters in a batch), and a base-model request is not held back.
func TestLoRARequestsInfo(t *testing.T) {
	base, _, client := start(t, func(c *simulator.Config) {
		c.LoRAAdapters = []string{"sql-lora", "chat-lora"}
		c.MaxLoRA = 1
		// Every request stalls in the engine after its first token,
		// holding its batch slot: it is running for as long as the test
		// looks.
		c.Faults.StallMidStream = time.Minute
		c.Faults.StallAfterTokens = 1
	})
	if maxLoRA, running, waiting, _ := loraState(t, client, base); maxLoRA != "1" || running != "" || waiting != "" {
		t.Fatalf("idle: max_lora %q running %q waiting %q, want 1 and none", maxLoRA, running, waiting)
	}
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	defer wg.Wait()
	defer cancel()
	send := func(model string) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			resp, err := post(t, ctx, client, base+"/v1/chat/completions", map[string]any{"model": model,
				"messages": []map[string]any{{"role": "user", "content": "hello " + model}}, "max_tokens": 5, "ignore_eos": true, "stream": true})
			if err == nil {
				_, _ = io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
			}
		}()
	}
	state := func() string {
		_, running, waiting, _ := loraState(t, client, base)
		return running + "|" + waiting
	}
	send("sql-lora")
	send("sql-lora")
	waitFor(t, "sql-lora running", func() bool { return state() == "sql-lora|" })
	send("chat-lora")
	waitFor(t, "chat-lora waiting", func() bool { return state() == "sql-lora|chat-lora" })
	send("sim-model")
	m := map[string]float64{}
	waitFor(t, "the base request running", func() bool {
		m = scrape(t, client, base)
		return m["vllm:num_requests_running"] == 3
	})
	if m["vllm:num_requests_waiting"] != 1 || state() != "sql-lora|chat-lora" {
		t.Errorf("running %v waiting %v LoRA %s, want 3 running (two sql-lora, one base), chat-lora waiting",
			m["vllm:num_requests_running"], m["vllm:num_requests_waiting"], state())
	}
	cancel()
	waitFor(t, "no adapter in flight", func() bool { return state() == "|" })
	// The aborts may let chat-lora run a moment before its own abort:
	// one more label set.
	if _, _, _, series := loraState(t, client, base); series < 3 {
		t.Errorf("%d LoRA series, want at least 3 (none, sql-lora running, chat-lora waiting): vLLM keeps every label set", series)
	}
}
