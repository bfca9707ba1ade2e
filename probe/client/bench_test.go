package client

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/infer-exporter/infer_exporter/probe/observation"
)

// benchChunks is the number of content chunks in the benchmark stream.
const benchChunks = 64

// vllmStream renders a vLLM-style chat stream: a role chunk, n content
// chunks, a finish chunk, a usage chunk and [DONE].
func vllmStream(n int) []byte {
	var b bytes.Buffer
	const head = `{"id":"chatcmpl-8f0b1c2d3e4f","object":"chat.completion.chunk","created":1732000000,"model":"meta-llama/Llama-3.1-8B-Instruct","choices":[{"index":0,`
	fmt.Fprintf(&b, "data: %s\"delta\":{\"role\":\"assistant\",\"content\":\"\"},\"logprobs\":null,\"finish_reason\":null}]}\n\n", head)
	for i := range n {
		fmt.Fprintf(&b, "data: %s\"delta\":{\"content\":\" tok%d\"},\"logprobs\":null,\"finish_reason\":null}]}\n\n", head, i)
	}
	fmt.Fprintf(&b, "data: %s\"delta\":{\"content\":\"\"},\"logprobs\":null,\"finish_reason\":\"length\",\"stop_reason\":null}]}\n\n", head)
	fmt.Fprintf(&b, "data: {\"id\":\"chatcmpl-8f0b1c2d3e4f\",\"object\":\"chat.completion.chunk\",\"created\":1732000000,\"model\":\"meta-llama/Llama-3.1-8B-Instruct\",\"choices\":[],\"usage\":{\"prompt_tokens\":12,\"total_tokens\":%d,\"completion_tokens\":%d}}\n\n", 12+n, n)
	b.WriteString("data: [DONE]\n\n")
	return b.Bytes()
}

// frames splits a rendered stream into its events, each with its blank line.
func frames(stream []byte) [][]byte {
	var out [][]byte
	for len(stream) > 0 {
		i := bytes.Index(stream, []byte("\n\n"))
		out = append(out, stream[:i+2])
		stream = stream[i+2:]
	}
	return out
}

// benchHandler serves the pre-rendered stream as fast as it can: in one
// write, or, under /flush/, one write and flush per event as a token-by-token
// server does.
func benchHandler(stream []byte) http.HandlerFunc {
	fr := frames(stream)
	return func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", "text/event-stream")
		if !strings.HasPrefix(r.URL.Path, "/flush/") {
			w.Write(stream)
			return
		}
		f := w.(http.Flusher)
		for _, b := range fr {
			w.Write(b)
			f.Flush()
		}
	}
}

// cpuTime is the process's user+system CPU time so far.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

func mallocs() uint64 {
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return ms.Mallocs
}

// perChunk reports a benchmark's figures per content chunk.
func perChunk(b *testing.B, cpu0 time.Duration, m0 uint64) {
	chunks := float64(b.N * benchChunks)
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/chunks, "ns/chunk")
	b.ReportMetric(float64(mallocs()-m0)/chunks, "allocs/chunk")
	b.ReportMetric(float64((cpuTime()-cpu0).Nanoseconds())/chunks, "cpu-ns/chunk")
}

// BenchmarkDecodeStream is the client's own cost per chunk with no network:
// SSE framing, JSON decoding, the clock read and the observation's
// bookkeeping, on an in-memory 64-chunk vLLM stream. Per-request setup (the
// decoder and its buffers) is included and amortised over the 64 chunks.
func BenchmarkDecodeStream(b *testing.B) {
	stream := vllmStream(benchChunks)
	c := New(Options{})
	defer c.Close()
	req := &Request{Prompt: "x", MaxTokens: benchChunks}
	obs := &observation.Request{TokenTimes: make([]time.Time, 0, benchChunks)}
	header := http.Header{"Content-Type": {"text/event-stream"}}
	src := bytes.NewReader(stream)
	ctx := context.Background()
	b.ReportAllocs()
	b.SetBytes(int64(len(stream)))
	cpu0, m0 := cpuTime(), mallocs()
	for b.Loop() {
		src.Reset(stream)
		obs.TokenTimes, obs.ContentEvents, obs.FirstToken = obs.TokenTimes[:0], 0, time.Time{}
		c.readStream(ctx, OpenAIChat.NewDecoder(src, header, c.maxLine), req, obs)
		if obs.Outcome != observation.Success || obs.ContentEvents != benchChunks {
			b.Fatalf("outcome %s, %d events: %v", obs.Outcome, obs.ContentEvents, obs.Err)
		}
	}
	perChunk(b, cpu0, m0)
}

// benchServerEnv makes the test binary a stream server (see TestMain), so
// that BenchmarkClientStream/process can measure the client's CPU alone.
const benchServerEnv = "INFER_EXPORTER_CLIENT_BENCH_SERVER"

// runBenchServer serves the benchmark stream on 127.0.0.1 until stdin closes.
func runBenchServer() {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	fmt.Println(ln.Addr().String())
	srv := &http.Server{Handler: benchHandler(vllmStream(benchChunks))}
	go srv.Serve(ln)
	io.Copy(io.Discard, os.Stdin)
	srv.Close()
}

// startBenchServer starts the server process and returns its base URL.
func startBenchServer(b *testing.B) string {
	cmd := exec.Command(os.Args[0])
	cmd.Env = append(os.Environ(), benchServerEnv+"=1")
	stdin, err := cmd.StdinPipe()
	if err != nil {
		b.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		b.Fatal(err)
	}
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { stdin.Close(); cmd.Wait() })
	addr, err := bufio.NewReader(stdout).ReadString('\n')
	if err != nil {
		b.Fatal(err)
	}
	return "http://" + strings.TrimSpace(addr)
}

