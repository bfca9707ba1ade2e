package replay

import (
	"errors"
	"math"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/infer-exporter/infer_exporter/internal/config"
	"github.com/infer-exporter/infer_exporter/probe/client"
	"github.com/infer-exporter/infer_exporter/probe/observation"
)

// tokenTrace is a token-only trace with records at the given offsets (ms),
// prompt 10 tokens, output 2.
func tokenTrace(ms ...int) *Trace {
	tr := &Trace{Name: "mem", Format: FormatAzure}
	for i, m := range ms {
		tr.Records = append(tr.Records, Record{Offset: time.Duration(m) * time.Millisecond, InputTokens: 10, OutputTokens: 2, File: "mem", Line: i + 2})
	}
	return tr
}

func offsets(t *testing.T, s *Source, max int) []time.Duration {
	t.Helper()
	var out []time.Duration
	sc := s.Schedule()
	for len(out) < max {
		off, ok := sc.Next()
		if !ok {
			break
		}
		out = append(out, off)
	}
	return out
}

func ms(v ...float64) []time.Duration {
	out := make([]time.Duration, len(v))
	for i, x := range v {
		out[i] = time.Duration(x * float64(time.Millisecond))
	}
	return out
}

func TestScheduleOptions(t *testing.T) {
	for _, tc := range []struct {
		name    string
		trace   *Trace
		opts    Options
		max     int
		want    []time.Duration
		clamped uint64
	}{
		{"as recorded", tokenTrace(0, 100, 250), Options{MaxRate: 1000}, 10, ms(0, 100, 250), 0},
		{"speed 2", tokenTrace(0, 100, 250), Options{Speed: 2, MaxRate: 1000}, 10, ms(0, 50, 125), 0},
		{"speed 0.5", tokenTrace(0, 100, 250), Options{Speed: 0.5, MaxRate: 1000}, 10, ms(0, 200, 500), 0},
		{"window", tokenTrace(0, 100, 250, 400, 600), Options{Start: 100 * time.Millisecond, End: 400 * time.Millisecond, MaxRate: 1000}, 10, ms(0, 150), 0},
		{"window starts before its first record", tokenTrace(0, 100, 250), Options{Start: 50 * time.Millisecond, MaxRate: 1000}, 10, ms(50, 200), 0},
		// Without an end a pass lasts to the last record plus the mean gap
		// (250/2 = 125 ms): 375 ms.
		{"loop", tokenTrace(0, 100, 250), Options{Loop: true, MaxRate: 1000}, 7, ms(0, 100, 250, 375, 475, 625, 750), 0},
		{"loop with end", tokenTrace(0, 100, 250), Options{Loop: true, End: 300 * time.Millisecond, MaxRate: 1000}, 6, ms(0, 100, 250, 300, 400, 550), 0},
		// A ceiling of 10/s spaces the burst 100 ms apart; the record at
		// 400 ms is back on its trace instant.
		{"ceiling", tokenTrace(0, 1, 2, 400), Options{MaxRate: 10}, 10, ms(0, 100, 200, 400), 2},
		// Equal trace instants still leave 1/MaxRate between sends.
		{"equal instants", tokenTrace(5, 5), Options{MaxRate: 1000}, 10, ms(5, 6), 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s, err := NewSource(tc.trace, tc.opts)
			if err != nil {
				t.Fatal(err)
			}
			got := offsets(t, s, tc.max)
			if len(got) != len(tc.want) {
				t.Fatalf("offsets %v, want %v", got, tc.want)
			}
			for i := range got {
				if got[i] != tc.want[i] {
					t.Fatalf("offsets %v, want %v", got, tc.want)
				}
			}
			if c := s.Schedule().Clamped(); c != tc.clamped {
				t.Errorf("clamped %d, want %d", c, tc.clamped)
			}
		})
	}
}

