package live

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	dto "github.com/prometheus/client_model/go"

	"github.com/infer-exporter/infer_exporter/internal/simulator"
	"github.com/infer-exporter/infer_exporter/internal/simulator/simulatortest"
	"github.com/infer-exporter/infer_exporter/internal/testenv"
	"github.com/infer-exporter/infer_exporter/probe/client"
	"github.com/infer-exporter/infer_exporter/probe/observation"
	"github.com/infer-exporter/infer_exporter/probe/sessions"
)

// bodyTap is a transport that keeps a copy of every response body as the
// client reads it, by the request's X-Request-Id: the simulator's emit
// stamps of each turn of a job, which the workload's own client sends
// with no context a test could give it (groundtruth.WithCapture's).
type bodyTap struct {
	inner  http.RoundTripper
	mu     sync.Mutex
	bodies map[string]*lockedBuffer
}

// lockedBuffer is a buffer that the client's reads write while a test may
// look.
type lockedBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *lockedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *lockedBuffer) bytes() []byte {
	b.mu.Lock()
	defer b.mu.Unlock()
	return slices.Clone(b.buf.Bytes())
}

func newBodyTap(t *testing.T) *bodyTap {
	tr := http.DefaultTransport.(*http.Transport).Clone()
	t.Cleanup(tr.CloseIdleConnections)
	return &bodyTap{inner: tr, bodies: map[string]*lockedBuffer{}}
}

// RoundTrip implements http.RoundTripper.
func (b *bodyTap) RoundTrip(req *http.Request) (*http.Response, error) {
	resp, err := b.inner.RoundTrip(req)
	if err != nil {
		return resp, err
	}
	buf := &lockedBuffer{}
	b.mu.Lock()
	b.bodies[req.Header.Get(simulator.RequestIDHeader)] = buf
	b.mu.Unlock()
	resp.Body = struct {
		io.Reader
		io.Closer
	}{io.TeeReader(resp.Body, buf), resp.Body}
	return resp, nil
}

// body is the response body of the request sent with X-Request-Id id.
func (b *bodyTap) body(id string) ([]byte, bool) {
	b.mu.Lock()
	buf := b.bodies[id]
	b.mu.Unlock()
	if buf == nil {
		return nil, false
	}
	return buf.bytes(), true
}

// tokenEmits is the simulator's emit instant (Unix ns) of each chunk of a
// chat stream that carries a token as the exporter counts them (a content
// or reasoning delta, or a tool call's: its name delta, then its
// arguments'), in order, and the tool calls' indexes the stream opened.
func tokenEmits(t *testing.T, body []byte) (emits []int64, calls []int) {
	t.Helper()
	sc := bufio.NewScanner(bytes.NewReader(body))
	sc.Buffer(make([]byte, 1<<16), 1<<20)
	for sc.Scan() {
		line, ok := strings.CutPrefix(sc.Text(), "data: ")
		if !ok || line == "[DONE]" {
			continue
		}
		var chunk struct {
			Emit    int64 `json:"sim_emit_unix_nano"`
			Choices []struct {
				Delta struct {
					Content   string `json:"content"`
					Reasoning string `json:"reasoning"`
					ToolCalls []struct {
						Index    int     `json:"index"`
						ID       *string `json:"id"`
						Function struct {
							Name *string `json:"name"`
						} `json:"function"`
					} `json:"tool_calls"`
				} `json:"delta"`
			} `json:"choices"`
		}
		if err := json.Unmarshal([]byte(line), &chunk); err != nil {
			t.Fatalf("chunk %q: %v", line, err)
		}
		if len(chunk.Choices) == 0 {
			continue
		}
		d := chunk.Choices[0].Delta
		if d.Content == "" && d.Reasoning == "" && len(d.ToolCalls) == 0 {
			continue
		}
		emits = append(emits, chunk.Emit)
		for _, c := range d.ToolCalls {
			if c.Function.Name != nil {
				calls = append(calls, c.Index)
			}
		}
	}
	return emits, calls
}

