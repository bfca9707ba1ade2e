// Package e2e runs the users' loop for real: the simulator serves, the
// exporter probes it, a real Prometheus (the pinned version, native
// histograms on) scrapes the exporter with the mixin's rules loaded, and a
// real Alertmanager delivers the alerts to a webhook inside the test.
package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	yaml "go.yaml.in/yaml/v3"

	"github.com/infer-exporter/infer_exporter/internal/realstack"
	"github.com/infer-exporter/infer_exporter/internal/testenv"
)

// e2eConfig is the mixin's _config for the test: windows of seconds instead
// of minutes and days, so that the loop closes within minutes. The
// regression threshold is 2 (the default is 1.05): a p99 over 15 s holds
// about 75 requests and is nearly their maximum, which CPU noise on a
// shared 2-core machine moves by tens of percent; the 5% threshold itself
// is tested exactly by promtool (mixin/tests/regression.yaml). The slowdown
// below multiplies every engine step by 4, so the p99 rises about 4 times
// (more where requests queue).
// GPU series come from the fixture job (see gpuFixture).
const e2eConfig = `{
  rateWindow: '15s',
  accuracyWindow: '1m',
  gpuSelector: 'job="gpu-fixture"',
  regression: { offset: '75s', 'for': '5s', minRequestsInWindow: 20, threshold: 2 },
  slo: { burnRates: [{ long: '1m', short: '15s', factor: 14.4, severity: 'critical', 'for': '5s' }] },
}`

const (
	slowdown = 4
	// The simulator's model, and the exporter's names for it.
	model_   = "sim-model"
	target   = "sim"
	workload = "chat"
)

// exporterConfig probes the simulator at SIM: a Poisson workload with a
// known-answer check every 2 s, the engine's metrics read every second, and
// the module chat_smoke of deploy/prometheus/probe-scrape-config.yml.
const exporterConfig = `targets:
  - name: sim
    url: SIM
    flavor: openai-chat
    model: sim-model
    timeout: 30s
    metrics: {interval: 1s}
    quality: {interval: 30s}
workloads:
  - name: chat
    target: sim
    arrival: {process: poisson, rate: 5, max_rate: 20}
    max_in_flight: 64
    prompt:
      input_tokens: {dist: fixed, mean: 256}
      output_tokens: {dist: fixed, mean: 32}
      seed: 1
    sampling: {ignore_eos: true}
    slo: {ttft: 500ms, tpot: 100ms}
    checks:
      - {prompt: "Say a word.", expect: "[a-z]+", max_tokens: 8, interval: 2s}
  # Answers checked for validity, so that the answer-check rules have data;
  # at 0.25 requests/s, below the regression alerts' floor of 1/3 (a
  # regression of theirs would be a second InferProbeTTFTRegression).
  - name: tools
    target: sim
    arrival: {process: constant, rate: 0.25}
    prompt:
      input_tokens: {dist: fixed, mean: 32}
      output_tokens: {dist: fixed, mean: 8}
    tools:
      - name: get_weather
        parameters: {type: object, properties: {city: {type: string}}}
    tool_choice: required
  - name: json
    target: sim
    arrival: {process: constant, rate: 0.25}
    prompt:
      input_tokens: {dist: fixed, mean: 32}
      output_tokens: {dist: fixed, mean: 8}
    response_format: {type: json_object}
  # A declared prefix-cache hit rate, so that the three views and the
  # eviction flag have data (at 0.25 requests/s, below the regression
  # alerts' floor, as above).
  - name: cached
    target: sim
    arrival: {process: constant, rate: 0.25}
    prompt:
      input_tokens: {dist: fixed, mean: 256}
      output_tokens: {dist: fixed, mean: 8}
      cache_hit_rate: 0.5
      prefix_pool: 2
modules:
  chat_smoke:
    target: sim
    requests: 2
    prompt:
      input_tokens: {dist: fixed, mean: 64}
      output_tokens: {dist: fixed, mean: 8}
    sampling: {ignore_eos: true}
    known_answers:
      - {prompt: "Say a word.", expect: "[a-z]+", max_tokens: 8}
probe:
  max_requests_per_second: 20
`

