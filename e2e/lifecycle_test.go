package e2e

import (
	"context"
	"fmt"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"

	"github.com/infer-exporter/infer_exporter/internal/realstack"
	"github.com/infer-exporter/infer_exporter/internal/testenv"
)

// lifecycleConfig: one workload against a simulator that is not up yet,
// its engine metrics (and readiness) read every second.
const lifecycleConfig = `targets:
  - name: sim
    url: SIM
    flavor: openai-chat
    model: sim-model
    timeout: 10s
    metrics: {interval: 1s}
workloads:
  - name: chat
    target: sim
    arrival: {process: poisson, rate: 5, max_rate: 20}
    max_in_flight: 64
    prompt:
      input_tokens: {dist: fixed, mean: 128}
      output_tokens: {dist: fixed, mean: 16}
      seed: 1
    sampling: {ignore_eos: true}
    slo: {ttft: 2s, tpot: 500ms}
`

// loadDelay is the simulated model load of every start.
const loadDelay = 20 * time.Second

// TestEndToEndLifecycle is a sidecar's life beside its engine, with the real
// Prometheus and Alertmanager and the mixin's rules (the test's windows,
// e2eConfig). The exporter starts first; the simulator starts 20 s later
// and loads its model for 20 s (--sim.load-delay). Meanwhile no error alert
// fires, infer_probe_target_ready goes 0 -> 1 at the load's end, the TTFT
// series holds no observation from before it, and the prompts are
// calibrated by the server within 2 poll intervals of it. Then the
// simulator is killed, an outage after ready: InferProbeErrorBudgetBurn
// fires. Then it starts again, loading for 20 s; its calibration reruns
// (and, in unready mode, the target is not ready while it loads). In
// refuse mode (vLLM's: no listener until loaded) it is killed and started
// a second time. Through it all, no alert but the outage's fires.
func TestEndToEndLifecycle(t *testing.T) {
	if testenv.RaceEnabled {
		t.Skip("runs without the race detector, in `make test-e2e`")
	}
	testenv.Slow(t, "-short: the lifecycle test takes about three minutes")
	prometheus := realstack.Tool(t, realstack.PrometheusModfile, "prometheus")
	jsonnet := realstack.Tool(t, realstack.PrometheusModfile, "jsonnet")
	alertmanager := realstack.Tool(t, realstack.AlertmanagerModfile, "alertmanager")
	exporter := realstack.BuildExporter(t)
	rules := filepath.Join(t.TempDir(), "mixin")
	if out, err := realstack.Run(t, jsonnet, "-c", "-m", rules, "-S", "mixin/build.jsonnet", "--tla-code", "config="+e2eConfig); err != nil {
		t.Fatalf("jsonnet: %v\n%s", err, out)
	}
	for _, tc := range []struct {
		mode     string // --sim.load-mode
		restarts int
	}{
		{"refuse", 2},  // vLLM: nothing listens until the model is loaded
		{"unready", 1}, // llama.cpp: 503, /health included, while loading
	} {
		t.Run(tc.mode, func(t *testing.T) {
			t.Parallel()
			lifecycle(t, tools{prometheus, alertmanager, exporter}, rules, tc.mode, tc.restarts)
		})
	}
}

type tools struct{ prometheus, alertmanager, exporter string }

