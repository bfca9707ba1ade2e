package main

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	dto "github.com/prometheus/client_model/go"
	"golang.org/x/crypto/bcrypt"
)

func freeAddr(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}

// testDeadline is when a test's waits give up: a little before go test's
// -timeout ends the process, so that the failure says what was awaited;
// an hour away when there is no such timeout. Waits for an event use it,
// not a time of their own: on a busy machine (the race step beside a cold
// build) the exporter's start took more than 10 s.
func testDeadline(t *testing.T) time.Time {
	if d, ok := t.Deadline(); ok {
		return d.Add(-10 * time.Second)
	}
	return time.Now().Add(time.Hour)
}

// startExporter runs the program in-process until the test ends.
func startExporter(t *testing.T, args ...string) string {
	t.Helper()
	addr := freeAddr(t)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan int, 1)
	go func() {
		done <- run(ctx, append([]string{"--web.listen-address=" + addr, "--log.level=warn", "--no-collector.nvml"}, args...))
	}()
	t.Cleanup(func() {
		cancel()
		select {
		case <-done:
		case <-time.After(time.Until(testDeadline(t))):
			t.Error("exporter did not stop")
		}
	})
	base := "http://" + addr
	deadline := testDeadline(t)
	// Ready, not only healthy: the listener comes up before the
	// configuration is applied.
	for {
		resp, err := http.Get(base + "/-/ready")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return base
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("exporter did not start: %v", err)
		}
		select {
		case code := <-done:
			t.Fatalf("exporter exited with %d", code)
		case <-time.After(50 * time.Millisecond):
		}
	}
}

func scrape(t *testing.T, url string) map[string]*dto.MetricFamily {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	mfs, err := parseText(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return mfs
}

func sumCounter(mf *dto.MetricFamily) float64 {
	var s float64
	for _, m := range mf.GetMetric() {
		s += m.GetCounter().GetValue()
	}
	return s
}

func histCount(mf *dto.MetricFamily) uint64 {
	var s uint64
	for _, m := range mf.GetMetric() {
		s += m.GetHistogram().GetSampleCount()
	}
	return s
}

// TestDemo is the README's first command: within 20 s, /metrics shows the
// four latency histograms with observations and token counters rising.
func TestDemo(t *testing.T) {
	base := startExporter(t, "--demo")
	deadline := time.Now().Add(20 * time.Second)
	var lastTokens float64
	rising := 0
	for time.Now().Before(deadline) {
		mfs := scrape(t, base+"/metrics")
		ok := true
		for _, name := range []string{
			"infer_probe_time_to_first_token_seconds", "infer_probe_time_per_output_token_seconds",
			"infer_probe_inter_token_latency_seconds", "infer_probe_request_duration_seconds",
		} {
			if mf := mfs[name]; mf == nil || histCount(mf) == 0 {
				ok = false
			}
		}
		if mf := mfs["infer_probe_completion_tokens_total"]; mf != nil {
			if v := sumCounter(mf); v > lastTokens {
				if lastTokens > 0 {
					rising++
				}
				lastTokens = v
			}
		}
		if ok && rising >= 1 {
			if mfs["infer_exporter_build_info"] == nil {
				t.Error("no infer_exporter_build_info")
			}
			if mfs["go_goroutines"] == nil || mfs["process_cpu_seconds_total"] == nil {
				t.Error("no Go or process metrics")
			}
			return
		}
		time.Sleep(500 * time.Millisecond)
	}
	t.Fatalf("demo did not show all four histograms with rising tokens within 20 s (tokens %v)", lastTokens)
}

func TestLandingAndHealth(t *testing.T) {
	base := startExporter(t, "--demo")
	for path, want := range map[string]string{"/": "infer_exporter", "/-/healthy": "Healthy", "/-/ready": "Ready"} {
		resp, err := http.Get(base + path)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 200 || !strings.Contains(string(body), want) {
			t.Errorf("GET %s = %d %q, want 200 containing %q", path, resp.StatusCode, body, want)
		}
	}
	resp, err := http.Get(base + "/-/reload")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusMethodNotAllowed {
		t.Errorf("GET /-/reload = %d, want 405", resp.StatusCode)
	}
}

// TestReloadKeepsOldConfig: a bad file is refused on reload with file, line
// and reason, and the running workloads go on.
func TestReloadKeepsOldConfig(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "c.yml")
	// A target nobody listens on: it never becomes ready, so the
	// workload runs and counts its arrivals as skipped (target_not_ready).
	good := fmt.Sprintf(`targets:
  - {name: t, url: "http://%s", model: m, timeout: 1s}
workloads:
  - {name: w, target: t, arrival: {process: constant, rate: 20}}
`, freeAddr(t))
	if err := os.WriteFile(file, []byte(good), 0o600); err != nil {
		t.Fatal(err)
	}
	base := startExporter(t, "--config.file="+file)
	if err := os.WriteFile(file, []byte(good+"  - {name: w2, target: nope}\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	resp, err := http.Post(base+"/-/reload", "", nil)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 500 || !strings.Contains(string(body), "c.yml:5: workloads[1].target") {
		t.Fatalf("reload of a bad file = %d %q, want 500 naming c.yml:5", resp.StatusCode, body)
	}
	mfs := scrape(t, base+"/metrics")
	if v := mfs["infer_exporter_config_last_reload_successful"].GetMetric()[0].GetGauge().GetValue(); v != 0 {
		t.Errorf("last_reload_successful = %v after a bad reload", v)
	}
	// The old workload still runs: its skipped arrivals keep rising.
	before := sumCounter(mfs["infer_probe_dropped_requests_total"])
	time.Sleep(300 * time.Millisecond)
	if after := sumCounter(scrape(t, base+"/metrics")["infer_probe_dropped_requests_total"]); after <= before {
		t.Errorf("old workload stopped: requests %v -> %v", before, after)
	}
	if err := os.WriteFile(file, []byte(strings.Replace(good, "name: w,", "name: w3,", 1)), 0o600); err != nil {
		t.Fatal(err)
	}
	resp, err = http.Post(base+"/-/reload", "", nil)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Fatalf("good reload = %d", resp.StatusCode)
	}
	mfs = scrape(t, base+"/metrics")
	if v := mfs["infer_exporter_config_last_reload_successful"].GetMetric()[0].GetGauge().GetValue(); v != 1 {
		t.Errorf("last_reload_successful = %v after a good reload", v)
	}
	for _, m := range mfs["infer_probe_requests_total"].GetMetric() {
		for _, l := range m.GetLabel() {
			if l.GetName() == "workload" && l.GetValue() == "w" {
				t.Fatalf("series of the removed workload w remain")
			}
		}
	}
}

