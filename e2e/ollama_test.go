package e2e

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"

	"github.com/infer-exporter/infer_exporter/internal/realstack"
	"github.com/infer-exporter/infer_exporter/internal/testenv"
)

// The bounds of the Ollama test, where the exporter's figure for a request
// is compared with Ollama's own for the same request.
//
// The clocks: the exporter's TTFT and E2E start at the request's scheduled
// instant, before the connection is taken and the request written. Ollama's
// total_duration starts when its handler starts, after the request's
// headers were read and before its body is parsed, and ends after the last
// line was written; eval_duration runs from the first token the runner
// sampled to the end. So the exporter's figure is Ollama's plus the way
// there (schedule to handler: the send, the recording proxy, gin's
// routing) and back (the line's way from the runner through the server and
// the proxy to the client), and never less, up to the last milliseconds
// of Ollama's accounting after its final line, which ollamaSlack allows.
//
// ollamaPathBound is that way there and back. On an idle machine it is a
// millisecond or two; here the three processes (exporter, proxy in the
// test, Ollama and its runner) share two cores with other builds and
// tests, where a runnable process can wait a scheduler period or more
// (tens of milliseconds) at each of the four hops. 250 ms is ten such
// waits; a figure off by more is a wrong clock or a wrong join, not load.
const (
	ollamaPathBound = 250 * time.Millisecond
	ollamaSlack     = 5 * time.Millisecond
)

const ollamaExporterConfig = `targets:
  - name: chat
    url: PROXY
    flavor: ollama-chat
    model: tiny
    timeout: 60s
    metrics: {engine: ollama, interval: 1s}
  - name: generate
    url: PROXY
    flavor: ollama-generate
    model: tiny
    timeout: 60s
    metrics: {engine: ollama, interval: 1s}
  - name: openai
    url: PROXY
    flavor: openai-chat
    model: tiny
    timeout: 60s
    metrics: {engine: ollama, interval: 1s}
  - name: missing
    url: PROXY
    flavor: ollama-chat
    model: no-such-model
    timeout: 30s
    metrics: {engine: none}
workloads:
  - name: w-chat
    target: chat
    arrival: {process: constant, rate: 4, max_rate: 10}
    max_in_flight: 8
    duration: 12s
    prompt:
      input_tokens: {dist: fixed, mean: 24}
      output_tokens: {dist: fixed, mean: 12}
      seed: 1
    sampling: {temperature: 0}
  - name: w-generate
    target: generate
    arrival: {process: constant, rate: 2, max_rate: 10}
    max_in_flight: 8
    duration: 12s
    prompt:
      input_tokens: {dist: fixed, mean: 24}
      output_tokens: {dist: fixed, mean: 12}
      seed: 2
    sampling: {temperature: 0}
  - name: w-openai
    target: openai
    arrival: {process: constant, rate: 2, max_rate: 10}
    max_in_flight: 8
    duration: 12s
    prompt:
      input_tokens: {dist: fixed, mean: 24}
      output_tokens: {dist: fixed, mean: 12}
      seed: 3
    sampling: {temperature: 0}
STALL
modules:
  probe-chat:
    target: chat
    requests: 3
    concurrency: 1
    prompt:
      input_tokens: {dist: fixed, mean: 24}
      output_tokens: {dist: fixed, mean: 12}
    sampling: {temperature: 0}
    timeout: 30s
  probe-missing:
    target: missing
    requests: 1
    concurrency: 1
    prompt:
      input_tokens: {dist: fixed, mean: 8}
      output_tokens: {dist: fixed, mean: 4}
    timeout: 10s
`

// ollamaStallWorkload is added by a reload once the others have finished:
// one arrival (a constant process's first comes after one interval, 2 s,
// within the 3 s), one long generation (1500 tokens, some seconds on the CPU) with a stall
// threshold of 300 ms, during which the test stops Ollama's runner for
// 1.5 s.
const ollamaStallWorkload = `  - name: w-stall
    target: generate
    arrival: {process: constant, rate: 0.5, max_rate: 1}
    max_in_flight: 1
    duration: 3s
    stall_threshold: 300ms
    prompt:
      input_tokens: {dist: fixed, mean: 16}
      output_tokens: {dist: fixed, mean: 1500}
      seed: 4
    sampling: {temperature: 0}
`

const ollamaBenchConfig = `targets:
  - {name: chat, url: PROXY, flavor: ollama-chat, model: tiny, timeout: 60s, metrics: {engine: none}}
  - {name: generate, url: PROXY, flavor: ollama-generate, model: tiny, timeout: 60s, metrics: {engine: none}}
  - {name: openai, url: PROXY, flavor: openai-chat, model: tiny, timeout: 60s, metrics: {engine: none}}
bench:
  seed: 1
  matrix:
    process: constant
    rates: [2]
    shapes:
      - {name: short, input_tokens: 24, output_tokens: 12}
  warmup: 2s
  duration: 6s
  repeats: 1
  max_in_flight: 8
  stability: {enabled: false}
  sampling: {temperature: 0}
`

