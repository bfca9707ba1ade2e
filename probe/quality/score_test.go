package quality_test

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"io"
	"math"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/infer-exporter/infer_exporter/internal/config"
	"github.com/infer-exporter/infer_exporter/internal/simulator"
	"github.com/infer-exporter/infer_exporter/internal/simulator/simulatortest"
	"github.com/infer-exporter/infer_exporter/probe/client"
	"github.com/infer-exporter/infer_exporter/probe/quality"
)

// referenceSHA256 is the built-in text's hash as docs/metrics.md states
// it: a change of the text must change the documentation (and every
// dashboard comparing the old label).
const referenceSHA256 = "29c164798e0a8ac2273f312a8a155fc1b7f91131118b141698306883811b1cdc"

// TestDocumented: docs/metrics.md states the reference text's hash and
// defines every metric of the live gauge.
func TestDocumented(t *testing.T) {
	doc, err := os.ReadFile("../../docs/metrics.md")
	if err != nil {
		t.Fatal(err)
	}
	want := []string{referenceSHA256, referenceSHA256[:quality.LabelHexDigits]}
	ch := make(chan *prometheus.Desc, 16)
	quality.NewMonitor(quality.MonitorOptions{}).Describe(ch)
	close(ch)
	name := regexp.MustCompile(`fqName: "([^"]+)"`)
	for d := range ch {
		want = append(want, "`"+name.FindStringSubmatch(d.String())[1]+"{")
	}
	want = append(want, quality.Reasons...)
	for _, w := range want {
		if !strings.Contains(string(doc), w) {
			t.Errorf("docs/metrics.md does not mention %s", w)
		}
	}
}

func TestReferenceText(t *testing.T) {
	ref := quality.Reference()
	sum := sha256.Sum256([]byte(ref.Body))
	if got := hex.EncodeToString(sum[:]); ref.SHA256 != got || got != referenceSHA256 {
		t.Errorf("SHA256 %s, bytes hash to %s, documented %s", ref.SHA256, got, referenceSHA256)
	}
	if ref.Label() != referenceSHA256[:quality.LabelHexDigits] {
		t.Errorf("label %q", ref.Label())
	}
	// A few hundred tokens: one short prefill, and enough tokens for a
	// steady mean.
	if n := simulator.CountTokens(ref.Body); n < 250 || n > 600 {
		t.Errorf("the reference text is %d words, want a few hundred", n)
	}
	for _, tc := range []struct{ name, body string }{{"one word", "hello"}, {"empty", "  "}, {"too long", strings.Repeat("a ", quality.MaxTextBytes)}} {
		if _, err := quality.NewText(tc.name, tc.body); err == nil {
			t.Errorf("NewText(%s) accepted", tc.name)
		}
	}
}

// TestFlavorsAgree: the configuration's list of scorable flavors is the
// list of flavors with a dialect, and every flavor is one or the other.
func TestFlavorsAgree(t *testing.T) {
	for _, f := range config.Flavors {
		capable, why := config.PerplexityCapable(config.Flavor(f))
		d, err := quality.DialectFor(f)
		if capable != (err == nil) {
			t.Errorf("flavor %s: config says capable %v (%s), quality has dialect %q (%v)", f, capable, why, d, err)
		}
		var e *quality.Error
		if err != nil && (!errors.As(err, &e) || e.Reason != quality.ReasonUnsupported || !strings.Contains(err.Error(), why)) {
			t.Errorf("flavor %s: error %v is not an unsupported Error saying %q", f, err, why)
		}
	}
}