func lifecycle(t *testing.T, bin tools, rules, mode string, restarts int) {
	dir := t.TempDir()
	ctx, cancel := context.WithTimeout(context.Background(), 8*time.Minute)
	defer cancel()
	simAddr := realstack.FreeAddr(t)
	simURL := "http://" + simAddr
	expAddr := realstack.FreeAddr(t)
	cfgFile := filepath.Join(dir, "exporter.yml")
	must(t, os.WriteFile(cfgFile, []byte(strings.ReplaceAll(lifecycleConfig, "SIM", simURL)), 0o644))
	exp := realstack.Start(t, "exporter", "", bin.exporter, "--config.file="+cfgFile, "--web.listen-address="+expAddr, "--no-collector.nvml", "--log.level=info")
	must(t, exp.WaitHTTP(ctx, "http://"+expAddr+"/-/ready"))
	hook, api := startAlerting(t, ctx, bin, dir, rules, expAddr, simURL)
	metrics := func() map[string]*dto.MetricFamily { return scrapeExporter(t, ctx, "http://"+expAddr+"/metrics") }

	// Before the simulator: the target is not ready, nothing is sent.
	time.Sleep(20 * time.Second)
	m := metrics()
	if v := gaugeWith(m, "infer_probe_target_ready", nil); v != 0 {
		t.Errorf("target_ready = %v before the server exists", v)
	}
	startSim := func(name string) (*realstack.Process, time.Time) {
		p := realstack.Start(t, name, "", bin.exporter, "simulate", "--web.listen-address="+simAddr, "--log.level=warn",
			"--sim.load-delay="+loadDelay.String(), "--sim.load-mode="+mode)
		return p, time.Now().Add(loadDelay)
	}
	sim, readyAt := startSim("simulator")

	// The load: not ready, no TTFT observation, no failure, until ready.
	var lastBefore map[string]*dto.MetricFamily
	readySeen := waitUntil(t, ctx, loadDelay+15*time.Second, "target_ready 1 after the load", func() bool {
		m := metrics()
		if gaugeWith(m, "infer_probe_target_ready", nil) == 1 {
			return true
		}
		lastBefore = m
		return false
	})
	t.Logf("%s: ready seen %v after the load's end", mode, readySeen.Sub(readyAt).Round(10*time.Millisecond))
	if readySeen.Before(readyAt) {
		t.Errorf("target ready %v before the load ended", readyAt.Sub(readySeen))
	}
	if lastBefore == nil {
		t.Fatal("no scrape before ready")
	}
	if n := histCountOf(lastBefore, "infer_probe_time_to_first_token_seconds"); n != 0 {
		t.Errorf("%d TTFT observations before ready", n)
	}
	if v := gaugeWith(lastBefore, "infer_probe_requests_total", nil); v != 0 {
		t.Errorf("%v requests in an outcome before ready", v)
	}
	if v := gaugeWith(lastBefore, "infer_probe_dropped_requests_total", map[string]string{"reason": "target_not_ready"}); v < 50 {
		t.Errorf("%v arrivals skipped as target_not_ready over the 40 s before ready, want about 200", v)
	}
	calibrated := waitUntil(t, ctx, 10*time.Second, "prompts calibrated by the server", func() bool {
		return gaugeWith(metrics(), "infer_probe_prompt_info", map[string]string{"tokenizer": "server"}) == 1
	})
	t.Logf("%s: calibrated by the server %v after ready was seen", mode, calibrated.Sub(readySeen).Round(10*time.Millisecond))
	if d := calibrated.Sub(readySeen); d > 2*time.Second {
		t.Errorf("calibrated %v after ready, want within 2 poll intervals (2 s)", d)
	}
	// Prometheus saw the 0 -> 1.
	waitUntil(t, ctx, 30*time.Second, "Prometheus to hold target_ready 0 then 1", func() bool {
		lo, _ := api.value(ctx, `min_over_time(infer_probe_target_ready{target="sim"}[2m])`)
		hi, _ := api.value(ctx, `infer_probe_target_ready{target="sim"}`)
		return lo == 0 && hi == 1
	})
	waitUntil(t, ctx, 30*time.Second, "successes after ready", func() bool {
		return gaugeWith(metrics(), "infer_probe_requests_total", map[string]string{"outcome": "success"}) >= 20
	})
	if fired := hook.firing(); len(fired) > 0 {
		t.Errorf("alerts fired across the load and the first minute of serving: %v", fired)
	}

	for i := range restarts {
		// An outage after ready: the error budget burns.
		sim.Kill()
		killed := time.Now()
		if i == 0 {
			waitUntil(t, ctx, 90*time.Second, "InferProbeErrorBudgetBurn to fire after the kill", func() bool {
				return hook.find("InferProbeErrorBudgetBurn", "firing") != nil
			})
			t.Logf("%s: the outage's error-budget alert fired %v after the kill", mode, time.Since(killed).Round(time.Second))
		} else {
			// The first outage's alert is still firing (its 1m window has
			// not cleared): the outage shows in the error ratio instead.
			waitUntil(t, ctx, 60*time.Second, "the error ratio over 15s above 0.5 after the second kill", func() bool {
				v, err := api.value(ctx, `target_model_workload:infer_probe_requests:error_ratio_rate15s{workload="chat"}`)
				return err == nil && v > 0.5
			})
			t.Logf("%s: kill %d: the error ratio over 15s passed 0.5 %v after it", mode, i+1, time.Since(killed).Round(time.Second))
		}
		calibrations := strings.Count(readLog(t, exp), `reason="server restarted"`)
		sim, readyAt = startSim(fmt.Sprintf("simulator-%d", i+1))
		if mode == "unready" {
			// Answering 503 while it loads: not ready again, nothing sent.
			waitUntil(t, ctx, 10*time.Second, "not ready while the restart loads", func() bool {
				return gaugeWith(metrics(), "infer_probe_target_ready", nil) == 0
			})
		}
		waitUntil(t, ctx, loadDelay+30*time.Second, "the restart's calibration", func() bool {
			return strings.Count(readLog(t, exp), `reason="server restarted"`) > calibrations
		})
		okBefore := gaugeWith(metrics(), "infer_probe_requests_total", map[string]string{"outcome": "success"})
		waitUntil(t, ctx, 30*time.Second, "successes after the restart", func() bool {
			return gaugeWith(metrics(), "infer_probe_requests_total", map[string]string{"outcome": "success"}) >= okBefore+10
		})
		t.Logf("%s: restart %d serving and calibrated again %v after its load's end", mode, i+1, time.Since(readyAt).Round(time.Second))
	}
	for _, a := range hook.firing() {
		if a != "InferProbeErrorBudgetBurn" {
			t.Errorf("alert %s fired; only the outage's error-budget alert should", a)
		}
	}
	if v := gaugeWith(metrics(), "infer_probe_target_ready", nil); v != 1 {
		t.Errorf("target_ready = %v at the end", v)
	}
}