func TestEndToEnd(t *testing.T) {
	if testenv.RaceEnabled {
		t.Skip("runs without the race detector, alone, in `make test-e2e`: its latencies must be the simulator's, not a loaded CPU's")
	}
	testenv.Slow(t, "-short: the end-to-end test takes about three minutes")
	prometheus := realstack.Tool(t, realstack.PrometheusModfile, "prometheus")
	jsonnet := realstack.Tool(t, realstack.PrometheusModfile, "jsonnet")
	alertmanager := realstack.Tool(t, realstack.AlertmanagerModfile, "alertmanager")
	exporter := realstack.BuildExporter(t)
	dir := t.TempDir()
	ctx, cancel := context.WithTimeout(context.Background(), 8*time.Minute)
	defer cancel()

	// The mixin, rendered with the test's windows.
	rules := filepath.Join(dir, "mixin")
	if out, err := realstack.Run(t, jsonnet, "-c", "-m", rules, "-S", "mixin/build.jsonnet", "--tla-code", "config="+e2eConfig); err != nil {
		t.Fatalf("jsonnet: %v\n%s", err, out)
	}

	// The simulator and the exporter.
	simAddr := realstack.FreeAddr(t)
	sim := realstack.Start(t, "simulator", "", exporter, "simulate", "--web.listen-address="+simAddr, "--log.level=warn")
	simURL := "http://" + simAddr
	must(t, sim.WaitHTTP(ctx, simURL+"/health"))
	expAddr := realstack.FreeAddr(t)
	cfgFile := filepath.Join(dir, "exporter.yml")
	must(t, os.WriteFile(cfgFile, []byte(strings.ReplaceAll(exporterConfig, "SIM", simURL)), 0o644))
	exp := realstack.Start(t, "exporter", "", exporter, "--config.file="+cfgFile, "--web.listen-address="+expAddr, "--no-collector.nvml", "--log.level=info")
	must(t, exp.WaitHTTP(ctx, "http://"+expAddr+"/-/ready"))

	// The webhook receiver, the GPU fixture, Alertmanager and Prometheus.
	hook, api := startAlerting(t, ctx, tools{prometheus, alertmanager, exporter}, dir, rules, expAddr, simURL)
	start := time.Now()

	// Every recording rule returns data.
	records := recordNames(t, filepath.Join(rules, "rules.yaml"))
	waitFor(t, ctx, 2*time.Minute, "every recording rule to return data", func() (bool, string) {
		var missing []string
		for _, r := range records {
			if n, err := api.count(ctx, r); err != nil || n == 0 {
				missing = append(missing, r)
			}
		}
		return len(missing) == 0, fmt.Sprintf("no data yet: %v", missing)
	})
	t.Logf("all %d recording rules return data after %s", len(records), time.Since(start).Round(time.Second))
	for _, q := range []string{
		"target_model_workload:infer_ranking_score:weighted_sum",
		"target_model_workload:infer_ranking_accuracy:ratio",
		"target_model:probe_known_answer_success:avg_over_time1m",
		"target_model:infer_gpu_energy_joules_per_generation_token:ratio_rate15s",
		"target_model:infer_gpu_cost_usd_per_generation_token:ratio_rate15s",
		"target_model:infer_gpu_serving_memory_used_bytes:sum",
		"target_model:infer_server_prefix_cache_hits:ratio_rate15s",
		"target_model_workload:infer_probe_time_to_first_token_seconds:coefficient_of_variation_rate15s",
	} {
		v, err := api.value(ctx, q)
		t.Logf("%s = %.4g %v", q, v, errOrEmpty(err))
	}
	checkDashboards(t, ctx, api, filepath.Join(rules, "dashboards"))
	// The exemplars reach Prometheus's exemplar storage as the exporter
	// exposes them (a trace id of 32 hex digits on the TTFT and E2E
	// buckets), from a slow bucket to its trace in Grafana.
	for _, h := range []string{"infer_probe_time_to_first_token_seconds_bucket", "infer_probe_request_duration_seconds_bucket"} {
		ids, err := api.exemplars(ctx, h+`{job="infer-exporter"}`, 5*time.Minute)
		good := 0
		for _, id := range ids {
			if len(id) == 32 && strings.Trim(id, "0123456789abcdef") == "" {
				good++
			}
		}
		if err != nil || good == 0 {
			t.Errorf("Prometheus stored no exemplar with a trace id on %s (%d exemplars, %v)", h, len(ids), err)
		} else {
			t.Logf("%s: %d exemplars stored, %d with a trace id", h, len(ids), good)
		}
	}
	ttftP99 := fmt.Sprintf(`target_model_workload_quantile:infer_probe_time_to_first_token_seconds:histogram_quantile_rate15s{quantile="0.99", target=%q, workload=%q}`, target, workload)
	if v, err := api.value(ctx, `histogram_count(sum(rate(infer_probe_time_to_first_token_seconds{job="infer-exporter"}[15s])))`); err != nil || !(v > 0) {
		t.Errorf("Prometheus holds no native histogram of TTFT (%v, %v): scrape_native_histograms did not take", v, err)
	}

	// The regression needs a baseline: the same window 75 s earlier.
	waitFor(t, ctx, 2*time.Minute, "the 75s-old baseline", func() (bool, string) {
		n, err := api.count(ctx, ttftP99+" offset 75s")
		return err == nil && n > 0, fmt.Sprint(err)
	})
	before, _ := api.value(ctx, ttftP99)
	ratio, _ := api.value(ctx, ttftP99+" / "+ttftP99+" offset 75s")
	t.Logf("p99 TTFT %.3fs, %.2f of its baseline", before, ratio)
	if a := hook.find("InferProbeTTFTRegression", "firing"); a != nil {
		t.Fatalf("the regression alert fired before any slowdown: %+v", a)
	}

	// Slow the simulator: the p99 regression alert reaches the webhook.
	setSlowdown(t, ctx, simURL, slowdown)
	slowed := time.Now()
	waitFor(t, ctx, 90*time.Second, "InferProbeTTFTRegression to fire at the webhook", func() (bool, string) {
		return hook.find("InferProbeTTFTRegression", "firing") != nil, hook.summary()
	})
	after, _ := api.value(ctx, ttftP99)
	a := hook.find("InferProbeTTFTRegression", "firing")
	t.Logf("fired %s after the slowdown: p99 TTFT %.3fs; %s", time.Since(slowed).Round(time.Second), after, a.Annotations["description"])
	if a.Labels["severity"] != "warning" || a.Labels["target"] != target || a.Labels["workload"] != workload || a.Annotations["summary"] == "" {
		t.Errorf("alert = %+v", a)
	}

	// Restore it: the alert resolves.
	setSlowdown(t, ctx, simURL, 1)
	restored := time.Now()
	waitFor(t, ctx, 90*time.Second, "InferProbeTTFTRegression to resolve at the webhook", func() (bool, string) {
		return hook.find("InferProbeTTFTRegression", "resolved") != nil, hook.summary()
	})
	t.Logf("resolved %s after the restore; whole loop %s", time.Since(restored).Round(time.Second), time.Since(start).Round(time.Second))
	// Slower, not failing: no request failed, so the error budget never
	// burned.
	if a := hook.find("InferProbeErrorBudgetBurn", "firing"); a != nil {
		t.Errorf("the error budget burned although no request failed: %+v", a)
	}

	checkSLOFollowsTheWorkload(t, ctx, api, hook, cfgFile, simURL, expAddr)
}