// TestOllamaEndToEnd runs a real Ollama (tools/ollama: built from the Go
// module proxy with its bundled llama.cpp) on the CPU, serving a tiny
// random model written at test time, and holds the exporter's figures to
// Ollama's own, request by request. A recording proxy between them keeps
// each response's final line (Ollama's durations and counts), joined to
// the exporter's requests by X-Request-Id.
//
//  1. A first Ollama creates the model in the test's Ollama home and stops.
//  2. The exporter starts with three workloads (ollama-chat,
//     ollama-generate, openai-chat) while nothing listens: its polls are
//     refused. A second Ollama starts on the same home and the proxy
//     begins to listen: a cold start, whose first request loads the model
//     (load_duration), as the cold-start tracker must see.
//  3. The continuous probe's totals equal the sums over Ollama's requests
//     (requests, prompt and output tokens exactly; TTFT and E2E within the
//     path bound per request); the engine reading equals /api/ps.
//  4. A reload adds a long generation; the test stops the runner
//     (SIGSTOP) for 1.5 s while it streams: a real stall, counted (at
//     least once: a loaded machine may add one of its own).
//  5. /probe: a module's requests equal Ollama's, and a module whose model
//     Ollama does not have fails with its 404.
//  6. The bench with --output.requests: every record equals its request's
//     figures in Ollama (the native APIs: TTFT, E2E, tokens; the OpenAI
//     API, which reports no durations: tokens, and E2E against the
//     request log's latency).
//  7. Every generation the proxy passed is in Ollama's request log.
func TestOllamaEndToEnd(t *testing.T) {
	if testenv.RaceEnabled {
		t.Skip("runs without the race detector, in `make test-e2e`")
	}
	testenv.Slow(t, "-short: the Ollama end-to-end test takes over a minute")
	ollama := ollamaTool(t)
	exporter := realstack.BuildExporter(t)
	ctx, cancel := context.WithTimeout(context.Background(), 8*time.Minute)
	defer cancel()

	// 1. The model, created into the test's own Ollama home.
	home := t.TempDir()
	model := filepath.Join(home, "tiny.gguf")
	must(t, writeTinyModel(model))
	modelfile := filepath.Join(home, "Modelfile")
	// One thread: a model this small gains nothing from two, and ggml's
	// threads meet at a barrier after every operation, where on a loaded
	// machine each waits for the other to be scheduled again (600 ms a
	// token with two threads beside other builds, 1.4 ms with one).
	must(t, os.WriteFile(modelfile, []byte("FROM "+model+"\nPARAMETER num_thread 1\n"), 0o644))
	ollamaAddr := realstack.FreeAddr(t)
	env := ollamaEnv(home, ollamaAddr)
	first := realstack.StartEnv(t, "ollama-create", home, env, ollama, "serve")
	must(t, first.WaitHTTP(ctx, "http://"+ollamaAddr+"/"))
	create := exec.CommandContext(ctx, ollama, "create", "tiny", "-f", modelfile)
	create.Env = append(os.Environ(), env...)
	if out, err := create.CombinedOutput(); err != nil {
		t.Fatalf("ollama create: %v\n%s", err, out)
	}
	first.Stop()

	// 2. The exporter first, then Ollama: a cold start.
	proxyAddr := realstack.FreeAddr(t)
	proxyURL := "http://" + proxyAddr
	proxy := newRecordingProxy("http://" + ollamaAddr)
	dir := t.TempDir()
	cfgFile := filepath.Join(dir, "exporter.yml")
	writeConfig := func(stall string) {
		cfg := strings.NewReplacer("PROXY", proxyURL, "STALL\n", stall).Replace(ollamaExporterConfig)
		must(t, os.WriteFile(cfgFile, []byte(cfg), 0o644))
	}
	writeConfig("")
	expAddr := realstack.FreeAddr(t)
	exp := realstack.Start(t, "exporter", "", exporter, "--config.file="+cfgFile, "--web.listen-address="+expAddr,
		"--no-collector.nvml", "--log.level=info")
	expURL := "http://" + expAddr
	must(t, exp.WaitHTTP(ctx, expURL+"/-/ready"))
	metricsURL := expURL + "/metrics"
	// The refusals the cold start is timed from: the target's readiness
	// polls run every 250 ms while it is down.
	waitFor(t, ctx, 30*time.Second, "the exporter to see the target down", func() (bool, string) {
		m, err := scrape(ctx, metricsURL)
		if err != nil {
			return false, err.Error()
		}
		_, ok := gaugeValue(m, "infer_probe_target_ready", map[string]string{"target": "chat"})
		return ok, "no infer_probe_target_ready yet"
	})
	time.Sleep(time.Second)
	server := realstack.StartEnv(t, "ollama", home, env, ollama, "serve")
	must(t, server.WaitHTTP(ctx, "http://"+ollamaAddr+"/"))
	proxy.serve(t, proxyAddr)

	// 3. The continuous probe, once its three workloads have finished.
	var m map[string]*dto.MetricFamily
	waitFor(t, ctx, 3*time.Minute, "the three workloads to finish", func() (bool, string) {
		var err error
		if m, err = scrape(ctx, metricsURL); err != nil {
			return false, err.Error()
		}
		n := promSum(m, "infer_probe_workload_state", map[string]string{"state": "finished"})
		return n == 3, fmt.Sprintf("%v of 3 finished", n)
	})
	// The engine reading is refreshed every second: wait for one after the
	// last request.
	time.Sleep(2 * time.Second)
	m, err := scrape(ctx, metricsURL)
	must(t, err)
	checkContinuous(t, m, proxy)
	checkColdStarts(t, m, proxy)
	checkEngineInfo(t, ctx, m, "http://"+ollamaAddr)

	// 4. A stall: the runner stopped while it streams.
	stallStarted := proxy.startedCh("w-stall-")
	writeConfig(ollamaStallWorkload)
	reload(t, ctx, expURL)
	select {
	case <-stallStarted:
	case <-time.After(time.Minute):
		t.Fatal("the stall workload's request did not start within a minute")
	}
	runner := runnerPid(t, server.Pid())
	must(t, syscall.Kill(runner, syscall.SIGSTOP))
	time.Sleep(1500 * time.Millisecond)
	must(t, syscall.Kill(runner, syscall.SIGCONT))
	waitFor(t, ctx, 2*time.Minute, "the stall workload to finish", func() (bool, string) {
		if m, err = scrape(ctx, metricsURL); err != nil {
			return false, err.Error()
		}
		n := promSum(m, "infer_probe_workload_state", map[string]string{"state": "finished", "workload": "w-stall"})
		return n == 1, "w-stall still running"
	})
	checkStall(t, m, proxy, server)

	// 5. /probe.
	checkProbe(t, ctx, expURL, proxyURL, proxy)

	// 6. The bench, request by request.
	checkBench(t, ctx, exporter, proxyURL, proxy, server)

	// 7. Every generation the proxy passed is one line of Ollama's request
	// log, with the same status, and the other way round.
	checkRequestLog(t, proxy, server)
}

