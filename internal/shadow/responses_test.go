package shadow_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/infer-exporter/infer_exporter/internal/shadow"
	"github.com/infer-exporter/infer_exporter/internal/simulator"
	"github.com/infer-exporter/infer_exporter/internal/simulator/simulatortest"
	"github.com/infer-exporter/infer_exporter/probe/client"
	"github.com/infer-exporter/infer_exporter/probe/observation"
	"github.com/infer-exporter/infer_exporter/probe/replay"
)

// responsesBody is the part of a Responses API request the test reads.
type responsesBody struct {
	MaxOutputTokens int    `json:"max_output_tokens"`
	Instructions    string `json:"instructions"`
	Input           string `json:"input"`
}

// TestCaptureReplayResponses: Responses API requests (POST /v1/responses)
// through the proxy are captured as chat's are: their body, path, instant
// and the output length of their usage (output_tokens), streamed or not;
// redacted, their instructions and input are filler of the same length.
// The store then replays to a target of flavor openai-responses: every
// captured row reaches a second simulator, with the same prompt (or,
// redacted, the same prompt length and none of the words) and its
// max_output_tokens forced to the captured output length.
func TestCaptureReplayResponses(t *testing.T) {
	for _, redact := range []bool{false, true} {
		t.Run(fmt.Sprintf("redact=%v", redact), func(t *testing.T) {
			rc1 := &recorder{}
			up1 := startSim(t, simulatortest.InstantConfig(), rc1)
			dir := t.TempDir()
			store, err := shadow.OpenStore(dir, 1<<20, 4)
			if err != nil {
				t.Fatal(err)
			}
			// At cleanup, after the proxy (whose cleanup, registered later, runs
			// first) has stopped its writer: a store closed under a write races.
			t.Cleanup(func() { store.Close() })
			reg := prometheus.NewRegistry()
			proxyURL, stop := startProxy(t, shadow.Config{Upstream: up1, Sample: 1, Redact: redact}, store, reg)

			// Streamed requests, as the client sends them, each of its own
			// length; then one not streamed, with instructions.
			const n = 4
			cl := client.New(client.Options{})
			defer cl.Close()
			target := &client.Target{BaseURL: proxyURL, Model: "sim-model", Flavor: client.OpenAIResponses}
			var usage []int // the output tokens, in sending order
			for i := range n {
				var o observation.Request
				cl.Do(context.Background(), target, &client.Request{Prompt: fmt.Sprintf("customer %d asks about invoice %d", i, 1000+i), MaxTokens: 30}, &o)
				if o.Outcome != observation.Success {
					t.Fatalf("request %d: %s %v", i, o.Outcome, o.Err)
				}
				usage = append(usage, o.OutputTokens)
			}
			resp, err := http.Post(proxyURL+"/v1/responses", "application/json", strings.NewReader(
				`{"model":"sim-model","instructions":"You answer the customer briefly.","input":"customer 9 asks about parcel 77","max_output_tokens":12,"ignore_eos":true}`))
			if err != nil {
				t.Fatal(err)
			}
			whole, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			var answer struct {
				Usage struct {
					OutputTokens int `json:"output_tokens"`
				} `json:"usage"`
			}
			if err := json.Unmarshal(whole, &answer); err != nil || answer.Usage.OutputTokens != 12 {
				t.Fatalf("the whole answer's usage: %s %v", whole, err)
			}
			usage = append(usage, 12)
			stop()
			if w := counter(t, reg, "infer_shadow_samples_written_total"); w != n+1 {
				t.Fatalf("written %v, want %d", w, n+1)
			}

			// The capture: path, body and output length of each request,
			// in sending order (one request at a time).
			tr, err := replay.ReadFile(dir, replay.FormatJSONL, replay.ReadOptions{})
			if err != nil {
				t.Fatal(err)
			}
			ups := rc1.sorted()
			if len(tr.Records) != n+1 || len(ups) != n+1 {
				t.Fatalf("%d records, %d upstream requests; want %d", len(tr.Records), len(ups), n+1)
			}
			for i, rec := range tr.Records {
				if rec.Path != "/v1/responses" || rec.OutputTokens != usage[i] {
					t.Errorf("record %d: path %s, output %d; want /v1/responses, %d", i, rec.Path, rec.OutputTokens, usage[i])
				}
				if !redact && !bytes.Equal(rec.Body, bytes.TrimSpace(ups[i].body)) {
					t.Errorf("record %d: body %s; upstream got %s", i, rec.Body, ups[i].body)
				}
			}

			// Its replay, to a Responses target.
			rc2 := &recorder{}
			up2 := startSim(t, simulatortest.InstantConfig(), rc2)
			obs := runReplay(t, fmt.Sprintf(`
targets:
  - {name: sim, url: %q, model: sim-model, flavor: openai-responses, timeout: 60s}
workloads:
  - name: replay
    target: sim
    replay: {source: jsonl, path: %q, force_output_tokens: true, max_rate: 10000}
`, up2, dir))
			got := rc2.sorted()
			if len(obs) != n+1 || len(got) != n+1 {
				t.Fatalf("the replay sent %d rows, upstream 2 got %d; want %d", len(obs), len(got), n+1)
			}
			for _, o := range obs {
				if o.Outcome != observation.Success {
					t.Errorf("replayed row: %s %v", o.Outcome, o.Err)
				}
			}
			// Each replayed row is matched to its record by its input (as
			// stored, redacted or not), and so to the original request.
			sent := map[int]bool{}
			for _, r := range got {
				g := parseResponses(t, r.body)
				j := slices.IndexFunc(tr.Records, func(rec replay.Record) bool { return parseResponses(t, rec.Body).Input == g.Input })
				if j < 0 {
					t.Errorf("a replayed row of no record: %s", r.body)
					continue
				}
				sent[j] = true
				w := parseResponses(t, ups[j].body)
				if r.path != "/v1/responses" || g.MaxOutputTokens != usage[j] {
					t.Errorf("row %d: %s max_output_tokens %d; want the captured output length %d", j, r.path, g.MaxOutputTokens, usage[j])
				}
				if !redact && (g.Input != w.Input || g.Instructions != w.Instructions) {
					t.Errorf("row %d: sent %s, original %s", j, r.body, ups[j].body)
				}
				if g.tokens() != w.tokens() {
					t.Errorf("row %d: %d prompt tokens, original %d", j, g.tokens(), w.tokens())
				}
				if redact {
					for _, word := range []string{"customer", "invoice", "parcel", "briefly"} {
						if bytes.Contains(r.body, []byte(word)) {
							t.Errorf("row %d: redacted replay still says %q: %s", j, word, r.body)
						}
					}
				}
			}
			if len(sent) != n+1 {
				t.Errorf("%d of %d records replayed", len(sent), n+1)
			}
		})
	}
}

// tokens is the prompt's length in the simulator's tokenizer: the
// instructions as a system message, the input as the user's.
func (r responsesBody) tokens() int {
	var msgs []simulator.ChatMessage
	if r.Instructions != "" {
		msgs = append(msgs, simulator.ChatMessage{Role: "system", Content: r.Instructions})
	}
	msgs = append(msgs, simulator.ChatMessage{Role: "user", Content: r.Input})
	return simulator.CountChatTokens(msgs, true)
}

func parseResponses(t *testing.T, b []byte) responsesBody {
	t.Helper()
	var r responsesBody
	if err := json.Unmarshal(b, &r); err != nil || strings.TrimSpace(r.Input) == "" {
		t.Fatalf("body %s: %v", b, err)
	}
	return r
}