// parallelAgentRun is agent jobs against the simulator playing a model
// that calls two tools at once on two turns, then answers (ToolTurns 2,
// ToolCalls 2), its tools answering after a fixed latency, with each
// turn's response body kept.
type parallelAgentRun struct {
	sessionRun
	tap   *bodyTap
	convs [][]observation.Request
}

// Parallel agent jobs' shape.
const (
	parallelTurns   = 2 // the simulator's tool turns
	parallelCalls   = 2 // its calls a turn
	parallelResult  = 20
	parallelLatency = 30 * time.Millisecond
)

func runParallelAgents(t *testing.T, cfg simulator.Config, jobs int) parallelAgentRun {
	t.Helper()
	cfg.ToolTurns, cfg.ToolCalls = parallelTurns, parallelCalls
	tap := newBodyTap(t)
	block := strings.Replace(agentBlock(jobs, 40*time.Millisecond, parallelLatency, parallelResult, 8),
		"tools: [{name: search, description: Searches.}]",
		"tools: [{name: search, description: Searches.}, {name: fetch, description: Fetches.}]", 1)
	sr := runSessionsClient(t, cfg, "openai-chat", block, nil, func(o *client.Options) { o.Transport = tap })
	if n := testutil.ToFloat64(sr.agents.jobs[sessions.Completed]); n != float64(jobs) {
		t.Fatalf("%v jobs completed, want %d (ended: %v)", n, jobs, agentEnded(sr))
	}
	if len(sr.obs) != jobs*(parallelTurns+1) {
		t.Fatalf("%d requests, want %d", len(sr.obs), jobs*(parallelTurns+1))
	}
	// Grouped by the tool latency: turn k+1 scheduled turn k's end plus
	// one latency, the two calls' joined, not their sum.
	convs := sr.conversations(parallelLatency)
	if len(convs) != jobs {
		t.Fatalf("%d jobs found in the observations, want %d (turns scheduled their previous turn's end plus %v)", len(convs), jobs, parallelLatency)
	}
	return parallelAgentRun{sessionRun: sr, tap: tap, convs: convs}
}

// turnTruth is one turn as the client measured it beside the simulator's
// emit instants of its token-bearing chunks.
type turnTruth struct {
	o     observation.Request
	emits []int64
	calls []int // the tool calls' indexes the stream opened
}

// truths pairs every turn of every job with its body, by turn index.
func (r parallelAgentRun) truths(t *testing.T) [][]turnTruth {
	t.Helper()
	out := make([][]turnTruth, parallelTurns+1)
	for i, conv := range r.convs {
		if len(conv) != parallelTurns+1 {
			t.Fatalf("job %d has %d turns, want %d", i, len(conv), parallelTurns+1)
		}
		for k, o := range conv {
			body, ok := r.tap.body(o.RequestID)
			if !ok {
				t.Fatalf("job %d turn %d: no body kept for request %q", i, k+1, o.RequestID)
			}
			emits, calls := tokenEmits(t, body)
			if len(emits) == 0 {
				t.Fatalf("job %d turn %d: no token in its body", i, k+1)
			}
			out[k] = append(out[k], turnTruth{o: o, emits: emits, calls: calls})
		}
	}
	return out
}

// seriesHistogram is an observer's count, sum and bucket counts.
func seriesHistogram(t *testing.T, o prometheus.Observer) (uint64, float64, []uint64) {
	t.Helper()
	var m dto.Metric
	if err := o.(prometheus.Metric).Write(&m); err != nil {
		t.Fatal(err)
	}
	h := m.GetHistogram()
	var buckets []uint64
	for _, b := range h.GetBucket() {
		buckets = append(buckets, b.GetCumulativeCount())
	}
	return h.GetSampleCount(), h.GetSampleSum(), buckets
}