func checkRequestLog(t *testing.T, proxy *recordingProxy, server *realstack.Process) {
	t.Helper()
	type key struct {
		path   string
		status int
	}
	proxied, logged := map[key]int{}, map[key]int{}
	for _, r := range proxy.byPrefix("") {
		proxied[key{r.Path, r.Status}]++
	}
	for _, g := range requestLog(t, server) {
		if isGeneration(g.path) {
			logged[key{g.path, g.status}]++
		}
	}
	t.Logf("generations by path and status: proxy %v, Ollama's request log %v", proxied, logged)
	if fmt.Sprint(proxied) != fmt.Sprint(logged) {
		t.Errorf("the proxy passed %v, Ollama's request log has %v", proxied, logged)
	}
}

// ollamaTool is the pinned Ollama's binary: `go tool -n ollama` in
// tools/ollama, which builds it into Go's cache the first time (minutes:
// its llama.cpp is C++ compiled through cgo).
func ollamaTool(t *testing.T) string {
	t.Helper()
	return realstack.ModuleTool(t, "tools/ollama", "ollama")
}

// ollamaEnv keeps Ollama on loopback, in the test's home, on the CPU, one
// request at a time (so that each request's durations are its own) and
// with the model kept loaded for the whole test.
func ollamaEnv(home, addr string) []string {
	return []string{
		"HOME=" + home,
		"OLLAMA_HOST=" + addr,
		"OLLAMA_MODELS=" + filepath.Join(home, "models"),
		"OLLAMA_NUM_PARALLEL=1",
		"OLLAMA_MAX_LOADED_MODELS=1",
		"OLLAMA_KEEP_ALIVE=30m",
		"OLLAMA_CONTEXT_LENGTH=4096",
		"OLLAMA_NOPRUNE=1",
		"CUDA_VISIBLE_DEVICES=",
		"HIP_VISIBLE_DEVICES=",
	}
}

// runnerPid finds the runner `ollama serve` started for the model: its one
// child process.
func runnerPid(t *testing.T, parent int) int {
	t.Helper()
	entries, err := os.ReadDir("/proc")
	must(t, err)
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		stat, err := os.ReadFile(filepath.Join("/proc", e.Name(), "stat"))
		if err != nil {
			continue
		}
		// pid (comm) state ppid ...: comm may hold spaces, so read after ')'.
		fields := strings.Fields(string(stat[bytes.LastIndexByte(stat, ')')+1:]))
		if len(fields) > 1 && fields[1] == strconv.Itoa(parent) {
			return pid
		}
	}
	t.Fatalf("no child process of ollama serve (pid %d)", parent)
	return 0
}

func reload(t *testing.T, ctx context.Context, expURL string) {
	t.Helper()
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, expURL+"/-/reload", nil)
	resp, err := http.DefaultClient.Do(req)
	must(t, err)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("reload: %s", resp.Status)
	}
}

func gaugeValue(mfs map[string]*dto.MetricFamily, name string, labels map[string]string) (float64, bool) {
	for _, m := range mfs[name].GetMetric() {
		if promMatches(m, labels) {
			return m.GetGauge().GetValue(), true
		}
	}
	return 0, false
}

// ollamaWorkloads maps each workload of the continuous probe to its
// flavor's path.
var ollamaWorkloads = []struct{ workload, target, path string }{
	{"w-chat", "chat", "/api/chat"},
	{"w-generate", "generate", "/api/generate"},
	{"w-openai", "openai", "/v1/chat/completions"},
}

