package main

import (
	"bytes"
	"context"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/infer-exporter/infer_exporter/internal/realstack"
	"github.com/infer-exporter/infer_exporter/internal/simulator/simulatortest"
)

var updateScreenshots = flag.Bool("update-screenshots", false, "write the landing page's screenshots into docs/images/")

// browse loads url in headless chromium, offline but for loopback, and
// returns the DOM; with shot set it also writes a screenshot there.
func browse(t *testing.T, bin, url, shot string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	args := []string{"--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
		"--disable-background-networking", "--disable-component-update", "--disable-sync",
		"--force-device-scale-factor=1", "--hide-scrollbars", "--user-data-dir=" + t.TempDir(), "--window-size=1400,900"}
	var out, errb bytes.Buffer
	cmd := exec.CommandContext(ctx, bin, append(args, "--dump-dom", url)...)
	cmd.Stdout, cmd.Stderr = &out, &errb
	if err := cmd.Run(); err != nil {
		t.Fatalf("chromium --dump-dom %s: %v\n%s", url, err, errb.String())
	}
	if shot != "" {
		cmd := exec.CommandContext(ctx, bin, append(args, "--screenshot="+shot, url)...)
		if b, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("chromium --screenshot: %v\n%s", err, b)
		}
	}
	return out.String()
}

// TestLandingPageTellsTheTruth: in headless Chromium, the landing page of
// an exporter whose target is dead says the workload is failing, with its
// error ratio and last error; with the measurement degraded it says
// degraded; against a healthy simulator it says running, with its last
// minute's rates and TTFT. Before, all three read "running". The
// screenshots in docs/images/ are this test's (-update-screenshots).
func TestLandingPageTellsTheTruth(t *testing.T) {
	bin := realstack.Chromium(t)
	simURL, _ := simulatortest.StartTest(t, simulatortest.InstantConfig())
	dead := "http://" + freeAddr(t) // nothing listens there
	for _, tc := range []struct {
		name, url string
		flags     []string
		want      *regexp.Regexp
	}{
		{"failing", dead, nil, regexp.MustCompile(`class="bad"><b>failing: (\d+) of (\d+) requests failed in the last minute \(100% errors\)`)},
		{"degraded", simURL, []string{"--probe.degraded-lag=1ns"}, regexp.MustCompile(`class="warn"><b>degraded: the client is behind its schedule \(schedule lag p99 [0-9.]+ ms, goroutine scheduling latency p99 [0-9.]+ ms over --probe.degraded-window, against a bound of 0\.0 ms, --probe.degraded-lag\); its latencies are not to be trusted: lower the workload(&#39;|')s rate \(arrival\.rate\), run fewer workloads on this exporter or spread them over several, or give it more CPU \(GOMAXPROCS, cores`)},
		// A generous degraded-lag: the two cases before, and chromium,
		// load this machine, and the scheduling latency of a loaded
		// process is what the degraded flag is for.
		{"running", simURL, []string{"--probe.degraded-lag=5s"}, regexp.MustCompile(`class="ok"><b>running</b></td><td>[0-9.]+ / [0-9.]+</td><td>100\.0% of \d+</td><td>(no SLO|[0-9.]+% of \d+)</td><td>[0-9.µm]+s / [0-9.µm]+s</td><td>[0-9.µm]+s / [0-9.µm]+s</td><td>none</td>`)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			cfg := filepath.Join(dir, "c.yml")
			if err := os.WriteFile(cfg, []byte(fmt.Sprintf(`targets:
  - {name: t, url: %q, model: sim-model, timeout: 5s, metrics: {engine: none}}
workloads:
  - name: w
    target: t
    arrival: {process: constant, rate: 20}
    prompt:
      input_tokens: {dist: fixed, mean: 16}
      output_tokens: {dist: fixed, mean: 4}
`, tc.url)), 0o600); err != nil {
				t.Fatal(err)
			}
			base := startExporter(t, append([]string{"--config.file=" + cfg}, tc.flags...)...)
			shot := ""
			if *updateScreenshots {
				shot, _ = filepath.Abs(filepath.Join("..", "..", "docs", "images", "landing-"+tc.name+".png"))
			}
			var dom string
			for deadline := time.Now().Add(20 * time.Second); time.Now().Before(deadline); time.Sleep(300 * time.Millisecond) {
				dom = browse(t, bin, base+"/", "")
				if tc.want.MatchString(dom) {
					break
				}
			}
			if !tc.want.MatchString(dom) {
				i := strings.Index(dom, "<h2>Workloads</h2>")
				t.Fatalf("the page does not say %s:\n%s", tc.want, dom[max(i, 0):])
			}
			if tc.name == "failing" && !strings.Contains(dom, "disconnected") {
				t.Errorf("the failing workload's last error does not name its outcome")
			}
			if shot != "" {
				browse(t, bin, base+"/", shot)
			}
		})
	}
}