// checkSLOFollowsTheWorkload: the TTFT SLO alert evaluates the threshold of
// the workload's configuration, not a copy in the mixin. The mixin is
// rendered once, with its default ttftThreshold (0.5 s), which every request
// here meets; the workload's slo.ttft is then lowered to 1 ms by a reload of
// the exporter alone. Prometheus must read the new threshold from /metrics,
// the recorded slow ratio must rise to every request, and
// InferProbeTTFTBudgetBurn must reach the webhook: nothing in the mixin
// changed.
func checkSLOFollowsTheWorkload(t *testing.T, ctx context.Context, api *promAPI, hook *webhook, cfgFile, simURL, expAddr string) {
	t.Helper()
	sel := fmt.Sprintf(`target=%q, workload=%q`, target, workload)
	slow := fmt.Sprintf(`target_model_workload:infer_probe_time_to_first_token_seconds:slow_ratio_rate15s{%s}`, sel)
	// The slowdown above may have sent some TTFTs over 500ms: start from a
	// window where none is, and the alert is not firing.
	burning := `ALERTS{alertname="InferProbeTTFTBudgetBurn", alertstate="firing"}`
	waitFor(t, ctx, 90*time.Second, "no TTFT over 500ms in the window, and no TTFT burn", func() (bool, string) {
		v, err := api.value(ctx, slow)
		n, err2 := api.count(ctx, burning)
		return err == nil && err2 == nil && v == 0 && n == 0, fmt.Sprintf("%s = %v, %d firing %v %v", slow, v, n, errOrEmpty(err), errOrEmpty(err2))
	})
	cfg := strings.ReplaceAll(exporterConfig, "SIM", simURL)
	if !strings.Contains(cfg, "slo: {ttft: 500ms,") {
		t.Fatal("the test's configuration no longer sets slo.ttft: 500ms")
	}
	must(t, os.WriteFile(cfgFile, []byte(strings.Replace(cfg, "slo: {ttft: 500ms,", "slo: {ttft: 1ms,", 1)), 0o644))
	resp, err := http.Post("http://"+expAddr+"/-/reload", "", nil)
	must(t, err)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("reload: %s", resp.Status)
	}
	changed := time.Now()
	threshold := fmt.Sprintf(`infer_probe_slo_threshold_seconds{job="infer-exporter", %s, slo="ttft"}`, sel)
	waitFor(t, ctx, 30*time.Second, "Prometheus to hold the new threshold", func() (bool, string) {
		v, err := api.value(ctx, threshold)
		return err == nil && v == 0.001, fmt.Sprintf("%s = %v %v", threshold, v, errOrEmpty(err))
	})
	waitFor(t, ctx, 90*time.Second, "InferProbeTTFTBudgetBurn to fire at the webhook", func() (bool, string) {
		return hook.findAfter("InferProbeTTFTBudgetBurn", "firing", changed) != nil, hook.summary()
	})
	v, err := api.value(ctx, slow)
	t.Logf("slo.ttft 500ms -> 1ms by reload: InferProbeTTFTBudgetBurn fired %s later, slow ratio %.3f %s",
		time.Since(changed).Round(time.Second), v, errOrEmpty(err))
	if err != nil || v < 0.5 {
		t.Errorf("%s = %v (%v) after the threshold fell to 1ms: want most requests slow", slow, v, err)
	}
}