// checkContinuous: each workload's totals on /metrics against the sums of
// Ollama's figures over the same requests (X-Request-Id <workload>-<n>).
func checkContinuous(t *testing.T, m map[string]*dto.MetricFamily, proxy *recordingProxy) {
	t.Helper()
	for _, w := range ollamaWorkloads {
		recs := proxy.byPrefix(w.workload + "-")
		var ok []*ollamaTruth
		for _, r := range recs {
			if r.Path != w.path {
				t.Errorf("%s: request %s went to %s, want %s", w.workload, r.ID, r.Path, w.path)
			}
			if r.Status == http.StatusOK {
				ok = append(ok, r)
			}
		}
		lw := map[string]string{"workload": w.workload}
		success := promSum(m, "infer_probe_requests_total", map[string]string{"workload": w.workload, "outcome": "success"})
		if int(success) != len(ok) || len(ok) < 10 {
			t.Errorf("%s: %v successes on /metrics, Ollama answered %d with 200 (of %d; want at least 10)", w.workload, success, len(ok), len(recs))
		}
		var prompt, output int
		var serverTTFT, serverE2E time.Duration
		for _, r := range ok {
			if w.path == "/v1/chat/completions" {
				if r.Usage == nil {
					t.Errorf("%s: %s: no usage in the last chunk", w.workload, r.ID)
					continue
				}
				prompt, output = prompt+r.Usage.PromptTokens, output+r.Usage.CompletionTokens
				continue
			}
			prompt, output = prompt+r.PromptEvalCount, output+r.EvalCount
			serverTTFT += r.ServerTTFT()
			serverE2E += time.Duration(r.TotalDuration)
		}
		if got := promSum(m, "infer_probe_prompt_tokens_total", lw); int(got) != prompt {
			t.Errorf("%s: prompt tokens %v on /metrics, %d in Ollama's answers", w.workload, got, prompt)
		}
		if got := promSum(m, "infer_probe_completion_tokens_total", lw); int(got) != output {
			t.Errorf("%s: completion tokens %v on /metrics, %d in Ollama's answers", w.workload, got, output)
		}
		if w.path == "/v1/chat/completions" {
			continue // no durations in the OpenAI API's answers
		}
		n, ttftSum := promHistogram(m, "infer_probe_time_to_first_token_seconds", lw)
		ne, e2eSum := promHistogram(m, "infer_probe_request_duration_seconds", lw)
		if int(n) != len(ok) || int(ne) != len(ok) {
			t.Errorf("%s: %v TTFT and %v E2E observations, %d requests", w.workload, n, ne, len(ok))
			continue
		}
		// Per request the exporter's figure is Ollama's plus the path
		// (0 to ollamaPathBound), so the sums differ by 0 to n bounds.
		checkSum(t, w.workload+" TTFT", ttftSum, serverTTFT, len(ok))
		checkSum(t, w.workload+" E2E", e2eSum, serverE2E, len(ok))
	}
}

func checkSum(t *testing.T, what string, exporterSum float64, server time.Duration, n int) {
	t.Helper()
	d := time.Duration(exporterSum*1e9) - server
	lo, hi := -time.Duration(n)*ollamaSlack, time.Duration(n)*ollamaPathBound
	t.Logf("%s: exporter %.4f s in all over %d requests, Ollama %.4f s: %.2f ms a request more", what, exporterSum, n, server.Seconds(), float64(d.Microseconds())/1000/float64(n))
	if d < lo || d > hi {
		t.Errorf("%s: the exporter's sum %.4f s is %v from Ollama's %.4f s, outside [%v, %v] for %d requests", what, exporterSum, d, server.Seconds(), lo, hi, n)
	}
}

