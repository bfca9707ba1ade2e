package prompt

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/infer-exporter/infer_exporter/internal/config"
	"github.com/infer-exporter/infer_exporter/internal/simulator"
	"github.com/infer-exporter/infer_exporter/internal/simulator/simulatortest"
)

// quirkyTokenizer is a vLLM-dialect /tokenize whose counts are not one per
// word: a BOS token, words of more than five letters are two tokens, and a
// chat request adds a 5-token template.
func quirkyTokenizer() http.Handler {
	count := func(text string) int {
		n := 1 // BOS
		for _, w := range strings.Fields(text) {
			n++
			if len(w) > 5 {
				n++
			}
		}
		return n
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var req struct {
			Prompt   *string `json:"prompt"`
			Messages []struct {
				Content string `json:"content"`
			} `json:"messages"`
		}
		if r.URL.Path != "/tokenize" || json.NewDecoder(r.Body).Decode(&req) != nil {
			http.NotFound(w, r)
			return
		}
		n := 0
		if req.Prompt != nil {
			n = count(*req.Prompt)
		} else {
			n = 5 + count(req.Messages[0].Content)
		}
		json.NewEncoder(w).Encode(map[string]int{"count": n})
	})
}

// TestExactLengths: against servers with a tokenizer endpoint, every prompt
// has exactly the requested count as the server counts it, over a range of
// lengths; lengths not above the overhead are refused.
func TestExactLengths(t *testing.T) {
	ctx := context.Background()
	quirky := httptest.NewServer(quirkyTokenizer())
	defer quirky.Close()
	type server struct {
		name, url, dialect string
		chat               bool
		overhead           int
	}
	var servers []server
	for _, e := range []struct{ engine, dialect string }{
		{simulator.EngineVLLM, "vllm"}, {simulator.EngineTGI, "tgi"}, {simulator.EngineLlamaCpp, "llamacpp"},
	} {
		cfg := simulatortest.InstantConfig()
		cfg.Engine = e.engine
		url, _ := simulatortest.StartTest(t, cfg)
		servers = append(servers, server{e.engine, url, e.dialect, false, 0})
		if e.engine == simulator.EngineVLLM {
			servers = append(servers, server{"vllm-chat", url + "/v1", e.dialect, true,
				simulator.ChatTokensPerMessage + simulator.ChatGenerationPromptTokens})
		}
	}
	servers = append(servers, server{"quirky", quirky.URL, "vllm", false, 1}, server{"quirky-chat", quirky.URL, "vllm", true, 6})

	for _, s := range servers {
		t.Run(s.name, func(t *testing.T) {
			tok, err := DetectTokenizer(ctx, Endpoint{BaseURL: s.url, Model: "sim-model", Chat: s.chat})
			if err != nil || tok == nil {
				t.Fatalf("DetectTokenizer = %v, %v", tok, err)
			}
			if tok.Dialect() != s.dialect {
				t.Fatalf("dialect %s, want %s", tok.Dialect(), s.dialect)
			}
			in := config.Distribution{Dist: "uniform", Min: s.overhead + 1, Max: s.overhead + 300}
			c, err := NewCalibrated(ctx, in, config.Distribution{Dist: "fixed", Mean: 8}, 7, tok, tok.Kind())
			if err != nil {
				t.Fatal(err)
			}
			if c.Overhead() != s.overhead {
				t.Errorf("overhead %d, want %d", c.Overhead(), s.overhead)
			}
			for i := range 60 {
				p, err := c.NextExact()
				if err != nil {
					t.Fatalf("prompt %d: %v", i, err)
				}
				got, err := tok.Count(ctx, p.Text)
				if err != nil {
					t.Fatal(err)
				}
				if got != p.InputTokens || p.Tokens != p.InputTokens {
					t.Fatalf("prompt %d: %d tokens (Tokens %d), want %d", i, got, p.Tokens, p.InputTokens)
				}
			}
			// Lengths at or below the overhead: refused at start...
			_, err = NewCalibrated(ctx, config.Distribution{Dist: "fixed", Mean: float64(max(1, s.overhead))}, config.Distribution{Dist: "fixed", Mean: 8}, 7, tok, tok.Kind())
			if s.overhead > 0 && !errors.Is(err, ErrBelowOverhead) {
				t.Errorf("length %d with overhead %d: err %v, want ErrBelowOverhead", s.overhead, s.overhead, err)
			}
			// ...and one by one.
			if s.overhead > 0 {
				if _, err := c.exact(s.overhead, newWordStream(1), s.overhead); !errors.Is(err, ErrBelowOverhead) {
					t.Errorf("exact(%d): %v, want ErrBelowOverhead", s.overhead, err)
				}
			}
		})
	}
}

