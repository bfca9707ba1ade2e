package simulator_test

import (
	"encoding/binary"
	"encoding/json"
	"io"
	"math"
	"net/http"
	"strconv"
	"testing"

	"github.com/infer-exporter/infer_exporter/internal/hashmix"
	"github.com/infer-exporter/infer_exporter/internal/simulator"
	"github.com/infer-exporter/infer_exporter/internal/simulator/simulatortest"
)

// specLogprobs computes the log-probabilities from the written definition
// in logprobs.go, independently of the implementation.
func specLogprobs(seed uint64, ids []int, penalty float64) []float64 {
	h := uint64(14695981039317130211)
	write := func(b []byte) {
		for _, c := range b {
			h = (h ^ uint64(c)) * 1099511628211
		}
	}
	var b [8]byte
	binary.LittleEndian.PutUint64(b[:], seed^0x10960b5a17)
	write(b[:])
	out := make([]float64, len(ids))
	for i, id := range ids {
		out[i] = math.NaN()
		if i > 0 {
			u := float64(hashmix.Mix64(h^uint64(id)*0x9e3779b97f4a7c15)>>11) / (1 << 53)
			out[i] = -(simulator.LogprobBase + simulator.LogprobSpread*u) - penalty
		}
		binary.LittleEndian.PutUint32(b[:4], uint32(id))
		write(b[:4])
	}
	return out
}

const lpText = "the lighthouse keeper climbed the stairs at dusk and lit the lamp as he had done for forty years"

// TestTokenLogprobsDefinition checks TokenLogprobs against its written
// definition, its range, its dependence on seed and context, and
// ExpectedPerplexity against the mean it defines.
func TestTokenLogprobsDefinition(t *testing.T) {
	ids := simulator.AppendTokenIDs(nil, lpText)
	for _, tc := range []struct {
		seed    uint64
		penalty float64
	}{{1, 0}, {1, 0.7}, {42, 0}, {42, 3}} {
		got := simulator.TokenLogprobs(tc.seed, ids, tc.penalty)
		want := specLogprobs(tc.seed, ids, tc.penalty)
		if !math.IsNaN(got[0]) {
			t.Errorf("seed %d: the first token's log-probability is %v, want NaN", tc.seed, got[0])
		}
		var sum float64
		for i := 1; i < len(ids); i++ {
			if got[i] != want[i] {
				t.Errorf("seed %d penalty %v: token %d: %v, the definition gives %v", tc.seed, tc.penalty, i, got[i], want[i])
			}
			if lo, hi := -(simulator.LogprobBase+simulator.LogprobSpread)-tc.penalty, -simulator.LogprobBase-tc.penalty; !(got[i] > lo && got[i] <= hi) {
				t.Errorf("token %d: %v outside (%v, %v]", i, got[i], lo, hi)
			}
			sum += got[i]
		}
		ppl, n := simulator.ExpectedPerplexity(tc.seed, lpText, tc.penalty)
		if n != len(ids)-1 {
			t.Errorf("scored %d tokens, want %d", n, len(ids)-1)
		}
		if want := math.Exp(-sum / float64(n)); math.Abs(ppl-want) > 1e-12*want {
			t.Errorf("seed %d penalty %v: perplexity %v, want %v", tc.seed, tc.penalty, ppl, want)
		}
	}
	// The penalty multiplies the perplexity by exp(penalty), exactly as
	// the fault promises.
	base, _ := simulator.ExpectedPerplexity(1, lpText, 0)
	worse, _ := simulator.ExpectedPerplexity(1, lpText, 0.5)
	if r := worse / base; math.Abs(r-math.Exp(0.5)) > 1e-9 {
		t.Errorf("penalty 0.5 multiplied the perplexity by %v, want %v", r, math.Exp(0.5))
	}
	// Seed and context matter: another seed, or another earlier token,
	// changes the later log-probabilities.
	a := simulator.TokenLogprobs(1, ids, 0)
	if b := simulator.TokenLogprobs(2, ids, 0); a[5] == b[5] {
		t.Errorf("seeds 1 and 2 give token 5 the same log-probability %v", a[5])
	}
	other := append([]int{ids[0] + 1}, ids[1:]...)
	if b := simulator.TokenLogprobs(1, other, 0); a[5] == b[5] {
		t.Errorf("changing token 0 left token 5's log-probability at %v: the context is not used", a[5])
	}
	if p, n := simulator.ExpectedPerplexity(1, "one", 0); !math.IsNaN(p) || n != 0 {
		t.Errorf("a one-token text has perplexity %v over %d tokens, want NaN over 0", p, n)
	}
}