// checkObserved checks that a by-turn series holds exactly the values want:
// their count, their sum to the float's rounding, and each of its buckets'
// counts as a histogram of want fills them.
func checkObserved(t *testing.T, what string, o prometheus.Observer, want []float64, buckets []float64) {
	t.Helper()
	n, sum, got := seriesHistogram(t, o)
	var s float64
	for _, x := range want {
		s += x
	}
	if n != uint64(len(want)) || math.Abs(sum-s) > 1e-12*math.Max(1, math.Abs(s)) {
		t.Errorf("%s: %d observations, %v s; the turns' %d, %v s", what, n, sum, len(want), s)
		return
	}
	for i, ub := range buckets {
		var c uint64
		for _, x := range want {
			if x <= ub {
				c++
			}
		}
		if i < len(got) && got[i] != c {
			t.Errorf("%s: bucket le=%v counts %d, the turns %d", what, ub, got[i], c)
		}
	}
}

// TestAgentJobsParallelCallsGroundTruth runs agent jobs against the
// simulator playing a model that calls two tools at once on two turns,
// then answers (ToolTurns 2, ToolCalls 2), with a fixed tool latency, and
// checks them against the simulator: every job completes in three turns,
// the first two with two calls each (its two tools in turn); the calls are
// joined (turn k+1 is scheduled turn k's end plus one latency, and the
// tool wait series holds that latency per calling turn); the calls series
// counts two a calling turn; each turn's prompt is the previous one plus
// the assistant's message and both results, to the simulator's token; the
// simulator wrote each turn's first token (the first call's name delta on
// a calling turn) no later than the client read it, by the simulator's own
// stamp; and the TTFT and TPOT by turn series hold exactly the turns'
// own.
func TestAgentJobsParallelCallsGroundTruth(t *testing.T) {
	const jobs = 6
	cfg := simulatortest.InstantConfig()
	// Real decode steps, short, so that a turn's tokens have gaps and its
	// TPOT something to measure.
	cfg.TimeScale, cfg.DecodeStep = 1, 2*time.Millisecond
	r := runParallelAgents(t, cfg, jobs)
	byTurn := r.truths(t)

	for k, turns := range byTurn {
		var ttft, tpot []float64
		for i, tt := range turns {
			o := tt.o
			if o.Outcome != observation.Success {
				t.Fatalf("job %d turn %d: %s", i, k+1, o.Outcome)
			}
			wantCalls := 0
			if k < parallelTurns {
				wantCalls = parallelCalls
			}
			if len(o.Calls) != wantCalls || !slices.Equal(tt.calls, []int{0, 1}[:wantCalls]) {
				t.Errorf("job %d turn %d: the client read %d calls %+v, the stream opened %v; want %d", i, k+1, len(o.Calls), o.Calls, tt.calls, wantCalls)
			} else if wantCalls > 0 && (o.Calls[0].Name != "search" || o.Calls[1].Name != "fetch") {
				t.Errorf("job %d turn %d: calls %+v, want search then fetch", i, k+1, o.Calls)
			}
			rec, ok := r.sim.PrefixRecord(o.RequestID)
			if !ok {
				t.Fatalf("job %d turn %d: no ground truth for request %q", i, k+1, o.RequestID)
			}
			// The simulator's template: the previous generation prompt
			// gives way to the assistant's message, whose content is null
			// (-1 + 3), each tool message is its words and 3, and a new
			// generation prompt follows (+1).
			if k > 0 {
				prev, _ := r.sim.PrefixRecord(byTurn[k-1][i].o.RequestID)
				if want := prev.PromptTokens + 3 + parallelCalls*(parallelResult+3); rec.PromptTokens != want {
					t.Errorf("job %d turn %d: %d prompt tokens, want %d (the previous turn's %d, the calls and both results)", i, k+1, rec.PromptTokens, want, prev.PromptTokens)
				}
			}
			d, ok := o.TTFT()
			if !ok {
				t.Fatalf("job %d turn %d: no TTFT", i, k+1)
			}
			// The client reads the first token after the simulator
			// wrote it: both are this process's wall clock.
			if server := time.Duration(tt.emits[0] - o.Scheduled.UnixNano()); server > d {
				t.Errorf("job %d turn %d: the simulator wrote the first token %v after the scheduled instant, the client read it at %v", i, k+1, server, d)
			}
			ttft = append(ttft, d.Seconds())
			if d, ok := o.TPOT(); ok {
				tpot = append(tpot, d.Seconds())
			}
		}
		if len(tpot) != len(turns) {
			t.Errorf("turn %d: %d of %d turns have a TPOT", k+1, len(tpot), len(turns))
		}
		checkObserved(t, fmt.Sprintf("turn %d TTFT series", k+1), r.sessions.ttft[k], ttft, latencyBuckets)
		checkObserved(t, fmt.Sprintf("turn %d TPOT series", k+1), r.sessions.tpot[k], tpot, tokenBuckets)
	}

	calling := float64(jobs * parallelTurns)
	if n := testutil.ToFloat64(r.agents.toolCalls); n != calling*parallelCalls {
		t.Errorf("%v tool calls counted, want %v (%d a calling turn)", n, calling*parallelCalls, parallelCalls)
	}
	if n, sum := observed(t, r.agents.toolWait); n != uint64(calling) || math.Abs(sum-calling*parallelLatency.Seconds()) > 1e-9 {
		t.Errorf("tool wait series: %d turns, %v s; want %v, %v s (one latency a turn: the calls joined)", n, sum, calling, calling*parallelLatency.Seconds())
	}
	if n, sum := observed(t, r.agents.tool); n != jobs || math.Abs(sum-calling*parallelLatency.Seconds()) > 1e-9 {
		t.Errorf("job tool time series: %d jobs, %v s; want %d, %v s", n, sum, jobs, calling*parallelLatency.Seconds())
	}
	if n, sum := observed(t, r.agents.turns); n != jobs || sum != float64(jobs*(parallelTurns+1)) {
		t.Errorf("job turns series: %d jobs, %v turns; want %d, %d", n, sum, jobs, jobs*(parallelTurns+1))
	}
}

