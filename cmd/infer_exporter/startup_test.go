package main

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"
)

// TestMain lets a test run the program itself as a child process (for
// --help, which exits the process).
func TestMain(m *testing.M) {
	if os.Getenv("INFER_EXPORTER_TEST_RUN_MAIN") == "1" {
		os.Exit(run(context.Background(), os.Args[1:]))
	}
	os.Exit(m.Run())
}

// runChild runs the program with args in a child process and returns what it
// printed.
func runChild(t *testing.T, args ...string) string {
	t.Helper()
	cmd := exec.Command(os.Args[0], args...)
	cmd.Env = append(os.Environ(), "INFER_EXPORTER_TEST_RUN_MAIN=1")
	out, _ := cmd.CombinedOutput()
	return string(out)
}

// TestSubcommandHelpListsItsOwnFlags: each subcommand's --help lists the flags
// that apply to it, not the exporter's serving flags.
func TestSubcommandHelpListsItsOwnFlags(t *testing.T) {
	for _, tc := range []struct {
		args      []string
		want, not []string
	}{
		{[]string{"simulate", "--help"}, []string{"--sim.decode-step", "--web.listen-address", "--log.level"},
			[]string{"--demo", "--web.config.file", "--collector.", "--config.file", "--probe.degraded-lag"}},
		{[]string{"bench", "--help"}, []string{"--config.file", "--config.check", "--output.dir", "--collector.nvml", "--shard", "--web.listen-address", "bench verify", "bench merge"},
			[]string{"--demo", "--web.config.file", "--web.telemetry-path", "--probe.degraded-lag", "--sim."}},
		// The cases: the top-level --help is the default command's,
		// as node_exporter's is; merge and verify list only their own.
		{[]string{"--help"}, []string{"--config.file", "--web.listen-address", "--demo", "--otlp.endpoint", "--collector.nvml", "--log.level", "simulate, shadow, bench"},
			[]string{"--sim.", "--shadow.", "--output.dir"}},
		{[]string{"-h", "--log.level=debug"}, []string{"--config.file", "--web.listen-address", "--demo"}, nil},
		{[]string{"bench", "merge", "--help"}, []string{"--output.dir", "<shards>"},
			// " --shard=": the flag's line; the description names it as "(--shard=i/N)".
			[]string{"--collector", "--baseline", " --shard=", "--config.file", "--web.listen-address", "--progress"}},
		{[]string{"bench", "verify", "--help"}, []string{"<report>"},
			[]string{"--collector", "--baseline", " --shard=", "--config.file", "--web.listen-address", "--output.dir"}},
		{[]string{"shadow", "--help"}, []string{"--shadow.upstream", "--web.listen-address"},
			[]string{"--demo", "--collector.", "--config.file", "--sim."}},
		{[]string{"serve", "--help"}, []string{"--demo", "--config.file", "--web.listen-address", "--collector.nvml"},
			[]string{"--sim.", "--shadow.", "--output.dir"}},
	} {
		out := strings.ReplaceAll(runChild(t, tc.args...), "--[no-]", "--")
		for _, w := range tc.want {
			if !strings.Contains(out, w) {
				t.Errorf("%v: help lacks %s:\n%s", tc.args, w, out)
			}
		}
		for _, n := range tc.not {
			if strings.Contains(out, n) {
				t.Errorf("%v: help lists %s, which does not apply:\n%s", tc.args, n, out)
			}
		}
	}
	// Serving flags still work without naming the default command.
	if code := run(context.Background(), []string{"--config.check"}); code != 2 {
		t.Errorf("--config.check without a file: exit %d, want 2", code)
	}
}

