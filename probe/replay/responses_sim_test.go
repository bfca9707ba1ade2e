package replay_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/infer-exporter/infer_exporter/internal/config"
	"github.com/infer-exporter/infer_exporter/internal/simulator"
	"github.com/infer-exporter/infer_exporter/internal/simulator/simulatortest"
	"github.com/infer-exporter/infer_exporter/probe/client"
	"github.com/infer-exporter/infer_exporter/probe/live"
	"github.com/infer-exporter/infer_exporter/probe/observation"
)

// responsesRecords are recorded Responses API requests, with their path,
// one JSONL line each: a string input already streaming for the replay's
// model (sent byte for byte unless its length is forced), a list of items
// with instructions and a cap, a body that did not stream, and one whose
// "prompt" is the API's prompt template, not a completions prompt. Their
// output_tokens differ, so that a replayed row is told by its length.
var responsesRecords = []struct {
	body   string
	output int
}{
	{`{"model":"sim-model","stream":true,"input":"Summarise the quarterly report in one line.","max_output_tokens":40}`, 5},
	{`{"model":"sim-model","stream":true,"instructions":"You answer briefly.","input":[{"role":"user","content":[{"type":"input_text","text":"Name three rivers."}]}],"max_output_tokens":64}`, 7},
	{`{"model":"prod-model","input":[{"role":"user","content":"Why is the sky blue?"}]}`, 9},
	{`{"model":"sim-model","stream":true,"prompt":{"id":"pmpt_1"},"input":"Translate: good morning","max_output_tokens":30}`, 11},
}

// writeResponsesTrace writes responsesRecords as a jsonl trace recorded at
// path, 20 ms apart.
func writeResponsesTrace(t *testing.T, path string) string {
	t.Helper()
	var b strings.Builder
	for i, r := range responsesRecords {
		fmt.Fprintf(&b, `{"offset":%g,"method":"POST","path":%q,"status":200,"body":%s,"output_tokens":%d}`+"\n", float64(i)*0.02, path, r.body, r.output)
	}
	file := filepath.Join(t.TempDir(), "responses.jsonl")
	if err := os.WriteFile(file, []byte(b.String()), 0o600); err != nil {
		t.Fatal(err)
	}
	return file
}

// bodyRecorder serves the simulator and keeps each request's path and body.
type bodyRecorder struct {
	mu     sync.Mutex
	paths  []string
	bodies [][]byte
}

func (rc *bodyRecorder) start(t *testing.T, cfg simulator.Config) string {
	t.Helper()
	sim, err := simulator.New(cfg, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	h := sim.Handler()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		r.Body = io.NopCloser(bytes.NewReader(body))
		rc.mu.Lock()
		rc.paths, rc.bodies = append(rc.paths, r.URL.Path), append(rc.bodies, body)
		rc.mu.Unlock()
		h.ServeHTTP(w, r)
	}))
	t.Cleanup(srv.Close)
	t.Cleanup(func() { sim.Close() })
	return srv.URL
}

// TestReplayResponsesRecords: recorded Responses API requests, with their
// path, replay to a target of flavor openai-responses (the embedded
// simulator's /v1/responses): every row is sent, to /v1/responses, with
// its body as recorded, less what is forced to measure it ("stream": true
// and the target's model; a body that says both goes byte for byte), and,
// with force_output_tokens, max_output_tokens set to the record's output
// length with ignore_eos, which the simulator then generates exactly.
func TestReplayResponsesRecords(t *testing.T) {
	trace := writeResponsesTrace(t, "/v1/responses")
	for _, force := range []bool{false, true} {
		t.Run(fmt.Sprintf("force_output_tokens=%v", force), func(t *testing.T) {
			rc := &bodyRecorder{}
			url := rc.start(t, simulatortest.InstantConfig())
			obs, reg := run(t, fmt.Sprintf(`
targets:
  - {name: sim, url: %q, model: sim-model, flavor: openai-responses, timeout: 60s}
workloads:
  - name: r
    target: sim
    replay: {source: jsonl, path: %q, force_output_tokens: %v, max_rate: 10000}
`, url, trace, force))
			n := len(responsesRecords)
			if len(obs) != n || len(rc.bodies) != n {
				t.Fatalf("%d observations, %d requests at the simulator; want %d", len(obs), len(rc.bodies), n)
			}
			for _, o := range obs {
				if o.Outcome != observation.Success {
					t.Fatalf("a row ended %s (HTTP %d): %v", o.Outcome, o.HTTPStatus, o.Err)
				}
			}
			if v, _ := metric(t, reg, "infer_probe_replay_requests_total"); v != float64(n) {
				t.Errorf("infer_probe_replay_requests_total = %v, want %d", v, n)
			}
			// Rows may reach the simulator in another order on a busy
			// machine: each received body is matched to its record by its
			// input.
			got := map[string]map[string]any{}
			for i, b := range rc.bodies {
				if rc.paths[i] != "/v1/responses" {
					t.Errorf("a row went to %s", rc.paths[i])
				}
				m := decode(t, b)
				got[fmt.Sprint(m["input"])] = m
			}
			// A body that already streams for the target's model, its
			// length not forced, goes as it was recorded.
			if first := []byte(responsesRecords[0].body); !force && !slices.ContainsFunc(rc.bodies, func(b []byte) bool { return bytes.Equal(b, first) }) {
				t.Errorf("%s was not sent byte for byte", first)
			}
			outputs := map[int]bool{}
			for _, o := range obs {
				outputs[o.OutputTokens] = true
			}
			for i, r := range responsesRecords {
				want := decode(t, []byte(r.body))
				want["stream"], want["model"] = true, "sim-model"
				if force {
					want["max_output_tokens"], want["ignore_eos"] = float64(r.output), true
					if !outputs[r.output] {
						t.Errorf("record %d: no row generated its %d output tokens (%v)", i, r.output, outputs)
					}
				}
				if g := got[fmt.Sprint(want["input"])]; !reflect.DeepEqual(g, want) {
					t.Errorf("record %d: sent %v, want %v", i, g, want)
				}
			}
		})
	}
}