// TestSampleFraction: a sample keeps about the fraction asked for, keeps
// the kept records at their trace instants, and differs between passes.
func TestSampleFraction(t *testing.T) {
	n := 10000
	m := make([]int, n)
	for i := range m {
		m[i] = i
	}
	s, err := NewSource(tokenTrace(m...), Options{Sample: 0.25, Seed: 7, Loop: true, MaxRate: 1e6})
	if err != nil {
		t.Fatal(err)
	}
	pass := time.Duration(n) * time.Millisecond // last 9999 ms + mean gap 1 ms
	var first, second []time.Duration
	sc := s.Schedule()
	for {
		off, _ := sc.Next()
		if off >= 2*pass {
			break
		}
		if off%time.Millisecond != 0 {
			t.Fatalf("offset %v is not a trace instant", off)
		}
		if off < pass {
			first = append(first, off)
		} else {
			second = append(second, off-pass)
		}
	}
	// Binomial(10000, 0.25): sd 43; 5 sd either side.
	for _, k := range []int{len(first), len(second)} {
		if math.Abs(float64(k)-2500) > 5*43.3 {
			t.Errorf("kept %d of %d, want about 2500", k, n)
		}
	}
	same := len(first) == len(second)
	for i := 0; same && i < len(first); i++ {
		same = first[i] == second[i]
	}
	if same {
		t.Error("both passes sampled the same records")
	}
}

func TestRate(t *testing.T) {
	// 40 records in the first 2 s, then 1 per second.
	var m []int
	for i := range 40 {
		m = append(m, i*50)
	}
	for i := 2; i < 30; i++ {
		m = append(m, i*1000)
	}
	s, err := NewSource(tokenTrace(m...), Options{MaxRate: 1000})
	if err != nil {
		t.Fatal(err)
	}
	sc := s.Schedule()
	for _, tc := range []struct {
		at   time.Duration
		want float64
	}{
		{time.Second, 20},              // 20 records in (0, 1 s]
		{2 * time.Second, 40.0 / 2},    // 39 + the one at 2 s, over 2 s
		{25 * time.Second, 10.0 / 10},  // one per second
		{100 * time.Second, 0},         // over
		{500 * time.Millisecond, 11.0}, // 11 records in the first second (at least 1 s)
	} {
		if got := sc.Rate(tc.at); math.Abs(got-tc.want) > 1e-9 {
			t.Errorf("Rate(%v) = %v, want %v", tc.at, got, tc.want)
		}
	}
}

func TestDefaultCeiling(t *testing.T) {
	// Busiest second: 5 records; at speed 2 they fall in 0.5 s, and
	// records 1 s (2 s of trace) further join them: 7 in one second.
	s, err := NewSource(tokenTrace(0, 100, 200, 300, 400, 1500, 1900, 5000), Options{Speed: 2})
	if err != nil {
		t.Fatal(err)
	}
	if got := s.MaxRate(); got != 70 {
		t.Errorf("MaxRate = %v, want 10 × 7", got)
	}
}

// TestSynthesisExactLength: a prompt is exactly the record's length in the
// simulator's tokenizer, the chat template counted.
func TestSynthesisExactLength(t *testing.T) {
	for _, chat := range []bool{false, true} {
		for _, n := range []int{4, 5, 17, 512, 1000} {
			tr := &Trace{Records: []Record{{InputTokens: n, OutputTokens: 1, Line: 1}}}
			s, err := NewSource(tr, Options{Flavor: flavorOf(chat)})
			if err != nil {
				t.Fatal(err)
			}
			s.Schedule().Next()
			p := s.Prompts().Next()
			words := len(strings.Fields(p.Text))
			want := n
			if chat {
				want = n - 4
			}
			if words != want || p.InputTokens != n || p.OutputTokens != 1 {
				t.Errorf("chat %v, %d tokens: %d words (want %d), prompt %+v", chat, n, words, want, p)
			}
		}
	}
}

