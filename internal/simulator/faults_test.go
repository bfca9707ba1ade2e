package simulator_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/infer-exporter/infer_exporter/internal/simulator"
)

func putFaults(t *testing.T, client *http.Client, base, method, body string) (int, map[string]any) {
	t.Helper()
	var out map[string]any
	st := getJSON(t, client, method, base+"/admin/faults", strings.NewReader(body), &out)
	return st, out
}

func TestAdminFaults(t *testing.T) {
	base, sim, client := start(t, nil)
	var got map[string]any
	if st := getJSON(t, client, http.MethodGet, base+"/admin/faults", nil, &got); st != 200 {
		t.Fatalf("GET status %d", st)
	}
	want := map[string]any{
		"slowdown": 1.0, "error_rate": 0.0, "error_status": 503.0,
		"stall_before_first_token": "0s", "stall_mid_stream": "0s", "stall_after_tokens": 0.0,
		"disconnect_after_tokens": 0.0, "malformed_after_tokens": 0.0, "slow_headers": "0s",
		"logprob_penalty": 0.0, "pad_content_bytes": 0.0, "invalid_structured": 0.0,
	}
	if !jsonEqual(got, want) {
		t.Errorf("GET %v, want %v", got, want)
	}

	tests := []struct {
		name, method, body string
		status             int
	}{
		{"put full", http.MethodPut, `{"slowdown": 2, "error_rate": 0.5, "error_status": 429, "stall_before_first_token": "1.5s",
			"stall_mid_stream": "2s", "stall_after_tokens": 3, "disconnect_after_tokens": 4, "malformed_after_tokens": 5, "slow_headers": "250ms",
			"logprob_penalty": 1.5, "pad_content_bytes": 1000}`, 200},
		{"post partial", http.MethodPost, `{"error_rate": 0.1}`, 200},
		{"unknown field", http.MethodPut, `{"error_rate": 0.1, "eror_status": 500}`, 400},
		{"bad status", http.MethodPut, `{"error_rate": 0.1, "error_status": 404}`, 400},
		{"rate above 1", http.MethodPut, `{"error_rate": 1.5}`, 400},
		{"bad duration", http.MethodPut, `{"slow_headers": "soon"}`, 400},
		{"number duration", http.MethodPut, `{"slow_headers": 5}`, 400},
		{"negative count", http.MethodPut, `{"disconnect_after_tokens": -1}`, 400},
		{"stall without position", http.MethodPut, `{"stall_mid_stream": "1s"}`, 400},
		{"negative logprob penalty", http.MethodPut, `{"logprob_penalty": -0.5}`, 400},
		{"logprob penalty above the bound", http.MethodPut, `{"logprob_penalty": 51}`, 400},
		{"negative padding", http.MethodPut, `{"pad_content_bytes": -1}`, 400},
		{"padding above the bound", http.MethodPut, `{"pad_content_bytes": 4194305}`, 400},
		{"not json", http.MethodPut, `{`, 400},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			before := sim.Faults()
			st, body := putFaults(t, client, base, tc.method, tc.body)
			if st != tc.status {
				t.Fatalf("status %d, want %d (body %v)", st, tc.status, body)
			}
			if st != 200 {
				if _, ok := body["error"]; !ok {
					t.Errorf("error body %v lacks \"error\"", body)
				}
				if sim.Faults() != before {
					t.Errorf("a rejected change altered the faults: %+v", sim.Faults())
				}
				return
			}
			var sent map[string]any
			json.Unmarshal([]byte(tc.body), &sent)
			for k, v := range sent {
				if !jsonEqual(body[k], v) {
					t.Errorf("%s = %v after the change, want %v", k, body[k], v)
				}
			}
		})
	}
	// The partial POST left the other fields off.
	f := sim.Faults()
	if f.ErrorRate != 0.1 || f.Slowdown != 1 || f.ErrorStatus != 503 || f.SlowHeaders != 0 || f.StallAfterTokens != 0 {
		t.Errorf("after the partial replace: %+v", f)
	}
	// Reset.
	if st, _ := putFaults(t, client, base, http.MethodPut, `{}`); st != 200 || sim.Faults() != simulator.NoFaults() {
		t.Errorf("reset: status %d, faults %+v", st, sim.Faults())
	}
}

func jsonEqual(a, b any) bool {
	ja, _ := json.Marshal(a)
	jb, _ := json.Marshal(b)
	if bytes.Equal(ja, jb) {
		return true
	}
	// Durations may be written differently ("1.5s" == "1500ms").
	sa, oka := a.(string)
	sb, okb := b.(string)
	if oka && okb {
		da, ea := time.ParseDuration(sa)
		db, eb := time.ParseDuration(sb)
		return ea == nil && eb == nil && da == db
	}
	return false
}

