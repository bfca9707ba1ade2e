package observation

import (
	"testing"
	"time"
)

var t0 = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

func ms(n int) time.Time { return t0.Add(time.Duration(n) * time.Millisecond) }

func itls(r *Request) []time.Duration {
	var out []time.Duration
	r.ITLs(func(d time.Duration) { out = append(out, d) })
	return out
}

// TestTPOTNotStreamed: a response whose whole output arrived in one content
// event (a server that ignored "stream": true and sent one JSON body, so
// FirstToken == End) has no TPOT and no ITL, however many tokens its usage
// counts. Before, it had a TPOT of 0 s, which dragged TPOT quantiles down.
func TestTPOTNotStreamed(t *testing.T) {
	whole := Request{Scheduled: ms(0), Sent: ms(1), FirstToken: ms(90), TokenTimes: []time.Time{ms(90)}, End: ms(90),
		Outcome: Success, HTTPStatus: 200, OutputTokens: 8, TokenSource: TokensFromUsage, ContentEvents: 1}
	if d, ok := whole.TPOT(); ok {
		t.Errorf("non-streamed body: TPOT = %v, want none", d)
	}
	if g := itls(&whole); len(g) != 0 {
		t.Errorf("non-streamed body: ITLs %v, want none", g)
	}
	// TTFT and E2E are still measured: the time to the whole answer.
	if d, ok := whole.TTFT(); !ok || d != 90*time.Millisecond {
		t.Errorf("TTFT = %v %v, want 90ms", d, ok)
	}
	if d, ok := whole.E2E(); !ok || d != 90*time.Millisecond {
		t.Errorf("E2E = %v %v, want 90ms", d, ok)
	}

	// A stream that sent its eight tokens in one event, then its end marker
	// a little later: no time between tokens was seen either.
	oneEvent := whole
	oneEvent.End = ms(91)
	if d, ok := oneEvent.TPOT(); ok {
		t.Errorf("stream of one event: TPOT = %v, want none", d)
	}
}

func TestTPOTStreamed(t *testing.T) {
	r := Request{Scheduled: ms(0), FirstToken: ms(100), TokenTimes: []time.Time{ms(100), ms(150), ms(250)}, End: ms(250),
		Outcome: Success, OutputTokens: 4, TokenSource: TokensFromUsage, ContentEvents: 3}
	if d, ok := r.TPOT(); !ok || d != 50*time.Millisecond {
		t.Errorf("TPOT = %v %v, want 50ms", d, ok)
	}
	if g := itls(&r); len(g) != 2 || g[0] != 50*time.Millisecond || g[1] != 100*time.Millisecond {
		t.Errorf("ITLs %v, want [50ms 100ms]", g)
	}
	// Fewer than two output tokens: no TPOT.
	one := r
	one.OutputTokens = 1
	if _, ok := one.TPOT(); ok {
		t.Error("one output token: TPOT defined")
	}
	// A record that does not count its events (built by hand, not by the
	// client) keeps the formula.
	uncounted := Request{Scheduled: ms(0), FirstToken: ms(100), End: ms(1100), OutputTokens: 11, Outcome: Success}
	if d, ok := uncounted.TPOT(); !ok || d != 100*time.Millisecond {
		t.Errorf("uncounted record: TPOT = %v %v, want 100ms", d, ok)
	}
}

// TestTTFA: the time to the first answer token runs from the scheduled
// instant, as TTFT does; a request that only reasoned has none.
func TestTTFA(t *testing.T) {
	r := Request{Scheduled: ms(0), FirstToken: ms(100), FirstAnswer: ms(700), TokenTimes: []time.Time{ms(100), ms(700)},
		End: ms(700), ReasoningEvents: 1, ContentEvents: 2}
	if d, ok := r.TTFA(); !ok || d != 700*time.Millisecond {
		t.Errorf("TTFA = %v %v, want 700ms", d, ok)
	}
	if d, _ := r.TTFT(); d != 100*time.Millisecond {
		t.Errorf("TTFT = %v, want the first reasoning token's 100ms", d)
	}
	r.FirstAnswer = time.Time{}
	if d, ok := r.TTFA(); ok {
		t.Errorf("no answer: TTFA = %v", d)
	}
	r.FirstAnswer, r.Scheduled = ms(700), time.Time{}
	if _, ok := r.TTFA(); ok {
		t.Error("no scheduled instant: TTFA defined")
	}
}