func errOrEmpty(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// waitFor polls cond every second until it holds, failing after limit.
func waitFor(t *testing.T, ctx context.Context, limit time.Duration, what string, cond func() (bool, string)) {
	t.Helper()
	deadline := time.Now().Add(limit)
	for {
		ok, detail := cond()
		if ok {
			return
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			t.Fatalf("waited %s for %s: %s", limit, what, detail)
		}
		time.Sleep(time.Second)
	}
}

// prometheusConfig scrapes the exporter every second with native histograms
// (and the classic buckets beside them, which the TTFT SLO counts), the GPU
// fixture as the exporter's instance, and /probe with the scrape
// configuration of deploy/prometheus/probe-scrape-config.yml, pointed at the
// test's simulator and exporter and labelled with the target and model it
// probes.
func prometheusConfig(t *testing.T, rules, amAddr, expAddr, simURL, fixtureAddr string) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(realstack.RepoRoot(t), "deploy/prometheus/probe-scrape-config.yml"))
	if err != nil {
		t.Fatal(err)
	}
	var probeCfg struct {
		ScrapeConfigs []map[string]any `yaml:"scrape_configs"`
	}
	if err := yaml.Unmarshal(b, &probeCfg); err != nil || len(probeCfg.ScrapeConfigs) != 1 {
		t.Fatalf("deploy/prometheus/probe-scrape-config.yml: %v (%d scrape configs)", err, len(probeCfg.ScrapeConfigs))
	}
	probe := probeCfg.ScrapeConfigs[0]
	probe["scrape_interval"], probe["scrape_timeout"] = "5s", "4s"
	probe["static_configs"] = []any{map[string]any{
		"targets": []string{simURL},
		"labels":  map[string]string{"target": target, "model": model_},
	}}
	relabels, _ := probe["relabel_configs"].([]any)
	found := false
	for _, r := range relabels {
		if m, ok := r.(map[string]any); ok && m["target_label"] == "__address__" {
			m["replacement"] = expAddr
			found = true
		}
	}
	if !found {
		t.Fatal("probe-scrape-config.yml no longer sends the scrape to the exporter through __address__")
	}
	cfg := map[string]any{
		"global":     map[string]any{"scrape_interval": "1s", "evaluation_interval": "1s"},
		"rule_files": []string{filepath.Join(rules, "rules.yaml"), filepath.Join(rules, "alerts.yaml")},
		"alerting": map[string]any{"alertmanagers": []any{map[string]any{
			"static_configs": []any{map[string]any{"targets": []string{amAddr}}},
		}}},
		"scrape_configs": []any{
			map[string]any{
				"job_name":                         "infer-exporter",
				"scrape_native_histograms":         true,
				"always_scrape_classic_histograms": true,
				"static_configs":                   []any{map[string]any{"targets": []string{expAddr}}},
			},
			map[string]any{
				"job_name":       "gpu-fixture",
				"static_configs": []any{map[string]any{"targets": []string{fixtureAddr}}},
				"relabel_configs": []any{map[string]any{
					"target_label": "instance", "replacement": expAddr,
				}},
			},
			probe,
		},
	}
	out, err := yaml.Marshal(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// gpuFixture serves the infer_gpu_* series of the page captured from a real
// H200 (collector/testdata/h200/metrics_under_load.prom), because this
// machine has no GPU. The captured energy counter stands still in a file, so
// it is advanced at each GPU's captured power draw: energy = captured +
// watts × seconds since the fixture started. Prometheus scrapes it as the
// exporter's instance, as if the exporter's NVML collector exposed it.
func gpuFixture(t *testing.T) http.Handler {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(realstack.RepoRoot(t), "collector/testdata/h200/metrics_under_load.prom"))
	if err != nil {
		t.Fatal(err)
	}
	parser := expfmt.NewTextParser(model.UTF8Validation)
	mfs, err := parser.TextToMetricFamilies(bytes.NewReader(b))
	if err != nil {
		t.Fatal(err)
	}
	watts := map[string]float64{}
	for _, m := range mfs["infer_gpu_power_watts"].GetMetric() {
		watts[gpuLabel(m)] = m.GetGauge().GetValue()
	}
	if len(watts) == 0 || mfs["infer_gpu_energy_joules_total"] == nil {
		t.Fatal("the H200 fixture lacks power or energy")
	}
	start := time.Now()
	var mu sync.Mutex
	return http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		mu.Lock()
		defer mu.Unlock()
		elapsed := time.Since(start).Seconds()
		w.Header().Set("Content-Type", string(expfmt.NewFormat(expfmt.TypeTextPlain)))
		for name, mf := range mfs {
			if !strings.HasPrefix(name, "infer_gpu_") {
				continue
			}
			if name == "infer_gpu_energy_joules_total" {
				mf = cloneEnergy(mf, watts, elapsed)
			}
			if _, err := expfmt.MetricFamilyToText(w, mf); err != nil {
				return
			}
		}
	})
}