// TestScoreAgainstSimulator scores the reference text through every
// dialect the simulator speaks, healthy and degraded, and compares the
// perplexity and the token count with the simulator's ground truth.
func TestScoreAgainstSimulator(t *testing.T) {
	ref := quality.Reference()
	for _, tc := range []struct {
		engine, flavor, dialect string
		baseSuffix              string
	}{
		{simulator.EngineVLLM, "openai-completions", quality.DialectOpenAIEcho, ""},
		{simulator.EngineVLLM, "openai-chat", quality.DialectOpenAIEcho, "/v1"},
		{simulator.EngineSGLang, "sglang", quality.DialectSGLang, ""},
		{simulator.EngineTGI, "tgi", quality.DialectTGI, "/"},
	} {
		for _, penalty := range []float64{0, 0.8} {
			t.Run(tc.engine+"/"+tc.flavor+"/penalty="+strconv.FormatFloat(penalty, 'g', -1, 64), func(t *testing.T) {
				cfg := simulatortest.InstantConfig()
				cfg.Engine, cfg.Seed = tc.engine, 3
				base, sim := simulatortest.StartTest(t, cfg)
				if err := sim.SetFaults(simulator.Faults{LogprobPenalty: penalty}); err != nil {
					t.Fatal(err)
				}
				f, _ := client.ParseFlavor(tc.flavor)
				ct := &client.Target{Name: "sim", BaseURL: base + tc.baseSuffix, Model: cfg.Model, Flavor: f}
				ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
				defer cancel()
				sc, err := quality.ScoreText(ctx, http.DefaultClient, ct, ref)
				if err != nil {
					t.Fatal(err)
				}
				want, n := sim.ExpectedPerplexity(ref.Body)
				if math.Abs(sc.Perplexity-want) > 1e-9*want || sc.Tokens != n {
					t.Errorf("perplexity %v over %d tokens, the simulator's truth %v over %d", sc.Perplexity, sc.Tokens, want, n)
				}
				if healthy, _ := simulator.ExpectedPerplexity(3, ref.Body, 0); penalty > 0 {
					if r := sc.Perplexity / healthy; math.Abs(r-math.Exp(penalty)) > 1e-9 {
						t.Errorf("degraded by %v nats: perplexity %v times the healthy one, want exp(%v) = %v", penalty, r, penalty, math.Exp(penalty))
					}
				}
				if math.Abs(sc.MeanLogprob+math.Log(sc.Perplexity)) > 1e-12 {
					t.Errorf("mean log-probability %v is not -log(perplexity %v)", sc.MeanLogprob, sc.Perplexity)
				}
				if sc.Dialect != tc.dialect || sc.Text.SHA256 != ref.SHA256 || sc.HTTPStatus != 200 || sc.Duration <= 0 {
					t.Errorf("score %+v", sc)
				}
			})
		}
	}
}

// canned serves body with status to every request.
func canned(t *testing.T, status int, body string) *httptest.Server {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(status)
		w.Write([]byte(body))
	}))
	t.Cleanup(srv.Close)
	return srv
}

// Hand-written answers, in each dialect's shape (see the package
// documentation for where the shapes come from).
const (
	echoOK = `{"choices":[{"text":"a b c","logprobs":{"token_logprobs":[null,-1.5,-0.5,-2.0]}}],"usage":{"prompt_tokens":3,"completion_tokens":1}}`
)