// TestMooncakeBlocks: prompts whose leading hash ids are equal are equal
// token for token over those blocks (template included), and differ in the
// first block whose id differs.
func TestMooncakeBlocks(t *testing.T) {
	const b = 16
	tr := &Trace{Format: FormatMooncake, Records: []Record{
		{InputTokens: 40, OutputTokens: 1, HashIDs: []int64{1, 2, 3}, Line: 1},
		{Offset: 1, InputTokens: 35, OutputTokens: 1, HashIDs: []int64{1, 2, 9}, Line: 2},
		{Offset: 2, InputTokens: 16, OutputTokens: 1, HashIDs: []int64{1}, Line: 3},
		{Offset: 3, InputTokens: 48, OutputTokens: 1, HashIDs: []int64{4, 2, 3}, Line: 4},
	}}
	for _, chat := range []bool{false, true} {
		s, err := NewSource(tr, Options{Flavor: flavorOf(chat), BlockSize: b, MaxRate: 1e6})
		if err != nil {
			t.Fatal(err)
		}
		var toks [][]string
		for range tr.Records {
			s.Schedule().Next()
			words := strings.Fields(s.Prompts().Next().Text)
			if chat {
				// The simulator's template: 2 tokens before the content, 2
				// after.
				words = append(append([]string{"<s>", "<user>"}, words...), "</s>", "<asst>")
			}
			toks = append(toks, words)
		}
		// prefix is the tokens of blocks 0..j: what the server's block hash
		// chain covers.
		prefix := func(r, j int) string { return strings.Join(toks[r][:min((j+1)*b, len(toks[r]))], " ") }
		for _, c := range []struct {
			r1, r2, j        int
			equal, equalChat bool
		}{
			{0, 1, 0, true, true}, {0, 1, 1, true, true}, {0, 1, 2, false, false},
			// Record 2 is one full block; with a chat template its last
			// tokens are the template's closing ones, so that block is not
			// record 0's.
			{0, 2, 0, true, false},
			{0, 3, 0, false, false}, {0, 3, 1, false, false},
		} {
			want := c.equal
			if chat {
				want = c.equalChat
			}
			if got := prefix(c.r1, c.j) == prefix(c.r2, c.j); got != want {
				t.Errorf("chat %v: records %d and %d equal up to block %d: %v, want %v", chat, c.r1, c.r2, c.j, got, want)
			}
		}
		if chat && (len(toks[0]) != 40 || len(toks[1]) != 35) {
			t.Errorf("chat lengths %d, %d", len(toks[0]), len(toks[1]))
		}
	}
}

