package shadow_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/infer-exporter/infer_exporter/internal/config"
	"github.com/infer-exporter/infer_exporter/internal/shadow"
	"github.com/infer-exporter/infer_exporter/internal/simulator"
	"github.com/infer-exporter/infer_exporter/internal/testenv"
	"github.com/infer-exporter/infer_exporter/probe/client"
	"github.com/infer-exporter/infer_exporter/probe/live"
	"github.com/infer-exporter/infer_exporter/probe/observation"
	"github.com/infer-exporter/infer_exporter/probe/workload"
)

// Spacing tolerance of the round trip: the p99 of the error in each gap
// between consecutive requests, replay versus capture, both measured where
// the requests arrive at the upstream. 24 requests, 15 to 60 ms apart.
// Measured on the 2-core development machine: p99 0.3-1 ms. Checked without
// the race detector, alone (make test-timing).
const roundTripGapP99 = 5 * time.Millisecond

// TestCaptureReplayRoundTrip sends requests through the proxy at uneven
// instants, replays the capture store through the exporter's config, Build
// and runner against a second simulator, and compares what each upstream
// received: the same bodies (or, redacted, the same prompt token counts and
// none of the words) in the same order, with the same spacing.
//
// Its spacing is checked by TestCaptureReplayRoundTripAccuracy alone: the
// gaps are the machine's as much as the replay's.
func TestCaptureReplayRoundTrip(t *testing.T) { captureReplayRoundTrip(t, false) }

// TestCaptureReplayRoundTripAccuracy: the same round trip, and the replay
// keeps the capture's spacing within roundTripGapP99 (make test-timing).
func TestCaptureReplayRoundTripAccuracy(t *testing.T) {
	testenv.Timing(t)
	captureReplayRoundTrip(t, true)
}

func captureReplayRoundTrip(t *testing.T, checkSpacing bool) {
	for _, redact := range []bool{false, true} {
		t.Run(fmt.Sprintf("redact=%v", redact), func(t *testing.T) {
			cfg := simulator.DefaultConfig()
			cfg.TimeScale = 0.05
			rc1 := &recorder{}
			up1 := startSim(t, cfg, rc1)
			dir := t.TempDir()
			store, err := shadow.OpenStore(dir, 1<<20, 8)
			if err != nil {
				t.Fatal(err)
			}
			// At cleanup, after the proxy (whose cleanup, registered later, runs
			// first) has stopped its writer: a store closed under a write races.
			t.Cleanup(func() { store.Close() })
			proxyURL, stop := startProxy(t, shadow.Config{Upstream: up1, Sample: 1, Redact: redact}, store, prometheus.NewRegistry())

			// Production traffic: distinct prompts and lengths, sent open
			// loop at uneven offsets.
			const n = 24
			cl := client.New(client.Options{})
			defer cl.Close()
			target := &client.Target{BaseURL: proxyURL, Model: "sim-model"}
			start := time.Now()
			var wg sync.WaitGroup
			original := make([]observation.Request, n)
			for i := range n {
				at := start.Add(time.Duration(i*40+(i*i*7)%25) * time.Millisecond)
				time.Sleep(time.Until(at))
				wg.Add(1)
				go func() {
					defer wg.Done()
					prompt := fmt.Sprintf("customer %d asks about invoice number %d and the shipping of parcel %d", i, 1000+i, i*i)
					cl.Do(context.Background(), target, &client.Request{Prompt: prompt, MaxTokens: 3 + i, Timeout: time.Minute}, &original[i])
				}()
			}
			wg.Wait()
			stop()
			for i, o := range original {
				if o.Outcome != observation.Success {
					t.Fatalf("original request %d: %s %v", i, o.Outcome, o.Err)
				}
			}

			// Replay the store.
			rc2 := &recorder{}
			up2 := startSim(t, cfg, rc2)
			// The content test replays under a ceiling (10,000 req/s) whose
			// token bucket (101 sends) holds every row a busy machine may make
			// overdue at once, where the default's would drop one: it checks
			// what is sent, the accuracy test when.
			ceiling := ""
			if !checkSpacing {
				ceiling = ", max_rate: 10000"
			}
			obs := runReplay(t, fmt.Sprintf(`
targets:
  - {name: sim, url: %q, model: sim-model, flavor: openai-chat, timeout: 60s}
workloads:
  - name: replay
    target: sim
    replay: {source: jsonl, path: %q%s}
`, up2, dir, ceiling))
			got, want := rc2.sorted(), rc1.sorted()
			if len(got) != n || len(want) != n || len(obs) != n {
				outcomes := map[string]int{}
				for _, o := range obs {
					outcomes[string(o.Outcome)+" "+o.DropReason]++
				}
				t.Fatalf("upstream 1 got %d requests, the replay sent %d (%v), upstream 2 got %d; want %d", len(want), len(obs), outcomes, len(got), n)
			}
			// The prompts' token counts, replayed and original, as sets.
			var gotTokens, wantTokens []int
			for i := range n {
				gotTokens, wantTokens = append(gotTokens, obs[i].PromptTokens), append(wantTokens, original[i].PromptTokens)
			}
			slices.Sort(gotTokens)
			slices.Sort(wantTokens)
			if !slices.Equal(gotTokens, wantTokens) {
				t.Errorf("prompt tokens replayed %v, original %v", gotTokens, wantTokens)
			}
			if !checkSpacing {
				// Two requests sent 35 ms apart may reach the upstream in
				// either order on a busy machine: match them by their
				// max_tokens (3 + i, one a request), and leave the order
				// and the spacing to the accuracy test.
				byMaxTokens := func(rs []*recorded) {
					slices.SortFunc(rs, func(a, b *recorded) int {
						return parseChat(t, a.body).MaxTokens - parseChat(t, b.body).MaxTokens
					})
				}
				byMaxTokens(got)
				byMaxTokens(want)
			}
			var gapErrs []time.Duration
			for i := range n {
				switch {
				case !redact && !bytes.Equal(got[i].body, bytes.TrimSpace(want[i].body)):
					t.Errorf("request %d: replayed body\n%s\noriginal\n%s", i, got[i].body, want[i].body)
				case redact:
					// The same request (its max_tokens), the same prompt
					// length, none of its words.
					g, w := parseChat(t, got[i].body), parseChat(t, want[i].body)
					if g.MaxTokens != w.MaxTokens || g.tokens() != w.tokens() || checkSpacing && obs[i].PromptTokens != original[w.MaxTokens-3].PromptTokens {
						t.Errorf("request %d: max_tokens %d, %d prompt tokens (usage %d); original %d, %d (usage %d)",
							i, g.MaxTokens, g.tokens(), obs[i].PromptTokens, w.MaxTokens, w.tokens(), original[w.MaxTokens-3].PromptTokens)
					}
					for _, word := range []string{"customer", "invoice", "parcel", "shipping"} {
						if bytes.Contains(got[i].body, []byte(word)) {
							t.Errorf("request %d: redacted replay still says %q", i, word)
						}
					}
				}
				if obs[i].Outcome != observation.Success {
					t.Errorf("replayed request %d: %s %v", i, obs[i].Outcome, obs[i].Err)
				}
				if i > 0 {
					e := got[i].at.Sub(got[i-1].at) - want[i].at.Sub(want[i-1].at)
					gapErrs = append(gapErrs, max(e, -e))
				}
			}
			slices.Sort(gapErrs)
			p99 := gapErrs[len(gapErrs)*99/100]
			t.Logf("inter-arrival error, replay versus capture: p50 %v p99 %v", gapErrs[len(gapErrs)/2], p99)
			if checkSpacing && p99 > roundTripGapP99 {
				t.Errorf("inter-arrival error p99 %v > %v", p99, roundTripGapP99)
			}
		})
	}
}