// hiddenReasoning is a request to a model that hides its reasoning: 200
// reasoning tokens the server counted but did not stream, then 20 visible
// deltas 20 ms apart from 1 s, the usage chunk 5 ms after the last one:
// 220 output tokens.
func hiddenReasoning() Request {
	r := Request{Scheduled: ms(0), Sent: ms(0), FirstToken: ms(1000), FirstAnswer: ms(1000),
		Outcome: Success, OutputTokens: 220, ReasoningTokens: 200, TokenSource: TokensFromUsage, ContentEvents: 20}
	for i := range 20 {
		r.TokenTimes = append(r.TokenTimes, ms(1000+20*i))
	}
	r.End = ms(1000 + 20*19 + 5)
	return r
}

// TestTPOTHiddenReasoning: reasoning the server counted but did not stream
// is no part of the streamed pace. Before, the 200 hidden tokens divided
// the visible stream's 385 ms: a TPOT of 1.76 ms for a 20 ms pace.
func TestTPOTHiddenReasoning(t *testing.T) {
	r := hiddenReasoning()
	if d, ok := r.TPOT(); !ok || d != 20*time.Millisecond {
		t.Errorf("hidden reasoning: TPOT = %v %v, want the visible pace of 20ms", d, ok)
	}
	if got := r.HiddenReasoning(); got != 200 {
		t.Errorf("HiddenReasoning = %d, want 200", got)
	}
	if d, ok := r.TTFA(); !ok || d != time.Second {
		t.Errorf("TTFA = %v %v, want the first visible token's 1s", d, ok)
	}

	// A window of token times (TokenWindow) keeps the last: the same pace.
	windowed := r
	windowed.TokenTimes = r.TokenTimes[15:]
	if d, ok := windowed.TPOT(); !ok || d != 20*time.Millisecond {
		t.Errorf("windowed token times: TPOT = %v %v, want 20ms", d, ok)
	}

	// One visible token after the hidden reasoning: no pace was seen.
	oneVisible := r
	oneVisible.OutputTokens = 201
	if d, ok := oneVisible.TPOT(); ok {
		t.Errorf("one visible token: TPOT = %v, want none", d)
	}

	// Reasoning streamed and counted: every token was streamed, the
	// formula over the whole output holds, and none is hidden.
	streamed := r
	streamed.ReasoningEvents = 5
	if got := streamed.HiddenReasoning(); got != 0 {
		t.Errorf("streamed reasoning: HiddenReasoning = %d", got)
	}
	if d, ok := streamed.TPOT(); !ok || d != (385*time.Millisecond)/219 {
		t.Errorf("streamed reasoning: TPOT = %v %v, want 385ms/219", d, ok)
	}
}

// TestReasoningRule: the one rule for a request's reasoning tokens, which
// the live metrics, /probe and the bench read: the server's count where it
// sent one, else the reasoning events.
func TestReasoningRule(t *testing.T) {
	for _, tc := range []struct {
		name           string
		tokens, events int
		want, hidden   int
	}{
		{"counted and streamed", 30, 7, 30, 0},
		{"streamed, not counted", 0, 7, 7, 0},
		{"counted, hidden", 200, 0, 200, 200},
		{"no reasoning", 0, 0, 0, 0},
	} {
		r := Request{ReasoningTokens: tc.tokens, ReasoningEvents: tc.events}
		if got := r.Reasoning(); got != tc.want {
			t.Errorf("%s: Reasoning = %d, want %d", tc.name, got, tc.want)
		}
		if got := r.HiddenReasoning(); got != tc.hidden {
			t.Errorf("%s: HiddenReasoning = %d, want %d", tc.name, got, tc.hidden)
		}
	}
}
