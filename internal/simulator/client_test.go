package simulator_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/infer-exporter/infer_exporter/internal/simulator"
	"github.com/infer-exporter/infer_exporter/internal/simulator/simulatortest"
)

// Test helpers shared by the HTTP-level tests: a client that leaves no idle
// connections behind, an SSE reader and a /metrics reader.

func newClient(t testing.TB) *http.Client {
	tr := &http.Transport{MaxIdleConnsPerHost: 1024, DisableCompression: true}
	t.Cleanup(tr.CloseIdleConnections)
	return &http.Client{Transport: tr}
}

func start(t testing.TB, mutate func(*simulator.Config)) (string, *simulator.Simulator, *http.Client) {
	t.Helper()
	cfg := simulatortest.InstantConfig()
	if mutate != nil {
		mutate(&cfg)
	}
	base, sim := simulatortest.StartTest(t, cfg)
	return base, sim, newClient(t)
}

// words returns a prompt of exactly n tokens; salt makes different prompts.
func words(n int, salt string) string {
	var b strings.Builder
	for i := range n {
		if i > 0 {
			b.WriteByte(' ')
		}
		b.WriteString(salt)
		b.WriteString(strconv.Itoa(i))
	}
	return b.String()
}

type usage struct {
	PromptTokens     int `json:"prompt_tokens"`
	CompletionTokens int `json:"completion_tokens"`
	TotalTokens      int `json:"total_tokens"`
}

type choice struct {
	Index int `json:"index"`
	Delta *struct {
		Role    *string `json:"role"`
		Content *string `json:"content"`
	} `json:"delta"`
	Message *struct {
		Role    string `json:"role"`
		Content string `json:"content"`
	} `json:"message"`
	Text         *string `json:"text"`
	FinishReason *string `json:"finish_reason"`
}

// chunk is a streamed chunk or a non-streaming body.
type chunk struct {
	ID          string   `json:"id"`
	Object      string   `json:"object"`
	Created     int64    `json:"created"`
	Model       string   `json:"model"`
	Choices     []choice `json:"choices"`
	Usage       *usage   `json:"usage"`
	SimEmit     int64    `json:"sim_emit_unix_nano"`
	SimArrival  int64    `json:"sim_arrival_unix_nano"`
	raw         string
	malformed   bool
	done        bool
	readAtNanos int64 // client wall clock when the event was read
}

// content is the token text of a content chunk, and whether it is one.
func (c *chunk) content() (string, bool) {
	if len(c.Choices) != 1 {
		return "", false
	}
	ch := c.Choices[0]
	switch {
	case ch.Delta != nil && ch.Delta.Content != nil && *ch.Delta.Content != "":
		return *ch.Delta.Content, true
	case ch.Text != nil && *ch.Text != "":
		return *ch.Text, true
	}
	return "", false
}

type streamResult struct {
	status  int
	header  http.Header
	events  []chunk
	readErr error // nil when the body ended cleanly
	// headersAt is the client's wall clock when the response headers
	// arrived.
	headersAt int64
}

// contents returns the content chunks.
func (r *streamResult) contents() []chunk {
	var out []chunk
	for _, e := range r.events {
		if _, ok := e.content(); ok {
			out = append(out, e)
		}
	}
	return out
}

func (r *streamResult) arrival(t testing.TB) int64 {
	t.Helper()
	v, err := strconv.ParseInt(r.header.Get(simulator.ArrivalHeader), 10, 64)
	if err != nil {
		t.Fatalf("arrival header %q: %v", r.header.Get(simulator.ArrivalHeader), err)
	}
	return v
}

// ttft is the ground-truth time to first token: the first content chunk's
// emit stamp minus the arrival header.
func (r *streamResult) ttft(t testing.TB) time.Duration {
	t.Helper()
	c := r.contents()
	if len(c) == 0 {
		t.Fatal("no content chunk")
	}
	return time.Duration(c[0].SimEmit - r.arrival(t))
}

func post(t testing.TB, ctx context.Context, client *http.Client, url string, body any) (*http.Response, error) {
	t.Helper()
	b, err := json.Marshal(body)
	if err != nil {
		t.Fatal(err)
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, bytes.NewReader(b))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	return client.Do(req)
}