// startAlerting starts Alertmanager (to a webhook in the test) and
// Prometheus (scraping the exporter every second, the mixin's rules
// loaded).
func startAlerting(t *testing.T, ctx context.Context, bin tools, dir, rules, expAddr, simURL string) (*webhook, *promAPI) {
	hook := newWebhook(t)
	fixture := httptest.NewServer(gpuFixture(t))
	t.Cleanup(fixture.Close)
	amAddr := realstack.FreeAddr(t)
	amConfig := filepath.Join(dir, "alertmanager.yml")
	must(t, os.WriteFile(amConfig, []byte(fmt.Sprintf(`route:
  receiver: webhook
  group_by: [alertname, target, workload, long]
  group_wait: 1s
  group_interval: 1s
  repeat_interval: 1h
receivers:
  - name: webhook
    webhook_configs:
      - url: %s/hook
        send_resolved: true
`, hook.URL)), 0o644))
	am := realstack.Start(t, "alertmanager", "", bin.alertmanager,
		"--config.file="+amConfig, "--storage.path="+filepath.Join(dir, "am-data"),
		"--web.listen-address="+amAddr, "--cluster.listen-address=", "--log.level=warn")
	must(t, am.WaitHTTP(ctx, "http://"+amAddr+"/-/ready"))
	promAddr := realstack.FreeAddr(t)
	promConfig := filepath.Join(dir, "prometheus.yml")
	must(t, os.WriteFile(promConfig, prometheusConfig(t, rules, amAddr, expAddr, simURL, strings.TrimPrefix(fixture.URL, "http://")), 0o644))
	prom := realstack.Start(t, "prometheus", "", bin.prometheus,
		"--config.file="+promConfig, "--storage.tsdb.path="+filepath.Join(dir, "prom-data"),
		"--web.listen-address="+promAddr, "--log.level=warn",
		// The exemplars of the latency histograms (TestEndToEnd reads
		// them back through /api/v1/query_exemplars).
		"--enable-feature=exemplar-storage")
	api := &promAPI{base: "http://" + promAddr}
	must(t, prom.WaitHTTP(ctx, api.base+"/-/ready"))
	return hook, api
}

// waitUntil polls cond every 250 ms until it holds, and returns when.
func waitUntil(t *testing.T, ctx context.Context, limit time.Duration, what string, cond func() bool) time.Time {
	t.Helper()
	deadline := time.Now().Add(limit)
	for {
		if cond() {
			return time.Now()
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			t.Fatalf("%s: not within %v", what, limit)
		}
		time.Sleep(250 * time.Millisecond)
	}
}

func readLog(t *testing.T, p *realstack.Process) string {
	b, err := os.ReadFile(p.Log)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// gaugeWith sums the counters and gauges of the family whose labels
// include want.
func gaugeWith(mfs map[string]*dto.MetricFamily, name string, want map[string]string) float64 {
	var s float64
	for _, m := range mfs[name].GetMetric() {
		n := 0
		for _, l := range m.GetLabel() {
			if v, ok := want[l.GetName()]; ok && v == l.GetValue() {
				n++
			}
		}
		if n == len(want) {
			s += m.GetCounter().GetValue() + m.GetGauge().GetValue()
		}
	}
	return s
}

func histCountOf(mfs map[string]*dto.MetricFamily, name string) uint64 {
	var s uint64
	for _, m := range mfs[name].GetMetric() {
		s += m.GetHistogram().GetSampleCount()
	}
	return s
}

// firing lists the names of the alerts notified as firing.
func (h *webhook) firing() []string {
	h.mu.Lock()
	defer h.mu.Unlock()
	seen := map[string]bool{}
	var out []string
	for _, a := range h.alerts {
		if n := a.Labels["alertname"]; a.Status == "firing" && !seen[n] {
			seen[n] = true
			out = append(out, n)
		}
	}
	return out
}

func scrapeExporter(t *testing.T, ctx context.Context, url string) map[string]*dto.MetricFamily {
	t.Helper()
	m, err := scrape(ctx, url)
	if err != nil {
		t.Fatalf("scrape %s: %v", url, err)
	}
	return m
}