func TestConfigCheck(t *testing.T) {
	dir := t.TempDir()
	bad := filepath.Join(dir, "bad.yml")
	if err := os.WriteFile(bad, []byte("targets:\n  - name: t\n    urll: x\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if code := run(context.Background(), []string{"--config.check", "--config.file=" + bad}); code != 1 {
		t.Errorf("--config.check on a bad file exited %d, want 1", code)
	}
}

func parseText(r io.Reader) (map[string]*dto.MetricFamily, error) {
	p := expfmt.NewTextParser(model.UTF8Validation)
	return p.TextToMetricFamilies(r)
}

// TestWebConfigBasicAuth: --web.config.file protects every endpoint, and
// the password never appears in what the exporter serves.
func TestWebConfigBasicAuth(t *testing.T) {
	hash, err := bcrypt.GenerateFromPassword([]byte("s3cret-pass"), bcrypt.MinCost)
	if err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(t.TempDir(), "web.yml")
	if err := os.WriteFile(file, []byte("basic_auth_users:\n  prom: "+string(hash)+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	addr := freeAddr(t)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan int, 1)
	go func() {
		done <- run(ctx, []string{"--web.listen-address=" + addr, "--web.config.file=" + file, "--log.level=warn", "--no-collector.nvml", "--demo"})
	}()
	defer func() { cancel(); <-done }()
	base := "http://" + addr
	var resp *http.Response
	for i := 0; i < 100; i++ {
		if resp, err = http.Get(base + "/metrics"); err == nil {
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusUnauthorized {
		t.Fatalf("GET /metrics without credentials = %d, want 401", resp.StatusCode)
	}
	for _, path := range []string{"/metrics", "/"} {
		req, _ := http.NewRequest("GET", base+path, nil)
		req.SetBasicAuth("prom", "s3cret-pass")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 200 {
			t.Errorf("GET %s with credentials = %d", path, resp.StatusCode)
		}
		if strings.Contains(string(body), "s3cret-pass") || strings.Contains(string(body), string(hash)) {
			t.Errorf("%s shows the password or its hash", path)
		}
	}
}

// TestDemoProbe: /probe with the demo module against the demo simulator
// succeeds and shows up on the landing page.
func TestDemoProbe(t *testing.T) {
	base := startExporter(t, "--demo")
	resp, err := http.Get(base + "/")
	if err != nil {
		t.Fatal(err)
	}
	page, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	m := regexp.MustCompile(`<code>(http://127\.0\.0\.1:\d+)</code>`).FindSubmatch(page)
	if m == nil {
		t.Fatalf("landing page does not show the demo target's URL:\n%s", page)
	}
	mfs := scrape(t, base+"/probe?module=demo&target="+url.QueryEscape(string(m[1])))
	if v := mfs["probe_success"].GetMetric()[0].GetGauge().GetValue(); v != 1 {
		t.Fatalf("probe_success = %v", v)
	}
	// Every family has a short help: one sentence, the definition is in
	// docs/metrics.md.
	checkHelp(t, mfs)
	checkHelp(t, scrape(t, base+"/metrics"))
	resp, err = http.Get(base + "/")
	if err != nil {
		t.Fatal(err)
	}
	page, _ = io.ReadAll(resp.Body)
	resp.Body.Close()
	if !strings.Contains(string(page), "module=demo") && !strings.Contains(string(page), ">demo<") {
		t.Errorf("landing page does not list the probe")
	}
}

// maxHelp bounds a metric's help text: one short sentence.
const maxHelp = 150

// packagePrefix is a help's leading lower-case word and a dot glued to the
// next word, as "workload.Requests".
var packagePrefix = regexp.MustCompile(`^[a-z][a-z0-9_]*\.[A-Za-z]`)

func checkHelp(t *testing.T, mfs map[string]*dto.MetricFamily) {
	t.Helper()
	for name, mf := range mfs {
		if !strings.HasPrefix(name, "infer_") && !strings.HasPrefix(name, "probe_") || name == "infer_exporter_build_info" {
			continue // client_golang's build info is not ours
		}
		h := mf.GetHelp()
		if h == "" || len(h) > maxHelp {
			t.Errorf("%s: help of %d characters, want 1 to %d: %q", name, len(h), maxHelp, h)
		}
		// A help is a sentence for the operator, not a Go identifier: a
		// leading "workload." is a package's name pasted in.
		if m := packagePrefix.FindString(h); m != "" {
			t.Errorf("%s: help begins with a package name %q: %q", name, m, h)
		}
	}
}