// TestUnreplayable: records that cannot be replayed exactly are refused
// with their line, or skipped and counted.
func TestUnreplayable(t *testing.T) {
	for _, tc := range []struct {
		name   string
		rec    Record
		opts   Options
		reason string
	}{
		{"zero output", Record{InputTokens: 5, OutputTokens: 0}, Options{}, "output length 0"},
		{"shorter than the template", Record{InputTokens: 3, OutputTokens: 1}, Options{Flavor: flavorOf(true)}, "chat template"},
		{"hash ids short", Record{InputTokens: 1025, OutputTokens: 1, HashIDs: []int64{1, 2}}, Options{}, "needs 3 blocks"},
		{"hash ids long", Record{InputTokens: 100, OutputTokens: 1, HashIDs: []int64{1, 2}}, Options{}, "needs 1 blocks"},
		{"body for another API", Record{Body: []byte(`{}`), Path: "/v1/completions"}, Options{Flavor: flavorOf(true)},
			"recorded for /v1/completions, the openai-completions API; the target speaks the openai-chat API (/chat/completions)"},
		{"body for an unknown path", Record{Body: []byte(`{}`), Path: "/generate"}, Options{Flavor: flavorOf(false)},
			"recorded for /generate, the path of no OpenAI API; the target speaks the openai-completions API (/completions)"},
		{"chat body to a Responses target", Record{Body: []byte(`{}`), Path: "/v1/chat/completions"}, Options{Flavor: facts(t, "openai-responses")},
			"recorded for /v1/chat/completions, the openai-chat API; the target speaks the openai-responses API (/responses)"},
		{"Responses body to a chat target", Record{Body: []byte(`{}`), Path: "/v1/responses"}, Options{Flavor: flavorOf(true)},
			"recorded for /v1/responses, the openai-responses API; the target speaks the openai-chat API (/chat/completions)"},
		{"Responses body without a path to a chat target", Record{Body: []byte(`{"input":"hi"}`)}, Options{Flavor: flavorOf(true)},
			`recorded without a path, with a body of the openai-responses API (by its members: input, max_output_tokens); the target speaks the openai-chat API`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			good := Record{Offset: time.Second, InputTokens: 600, OutputTokens: 1, HashIDs: []int64{1, 2}, Line: 2, File: "x"}
			if tc.rec.Body != nil {
				good = Record{Offset: time.Second, Body: []byte(`{}`), Line: 2, File: "x"}
			}
			bad := tc.rec
			bad.File, bad.Line = "x", 7
			tr := &Trace{Name: "x", Records: []Record{bad, good}}
			tc.opts.OnUnreplayable = Refuse
			_, err := NewSource(tr, tc.opts)
			var le *LineError
			if !errors.As(err, &le) || le.Line != 7 || !strings.Contains(le.Reason, tc.reason) {
				t.Fatalf("refuse: %v, want x:7: ...%s...", err, tc.reason)
			}
			tc.opts.OnUnreplayable = Skip
			s, err := NewSource(tr, tc.opts)
			if err != nil {
				t.Fatal(err)
			}
			if s.Skipped() != 1 || s.Records() != 1 || len(s.Errors()) != 1 {
				t.Errorf("skip: skipped %d, records %d", s.Skipped(), s.Records())
			}
		})
	}
	// A target of no OpenAI API takes no recorded body, whatever its path.
	tr := &Trace{Name: "x", Records: []Record{{Body: []byte(`{}`), File: "x", Line: 3}}}
	if _, err := NewSource(tr, Options{Flavor: facts(t, "tgi")}); err == nil ||
		!strings.Contains(err.Error(), `x:3: a recorded body is sent to an OpenAI API (openai-chat, openai-completions, openai-responses); the target's flavor "tgi" is none`) {
		t.Errorf("a body to a tgi target: %v", err)
	}
	if _, err := NewSource(tokenTrace(0, 10), Options{Start: time.Hour}); !errors.Is(err, ErrNoRecords) {
		t.Errorf("empty window: %v", err)
	}
}

// TestRequestCompletion: a token record's request gets its output length
// forced; a recorded body goes as RawBody (with its output length forced on
// request).
func TestRequestCompletion(t *testing.T) {
	s, err := NewSource(tokenTrace(0), Options{})
	if err != nil {
		t.Fatal(err)
	}
	s.Schedule().Next()
	p := s.Prompts().Next()
	req := &client.Request{Prompt: p.Text}
	s.Prompts().Request(0, req)
	if req.MaxTokens != 2 || !req.IgnoreEOS || req.RawBody != nil {
		t.Errorf("token record request %+v", req)
	}

	body := `{"messages":[{"role":"user","content":"hi"}],"max_tokens":100,"stream":true}`
	tr := &Trace{Records: []Record{{Body: []byte(body), OutputTokens: 9, Line: 1}}}
	for _, force := range []bool{false, true} {
		s, err := NewSource(tr, Options{ForceOutputTokens: force, Flavor: flavorOf(true)})
		if err != nil {
			t.Fatal(err)
		}
		s.Schedule().Next()
		if p := s.Prompts().Next(); p.Text != "" || p.OutputTokens != 9 {
			t.Errorf("body prompt %+v", p)
		}
		req := &client.Request{}
		s.Prompts().Request(0, req)
		want := body
		if force {
			want = `{"ignore_eos":true,"max_tokens":9,"messages":[{"role":"user","content":"hi"}],"stream":true}`
		}
		if string(req.RawBody) != want {
			t.Errorf("force %v: RawBody %s, want %s", force, req.RawBody, want)
		}
	}
}