// TestScoreFailures: every way an answer can fail gives its reason, and
// never a perplexity.
func TestScoreFailures(t *testing.T) {
	many := `{"choices":[{"logprobs":{"token_logprobs":[null` + strings.Repeat(",-1", quality.MaxTokens) + `]}}],"usage":{"prompt_tokens":70000}}`
	huge := `{"choices":[{"logprobs":{"token_logprobs":[null]}}],"pad":"` + strings.Repeat("x", quality.MaxResponseBytes) + `"}`
	for _, tc := range []struct {
		name, flavor string
		status       int
		body         string
		reason       string
	}{
		{"server error", "openai-completions", 500, `{"error":{"message":"boom"}}`, quality.ReasonHTTPStatus},
		{"not json", "openai-completions", 200, `{not json`, quality.ReasonBadResponse},
		{"echo ignored: no logprobs", "openai-completions", 200, `{"choices":[{"text":"x","logprobs":null}],"usage":{"prompt_tokens":3}}`, quality.ReasonNoLogprobs},
		{"echo ignored: generated only", "openai-completions", 200, `{"choices":[{"logprobs":{"token_logprobs":[-0.5]}}],"usage":{"prompt_tokens":3}}`, quality.ReasonNoLogprobs},
		{"no usage", "openai-completions", 200, `{"choices":[{"logprobs":{"token_logprobs":[null,-1]}}]}`, quality.ReasonIncomplete},
		{"a null after the first", "openai-completions", 200, `{"choices":[{"logprobs":{"token_logprobs":[null,-1,null,-2]}}],"usage":{"prompt_tokens":4}}`, quality.ReasonIncomplete},
		{"short of the prompt", "openai-completions", 200, `{"choices":[{"logprobs":{"token_logprobs":[null,-1,-2]}}],"usage":{"prompt_tokens":5}}`, quality.ReasonIncomplete},
		{"one token", "openai-completions", 200, `{"choices":[{"logprobs":{"token_logprobs":[null,-1]}}],"usage":{"prompt_tokens":1}}`, quality.ReasonIncomplete},
		{"positive log-probability", "openai-completions", 200, `{"choices":[{"logprobs":{"token_logprobs":[null,0.5]}}],"usage":{"prompt_tokens":2}}`, quality.ReasonBadResponse},
		{"perplexity overflows: -1000 a token", "openai-completions", 200, `{"choices":[{"logprobs":{"token_logprobs":[null,-1000,-1000]}}],"usage":{"prompt_tokens":3}}`, quality.ReasonBadResponse},
		{"sglang perplexity overflows", "sglang", 200, `{"meta_info":{"prompt_tokens":2,"input_token_logprobs":[[null,1,null],[-1000,2,null]]}}`, quality.ReasonBadResponse},
		{"a string log-probability", "openai-completions", 200, `{"choices":[{"logprobs":{"token_logprobs":[null,"-1"]}}],"usage":{"prompt_tokens":2}}`, quality.ReasonBadResponse},
		{"error in a 200", "openai-completions", 200, `{"error":{"message":"no"}}`, quality.ReasonBadResponse},
		{"too many entries", "openai-completions", 200, many, quality.ReasonBadResponse},
		{"too large", "openai-completions", 200, huge, quality.ReasonBadResponse},
		{"sglang window not the prompt", "sglang", 200, `{"meta_info":{"prompt_tokens":4,"input_token_logprobs":[[null,1,null],[-1,2,null]]}}`, quality.ReasonIncomplete},
		{"sglang entry not a triple", "sglang", 200, `{"meta_info":{"prompt_tokens":2,"input_token_logprobs":[[null,1,null],{"lp":-1}]}}`, quality.ReasonBadResponse},
		{"sglang without logprobs", "sglang", 200, `{"text":"x","meta_info":{"prompt_tokens":2}}`, quality.ReasonNoLogprobs},
		{"tgi prefill disabled", "tgi", 200, `{"generated_text":"x","details":{"prefill":[],"tokens":[]}}`, quality.ReasonNoLogprobs},
		{"tgi cached tokens unscored", "tgi", 200, `{"details":{"prefill":[{"id":1,"text":"a","logprob":null},{"id":2,"text":"b","logprob":null},{"id":3,"text":"c","logprob":-1}]}}`, quality.ReasonIncomplete},
		{"unsupported flavor", "llamacpp", 200, echoOK, quality.ReasonUnsupported},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srv := canned(t, tc.status, tc.body)
			f, _ := client.ParseFlavor(tc.flavor)
			sc, err := quality.ScoreText(context.Background(), http.DefaultClient, &client.Target{BaseURL: srv.URL, Flavor: f}, quality.Reference())
			var e *quality.Error
			if !errors.As(err, &e) || e.Reason != tc.reason {
				t.Fatalf("score %+v, error %v; want reason %s", sc, err, tc.reason)
			}
			if tc.reason != quality.ReasonUnsupported && e.HTTPStatus != tc.status {
				t.Errorf("HTTP status %d in the error, want %d", e.HTTPStatus, tc.status)
			}
		})
	}
}

// TestScoreHandWritten checks the arithmetic on a hand-written answer: the
// first entry skipped, the generated token's cut at prompt_tokens.
func TestScoreHandWritten(t *testing.T) {
	srv := canned(t, 200, echoOK)
	sc, err := quality.ScoreText(context.Background(), http.DefaultClient,
		&client.Target{BaseURL: srv.URL + "/v1", Flavor: client.OpenAICompletions}, quality.Reference())
	if err != nil {
		t.Fatal(err)
	}
	if want := math.Exp(1.0); sc.Tokens != 2 || math.Abs(sc.Perplexity-want) > 1e-12 {
		t.Errorf("perplexity %v over %d tokens, want exp(1) over 2 (-1.5 and -0.5; -2.0 is the generated token)", sc.Perplexity, sc.Tokens)
	}
}