// checkColdStarts: each target saw one start, from the refused polls; the
// model's load is in its first request (load_duration), so the start's
// first token comes after the readiness by at least that load and at most
// that request's whole server-side TTFT plus one arrival interval (the
// first arrival after the readiness that gates them) and the path. The
// start's load time is its first request's TTFT (phase
// first_request_ttft): that request's TTFT in Ollama (load_duration, then
// the prompt's evaluation and the first token) plus the path, so at least
// load_duration and, the instants held against the recording proxy's
// (its arrival there, its first byte back), within the path of the
// proxy's TTFT. (It was once bound to load_duration plus one readiness
// poll, which held only while the prompt's evaluation was quick: beside
// the race step it took 558 ms; and then to Ollama's own TTFT, whose
// total_duration also holds the accounting after the last line.)
func checkColdStarts(t *testing.T, m map[string]*dto.MetricFamily, proxy *recordingProxy) {
	t.Helper()
	// One request loaded the model (the others that came during the load
	// waited for it, which Ollama counts in their load_duration too).
	var loader *ollamaTruth
	for _, r := range proxy.byPrefix("w-") {
		if loader == nil || r.LoadDuration > loader.LoadDuration {
			loader = r
		}
	}
	if loader == nil || time.Duration(loader.LoadDuration) < 50*time.Millisecond {
		t.Errorf("no request loaded the model (the longest load_duration: %+v)", loader)
	}
	for _, w := range ollamaWorkloads {
		lt := map[string]string{"target": w.target}
		if n := promSum(m, "infer_server_starts_total", lt); n != 1 {
			t.Errorf("%s: %v starts, want 1", w.target, n)
		}
		ready, okR := gaugeValue(m, "infer_server_last_cold_start_seconds", map[string]string{"target": w.target, "phase": "ready", "from": "first_refusal"})
		ft, okF := gaugeValue(m, "infer_server_last_cold_start_seconds", map[string]string{"target": w.target, "phase": "first_token", "from": "first_refusal"})
		if !okR || !okF {
			t.Errorf("%s: cold start ready %v (%v), first token %v (%v), want both from first_refusal", w.target, ready, okR, ft, okF)
			continue
		}
		// The start's first token is the first request to end successfully.
		var firstOK *ollamaTruth
		for _, r := range proxy.byPrefix(w.workload + "-") {
			if r.Status == http.StatusOK && (firstOK == nil || r.End.Before(firstOK.End)) {
				firstOK = r
			}
		}
		if firstOK == nil {
			t.Errorf("%s: no successful request", w.target)
			continue
		}
		load := time.Duration(firstOK.LoadDuration)
		seen := time.Duration((ft - ready) * 1e9)
		interval := time.Second / 2 // the slowest workload's 2 req/s
		serverTTFT := firstOK.ServerTTFT()
		if w.path == "/v1/chat/completions" {
			// No durations: the proxy's first byte stands for the first token.
			serverTTFT = firstOK.First.Sub(firstOK.Recv)
		}
		t.Logf("%s: cold start ready after %.3f s, first token %.3f s after ready; its request %s: load_duration %v, server TTFT %v",
			w.target, ready, ft-ready, firstOK.ID, load, serverTTFT)
		frt, okT := gaugeValue(m, "infer_server_last_cold_start_seconds", map[string]string{"target": w.target, "phase": "first_request_ttft", "from": "first_refusal"})
		if !okT {
			t.Errorf("%s: no first_request_ttft phase", w.target)
		} else {
			loadSeen := time.Duration(frt * 1e9)
			if w.path == "/v1/chat/completions" {
				// Ollama's OpenAI API gives no durations: against the
				// proxy's first byte, which holds the load.
				t.Logf("%s: first request TTFT %v; the proxy's first byte %v after its arrival", w.target, loadSeen, serverTTFT)
				if d := loadSeen - serverTTFT; d < -ollamaSlack || d > ollamaPathBound {
					t.Errorf("%s: first request TTFT %v is %v from the proxy's %v, outside [%v, %v]", w.target, loadSeen, d, serverTTFT, -ollamaSlack, ollamaPathBound)
				}
			} else {
				// Held against the proxy's first byte, a hop before the
				// exporter's: Ollama's own TTFT (total_duration less
				// eval_duration) also holds its accounting after the last
				// line, which a busy machine stretched past ollamaSlack
				// (the exporter 10.6 ms "before" Ollama's first token).
				proxyTTFT := firstOK.First.Sub(firstOK.Recv)
				d := loadSeen - proxyTTFT
				t.Logf("%s: the start's load time (first request TTFT) %v, the proxy's first byte %v after its arrival, Ollama's TTFT %v (load_duration %v): %v more than the proxy's",
					w.target, loadSeen, proxyTTFT, serverTTFT, load, d)
				if loadSeen < load || d < -ollamaSlack || d > ollamaPathBound {
					t.Errorf("%s: the start's load time %v is %v from the proxy's TTFT %v of %s (load_duration %v), want at least load_duration and within [%v, %v] of that TTFT",
						w.target, loadSeen, d, proxyTTFT, firstOK.ID, load, -ollamaSlack, ollamaPathBound)
				}
			}
		}
		if seen < load || seen > serverTTFT+interval+ollamaPathBound+engineReadyPoll {
			t.Errorf("%s: ready to first token %v, want within [load_duration %v, server TTFT %v + arrival interval %v + path %v + poll %v]",
				w.target, seen, load, serverTTFT, interval, ollamaPathBound, engineReadyPoll)
		}
		// The instant, on the one clock of this host: the start's first
		// token is that request's first token in Ollama (its arrival at
		// the proxy, a hop before Ollama's handler, plus Ollama's TTFT,
		// the load included) plus the way back.
		at, ok := gaugeValue(m, "infer_server_last_start_time_seconds", map[string]string{"target": w.target, "from": "first_refusal"})
		if !ok || w.path == "/v1/chat/completions" {
			continue
		}
		exporterFirst := time.Unix(0, int64((at+ft)*1e9))
		d := exporterFirst.Sub(firstOK.First)
		t.Logf("%s: the start's first token %v after the proxy read it from Ollama (Ollama's own TTFT %v: load_duration %v + the rest %v)",
			w.target, d, serverTTFT, load, serverTTFT-load)
		if d < -ollamaSlack || d > ollamaPathBound {
			t.Errorf("%s: the start's first token is %v from the proxy's first byte of %s, outside [%v, %v]", w.target, d, firstOK.ID, -ollamaSlack, ollamaPathBound)
		}
	}
}

// engineReadyPoll is engine.ReadyPollInterval: the readiness is seen late
// by at most one poll.
const engineReadyPoll = 250 * time.Millisecond