// promptLogprobsOf reads the prompt tokens' log-probabilities (NaN for
// null) out of one dialect's answer.
type lpDialect struct {
	name, engine, path, body string
	read                     func(t *testing.T, body []byte) []float64
}

func nullable(v *float64) float64 {
	if v == nil {
		return math.NaN()
	}
	return *v
}

var lpDialects = []lpDialect{
	{"vllm echo", simulator.EngineVLLM, "/v1/completions",
		`{"prompt":` + strconv.Quote(lpText) + `,"echo":true,"logprobs":1,"max_tokens":1}`,
		func(t *testing.T, body []byte) []float64 {
			var r struct {
				Choices []struct {
					Text     string
					Logprobs struct {
						Tokens        []string
						TokenLogprobs []*float64 `json:"token_logprobs"`
						TextOffset    []int      `json:"text_offset"`
					}
				}
				Usage struct {
					PromptTokens int `json:"prompt_tokens"`
				}
			}
			mustJSON(t, body, &r)
			c := r.Choices[0]
			if len(c.Text) < len(lpText) || c.Text[:len(lpText)] != lpText {
				t.Errorf("echoed text %q does not begin with the prompt", c.Text)
			}
			var out []float64
			for i, v := range c.Logprobs.TokenLogprobs[:r.Usage.PromptTokens] {
				if got := c.Text[c.Logprobs.TextOffset[i]:][:len(c.Logprobs.Tokens[i])]; got != c.Logprobs.Tokens[i] {
					t.Errorf("token %d %q is not at its text_offset %d (%q)", i, c.Logprobs.Tokens[i], c.Logprobs.TextOffset[i], got)
				}
				out = append(out, nullable(v))
			}
			if n := len(c.Logprobs.TokenLogprobs) - r.Usage.PromptTokens; n != 1 {
				t.Errorf("%d generated tokens' log-probabilities after the prompt's, want 1", n)
			}
			return out
		}},
	{"vllm prompt_logprobs", simulator.EngineVLLM, "/v1/completions",
		`{"prompt":` + strconv.Quote(lpText) + `,"prompt_logprobs":0,"max_tokens":1}`,
		func(t *testing.T, body []byte) []float64 {
			var r struct {
				Choices []struct {
					Logprobs       any
					PromptLogprobs []map[string]struct{ Logprob float64 } `json:"prompt_logprobs"`
				}
			}
			mustJSON(t, body, &r)
			if r.Choices[0].Logprobs != nil {
				t.Errorf("logprobs %v without logprobs asked for", r.Choices[0].Logprobs)
			}
			ids := simulator.AppendTokenIDs(nil, lpText)
			var out []float64
			for i, m := range r.Choices[0].PromptLogprobs {
				e, ok := m[strconv.Itoa(ids[i])]
				if !ok {
					out = append(out, math.NaN())
					continue
				}
				out = append(out, e.Logprob)
			}
			return out
		}},
	{"sglang native", simulator.EngineSGLang, "/generate",
		`{"text":` + strconv.Quote(lpText) + `,"sampling_params":{"max_new_tokens":1},"return_logprob":true,"logprob_start_len":0}`,
		func(t *testing.T, body []byte) []float64 {
			var r struct {
				MetaInfo struct {
					PromptTokens        int               `json:"prompt_tokens"`
					InputTokenLogprobs  [][3]*json.Number `json:"input_token_logprobs"`
					OutputTokenLogprobs [][3]*json.Number `json:"output_token_logprobs"`
				} `json:"meta_info"`
			}
			mustJSON(t, body, &r)
			if len(r.MetaInfo.OutputTokenLogprobs) != 1 {
				t.Errorf("%d output log-probabilities, want 1", len(r.MetaInfo.OutputTokenLogprobs))
			}
			var out []float64
			for _, e := range r.MetaInfo.InputTokenLogprobs {
				v := math.NaN()
				if e[0] != nil {
					v, _ = e[0].Float64()
				}
				out = append(out, v)
			}
			return out
		}},
	{"tgi generate", simulator.EngineTGI, "/generate",
		`{"inputs":` + strconv.Quote(lpText) + `,"parameters":{"max_new_tokens":1,"details":true,"decoder_input_details":true}}`,
		func(t *testing.T, body []byte) []float64 {
			var r struct {
				Details struct {
					Prefill []struct {
						Text    string
						Logprob *float64
					}
					Tokens []struct{ Logprob *float64 }
				}
			}
			mustJSON(t, body, &r)
			if len(r.Details.Tokens) != 1 || r.Details.Tokens[0].Logprob == nil {
				t.Errorf("generated tokens %+v, want one with a logprob", r.Details.Tokens)
			}
			var out []float64
			for _, e := range r.Details.Prefill {
				out = append(out, nullable(e.Logprob))
			}
			return out
		}},
}