// TestListenerUpWhileTokenizersStall: four workloads whose target's /tokenize
// stalls. The listener answers while every tokenizer request still stalls
// (/-/healthy answered before any /tokenize request ended, /metrics
// served), the workloads calibrate concurrently (all four "calibrating" at
// once), and they start once their tokenizer answers.
//
// The listener's promptness is judged by that order of events, not by a
// time: "/-/healthy within 1 s of the start" failed on a busy machine (the
// race step beside a cold build), where the start itself takes seconds;
// a listener that waited for the tokenizers would answer only after a
// /tokenize request ended (answered, or given up at the calibration's
// timeout).
func TestListenerUpWhileTokenizersStall(t *testing.T) {
	release := make(chan struct{})
	var tokenizeEnded atomic.Int32
	stalled := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if strings.HasSuffix(r.URL.Path, "/tokenize") {
			defer tokenizeEnded.Add(1)
			select {
			case <-r.Context().Done():
			case <-release:
			}
			http.Error(w, "stalled", http.StatusServiceUnavailable)
			return
		}
		http.Error(w, "no model", http.StatusServiceUnavailable)
	}))
	var once sync.Once
	unstall := func() { once.Do(func() { close(release) }) }
	defer stalled.Close()
	defer unstall()

	var b strings.Builder
	fmt.Fprintf(&b, "targets:\n  - {name: slow, url: %q, model: m, metrics: {engine: none}}\nworkloads:\n", stalled.URL)
	for i := range 4 {
		fmt.Fprintf(&b, "  - {name: w%d, target: slow, arrival: {process: constant, rate: 1}}\n", i)
	}
	file := filepath.Join(t.TempDir(), "c.yml")
	if err := os.WriteFile(file, []byte(b.String()), 0o600); err != nil {
		t.Fatal(err)
	}

	addr := freeAddr(t)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan int, 1)
	go func() {
		done <- run(ctx, []string{"--web.listen-address=" + addr, "--log.level=error", "--no-collector.nvml", "--config.file=" + file})
	}()
	defer func() {
		cancel()
		select {
		case <-done:
		case <-time.After(time.Until(testDeadline(t))):
			t.Error("exporter did not stop")
		}
	}()
	base := "http://" + addr
	deadline := testDeadline(t)
	client := &http.Client{Timeout: time.Until(deadline)}
	for {
		resp, err := client.Get(base + "/-/healthy")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode != http.StatusOK {
				t.Fatalf("/-/healthy: %s", resp.Status)
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("/-/healthy did not answer: %v", err)
		}
		time.Sleep(10 * time.Millisecond)
	}
	if n := tokenizeEnded.Load(); n != 0 {
		t.Fatalf("/-/healthy answered only after %d /tokenize requests ended: the listener waited for the tokenizers", n)
	}
	if resp, err := client.Get(base + "/metrics"); err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("/metrics while calibrating: %v %v", resp, err)
	} else {
		resp.Body.Close()
	}

	// All four calibrate at the same time.
	waitFor(t, client, base, func(mfs string) bool {
		return inState(mfs, "calibrating") == 4
	})
	if resp, err := client.Get(base + "/-/ready"); err != nil || resp.StatusCode != http.StatusOK {
		t.Errorf("/-/ready once the configuration is applied: %v %v", resp, err)
	} else {
		resp.Body.Close()
	}
	// The tokenizer answers (503 in every dialect: no tokenizer), and the
	// workloads start on estimated lengths.
	unstall()
	waitFor(t, client, base, func(mfs string) bool {
		return inState(mfs, "running") == 4
	})
	// The landing page shows them started: each listed, none calibrating.
	// Not "running" by name: the target answers every request 503, so
	// from the third failed request on (some 3 s after the start) the
	// page says "failing", as it should; on a busy machine the page was
	// read that late.
	page := get(t, client, base+"/")
	for i := range 4 {
		if !strings.Contains(page, fmt.Sprintf(">w%d<", i)) {
			t.Errorf("landing page does not list workload w%d:\n%s", i, page)
		}
	}
	if strings.Contains(page, "calibrating") {
		t.Errorf("landing page shows a workload still calibrating:\n%s", page)
	}
}

// inState counts the workloads whose infer_probe_workload_state is state.
func inState(metrics, state string) int {
	re := regexp.MustCompile(`(?m)^infer_probe_workload_state\{[^}]*state="` + state + `"[^}]*\} 1$`)
	return len(re.FindAllString(metrics, -1))
}

func get(t *testing.T, client *http.Client, url string) string {
	t.Helper()
	resp, err := client.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var b strings.Builder
	buf := make([]byte, 32<<10)
	for {
		n, err := resp.Body.Read(buf)
		b.Write(buf[:n])
		if err != nil {
			break
		}
	}
	return b.String()
}

// waitFor polls /metrics until ok holds for its text, or fails at the
// test's deadline.
func waitFor(t *testing.T, client *http.Client, base string, ok func(string) bool) {
	t.Helper()
	deadline := testDeadline(t)
	var last string
	for time.Now().Before(deadline) {
		last = get(t, client, base+"/metrics")
		if ok(last) {
			return
		}
		time.Sleep(50 * time.Millisecond)
	}
	var states []string
	for _, l := range strings.Split(last, "\n") {
		if strings.HasPrefix(l, "infer_probe_workload_state") {
			states = append(states, l)
		}
	}
	t.Fatalf("condition not met by the test's deadline; workload states:\n%s", strings.Join(states, "\n"))
}