// checkEngineInfo: infer_server_info and infer_server_loaded_model_bytes
// against /api/version and /api/ps, asked directly of Ollama.
func checkEngineInfo(t *testing.T, ctx context.Context, m map[string]*dto.MetricFamily, ollamaURL string) {
	t.Helper()
	var version struct {
		Version string `json:"version"`
	}
	var ps struct {
		Models []struct {
			Name          string `json:"name"`
			Size          int64  `json:"size"`
			SizeVRAM      int64  `json:"size_vram"`
			ContextLength int    `json:"context_length"`
		} `json:"models"`
	}
	getJSON(t, ctx, ollamaURL+"/api/version", &version)
	getJSON(t, ctx, ollamaURL+"/api/ps", &ps)
	if len(ps.Models) != 1 {
		t.Fatalf("/api/ps: %d models loaded, want 1: %+v", len(ps.Models), ps)
	}
	loaded := ps.Models[0]
	t.Logf("/api/version %q; /api/ps: %s, %d bytes (%d in VRAM), context %d", version.Version, loaded.Name, loaded.Size, loaded.SizeVRAM, loaded.ContextLength)
	if loaded.SizeVRAM != 0 {
		t.Errorf("/api/ps: %d bytes in VRAM: the model is not on the CPU", loaded.SizeVRAM)
	}
	for _, w := range ollamaWorkloads {
		want := map[string]string{"target": w.target, "engine": "ollama", "version": version.Version,
			"model": loaded.Name, "max_context_length": strconv.Itoa(loaded.ContextLength)}
		if _, ok := gaugeValue(m, "infer_server_info", want); !ok {
			var have []string
			for _, s := range m["infer_server_info"].GetMetric() {
				have = append(have, s.String())
			}
			t.Errorf("%s: no infer_server_info %v; have %s", w.target, want, strings.Join(have, "; "))
		}
		for memory, want := range map[string]int64{"total": loaded.Size, "vram": loaded.SizeVRAM} {
			got, ok := gaugeValue(m, "infer_server_loaded_model_bytes", map[string]string{"target": w.target, "loaded_model": loaded.Name, "memory": memory})
			if !ok || int64(got) != want {
				t.Errorf("%s: infer_server_loaded_model_bytes{memory=%q} %v (present %v), /api/ps says %d", w.target, memory, got, ok, want)
			}
		}
		if n := len(m["infer_server_loaded_model_bytes"].GetMetric()); n != 2*len(ollamaWorkloads) {
			t.Errorf("infer_server_loaded_model_bytes: %d series, want 2 (total, vram) for each of the %d targets", n, len(ollamaWorkloads))
		}
		if up, _ := gaugeValue(m, "infer_server_up", map[string]string{"target": w.target}); up != 1 {
			t.Errorf("%s: infer_server_up %v", w.target, up)
		}
	}
}

func getJSON(t *testing.T, ctx context.Context, url string, v any) {
	t.Helper()
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	resp, err := http.DefaultClient.Do(req)
	must(t, err)
	defer resp.Body.Close()
	must(t, json.NewDecoder(resp.Body).Decode(v))
}

// checkStall: the long generation stalled once (the runner stopped for
// 1.5 s against a 300 ms threshold), then ended as a success with all its
// tokens; Ollama's eval_duration holds the pause, so the stall was the
// engine's.
func checkStall(t *testing.T, m map[string]*dto.MetricFamily, proxy *recordingProxy, server *realstack.Process) {
	t.Helper()
	defer func() {
		if t.Failed() {
			for _, s := range m["infer_probe_requests_total"].GetMetric() {
				if promMatches(s, map[string]string{"workload": "w-stall"}) {
					t.Logf("w-stall: %s", s.String())
				}
			}
			log := requestLog(t, server)
			t.Logf("Ollama's last requests: %+v", log[max(0, len(log)-3):])
		}
	}()
	lw := map[string]string{"workload": "w-stall"}
	recs := proxy.byPrefix("w-stall-")
	if len(recs) != 1 {
		t.Fatalf("w-stall: %d requests, want 1", len(recs))
	}
	r := recs[0]
	t.Logf("w-stall: %s: status %d, %d lines, %d tokens, eval_duration %v, done_reason %q, error %q", r.ID, r.Status, r.Lines, r.EvalCount, time.Duration(r.EvalDuration), r.DoneReason, r.Error)
	// At least one: the stop is one, and a loaded machine may pause the
	// runner past the threshold again on its own.
	stalls := promSum(m, "infer_probe_stalls_total", lw)
	t.Logf("w-stall: %v stalls counted", stalls)
	if stalls < 1 {
		t.Errorf("w-stall: %v stalls, want at least 1", stalls)
	}
	if n := promSum(m, "infer_probe_requests_total", map[string]string{"workload": "w-stall", "outcome": "success"}); n != 1 {
		t.Errorf("w-stall: %v successes, want 1", n)
	}
	if got := promSum(m, "infer_probe_completion_tokens_total", lw); int(got) != r.EvalCount || r.EvalCount != 1500 {
		t.Errorf("w-stall: %v tokens on /metrics, Ollama's eval_count %d, asked 1500", got, r.EvalCount)
	}
	if time.Duration(r.EvalDuration) < 1500*time.Millisecond {
		t.Errorf("w-stall: eval_duration %v does not hold the 1.5 s the runner was stopped", time.Duration(r.EvalDuration))
	}
}