// TestForceOutputResponses: a recorded Responses API body sent to a
// Responses target gets its output length as max_output_tokens, the API's
// own field, whatever else the body holds (the API's "prompt" is a prompt
// template), with its path or without.
func TestForceOutputResponses(t *testing.T) {
	opts := Options{Flavor: facts(t, "openai-responses"), ForceOutputTokens: true}
	for body, want := range map[string]string{
		`{"input":"hi","stream":true}`:                                       `{"ignore_eos":true,"input":"hi","max_output_tokens":9,"stream":true}`,
		`{"input":[{"role":"user","content":"hi"}],"max_output_tokens":100}`: `{"ignore_eos":true,"input":[{"role":"user","content":"hi"}],"max_output_tokens":9}`,
		`{"prompt":{"id":"pmpt_1"},"input":"x"}`:                             `{"ignore_eos":true,"input":"x","max_output_tokens":9,"prompt":{"id":"pmpt_1"}}`,
	} {
		for _, path := range []string{"/v1/responses", ""} {
			tr := &Trace{Records: []Record{{Body: []byte(body), Path: path, OutputTokens: 9, Line: 1}}}
			s, err := NewSource(tr, opts)
			if err != nil {
				t.Fatalf("%s at %q: %v", body, path, err)
			}
			s.Schedule().Next()
			s.Prompts().Next()
			req := &client.Request{}
			s.Prompts().Request(0, req)
			if string(req.RawBody) != want {
				t.Errorf("%s at %q: %s, want %s", body, path, req.RawBody, want)
			}
		}
	}
}

// flavorOf is the facts of the OpenAI chat flavor (chat) or completions
// flavor.
func flavorOf(chat bool) config.FlavorFacts {
	name := config.Flavor("openai-completions")
	if chat {
		name = "openai-chat"
	}
	f, _ := name.Facts()
	return f
}

// facts is the facts of the flavor name.
func facts(t testing.TB, name config.Flavor) config.FlavorFacts {
	t.Helper()
	f, ok := name.Facts()
	if !ok {
		t.Fatalf("no flavor %q", name)
	}
	return f
}

type fakeRecorder struct {
	mu       sync.Mutex
	drifts   []time.Duration
	progress []float64
}

func (f *fakeRecorder) Drift(_ time.Time, d time.Duration) {
	f.mu.Lock()
	f.drifts = append(f.drifts, d)
	f.mu.Unlock()
}

func (f *fakeRecorder) Replayed(p float64) {
	f.mu.Lock()
	f.progress = append(f.progress, p)
	f.mu.Unlock()
}

// TestDriftAndProgress: drift is the send instant minus the trace instant,
// the ceiling's delay included; progress counts replayed records of the
// pass, dropped ones included.
func TestDriftAndProgress(t *testing.T) {
	rec := &fakeRecorder{}
	s, err := NewSource(tokenTrace(0, 0, 1000, 2000), Options{MaxRate: 10, Recorder: rec})
	if err != nil {
		t.Fatal(err)
	}
	start := time.Unix(1000, 0)
	sends := []time.Duration{time.Millisecond, 0, 3 * time.Millisecond, -1} // lag per arrival; -1 dropped
	for i, lag := range sends {
		off, _ := s.Schedule().Next()
		s.Prompts().Next()
		s.Prompts().Request(uint64(i), &client.Request{})
		obs := &observation.Request{Seq: uint64(i), Scheduled: start.Add(off)}
		if lag >= 0 {
			obs.Sent = obs.Scheduled.Add(lag)
			s.Prompts().Done(obs)
		} else {
			obs.Outcome = observation.Dropped
			s.Prompts().Dropped(obs)
		}
	}
	// The second record was held back 100 ms by the ceiling.
	want := []time.Duration{time.Millisecond, 100 * time.Millisecond, 3 * time.Millisecond}
	if len(rec.drifts) != len(want) {
		t.Fatalf("drifts %v, want %v", rec.drifts, want)
	}
	for i := range want {
		if rec.drifts[i] != want[i] {
			t.Errorf("drifts %v, want %v", rec.drifts, want)
		}
	}
	if p := rec.progress; len(p) != 4 || p[0] != 0.25 || p[3] != 1 {
		t.Errorf("progress %v, want 0.25 ... 1", p)
	}
}