// streamRequest sends a request and reads its whole SSE body. onEvent, when
// set, is called after each event; returning false stops reading (the body
// is closed).
func streamRequest(t testing.TB, ctx context.Context, client *http.Client, url string, body any, onEvent func(chunk) bool) *streamResult {
	t.Helper()
	resp, err := post(t, ctx, client, url, body)
	if err != nil {
		t.Fatalf("POST %s: %v", url, err)
	}
	defer resp.Body.Close()
	res := &streamResult{status: resp.StatusCode, header: resp.Header, headersAt: time.Now().UnixNano()}
	if resp.StatusCode != http.StatusOK {
		io.Copy(io.Discard, resp.Body)
		return res
	}
	br := bufio.NewReader(resp.Body)
	for {
		line, err := br.ReadString('\n')
		if err != nil {
			// A clean end is io.EOF with nothing pending; anything else (a
			// cut chunked body gives io.ErrUnexpectedEOF) is a read error.
			if err != io.EOF || line != "" {
				res.readErr = err
			}
			break
		}
		line = strings.TrimRight(line, "\n")
		if line == "" {
			continue
		}
		data, ok := strings.CutPrefix(line, "data: ")
		if !ok {
			t.Fatalf("line %q is not a data line", line)
		}
		c := chunk{raw: data, readAtNanos: time.Now().UnixNano()}
		switch {
		case data == "[DONE]":
			c.done = true
		case json.Unmarshal([]byte(data), &c) != nil:
			c.malformed = true
		}
		res.events = append(res.events, c)
		if onEvent != nil && !onEvent(c) {
			break
		}
	}
	return res
}

func chatBody(prompt string, maxTokens int, stream bool) map[string]any {
	b := map[string]any{
		"model":      "sim-model",
		"messages":   []map[string]any{{"role": "user", "content": prompt}},
		"max_tokens": maxTokens,
		"ignore_eos": true,
		"stream":     stream,
	}
	if stream {
		b["stream_options"] = map[string]any{"include_usage": true}
	}
	return b
}

// getJSON fetches url and decodes its JSON body into v, returning the status.
func getJSON(t testing.TB, client *http.Client, method, url string, body io.Reader, v any) int {
	t.Helper()
	req, err := http.NewRequest(method, url, body)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := client.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, url, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	if v != nil && len(b) > 0 {
		if err := json.Unmarshal(b, v); err != nil {
			t.Fatalf("%s %s: body %q: %v", method, url, b, err)
		}
	}
	return resp.StatusCode
}

// scrape reads /metrics into a map from "name{labels}" (labels without
// model_name, sorted as exposed) to value. Histograms appear as their
// _count and _sum series.
func scrape(t testing.TB, client *http.Client, base string) map[string]float64 {
	t.Helper()
	resp, err := client.Get(base + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	out := make(map[string]float64)
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		line := sc.Text()
		if line == "" || line[0] == '#' {
			continue
		}
		sp := strings.LastIndexByte(line, ' ')
		name, val := line[:sp], line[sp+1:]
		v, err := strconv.ParseFloat(val, 64)
		if err != nil {
			t.Fatalf("metrics line %q: %v", line, err)
		}
		name = strings.Replace(name, `model_name="sim-model"`, "", 1)
		name = strings.Replace(name, "{,", "{", 1)
		name = strings.Replace(name, ",}", "}", 1)
		name = strings.TrimSuffix(name, "{}")
		out[name] = v
	}
	return out
}

// waitFor polls cond until it holds or the deadline passes. It waits for an
// event the simulator guarantees, bounded so a broken simulator fails the
// test instead of hanging it; it never asserts on elapsed time.
func waitFor(t testing.TB, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(2 * time.Millisecond)
	}
}

func mustTokenCount(t testing.TB, client *http.Client, base, text string) int {
	t.Helper()
	var tok struct {
		Count int `json:"count"`
	}
	b, _ := json.Marshal(map[string]string{"prompt": text})
	if st := getJSON(t, client, http.MethodPost, base+"/tokenize", bytes.NewReader(b), &tok); st != 200 {
		t.Fatalf("tokenize status %d", st)
	}
	return tok.Count
}