func TestFaultErrorStatus(t *testing.T) {
	for _, status := range []int{429, 500, 503} {
		t.Run(http.StatusText(status), func(t *testing.T) {
			base, sim, client := start(t, nil)
			if err := sim.SetFaults(simulator.Faults{ErrorRate: 1, ErrorStatus: status}); err != nil {
				t.Fatal(err)
			}
			for _, stream := range []bool{false, true} {
				var body struct {
					Error struct {
						Type string `json:"type"`
						Code int    `json:"code"`
					} `json:"error"`
				}
				b, _ := json.Marshal(chatBody("hi", 4, stream))
				if st := getJSON(t, client, http.MethodPost, base+"/v1/chat/completions", bytes.NewReader(b), &body); st != status || body.Error.Code != status || body.Error.Type == "" {
					t.Errorf("stream=%v: status %d body %+v, want %d", stream, st, body, status)
				}
			}
			m := scrape(t, client, base)
			if m["vllm:generation_tokens_total"] != 0 || m[`vllm:request_success_total{finished_reason="length"}`] != 0 {
				t.Error("an injected error reached the engine")
			}
		})
	}
}

func TestFaultErrorRate(t *testing.T) {
	base, sim, client := start(t, nil)
	sim.SetFaults(simulator.Faults{ErrorRate: 0.5, ErrorStatus: 500})
	const n = 200
	failed := 0
	for range n {
		if st := getJSON(t, client, http.MethodPost, base+"/v1/completions", strings.NewReader(`{"prompt": "a", "max_tokens": 1}`), nil); st == 500 {
			failed++
		} else if st != 200 {
			t.Fatalf("status %d", st)
		}
	}
	// Binomial(200, 0.5) has a standard deviation of 7.1; the draws are
	// seeded, so this is a fixed outcome, and ±3σ (±21) documents how far a
	// different seed may land.
	if failed < 79 || failed > 121 {
		t.Errorf("%d of %d failed, want about half", failed, n)
	}
	m := scrape(t, client, base)
	if got := m[`vllm:request_success_total{finished_reason="length"}`]; got != float64(n-failed) {
		t.Errorf("engine finished %v requests, want %d (injected errors never reach it)", got, n-failed)
	}
}

func TestFaultSlowdown(t *testing.T) {
	base, sim, client := start(t, func(c *simulator.Config) { c.TimeScale = 0.05 }) // 1 ms steps
	e2e := func() time.Duration {
		res := streamRequest(t, context.Background(), client, base+"/v1/chat/completions", chatBody("a", 20, true), nil)
		c := res.contents()
		return time.Duration(c[len(c)-1].SimEmit - res.arrival(t))
	}
	normal := e2e()
	sim.SetFaults(simulator.Faults{Slowdown: 5})
	slow := e2e()
	// 20 steps of 20 ms × 0.05 × 5, less what a loop running late takes
	// off the first: it starts each step at the previous one's end instant
	// when that is at most maxStepLag (10 ms) past, so a request that
	// arrives then joins a step whose clock began before it (99.7 ms was
	// seen under the race detector on a loaded machine).
	if floor := 100*time.Millisecond - 10*time.Millisecond; slow < floor {
		t.Errorf("E2E with slowdown 5 = %v, below the modelled %v", slow, floor)
	}
	if slow <= normal {
		t.Errorf("E2E with slowdown %v not above without %v", slow, normal)
	}
}

func TestFaultStallBeforeFirstToken(t *testing.T) {
	const stall = 150 * time.Millisecond
	base, _, client := start(t, func(c *simulator.Config) { c.Faults.StallBeforeFirstToken = stall })
	res := streamRequest(t, context.Background(), client, base+"/v1/chat/completions", chatBody("a", 5, true), nil)
	if res.readErr != nil || len(res.contents()) != 5 {
		t.Fatalf("read error %v, %d tokens", res.readErr, len(res.contents()))
	}
	if ttft := res.ttft(t); ttft < stall {
		t.Errorf("TTFT %v, want at least the stall %v", ttft, stall)
	}
	// The headers came before the stall.
	if first := res.contents()[0].SimEmit; res.headersAt >= first {
		t.Errorf("headers read at %d, after the first token's emit %d", res.headersAt, first)
	}
}

func TestFaultStallMidStream(t *testing.T) {
	const stall = 200 * time.Millisecond
	base, _, client := start(t, func(c *simulator.Config) {
		c.Faults.StallMidStream = stall
		c.Faults.StallAfterTokens = 3
	})
	res := streamRequest(t, context.Background(), client, base+"/v1/chat/completions", chatBody("a", 10, true), nil)
	c := res.contents()
	if res.readErr != nil || len(c) != 10 || !res.events[len(res.events)-1].done {
		t.Fatalf("read error %v, %d tokens", res.readErr, len(c))
	}
	largest, at := time.Duration(0), 0
	for i := 1; i < len(c); i++ {
		if gap := time.Duration(c[i].SimEmit - c[i-1].SimEmit); gap > largest {
			largest, at = gap, i
		}
	}
	// The stall runs from the engine's step end of token 3; the handler
	// stamps token 3 a few microseconds later, hence the 50 ms allowance.
	if at != 3 || largest < stall-50*time.Millisecond {
		t.Errorf("largest gap %v before token %d, want >= ~%v before token 4 (index 3)", largest, at+1, stall)
	}
	if ttft := res.ttft(t); ttft >= stall {
		t.Errorf("TTFT %v: the stall hit before the first token", ttft)
	}
}