func gpuLabel(m *dto.Metric) string {
	for _, l := range m.GetLabel() {
		if l.GetName() == "gpu" {
			return l.GetValue()
		}
	}
	return ""
}

func cloneEnergy(mf *dto.MetricFamily, watts map[string]float64, elapsed float64) *dto.MetricFamily {
	out := &dto.MetricFamily{Name: mf.Name, Help: mf.Help, Type: mf.Type}
	for _, m := range mf.GetMetric() {
		v := m.GetCounter().GetValue() + watts[gpuLabel(m)]*elapsed
		out.Metric = append(out.Metric, &dto.Metric{Label: m.Label, Counter: &dto.Counter{Value: &v}})
	}
	return out
}

func recordNames(t *testing.T, path string) []string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var f struct {
		Groups []struct {
			Rules []struct {
				Record string `yaml:"record"`
			} `yaml:"rules"`
		} `yaml:"groups"`
	}
	if err := yaml.Unmarshal(b, &f); err != nil {
		t.Fatal(err)
	}
	seen := map[string]bool{}
	var names []string
	for _, g := range f.Groups {
		for _, r := range g.Rules {
			if !seen[r.Record] {
				seen[r.Record] = true
				names = append(names, r.Record)
			}
		}
	}
	if len(names) < 20 {
		t.Fatalf("only %d recording rules in %s", len(names), path)
	}
	return names
}