// TestAgentJobsParallelCallsTTFTAccuracy states how close each turn's TTFT
// is to the simulator's own account of it (its first token's emit instant
// less the turn's scheduled instant), on agent jobs with parallel calls
// against a real-time simulator, and prints, per turn index, the median
// and the largest difference, and the turns' TPOT beside the simulator's
// emit gaps (last token's emit less the first's, over the tokens less
// one).
func TestAgentJobsParallelCallsTTFTAccuracy(t *testing.T) {
	testenv.Timing(t)
	const jobs = 12
	cfg := simulator.DefaultConfig() // 20 ms decode steps, real time
	r := runParallelAgents(t, cfg, jobs)
	var all []time.Duration
	for k, turns := range r.truths(t) {
		var diffs []time.Duration
		var tpot, simTPOT time.Duration
		for _, tt := range turns {
			d, _ := tt.o.TTFT()
			diffs = append(diffs, d-time.Duration(tt.emits[0]-tt.o.Scheduled.UnixNano()))
			c, _ := tt.o.TPOT()
			tpot += c
			if n := len(tt.emits); n > 1 {
				simTPOT += time.Duration(tt.emits[n-1]-tt.emits[0]) / time.Duration(n-1)
			}
		}
		all = append(all, diffs...)
		n := time.Duration(len(turns))
		t.Logf("turn %d: %d turns; client TTFT - simulator's (first token emit - scheduled): median %v, max %v; TPOT mean %v, simulator's emit gaps %v",
			k+1, len(turns), quantile(diffs, .5), quantile(diffs, 1), tpot/n, simTPOT/n)
	}
	if p99 := quantile(all, .99); p99 > 5*time.Millisecond {
		t.Errorf("client TTFT - simulator's p99 %v > 5ms over %d turns", p99, len(all))
	}
}