// TestConfigCheckRefusesUnusable: --config.check refuses, with a clear
// reason, what would once have passed and then killed the exporter or done
// nothing.
func TestConfigCheckRefusesUnusable(t *testing.T) {
	dir := t.TempDir()
	write := func(name, body string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	huge := filepath.Join(dir, "huge.yml")
	f, err := os.Create(huge)
	if err != nil {
		t.Fatal(err)
	}
	if err := f.Truncate(64 << 20); err != nil { // 64 MB (sparse)
		t.Fatal(err)
	}
	f.Close()
	// Recorded for the Responses API, replayed at a chat target: the
	// exporter once passed the check and then refused to start.
	responsesTrace := write("responses.jsonl", `{"offset": 0, "path": "/v1/responses", "body": {"input": "hi", "max_output_tokens": 8}}`+"\n")
	malformedTrace := write("malformed.jsonl", `{"offset": 0, "body": {"messages": []}}`+"\nnot json\n")
	replayOf := func(trace string) string {
		return "targets:\n  - {name: t, url: \"http://127.0.0.1:9\", model: m, flavor: openai-chat}\nworkloads:\n  - name: w\n    target: t\n    replay: {source: jsonl, path: " + trace + "}\n"
	}
	deepSchema := write("deep.json", strings.Repeat(`{"items":`, 6552)+"{}"+strings.Repeat("}", 6552))
	for _, tc := range []struct {
		file, want string
	}{
		{write("tokens.yml", "targets:\n  - {name: t, url: \"http://127.0.0.1:9\", model: m}\nworkloads:\n  - name: w\n    target: t\n    arrival: {process: constant, rate: 1}\n    prompt: {input_tokens: {dist: fixed, mean: 1e15}}\n"),
			"tokens.yml:7: workloads[0].prompt.input_tokens.mean: at most 1048576 tokens"},
		{write("empty.yml", "# nothing here\n"), "empty configuration"},
		{write("dashes.yml", "---\n"), "empty configuration"},
		{huge, "file larger than 1 MiB (config.MaxFileBytes)"},
		// A model name with CR, LF or NUL once passed the check.
		{write("model-crlf.yml", "targets:\n  - {name: t, url: \"http://127.0.0.1:9\", model: \"m\\r\\nx\"}\n"),
			`model-crlf.yml:2: targets[0].model: model name has a control character ('\r' at byte 1)`},
		{write("model-nul.yml", "targets:\n  - {name: t, url: \"http://127.0.0.1:9\", model: \"m\\0\"}\n"),
			`targets[0].model: model name has a control character ('\x00' at byte 1)`},
		// A 65 KB schema nested 6,553 deep, within config.MaxSchemaBytes,
		// once kept the check compiling for more than 500 s.
		{write("deep-schema.yml", "targets:\n  - {name: t, url: \"http://127.0.0.1:9\", model: m}\nworkloads:\n  - name: w\n    target: t\n    arrival: {rate: 1}\n    response_format: {type: json_schema, schema_file: deep.json}\n"),
			"deep-schema.yml:7: workloads[0].response_format.schema_file: " + deepSchema + ": nested more than 64 levels deep: at most 64 (config.MaxSchemaDepth)"},
		{write("replay-responses.yml", replayOf(responsesTrace)),
			`workloads[0] "w": replay: ` + responsesTrace + `:1: recorded for /v1/responses, the openai-responses API; the target speaks the openai-chat API`},
		{write("replay-malformed.yml", replayOf(malformedTrace)), malformedTrace + ":2"},
	} {
		out := runChild(t, "--config.check", "--config.file="+tc.file)
		if !strings.Contains(out, tc.want) || strings.Contains(out, "OK") {
			t.Errorf("%s: %q, want a refusal with %q", filepath.Base(tc.file), out, tc.want)
		}
	}
}

// TestReloadRefusesUnboundedLengths: a running exporter given a 1e15-token
// prompt on reload refuses it like any bad file, and the old workload runs
// on (it once died out of memory).
func TestReloadRefusesUnboundedLengths(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "c.yml")
	good := fmt.Sprintf("targets:\n  - {name: t, url: \"http://%s\", model: m, timeout: 1s}\nworkloads:\n  - {name: w, target: t, arrival: {process: constant, rate: 20}}\n", freeAddr(t))
	if err := os.WriteFile(file, []byte(good), 0o600); err != nil {
		t.Fatal(err)
	}
	base := startExporter(t, "--config.file="+file)
	bad := strings.Replace(good, "rate: 20}}", "rate: 20}, prompt: {input_tokens: {dist: fixed, mean: 1e15}}}", 1)
	if err := os.WriteFile(file, []byte(bad), 0o600); err != nil {
		t.Fatal(err)
	}
	resp, err := http.Post(base+"/-/reload", "", nil)
	if err != nil {
		t.Fatal(err)
	}
	body := get(t, http.DefaultClient, base+"/-/ready")
	resp.Body.Close()
	if resp.StatusCode != http.StatusInternalServerError {
		t.Fatalf("reload with a 1e15-token prompt = %d, want 500", resp.StatusCode)
	}
	if !strings.Contains(body, "Ready") {
		t.Errorf("/-/ready after a refused reload: %q", body)
	}
	// Its target never answers, so never becomes ready: the old workload
	// runs on, skipping its arrivals (target_not_ready).
	before := sumCounter(scrape(t, base+"/metrics")["infer_probe_dropped_requests_total"])
	time.Sleep(300 * time.Millisecond)
	if after := sumCounter(scrape(t, base+"/metrics")["infer_probe_dropped_requests_total"]); after <= before {
		t.Errorf("old workload stopped: skipped arrivals %v -> %v", before, after)
	}
}