// checkDashboards runs every panel query of the rendered dashboards against
// the running Prometheus, with the variables set to match everything: each
// must be valid PromQL and return data, except where this stack has none to
// give (named below with the reason).
func checkDashboards(t *testing.T, ctx context.Context, api *promAPI, dir string) {
	t.Helper()
	noData := map[string]string{
		"XID errors": "the H200 page holds no XID event",
		// Rows whose events this stack does not make, each checked
		// elsewhere against a real source.
		"Perplexity score failures": "the simulator's log-probabilities never fail a score (probe/quality's tests make every failure)",
		"Cold start, per start":     "the simulator serves before the exporter starts: no start to see (probe/coldstart's live test restarts servers)",
	}
	// The bench's live series exist while a bench runs with
	// --web.listen-address (TestLiveMetricsWhileRunning); this stack runs
	// none, so the Fleet dashboard's bench row has no data here.
	benchOnly := func(expr string) bool { return strings.Contains(expr, `job="infer-bench"`) }
	// A baseline a day old cannot exist in a stack minutes old; the same
	// query without the offset is checked.
	dayOld := func(expr string) bool { return strings.Contains(expr, "offset 1d") }
	// The bench history dashboard reads bench reports backfilled as
	// infer_bench_* series (bench export, then promtool's
	// create-blocks-from openmetrics); this stack backfills none.
	// TestExportBackfill backfills an export with the pinned promtool
	// and reads it back.
	backfilled := func(expr string) bool { return strings.Contains(expr, "infer_bench_") }
	files, _ := filepath.Glob(filepath.Join(dir, "*.json"))
	if len(files) == 0 {
		t.Fatal("no rendered dashboards")
	}
	vars := strings.NewReplacer("$__rate_interval", "15s", "$cluster", ".*", "$target", ".*", "$model", ".*", "$workload", ".*", "$instance", ".*", "$gpu", ".*", "$engine", ".*")
	queries := 0
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		var d struct {
			Panels []struct {
				Title   string `json:"title"`
				Targets []struct {
					Expr string `json:"expr"`
				} `json:"targets"`
			} `json:"panels"`
		}
		if err := json.Unmarshal(b, &d); err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		for _, p := range d.Panels {
			for _, q := range p.Targets {
				queries++
				n, err := api.count(ctx, vars.Replace(q.Expr))
				switch {
				case err != nil:
					t.Errorf("%s, panel %q: %v", filepath.Base(f), p.Title, err)
				case n == 0 && noData[p.Title] == "" && !benchOnly(q.Expr) && !dayOld(q.Expr) && !backfilled(q.Expr):
					t.Errorf("%s, panel %q: no data for %s", filepath.Base(f), p.Title, q.Expr)
				}
			}
		}
	}
	t.Logf("%d dashboard queries ran on the live Prometheus", queries)
}

// setSlowdown replaces the simulator's faults through /admin/faults.
func setSlowdown(t *testing.T, ctx context.Context, simURL string, factor float64) {
	t.Helper()
	body := fmt.Sprintf(`{"slowdown": %g}`, factor)
	req, _ := http.NewRequestWithContext(ctx, http.MethodPut, simURL+"/admin/faults", strings.NewReader(body))
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(resp.Body)
		t.Fatalf("PUT /admin/faults %s: %d %s", body, resp.StatusCode, b)
	}
}

// promAPI queries Prometheus's HTTP API.
type promAPI struct{ base string }