// BenchmarkClientStream runs whole requests over loopback keep-alive HTTP
// against a server that writes a pre-rendered 64-chunk stream as fast as it
// can. "inproc" servers share the process, so their allocs and cpu-ns per
// chunk include the server's work; "process" runs the server in a child
// process, so cpu-ns/chunk and allocs/chunk there are the client's alone:
// HTTP read, SSE parse, JSON decode and bookkeeping.
func BenchmarkClientStream(b *testing.B) {
	stream := vllmStream(benchChunks)
	for _, bc := range []struct {
		name  string
		proc  bool
		flush bool
	}{
		{"inproc/one-write", false, false},
		{"inproc/flush-per-chunk", false, true},
		{"process/one-write", true, false},
		{"process/flush-per-chunk", true, true},
	} {
		b.Run(bc.name, func(b *testing.B) {
			var base string
			if bc.proc {
				base = startBenchServer(b)
			} else {
				srv := httptest.NewServer(benchHandler(stream))
				defer srv.Close()
				base = srv.URL
			}
			if bc.flush {
				base += "/flush"
			}
			c := New(Options{MaxConnsPerHost: 1})
			defer c.Close()
			target := &Target{BaseURL: base, Model: "m"}
			req := &Request{Prompt: "x", MaxTokens: benchChunks}
			obs := &observation.Request{}
			ctx := context.Background()
			b.ReportAllocs()
			cpu0, m0 := cpuTime(), mallocs()
			for b.Loop() {
				c.Do(ctx, target, req, obs)
				if obs.Outcome != observation.Success || obs.ContentEvents != benchChunks {
					b.Fatalf("outcome %s, %d events: %v", obs.Outcome, obs.ContentEvents, obs.Err)
				}
			}
			perChunk(b, cpu0, m0)
		})
	}
}

// BenchmarkFirstTokenBias measures how late the client stamps events under
// load: 200 requests/s, 64 tokens each at a 10 ms inter-token gap (about 130
// requests in flight), from an in-process server. For every event the server
// notes the instant before it writes and flushes; the bias is the client's
// read instant minus that, so it includes the server's write, the loopback
// hop and the client's wake-up and parsing: an upper bound on the client's
// own bias. It runs a fixed 2 s load whatever b.N; use -benchtime=1x.
func BenchmarkFirstTokenBias(b *testing.B) {
	const (
		rate     = 200
		duration = 2 * time.Second
		itl      = 10 * time.Millisecond
	)
	var (
		mu   sync.Mutex
		sent = map[string][]time.Time{}
	)
	fr := frames(vllmStream(benchChunks))
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		id := r.Header.Get("X-Req")
		w.Header().Set("Content-Type", "text/event-stream")
		f := w.(http.Flusher)
		start := time.Now()
		times := make([]time.Time, 0, benchChunks)
		for i, ev := range fr {
			if i >= 1 && i <= benchChunks { // content chunks, paced
				time.Sleep(time.Until(start.Add(time.Duration(i-1) * itl)))
				times = append(times, time.Now())
			}
			w.Write(ev)
			f.Flush()
		}
		mu.Lock()
		sent[id] = times
		mu.Unlock()
	}))
	defer srv.Close()
	n := int(rate * duration / time.Second)
	c := New(Options{MaxConnsPerHost: n})
	defer c.Close()
	var (
		wg        sync.WaitGroup
		firstBias []time.Duration
		allBias   []time.Duration
		failed    int
		resMu     sync.Mutex
	)
	b.ResetTimer()
	for range b.N {
		begin := time.Now()
		for i := range n {
			at := begin.Add(time.Duration(i) * time.Second / rate)
			time.Sleep(time.Until(at))
			wg.Add(1)
			go func(id string) {
				defer wg.Done()
				t := &Target{BaseURL: srv.URL, Headers: map[string]string{"X-Req": id}}
				obs := &observation.Request{Scheduled: time.Now()}
				c.Do(context.Background(), t, &Request{Prompt: "x", MaxTokens: benchChunks}, obs)
				mu.Lock()
				st := sent[id]
				mu.Unlock()
				resMu.Lock()
				defer resMu.Unlock()
				if obs.Outcome != observation.Success || len(st) != len(obs.TokenTimes) {
					failed++
					return
				}
				firstBias = append(firstBias, obs.FirstToken.Sub(st[0]))
				for k := range st {
					allBias = append(allBias, obs.TokenTimes[k].Sub(st[k]))
				}
			}(strconv.Itoa(i))
		}
		wg.Wait()
	}
	b.StopTimer()
	if failed > 0 || len(firstBias) == 0 {
		b.Fatalf("%d requests failed", failed)
	}
	q := func(d []time.Duration, p float64) float64 {
		slices.Sort(d)
		return float64(d[int(p*float64(len(d)-1))].Microseconds())
	}
	b.ReportMetric(q(firstBias, 0.5), "ttft-bias-p50-us")
	b.ReportMetric(q(firstBias, 0.99), "ttft-bias-p99-us")
	b.ReportMetric(q(firstBias, 1), "ttft-bias-max-us")
	b.ReportMetric(q(allBias, 0.5), "event-bias-p50-us")
	b.ReportMetric(q(allBias, 0.99), "event-bias-p99-us")
}