// checkProbe: a /probe of three requests, each against Ollama's figures
// (per request: probe_request_*{request="i"}, the i-th request of the
// probe, X-Request-Id probe-<module>-<probe>-<i>); and one of a model
// Ollama does not have, which fails with Ollama's 404.
func checkProbe(t *testing.T, ctx context.Context, expURL, proxyURL string, proxy *recordingProxy) {
	t.Helper()
	m, err := scrape(ctx, expURL+"/probe?module=probe-chat&target="+proxyURL)
	must(t, err)
	if v, _ := gaugeValue(m, "probe_success", nil); v != 1 {
		t.Errorf("/probe probe-chat: probe_success %v", v)
	}
	recs := proxy.byPrefix("probe-probe-chat-")
	if len(recs) != 3 {
		t.Fatalf("/probe probe-chat: %d requests reached Ollama, want 3", len(recs))
	}
	total := 0
	for _, r := range recs {
		i := r.ID[strings.LastIndexByte(r.ID, '-')+1:]
		lr := map[string]string{"request": i}
		total += r.EvalCount
		if got, _ := gaugeValue(m, "probe_request_output_tokens", lr); int(got) != r.EvalCount {
			t.Errorf("/probe request %s: %v output tokens, Ollama's eval_count %d", i, got, r.EvalCount)
		}
		ttft, _ := gaugeValue(m, "probe_request_time_to_first_token_seconds", lr)
		e2e, _ := gaugeValue(m, "probe_request_e2e_latency_seconds", lr)
		checkTTFT(t, "/probe request "+i+" TTFT", ttft, r)
		checkOne(t, "/probe request "+i+" E2E", e2e, time.Duration(r.TotalDuration))
	}
	if got, _ := gaugeValue(m, "probe_output_tokens", nil); int(got) != total {
		t.Errorf("/probe: probe_output_tokens %v, Ollama's eval_count %d in all", got, total)
	}

	m, err = scrape(ctx, expURL+"/probe?module=probe-missing&target="+proxyURL)
	must(t, err)
	if v, _ := gaugeValue(m, "probe_success", nil); v != 0 {
		t.Errorf("/probe probe-missing: probe_success %v, want 0", v)
	}
	if v, _ := gaugeValue(m, "probe_http_status_code", nil); v != http.StatusNotFound {
		t.Errorf("/probe probe-missing: probe_http_status_code %v, want 404", v)
	}
	missing := proxy.byPrefix("probe-probe-missing-")
	if len(missing) != 1 || missing[0].Status != http.StatusNotFound || !strings.Contains(missing[0].Error, "not found") {
		t.Errorf("/probe probe-missing: Ollama's answers %+v, want one 404 \"model ... not found\"", missing)
	}
}

// checkTTFT: the exporter's TTFT of one request against the truth. From
// below, the proxy's first byte of that request after it got it: the
// exporter's clock starts at the scheduled send, before the proxy has the
// request, and stops at the first token, after the proxy passed it on, so
// it is never less, on any machine. From above, Ollama's own TTFT plus the
// path. Not Ollama's figure from below, as for E2E: total_duration less
// eval_duration holds, besides the load and the prompt, the server's time
// around each later token that eval_duration does not count (taking it
// from the runner, writing it), which on a busy CPU passed the exporter's
// TTFT by 7 ms (67.2 ms against 60.3 ms, the slow step beside).
func checkTTFT(t *testing.T, what string, exporterSeconds float64, o *ollamaTruth) {
	t.Helper()
	got := time.Duration(exporterSeconds * 1e9)
	proxy := o.First.Sub(o.Recv)
	if d := got - o.ServerTTFT(); got < proxy || d > ollamaPathBound {
		t.Errorf("%s: the exporter's %.4f s is %v from Ollama's %v, want at least the proxy's first byte %v and at most %v more than Ollama's",
			what, exporterSeconds, d, o.ServerTTFT(), proxy, ollamaPathBound)
	}
}

func checkOne(t *testing.T, what string, exporterSeconds float64, server time.Duration) {
	t.Helper()
	d := time.Duration(exporterSeconds*1e9) - server
	if d < -ollamaSlack || d > ollamaPathBound {
		t.Errorf("%s: the exporter's %.4f s is %v from Ollama's %v, outside [%v, %v]", what, exporterSeconds, d, server, -ollamaSlack, ollamaPathBound)
	}
}

// ginLine is one line of Ollama's request log (gin's):
//
//	[GIN] 2026/12/02 - 02:50:17 | 200 |   12.345678ms |       127.0.0.1 | POST     "/api/chat"
var ginLine = regexp.MustCompile(`^\[GIN\] [^|]*\|\s*(\d+)\s*\|\s*(\S+)\s*\|[^|]*\|\s*(\w+)\s+"([^"]+)"`)

type ginRequest struct {
	status  int
	latency time.Duration
	path    string
}