type vectorSample struct {
	Metric map[string]string `json:"metric"`
	Value  [2]any            `json:"value"`
}

// get asks Prometheus's HTTP API for path (with its query) and decodes the
// answer's data into data.
func (p *promAPI) get(ctx context.Context, path string, data any) error {
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, p.base+path, nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	var r struct {
		Status string          `json:"status"`
		Error  string          `json:"error"`
		Data   json.RawMessage `json:"data"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&r); err != nil {
		return err
	}
	if r.Status != "success" {
		return fmt.Errorf("%s: %s", path, r.Error)
	}
	return json.Unmarshal(r.Data, data)
}

func (p *promAPI) query(ctx context.Context, q string) ([]vectorSample, error) {
	var data struct {
		Result []vectorSample `json:"result"`
	}
	err := p.get(ctx, "/api/v1/query?query="+url.QueryEscape(q), &data)
	return data.Result, err
}

// exemplars are the trace ids of the exemplars Prometheus stored for the
// series of q over the last span.
func (p *promAPI) exemplars(ctx context.Context, q string, span time.Duration) ([]string, error) {
	now := time.Now()
	var data []struct {
		Exemplars []struct {
			Labels map[string]string `json:"labels"`
		} `json:"exemplars"`
	}
	if err := p.get(ctx, fmt.Sprintf("/api/v1/query_exemplars?query=%s&start=%d&end=%d", url.QueryEscape(q), now.Add(-span).Unix(), now.Unix()), &data); err != nil {
		return nil, err
	}
	var ids []string
	for _, s := range data {
		for _, e := range s.Exemplars {
			ids = append(ids, e.Labels["trace_id"])
		}
	}
	return ids, nil
}

func (p *promAPI) count(ctx context.Context, q string) (int, error) {
	res, err := p.query(ctx, q)
	return len(res), err
}

// value is the value of the first sample of q, NaN when there is none.
func (p *promAPI) value(ctx context.Context, q string) (float64, error) {
	res, err := p.query(ctx, q)
	if err != nil || len(res) == 0 {
		return math.NaN(), err
	}
	s, _ := res[0].Value[1].(string)
	var v float64
	_, err = fmt.Sscan(s, &v)
	return v, err
}

// webhook records Alertmanager's notifications.
type webhook struct {
	URL    string
	mu     sync.Mutex
	alerts []hookAlert
}

type hookAlert struct {
	Status      string            `json:"status"`
	StartsAt    time.Time         `json:"startsAt"`
	Labels      map[string]string `json:"labels"`
	Annotations map[string]string `json:"annotations"`
}

func newWebhook(t *testing.T) *webhook {
	h := &webhook{}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var msg struct {
			Alerts []hookAlert `json:"alerts"`
		}
		if err := json.NewDecoder(r.Body).Decode(&msg); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		h.mu.Lock()
		h.alerts = append(h.alerts, msg.Alerts...)
		h.mu.Unlock()
	}))
	t.Cleanup(srv.Close)
	h.URL = srv.URL
	return h
}

// findAfter returns the first notified alert with that name and status
// that started after t.
func (h *webhook) findAfter(name, status string, t time.Time) *hookAlert {
	h.mu.Lock()
	defer h.mu.Unlock()
	for i := range h.alerts {
		if h.alerts[i].Labels["alertname"] == name && h.alerts[i].Status == status && h.alerts[i].StartsAt.After(t) {
			a := h.alerts[i]
			return &a
		}
	}
	return nil
}

// find returns the first notified alert with that name and status.
func (h *webhook) find(name, status string) *hookAlert {
	h.mu.Lock()
	defer h.mu.Unlock()
	for i := range h.alerts {
		if h.alerts[i].Labels["alertname"] == name && h.alerts[i].Status == status {
			a := h.alerts[i]
			return &a
		}
	}
	return nil
}

func (h *webhook) summary() string {
	h.mu.Lock()
	defer h.mu.Unlock()
	var s []string
	for _, a := range h.alerts {
		s = append(s, a.Labels["alertname"]+"="+a.Status)
	}
	return fmt.Sprintf("notifications so far: %v", s)
}