// TestShutdownWhileConfigReadBlocks: a --config.file that is a FIFO with no
// writer blocks the read; the listener is up meanwhile (not ready), and
// SIGTERM (the context) ends the exporter at once (it once ran 615 s).
func TestShutdownWhileConfigReadBlocks(t *testing.T) {
	fifo := filepath.Join(t.TempDir(), "c.yml")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Skip("no FIFOs here:", err)
	}
	addr := freeAddr(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan int, 1)
	go func() {
		done <- run(ctx, []string{"--web.listen-address=" + addr, "--log.level=error", "--no-collector.nvml", "--config.file=" + fifo})
	}()
	client := &http.Client{Timeout: time.Second}
	deadline := time.Now().Add(5 * time.Second)
	for {
		resp, err := client.Get("http://" + addr + "/-/ready")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode != http.StatusServiceUnavailable {
				t.Fatalf("/-/ready while the configuration is unread: %s, want 503", resp.Status)
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("listener not up while the configuration read blocks")
		}
		time.Sleep(20 * time.Millisecond)
	}
	cancel()
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		t.Fatal("the exporter did not stop while its configuration read blocked")
	}
}

// TestStartRefusesOTLPVariablesOutOfRange: an OTEL_* value that the SDK
// would panic on (a batch queue of -1: makeslice, exit 2 with a goroutine
// dump), exhaust memory with (10^8 spans), fail every push with (a header
// with CR, LF or NUL) or ignore (brotli) stops the process at start with
// exit status 1 and a message naming the variable and its range, so that a
// pod with such a value says why in its log.
func TestStartRefusesOTLPVariablesOutOfRange(t *testing.T) {
	for _, tc := range []struct {
		key, value, say string
	}{
		{"OTEL_BSP_MAX_QUEUE_SIZE", "-1", `OTEL_BSP_MAX_QUEUE_SIZE=\"-1\": outside 1..65536 spans`},
		{"OTEL_BSP_MAX_QUEUE_SIZE", "100000000", `OTEL_BSP_MAX_QUEUE_SIZE=\"100000000\": outside 1..65536 spans`},
		{"OTEL_EXPORTER_OTLP_HEADERS", "api-key=a%0D%0Ab", `OTEL_EXPORTER_OTLP_HEADERS: the value of api-key has a control character after decoding ('\\r' at byte 1)`},
		{"OTEL_EXPORTER_OTLP_HEADERS", "api-key=a%00b", `OTEL_EXPORTER_OTLP_HEADERS: the value of api-key has a control character after decoding ('\\x00' at byte 1)`},
		{"OTEL_EXPORTER_OTLP_COMPRESSION", "brotli", `OTEL_EXPORTER_OTLP_COMPRESSION=\"brotli\": unknown compression; want gzip or none`},
	} {
		t.Run(tc.key+"="+tc.value, func(t *testing.T) {
			cmd := exec.Command(os.Args[0], "--otlp.endpoint=http://127.0.0.1:1", "--no-collector.nvml",
				"--web.listen-address=127.0.0.1:0", "--log.level=error")
			cmd.Env = append(os.Environ(), "INFER_EXPORTER_TEST_RUN_MAIN=1", tc.key+"="+tc.value)
			out, err := cmd.CombinedOutput()
			var exit *exec.ExitError
			if !errors.As(err, &exit) || exit.ExitCode() != 1 {
				t.Fatalf("exit %v, want status 1:\n%s", err, out)
			}
			if !strings.Contains(string(out), tc.say) {
				t.Fatalf("output lacks %s:\n%s", tc.say, out)
			}
			if strings.Contains(string(out), "goroutine ") {
				t.Fatalf("a panic:\n%s", out)
			}
		})
	}
}