// TestReplayRefusesRecordsOfAnotherAPI: records captured for one OpenAI
// API are refused for a target of another, with a reason naming both (the
// workload does not start), or skipped and counted; a record of no API's
// path is refused too.
func TestReplayRefusesRecordsOfAnotherAPI(t *testing.T) {
	url, _ := simulatortest.StartTest(t, simulatortest.InstantConfig())
	for _, tc := range []struct {
		path, flavor, reason string
	}{
		{"/v1/chat/completions", "openai-responses",
			"recorded for /v1/chat/completions, the openai-chat API; the target speaks the openai-responses API (/responses)"},
		{"/v1/responses", "openai-chat",
			"recorded for /v1/responses, the openai-responses API; the target speaks the openai-chat API (/chat/completions)"},
		{"/v1/responses", "openai-completions",
			"recorded for /v1/responses, the openai-responses API; the target speaks the openai-completions API (/completions)"},
		{"/v1/embeddings", "openai-responses",
			"recorded for /v1/embeddings, the path of no OpenAI API; the target speaks the openai-responses API (/responses)"},
	} {
		t.Run(tc.path+" to "+tc.flavor, func(t *testing.T) {
			trace := writeResponsesTrace(t, tc.path)
			yml := fmt.Sprintf(`
targets:
  - {name: sim, url: %q, model: sim-model, flavor: %s}
workloads:
  - name: r
    target: sim
    replay: {source: jsonl, path: %q, on_malformed: refuse}
`, url, tc.flavor, trace)
			c, err := config.Parse([]byte(yml), filepath.Join(t.TempDir(), "c.yml"))
			if err != nil {
				t.Fatalf("the configuration is refused before the trace is read: %v", err)
			}
			_, _, err = live.Build(context.Background(), c, live.NewMetrics(prometheus.NewRegistry()), live.Options{}, slog.New(slog.DiscardHandler))
			if want := trace + ":1: " + tc.reason; err == nil || !strings.Contains(err.Error(), want) {
				t.Errorf("build: %v\nwant ...%s", err, want)
			}
		})
	}
}

// TestResponsesFlavorPath: the flavor facts' Path of each OpenAI API is
// where the client sends that flavor's requests, so that a record's path
// is told apart as the client would have sent it.
func TestResponsesFlavorPath(t *testing.T) {
	for _, f := range config.AllFlavors() {
		if f.Path == "" {
			continue
		}
		fl, err := client.ParseFlavor(string(f.Name))
		if err != nil {
			t.Fatal(err)
		}
		req, err := fl.NewRequest(context.Background(), &client.Target{BaseURL: "http://h:1", Model: "m", Flavor: fl}, &client.Request{Prompt: "hi", MaxTokens: 1})
		if err != nil {
			t.Fatal(err)
		}
		if want := "/v1" + f.Path; req.URL.Path != want {
			t.Errorf("%s: the client sends to %s, the facts say %s", f.Name, req.URL.Path, want)
		}
		if api, ok := config.RecordedPathFlavor(req.URL.Path); !ok || api.Name != f.Name {
			t.Errorf("%s: its requests' path %s is told as %q", f.Name, req.URL.Path, api.Name)
		}
	}
}

func decode(t *testing.T, b []byte) map[string]any {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatalf("%s: %v", b, err)
	}
	return m
}

// flavorFacts is the facts of the flavor name.
func flavorFacts(t testing.TB, name config.Flavor) config.FlavorFacts {
	t.Helper()
	f, ok := name.Facts()
	if !ok {
		t.Fatalf("no flavor %q", name)
	}
	return f
}