// TestScoreTransportFailures: no answer is a timeout or a connection
// failure, and the bearer token a server echoes is redacted.
func TestScoreTransportFailures(t *testing.T) {
	slow := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		// Read the body first: the server notices a closed connection
		// (and cancels r's context) only once it reads in the background.
		io.Copy(io.Discard, r.Body)
		select {
		case <-r.Context().Done():
		case <-time.After(5 * time.Second):
		}
	}))
	defer slow.Close()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	closed := "http://" + ln.Addr().String()
	ln.Close()
	echo := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Error(w, "bad key "+r.Header.Get("Authorization"), http.StatusUnauthorized)
	}))
	defer echo.Close()
	for _, tc := range []struct {
		name, url string
		reason    string
	}{
		{"deadline", slow.URL, quality.ReasonTimeout},
		{"refused", closed, quality.ReasonConnection},
		{"token echoed", echo.URL, quality.ReasonHTTPStatus},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
			defer cancel()
			_, err := quality.ScoreText(ctx, http.DefaultClient, &client.Target{BaseURL: tc.url, BearerToken: "sk-secret-42"}, quality.Reference())
			var e *quality.Error
			if !errors.As(err, &e) || e.Reason != tc.reason {
				t.Fatalf("error %v, want reason %s", err, tc.reason)
			}
			if strings.Contains(err.Error(), "sk-secret-42") {
				t.Errorf("the error %q holds the bearer token", err)
			}
		})
	}
}

// echoAnswer is a vLLM-shaped echo answer for a prompt of n tokens: each
// token with its log-probability, top_logprobs and offset, as vLLM writes
// them, plus the generated token.
func echoAnswer(n int) []byte {
	var b strings.Builder
	b.WriteString(`{"id":"cmpl-1","object":"text_completion","choices":[{"index":0,"text":"x","logprobs":{"text_offset":[`)
	for i := 0; i <= n; i++ {
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteString(strconv.Itoa(i * 6))
	}
	b.WriteString(`],"token_logprobs":[null`)
	for i := 1; i <= n; i++ {
		b.WriteString(",-2.718281828459045")
	}
	b.WriteString(`],"tokens":["w"`)
	for i := 1; i <= n; i++ {
		b.WriteString(`," word"`)
	}
	b.WriteString(`],"top_logprobs":[null`)
	for i := 1; i <= n; i++ {
		b.WriteString(`,{" word":-2.718281828459045," other":-3.1415926}`)
	}
	b.WriteString(`]},"finish_reason":"length"}],"usage":{"prompt_tokens":` + strconv.Itoa(n) + `,"completion_tokens":1}}`)
	return []byte(b.String())
}

// BenchmarkScoreEcho reads vLLM-shaped echo answers: the reference text's
// size (some 450 tokens) and MaxTokens entries, the bound. Memory per
// score grows with the body (which is read whole, at most
// MaxResponseBytes), not with an array of log-probabilities.
func BenchmarkScoreEcho(b *testing.B) {
	for _, n := range []int{450, quality.MaxTokens - 1} {
		body := echoAnswer(n)
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			io.Copy(io.Discard, r.Body)
			w.Header().Set("Content-Type", "application/json")
			w.Write(body)
		}))
		ct := &client.Target{BaseURL: srv.URL, Flavor: client.OpenAICompletions}
		b.Run(strconv.Itoa(n)+"-tokens", func(b *testing.B) {
			b.SetBytes(int64(len(body)))
			b.ReportAllocs()
			for b.Loop() {
				sc, err := quality.ScoreText(context.Background(), http.DefaultClient, ct, quality.Reference())
				if err != nil || sc.Tokens != n-1 {
					b.Fatalf("%+v %v", sc, err)
				}
			}
		})
		srv.Close()
	}
}