func TestFaultDisconnect(t *testing.T) {
	base, sim, client := start(t, func(c *simulator.Config) { c.TimeScale = 0.1 })
	sim.SetFaults(simulator.Faults{DisconnectAfterTokens: 5})
	res := streamRequest(t, context.Background(), client, base+"/v1/chat/completions", chatBody("a", 1000, true), nil)
	if len(res.contents()) != 5 {
		t.Errorf("%d content chunks before the disconnect, want 5", len(res.contents()))
	}
	if !errors.Is(res.readErr, io.ErrUnexpectedEOF) {
		t.Errorf("read error %v, want unexpected EOF", res.readErr)
	}
	for _, e := range res.events {
		if e.done || e.Usage != nil {
			t.Errorf("event after the disconnect point: %s", e.raw)
		}
	}
	waitFor(t, "the abort to be counted", func() bool {
		return scrape(t, client, base)[`vllm:request_success_total{finished_reason="abort"}`] == 1
	})
	// Non-streaming: the connection closes instead of the answer.
	resp, err := post(t, context.Background(), client, base+"/v1/completions", map[string]any{"prompt": "a", "max_tokens": 5, "ignore_eos": true})
	if err == nil {
		_, err = io.ReadAll(resp.Body)
		resp.Body.Close()
	}
	if err == nil {
		t.Error("non-streaming request got a complete answer")
	}
	// Fewer tokens than the disconnect point: no effect.
	res = streamRequest(t, context.Background(), client, base+"/v1/chat/completions", chatBody("a", 4, true), nil)
	if res.readErr != nil || len(res.contents()) != 4 {
		t.Errorf("short request: read error %v, %d tokens", res.readErr, len(res.contents()))
	}
}

func TestFaultMalformedChunk(t *testing.T) {
	base, sim, client := start(t, nil)
	sim.SetFaults(simulator.Faults{MalformedAfterTokens: 3})
	res := streamRequest(t, context.Background(), client, base+"/v1/completions",
		map[string]any{"prompt": "a", "max_tokens": 8, "ignore_eos": true, "stream": true}, nil)
	if res.readErr != nil {
		t.Fatal(res.readErr)
	}
	var kinds []string
	for _, e := range res.events {
		switch _, content := e.content(); {
		case e.malformed:
			kinds = append(kinds, "bad:"+e.raw)
		case e.done:
			kinds = append(kinds, "done")
		case content:
			kinds = append(kinds, "tok")
		default:
			kinds = append(kinds, "other")
		}
	}
	want := "tok tok tok bad:{not json tok tok tok tok tok done"
	if got := strings.Join(kinds, " "); got != want {
		t.Errorf("events %q, want %q", got, want)
	}
	b, _ := json.Marshal(map[string]any{"prompt": "a", "max_tokens": 8, "ignore_eos": true})
	resp, err := client.Post(base+"/v1/completions", "application/json", bytes.NewReader(b))
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if string(body) != "{not json" {
		t.Errorf("non-streaming body %q, want {not json", body)
	}
}

func TestFaultSlowHeaders(t *testing.T) {
	const delay = 150 * time.Millisecond
	base, sim, client := start(t, nil)
	sim.SetFaults(simulator.Faults{SlowHeaders: delay})
	sent := time.Now()
	resp, err := post(t, context.Background(), client, base+"/v1/chat/completions", chatBody("a", 3, true))
	if err != nil {
		t.Fatal(err)
	}
	headers := time.Since(sent)
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || headers < delay {
		t.Errorf("status %d, headers after %v, want at least %v", resp.StatusCode, headers, delay)
	}
}

// A fault change applies to requests that arrive after it, not to one in
// flight.
func TestFaultsApplyToLaterRequests(t *testing.T) {
	base, sim, client := start(t, func(c *simulator.Config) { c.TimeScale = 0.1 })
	changed := false
	res := streamRequest(t, context.Background(), client, base+"/v1/chat/completions", chatBody("a", 20, true), func(c chunk) bool {
		if _, ok := c.content(); ok && !changed {
			changed = true
			sim.SetFaults(simulator.Faults{DisconnectAfterTokens: 2, ErrorRate: 1})
		}
		return true
	})
	if res.readErr != nil || len(res.contents()) != 20 {
		t.Errorf("request in flight: read error %v, %d tokens; want all 20", res.readErr, len(res.contents()))
	}
	if st := getJSON(t, client, http.MethodPost, base+"/v1/completions", strings.NewReader(`{"prompt": "a"}`), nil); st != 503 {
		t.Errorf("later request status %d, want the injected 503", st)
	}
}