// TestCalibratedIsPure: the same seed, spec and tokenizer give the same
// prompts and the same hash; another seed does not.
func TestCalibratedIsPure(t *testing.T) {
	ctx := context.Background()
	srv := httptest.NewServer(quirkyTokenizer())
	defer srv.Close()
	tok, err := DetectTokenizer(ctx, Endpoint{BaseURL: srv.URL})
	if err != nil || tok == nil {
		t.Fatal(tok, err)
	}
	in, out := config.Distribution{Dist: "uniform", Min: 2, Max: 200}, config.Distribution{Dist: "fixed", Mean: 16}
	hash := func(seed int64) string {
		c, err := NewCalibrated(ctx, in, out, seed, tok, tok.Kind())
		if err != nil {
			t.Fatal(err)
		}
		h, err := HashPrompts(c.NextExact, 32)
		if err != nil {
			t.Fatal(err)
		}
		return h
	}
	a, b, other := hash(3), hash(3), hash(4)
	if a != b || len(a) != 64 {
		t.Fatalf("same seed, hashes %s and %s", a, b)
	}
	if a == other {
		t.Fatalf("different seeds, same hash %s", a)
	}
}

// TestNoTokenizerIsAnEstimate: Ollama has no /tokenize; prompts are N
// words, marked as an estimate.
func TestNoTokenizerIsAnEstimate(t *testing.T) {
	cfg := simulatortest.InstantConfig()
	cfg.Engine = simulator.EngineOllama
	url, _ := simulatortest.StartTest(t, cfg)
	tok, err := DetectTokenizer(context.Background(), Endpoint{BaseURL: url})
	if err != nil || tok != nil {
		t.Fatalf("DetectTokenizer = %v, %v; want none", tok, err)
	}
	c, err := NewCalibrated(context.Background(), config.Distribution{Dist: "fixed", Mean: 10}, config.Distribution{Dist: "fixed", Mean: 4}, 1, nil, "")
	if err != nil {
		t.Fatal(err)
	}
	p := c.Next()
	if c.Kind() != TokenizerEstimate || len(strings.Fields(p.Text)) != 10 || p.Tokens != 0 {
		t.Fatalf("kind %s, prompt %q (Tokens %d)", c.Kind(), p.Text, p.Tokens)
	}
}

// failingCounter measures the overhead, then fails every count.
type failingCounter struct{ calls int }

func (f *failingCounter) Count(context.Context, string) (int, error) {
	f.calls++
	if f.calls == 1 {
		return 0, nil
	}
	return 0, errors.New("tokenizer down")
}

// TestNextReportsFailures: a prompt that cannot be calibrated goes out as
// an estimate (Tokens 0, the requested words), and each failure reaches
// OnFailure with the tokenizer's error.
func TestNextReportsFailures(t *testing.T) {
	c, err := NewCalibrated(context.Background(), config.Distribution{Dist: "fixed", Mean: 10}, config.Distribution{Dist: "fixed", Mean: 4}, 1, &failingCounter{}, TokenizerServer)
	if err != nil {
		t.Fatal(err)
	}
	var got []error
	c.OnFailure = func(err error) { got = append(got, err) }
	for range 3 {
		if p := c.Next(); p.Tokens != 0 || p.InputTokens != 10 || len(strings.Fields(p.Text)) != 10 {
			t.Fatalf("prompt %q (Tokens %d, InputTokens %d), want an estimate of 10 words", p.Text, p.Tokens, p.InputTokens)
		}
	}
	if len(got) != 3 {
		t.Fatalf("OnFailure called %d times, want 3", len(got))
	}
	for _, err := range got {
		if err == nil || !strings.Contains(err.Error(), "tokenizer down") {
			t.Fatalf("OnFailure(%v), want the tokenizer's error", err)
		}
	}
}