type chatBody struct {
	MaxTokens int `json:"max_tokens"`
	Messages  []struct {
		Role    string `json:"role"`
		Content string `json:"content"`
	} `json:"messages"`
}

// tokens is the prompt's length in the simulator's tokenizer.
func (c chatBody) tokens() int {
	msgs := make([]simulator.ChatMessage, len(c.Messages))
	for i, m := range c.Messages {
		msgs[i] = simulator.ChatMessage{Role: m.Role, Content: m.Content}
	}
	return simulator.CountChatTokens(msgs, true)
}

func parseChat(t *testing.T, b []byte) chatBody {
	t.Helper()
	var c chatBody
	if err := json.Unmarshal(b, &c); err != nil || len(c.Messages) == 0 {
		t.Fatalf("body %s: %v", b, err)
	}
	if strings.TrimSpace(c.Messages[0].Content) == "" {
		t.Fatalf("empty prompt in %s", b)
	}
	return c
}

// runReplay builds the configuration's one workload as the exporter does
// and runs it to the end of its trace, returning its observations in
// schedule order.
func runReplay(t *testing.T, yml string) []observation.Request {
	t.Helper()
	c, err := config.Parse([]byte(yml), filepath.Join(t.TempDir(), "replay.yml"))
	if err != nil {
		t.Fatal(err)
	}
	runners, clients, err := live.Build(context.Background(), c, live.NewMetrics(prometheus.NewRegistry()), live.Options{}, discard)
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		for _, cl := range clients {
			cl.Close()
		}
	}()
	var mu sync.Mutex
	var obs []observation.Request
	runners[0].Observer = workload.Observers{runners[0].Observer, workload.Results(func(o *observation.Request) {
		mu.Lock()
		obs = append(obs, *o)
		mu.Unlock()
	})}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	runners[0].Run(ctx)
	slices.SortFunc(obs, func(a, b observation.Request) int { return a.Scheduled.Compare(b.Scheduled) })
	return obs
}