func mustJSON(t *testing.T, body []byte, v any) {
	t.Helper()
	if err := json.Unmarshal(body, v); err != nil {
		t.Fatalf("body %.300q: %v", body, err)
	}
}

// TestLogprobDialects asks each dialect for the prompt's log-probabilities,
// healthy and under the degradation fault, and compares every value with
// TokenLogprobs: the ground truth a perplexity probe is tested against.
func TestLogprobDialects(t *testing.T) {
	ids := simulator.AppendTokenIDs(nil, lpText)
	for _, d := range lpDialects {
		for _, penalty := range []float64{0, 1.25} {
			t.Run(d.name+"/penalty="+strconv.FormatFloat(penalty, 'g', -1, 64), func(t *testing.T) {
				cfg := simulatortest.InstantConfig()
				cfg.Engine = d.engine
				cfg.Seed = 7
				base, sim := simulatortest.StartTest(t, cfg)
				if err := sim.SetFaults(simulator.Faults{LogprobPenalty: penalty}); err != nil {
					t.Fatal(err)
				}
				resp := postJSON(t, base+d.path, d.body)
				body, _ := io.ReadAll(resp.Body)
				resp.Body.Close()
				if resp.StatusCode != http.StatusOK {
					t.Fatalf("status %d: %s", resp.StatusCode, body)
				}
				if ct := resp.Header.Get("Content-Type"); ct != "application/json" {
					t.Errorf("Content-Type %q, want application/json", ct)
				}
				got := d.read(t, body)
				want := simulator.TokenLogprobs(7, ids, penalty)
				if len(got) != len(want) {
					t.Fatalf("%d prompt log-probabilities, want %d", len(got), len(want))
				}
				for i := range want {
					if !(got[i] == want[i] || math.IsNaN(got[i]) && math.IsNaN(want[i])) {
						t.Errorf("token %d: %v, want %v", i, got[i], want[i])
					}
				}
				if p, _ := sim.ExpectedPerplexity(lpText); p != func() float64 { v, _ := simulator.ExpectedPerplexity(7, lpText, penalty); return v }() {
					t.Errorf("the simulator's ExpectedPerplexity %v ignores its seed or faults", p)
				}
			})
		}
	}
}

// TestLogprobRefusals: what the simulator cannot answer is refused, never
// answered without the log-probabilities that were asked for.
func TestLogprobRefusals(t *testing.T) {
	for _, tc := range []struct {
		name, engine, path, body string
		status                   int
	}{
		{"streamed echo", simulator.EngineVLLM, "/v1/completions", `{"prompt":"a b","echo":true,"stream":true}`, 400},
		{"streamed logprobs", simulator.EngineVLLM, "/v1/completions", `{"prompt":"a b","logprobs":1,"stream":true}`, 400},
		{"logprobs above 20", simulator.EngineVLLM, "/v1/completions", `{"prompt":"a b","logprobs":21}`, 400},
		{"logprobs not a count", simulator.EngineVLLM, "/v1/completions", `{"prompt":"a b","logprobs":"many"}`, 400},
		{"negative prompt_logprobs", simulator.EngineVLLM, "/v1/completions", `{"prompt":"a b","prompt_logprobs":-1}`, 400},
		{"chat logprobs ignored", simulator.EngineVLLM, "/v1/chat/completions", `{"messages":[{"role":"user","content":"a"}],"logprobs":true,"max_tokens":1}`, 200},
		{"sglang streamed logprobs", simulator.EngineSGLang, "/generate", `{"text":"a b","stream":true,"return_logprob":true}`, 400},
		{"sglang without stream", simulator.EngineSGLang, "/generate", `{"text":"a b","sampling_params":{"max_new_tokens":2}}`, 200},
		{"tgi generate without inputs", simulator.EngineTGI, "/generate", `{"parameters":{}}`, 422},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := simulatortest.InstantConfig()
			cfg.Engine = tc.engine
			base, _ := simulatortest.StartTest(t, cfg)
			resp := postJSON(t, base+tc.path, tc.body)
			body, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode != tc.status {
				t.Errorf("status %d, want %d: %s", resp.StatusCode, tc.status, body)
			}
		})
	}
}