// requestLog reads Ollama's request log from its process log.
func requestLog(t *testing.T, p *realstack.Process) []ginRequest {
	t.Helper()
	b, err := os.ReadFile(p.Log)
	must(t, err)
	var out []ginRequest
	sc := bufio.NewScanner(bytes.NewReader(b))
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		g := ginLine.FindStringSubmatch(sc.Text())
		if g == nil {
			continue
		}
		status, _ := strconv.Atoi(g[1])
		lat, err := time.ParseDuration(strings.ReplaceAll(g[2], "µ", "u"))
		if err != nil {
			t.Fatalf("request log: latency %q: %v", g[2], err)
		}
		out = append(out, ginRequest{status: status, latency: lat, path: g[4]})
	}
	return out
}

// checkBench: the bench's per-request records, each joined by its id to
// Ollama's figures for that request.
func checkBench(t *testing.T, ctx context.Context, exporter, proxyURL string, proxy *recordingProxy, server *realstack.Process) {
	t.Helper()
	dir := t.TempDir()
	cfg := filepath.Join(dir, "bench.yml")
	must(t, os.WriteFile(cfg, []byte(strings.ReplaceAll(ollamaBenchConfig, "PROXY", proxyURL)), 0o644))
	requests := filepath.Join(dir, "requests.jsonl")
	before := len(requestLog(t, server))
	cmd := exec.CommandContext(ctx, exporter, "bench", "--config.file="+cfg, "--output.dir="+filepath.Join(dir, "out"),
		"--progress=never", "--output.requests="+requests)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("bench: %v\n%s", err, lastLinesOf(string(out), 40))
	}
	b, err := os.ReadFile(requests)
	must(t, err)
	type record struct {
		ID           string   `json:"id"`
		Cell         string   `json:"cell"`
		TTFT         *float64 `json:"ttft"`
		E2E          *float64 `json:"e2e"`
		End          *float64 `json:"end"`
		InputTokens  int      `json:"input_tokens"`
		OutputTokens int      `json:"output_tokens"`
		Outcome      string   `json:"outcome"`
	}
	truth := proxy.byID()
	var native, openai int
	var openaiRecs []record
	var maxTTFT, maxE2E time.Duration
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		var r record
		must(t, json.Unmarshal(sc.Bytes(), &r))
		o := truth[r.ID]
		if o == nil {
			t.Errorf("bench record %s: no such request reached Ollama", r.ID)
			continue
		}
		if r.Outcome != "success" || o.Status != http.StatusOK || r.TTFT == nil || r.E2E == nil {
			t.Errorf("bench record %s: outcome %s, Ollama's status %d", r.ID, r.Outcome, o.Status)
			continue
		}
		if o.Path == "/v1/chat/completions" {
			openai++
			openaiRecs = append(openaiRecs, r)
			if o.Usage == nil || r.InputTokens != o.Usage.PromptTokens || r.OutputTokens != o.Usage.CompletionTokens {
				t.Errorf("bench record %s: %d/%d tokens, Ollama's usage %+v", r.ID, r.InputTokens, r.OutputTokens, o.Usage)
			}
			continue
		}
		native++
		if r.InputTokens != o.PromptEvalCount || r.OutputTokens != o.EvalCount {
			t.Errorf("bench record %s: %d prompt and %d output tokens, Ollama's prompt_eval_count %d and eval_count %d",
				r.ID, r.InputTokens, r.OutputTokens, o.PromptEvalCount, o.EvalCount)
		}
		checkTTFT(t, "bench "+r.ID+" TTFT", *r.TTFT, o)
		checkOne(t, "bench "+r.ID+" E2E", *r.E2E, time.Duration(o.TotalDuration))
		maxTTFT = max(maxTTFT, time.Duration(*r.TTFT*1e9)-o.ServerTTFT())
		maxE2E = max(maxE2E, time.Duration(*r.E2E*1e9)-time.Duration(o.TotalDuration))
	}
	t.Logf("bench: %d records of the native APIs joined, the exporter above Ollama by at most %v (TTFT) and %v (E2E); %d of the OpenAI API", native, maxTTFT, maxE2E, openai)
	if native < 20 || openai < 10 {
		t.Errorf("bench: %d native and %d OpenAI records joined, want at least 20 and 10", native, openai)
	}

	// The OpenAI API's answers carry no durations: its E2E is held to the
	// request log's latency (gin's, from its middleware's start to the
	// handler's end). The bench's cells run one after another and
	// Ollama answers one request at a time, so the log's
	// /v1/chat/completions lines come in the order the records ended.
	var log []ginRequest
	for _, g := range requestLog(t, server)[before:] {
		if g.path == "/v1/chat/completions" {
			log = append(log, g)
		}
	}
	sort.Slice(openaiRecs, func(i, j int) bool { return *openaiRecs[i].End < *openaiRecs[j].End })
	if len(log) != len(openaiRecs) {
		t.Fatalf("request log: %d /v1/chat/completions lines during the bench, %d records", len(log), len(openaiRecs))
	}
	for i, r := range openaiRecs {
		checkOne(t, "bench "+r.ID+" E2E (request log)", *r.E2E, log[i].latency)
	}
}

func lastLinesOf(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}
