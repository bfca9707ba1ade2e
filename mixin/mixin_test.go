// Tests of the monitoring mixin: the committed outputs are what the jsonnet
// renders, promtool accepts the rules and its unit tests pass and cover every
// alert, the dashboards pass lint checks, and every query reads metrics that
// the exporter exposes or that a rule records.
package mixin_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	yaml "go.yaml.in/yaml/v3"

	"github.com/infer-exporter/infer_exporter/internal/realstack"
)

// ruleFile is a Prometheus rule file.
type ruleFile struct {
	Groups []struct {
		Name  string `yaml:"name"`
		Rules []rule `yaml:"rules"`
	} `yaml:"groups"`
}

type rule struct {
	Record      string            `yaml:"record"`
	Alert       string            `yaml:"alert"`
	Expr        string            `yaml:"expr"`
	For         string            `yaml:"for"`
	Labels      map[string]string `yaml:"labels"`
	Annotations map[string]string `yaml:"annotations"`
}

func loadRules(t *testing.T, path string) []rule {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var f ruleFile
	if err := yaml.Unmarshal(b, &f); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	var out []rule
	for _, g := range f.Groups {
		out = append(out, g.Rules...)
	}
	return out
}

func repoPath(t *testing.T, rel string) string {
	return filepath.Join(realstack.RepoRoot(t), rel)
}

// TestGeneratedUpToDate renders the mixin and compares every file with the
// committed one.
func TestGeneratedUpToDate(t *testing.T) {
	t.Parallel() // a child process of its own: runs beside the others
	jsonnet := realstack.Tool(t, realstack.PrometheusModfile, "jsonnet")
	dir := t.TempDir()
	if out, err := realstack.Run(t, jsonnet, "-c", "-m", dir, "-S", "mixin/build.jsonnet"); err != nil {
		t.Fatalf("jsonnet: %v\n%s", err, out)
	}
	committed := repoPath(t, "mixin/generated")
	want := listFiles(t, dir)
	got := listFiles(t, committed)
	if !slices.Equal(want, got) {
		t.Errorf("stale, run make mixin: mixin/generated holds %v, the mixin renders %v", got, want)
	}
	for _, f := range want {
		a, _ := os.ReadFile(filepath.Join(dir, f))
		b, _ := os.ReadFile(filepath.Join(committed, f))
		if !bytes.Equal(a, b) {
			t.Errorf("stale, run make mixin: mixin/generated/%s differs from what the mixin renders", f)
		}
	}

	out, err := exec.Command(jsonnet, "-S", repoPath(t, "mixin/prometheusrule.jsonnet")).Output()
	if err != nil {
		t.Fatalf("jsonnet prometheusrule: %v", err)
	}
	b, err := os.ReadFile(repoPath(t, "deploy/kubernetes/prometheusrule.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(out, b) {
		t.Errorf("stale, run make mixin: deploy/kubernetes/prometheusrule.yaml differs from what the mixin renders")
	}
}

func listFiles(t *testing.T, dir string) []string {
	t.Helper()
	var files []string
	err := filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		rel, _ := filepath.Rel(dir, p)
		files = append(files, rel)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	sort.Strings(files)
	return files
}

// TestPromtool runs promtool's checks and the unit tests of tests/.
func TestPromtool(t *testing.T) {
	t.Parallel() // a child process of its own: runs beside the others
	promtool := realstack.Tool(t, realstack.PrometheusModfile, "promtool")
	if out, err := realstack.Run(t, promtool, "check", "rules", "mixin/generated/rules.yaml", "mixin/generated/alerts.yaml"); err != nil {
		t.Fatalf("promtool check rules: %v\n%s", err, out)
	}
	tests, err := filepath.Glob(repoPath(t, "mixin/tests/*.yaml"))
	if err != nil || len(tests) == 0 {
		t.Fatalf("no promtool tests in mixin/tests: %v", err)
	}
	// One promtool a file, two at a time: promtool runs a file's tests
	// one after another, and these suites are most of the package's time.
	for _, f := range tests {
		t.Run(filepath.Base(f), func(t *testing.T) {
			t.Parallel()
			if out, err := promtoolTest(t, promtool, f); err != nil {
				t.Fatalf("promtool test rules %s: %v\n%s", filepath.Base(f), err, out)
			}
		})
	}
}

// promtoolTest runs `promtool test rules` over files from the repository's
// root, with GOGC=400: promtool evaluates every rule of the mixin at every
// step of a test group, allocating gigabytes on the way, and a heap that
// may grow to five times its live data instead of twice spends some 20%
// less CPU on the whole suite (measured over mixin/tests/*.yaml: 44-49 s
// against 55-62 s of user+sys), for some 300 MB at its peak instead of 140.
func promtoolTest(t *testing.T, promtool string, files ...string) (string, error) {
	t.Helper()
	cmd := exec.Command(promtool, append([]string{"test", "rules"}, files...)...)
	cmd.Dir = realstack.RepoRoot(t)
	cmd.Env = append(os.Environ(), "GOGC=400")
	out, err := cmd.CombinedOutput()
	var ee *exec.ExitError
	if err != nil && !errors.As(err, &ee) {
		t.Fatalf("run %s: %v", promtool, err)
	}
	return string(out), err
}

// TestPromtoolPinnedBaseline renders the mixin with pinned baselines instead
// of an offset and runs tests/pinned/ against it.
func TestPromtoolPinnedBaseline(t *testing.T) {
	t.Parallel() // a child process of its own: runs beside the others
	jsonnet := realstack.Tool(t, realstack.PrometheusModfile, "jsonnet")
	promtool := realstack.Tool(t, realstack.PrometheusModfile, "promtool")
	dir := t.TempDir()
	config := `{regression: {offset: null, pinned: [{target: "t", model: "m", ttftSeconds: 0.4, tpotSeconds: 0.04}]},
		perplexity: {offset: null, pinned: [{target: "t", model: "m", text: "29c164798e0a8ac2", perplexity: 8}]}}`
	if out, err := realstack.Run(t, jsonnet, "-c", "-m", dir, "-S", "mixin/build.jsonnet", "--tla-code", "config="+config); err != nil {
		t.Fatalf("jsonnet: %v\n%s", err, out)
	}
	tests, _ := filepath.Glob(repoPath(t, "mixin/tests/pinned/*.yaml"))
	if len(tests) == 0 {
		t.Fatal("no tests in mixin/tests/pinned")
	}
	var copies []string
	for _, f := range tests {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		dst := filepath.Join(dir, filepath.Base(f))
		if err := os.WriteFile(dst, b, 0o644); err != nil {
			t.Fatal(err)
		}
		copies = append(copies, dst)
	}
	if out, err := promtoolTest(t, promtool, copies...); err != nil {
		t.Fatalf("promtool test rules (pinned baselines): %v\n%s", err, out)
	}
}

// unitTestFile is the part of a promtool test file that says which alerts
// it expects, and for which series.
type unitTestFile struct {
	Tests []struct {
		Name        string `yaml:"name"`
		InputSeries []struct {
			Series string `yaml:"series"`
		} `yaml:"input_series"`
		AlertTests []struct {
			Alertname string `yaml:"alertname"`
			ExpAlerts []struct {
				ExpLabels map[string]string `yaml:"exp_labels"`
			} `yaml:"exp_alerts"`
		} `yaml:"alert_rule_test"`
	} `yaml:"tests"`
}

var targetWorkload = regexp.MustCompile(`\b(target|workload)="([^"]*)"`)

// TestEveryAlertIsTested: every alert has a promtool test that expects it to
// fire, and one that expects it not to: a check that expects no alert of
// that name, or one that expects it for some of its group's targets and
// workloads but not for another that the group's input series carry (the
// burn-rate and regression files hold their cases as workloads of one
// group, so that they share its evaluations: a check there lists every
// case that fires, and so says that the others stay silent).
func TestEveryAlertIsTested(t *testing.T) {
	fires, silent := map[string]bool{}, map[string]bool{}
	files, _ := filepath.Glob(repoPath(t, "mixin/tests/*.yaml"))
	pinned, _ := filepath.Glob(repoPath(t, "mixin/tests/pinned/*.yaml"))
	for _, f := range append(files, pinned...) {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		var u unitTestFile
		if err := yaml.Unmarshal(b, &u); err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		for _, tc := range u.Tests {
			// The group's series, by their target and workload.
			cases := map[string]bool{}
			for _, is := range tc.InputSeries {
				var target, workload string
				for _, m := range targetWorkload.FindAllStringSubmatch(is.Series, -1) {
					if m[1] == "target" {
						target = m[2]
					} else {
						workload = m[2]
					}
				}
				cases[target+"/"+workload] = true
			}
			for _, at := range tc.AlertTests {
				if len(at.ExpAlerts) == 0 {
					silent[at.Alertname] = true
					continue
				}
				fires[at.Alertname] = true
				firing := map[string]bool{}
				perCase := true
				for _, e := range at.ExpAlerts {
					target, workload := e.ExpLabels["target"], e.ExpLabels["workload"]
					if target == "" || workload == "" {
						perCase = false // not an alert by target and workload
					}
					firing[target+"/"+workload] = true
				}
				for c := range cases {
					if perCase && !firing[c] {
						silent[at.Alertname] = true
					}
				}
			}
		}
	}
	alerts := loadRules(t, repoPath(t, "mixin/generated/alerts.yaml"))
	if len(alerts) == 0 {
		t.Fatal("no alerts")
	}
	for _, a := range alerts {
		if !fires[a.Alert] {
			t.Errorf("alert %s: no promtool test expects it to fire", a.Alert)
		}
		if !silent[a.Alert] {
			t.Errorf("alert %s: no promtool test expects it to stay silent", a.Alert)
		}
	}
}

var camelCase = regexp.MustCompile(`^[A-Z][a-zA-Z0-9]*$`)

// TestAlertConventions: mixtool's lint rules for alerts.
func TestAlertConventions(t *testing.T) {
	for _, a := range loadRules(t, repoPath(t, "mixin/generated/alerts.yaml")) {
		if !camelCase.MatchString(a.Alert) {
			t.Errorf("alert %q: name is not CamelCase", a.Alert)
		}
		switch a.Labels["severity"] {
		case "critical", "warning", "info":
		default:
			t.Errorf("alert %s: severity %q is not critical, warning or info", a.Alert, a.Labels["severity"])
		}
		if a.Annotations["summary"] == "" {
			t.Errorf("alert %s: no summary", a.Alert)
		}
		if d := a.Annotations["description"]; !strings.Contains(d, "{{ $") {
			t.Errorf("alert %s: description %q is not templated", a.Alert, d)
		}
	}
	for _, r := range loadRules(t, repoPath(t, "mixin/generated/rules.yaml")) {
		if parts := strings.Split(r.Record, ":"); len(parts) != 3 || parts[0] == "" || parts[1] == "" || parts[2] == "" {
			t.Errorf("recording rule %q: not level:metric:operations", r.Record)
		}
	}
}

// dashboard is the part of a Grafana dashboard the lint reads.
type dashboard struct {
	UID           string  `json:"uid"`
	Title         string  `json:"title"`
	SchemaVersion int     `json:"schemaVersion"`
	Panels        []panel `json:"panels"`
	Annotations   struct {
		List []struct {
			Name       string         `json:"name"`
			Expr       string         `json:"expr"`
			Datasource map[string]any `json:"datasource"`
		} `json:"list"`
	} `json:"annotations"`
	Templating struct {
		List []struct {
			Name       string         `json:"name"`
			Type       string         `json:"type"`
			Query      any            `json:"query"`
			Datasource map[string]any `json:"datasource"`
		} `json:"list"`
	} `json:"templating"`
}

type panel struct {
	ID          int            `json:"id"`
	Type        string         `json:"type"`
	Title       string         `json:"title"`
	Description string         `json:"description"`
	Datasource  map[string]any `json:"datasource"`
	GridPos     *struct {
		X, Y, W, H int
	} `json:"gridPos"`
	FieldConfig struct {
		Defaults struct {
			Unit string `json:"unit"`
		} `json:"defaults"`
	} `json:"fieldConfig"`
	Targets []struct {
		Expr       string         `json:"expr"`
		RefID      string         `json:"refId"`
		Datasource map[string]any `json:"datasource"`
	} `json:"targets"`
}

func loadDashboards(t *testing.T) map[string]dashboard {
	t.Helper()
	files, _ := filepath.Glob(repoPath(t, "mixin/generated/dashboards/*.json"))
	if len(files) != 6 {
		t.Fatalf("dashboards = %v, want overview, ranking, gpu, server, fleet and bench history", files)
	}
	out := map[string]dashboard{}
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		dec := json.NewDecoder(bytes.NewReader(b))
		var d dashboard
		if err := dec.Decode(&d); err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		out[filepath.Base(f)] = d
	}
	return out
}

var (
	rangeSelector = regexp.MustCompile(`\[[^\]]*\]`)
	variableRef   = regexp.MustCompile(`\$(\w+)`)
)

// TestDashboardLint: uid, title, unique panel ids, units, data source
// variable, and $__rate_interval in every range.
func TestDashboardLint(t *testing.T) {
	t.Parallel() // a child process of its own: runs beside the others
	uids, titles := map[string]bool{}, map[string]bool{}
	for name, d := range loadDashboards(t) {
		t.Run(name, func(t *testing.T) {
			if d.UID == "" || len(d.UID) > 40 || uids[d.UID] {
				t.Errorf("uid %q: empty, longer than 40 or not unique", d.UID)
			}
			uids[d.UID] = true
			if d.Title == "" || titles[d.Title] {
				t.Errorf("title %q: empty or not unique", d.Title)
			}
			titles[d.Title] = true
			if d.SchemaVersion < 36 {
				t.Errorf("schemaVersion %d < 36", d.SchemaVersion)
			}
			vars := map[string]bool{"__rate_interval": true}
			hasDatasource := false
			for _, v := range d.Templating.List {
				vars[v.Name] = true
				if v.Name == "datasource" && v.Type == "datasource" && v.Query == "prometheus" {
					hasDatasource = true
				}
				if v.Type == "query" && v.Datasource["uid"] != "${datasource}" {
					t.Errorf("variable %s: data source %v, want ${datasource}", v.Name, v.Datasource)
				}
			}
			if !hasDatasource {
				t.Error("no $datasource variable of type datasource")
			}
			for _, a := range d.Annotations.List {
				if a.Expr == "" {
					continue
				}
				if a.Datasource["uid"] != "${datasource}" {
					t.Errorf("annotation %q: data source %v, want ${datasource}", a.Name, a.Datasource)
				}
				for _, m := range variableRef.FindAllStringSubmatch(a.Expr, -1) {
					if !vars[m[1]] {
						t.Errorf("annotation %q: $%s is not a variable of the dashboard", a.Name, m[1])
					}
				}
			}
			ids := map[int]bool{}
			for _, p := range d.Panels {
				if p.ID <= 0 || ids[p.ID] {
					t.Errorf("panel %q: id %d is not unique and positive", p.Title, p.ID)
				}
				ids[p.ID] = true
				if p.GridPos == nil || p.GridPos.W <= 0 || p.GridPos.X+p.GridPos.W > 24 {
					t.Errorf("panel %q: bad gridPos %+v", p.Title, p.GridPos)
				}
				if p.Type == "row" {
					continue
				}
				if p.Title == "" || p.Description == "" {
					t.Errorf("panel %d: title %q, description %q: both are needed", p.ID, p.Title, p.Description)
				}
				if p.FieldConfig.Defaults.Unit == "" {
					t.Errorf("panel %q: no unit", p.Title)
				}
				if p.Datasource["uid"] != "${datasource}" {
					t.Errorf("panel %q: data source %v, want ${datasource}", p.Title, p.Datasource)
				}
				if len(p.Targets) == 0 {
					t.Errorf("panel %q: no queries", p.Title)
				}
				refs := map[string]bool{}
				for _, q := range p.Targets {
					if q.Datasource["uid"] != "${datasource}" {
						t.Errorf("panel %q: query data source %v, want ${datasource}", p.Title, q.Datasource)
					}
					if q.RefID == "" || refs[q.RefID] {
						t.Errorf("panel %q: refId %q empty or not unique", p.Title, q.RefID)
					}
					refs[q.RefID] = true
					for _, r := range rangeSelector.FindAllString(q.Expr, -1) {
						if r != "[$__rate_interval]" {
							t.Errorf("panel %q: range %s in %q: use [$__rate_interval]", p.Title, r, q.Expr)
						}
					}
					for _, m := range variableRef.FindAllStringSubmatch(q.Expr, -1) {
						if !vars[m[1]] {
							t.Errorf("panel %q: $%s is not a variable of the dashboard", p.Title, m[1])
						}
					}
				}
			}
		})
	}
}

// TestDashboardsAreJSONAsGrafanaReadsThem decodes the files strictly enough
// to catch a broken panel: every panel has a type Grafana knows.
func TestDashboardsAreJSONAsGrafanaReadsThem(t *testing.T) {
	t.Parallel() // a child process of its own: runs beside the others
	known := map[string]bool{"row": true, "timeseries": true, "stat": true, "table": true, "heatmap": true, "state-timeline": true}
	for name, d := range loadDashboards(t) {
		for _, p := range d.Panels {
			if !known[p.Type] {
				t.Errorf("%s: panel %q has type %q", name, p.Title, p.Type)
			}
		}
	}
}

// queries returns every PromQL expression of the rules and dashboards, with
// where it comes from. Dashboard variables are replaced so that the text
// parses: $__rate_interval by a duration; label_values(selector, label) by
// its selector.
func queries(t *testing.T) map[string]string {
	t.Helper()
	out := map[string]string{}
	for _, f := range []string{"rules.yaml", "alerts.yaml"} {
		for _, r := range loadRules(t, repoPath(t, "mixin/generated/"+f)) {
			out[strings.TrimSpace(r.Expr)] = f + " " + r.Record + r.Alert
		}
	}
	for _, q := range runbookQueries(t) {
		out[q.expr] = "docs/runbooks.md " + q.section
	}
	labelValues := regexp.MustCompile(`^label_values\((.*),\s*\w+\)$`)
	for name, d := range loadDashboards(t) {
		for _, p := range d.Panels {
			for _, q := range p.Targets {
				out[strings.ReplaceAll(q.Expr, "$__rate_interval", "5m")] = name + " panel " + p.Title
			}
		}
		for _, a := range d.Annotations.List {
			if a.Expr != "" {
				out[a.Expr] = name + " annotation " + a.Name
			}
		}
		for _, v := range d.Templating.List {
			if v.Type != "query" {
				continue
			}
			q, _ := v.Query.(map[string]any)["query"].(string)
			m := labelValues.FindStringSubmatch(q)
			if m == nil {
				t.Errorf("%s: variable %s: query %q is not label_values(selector, label)", name, v.Name, q)
				continue
			}
			out[m[1]] = name + " variable " + v.Name
		}
	}
	return out
}

// parsedQuery is one answer of tools/prometheus/promqlnames.
type parsedQuery struct {
	Expr  string   `json:"expr"`
	Names []string `json:"names"`
	Error string   `json:"error"`
}

// parseQueries parses every query with Prometheus's own PromQL parser
// (tools/prometheus/promqlnames, built in the tools module, which holds
// Prometheus; the exporter's module does not depend on it).
func parseQueries(t *testing.T, exprs []string) []parsedQuery {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "promqlnames")
	build := exec.Command("go", "build", "-o", bin, "./promqlnames")
	build.Dir = repoPath(t, "tools/prometheus")
	if out, err := build.CombinedOutput(); err != nil {
		if os.Getenv("CI") != "" {
			t.Fatalf("build promqlnames: %v\n%s", err, out)
		}
		t.Skipf("build promqlnames: %v\n%s; skipped because CI is not set", err, out)
	}
	var in bytes.Buffer
	for _, e := range exprs {
		b, _ := json.Marshal(e)
		in.Write(b)
		in.WriteByte('\n')
	}
	cmd := exec.Command(bin)
	cmd.Stdin = &in
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("promqlnames: %v", err)
	}
	var res []parsedQuery
	sc := bufio.NewScanner(bytes.NewReader(out))
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		var q parsedQuery
		if err := json.Unmarshal(sc.Bytes(), &q); err != nil {
			t.Fatal(err)
		}
		res = append(res, q)
	}
	if len(res) != len(exprs) {
		t.Fatalf("promqlnames answered %d of %d queries", len(res), len(exprs))
	}
	return res
}

// TestQueriesReadExposedMetrics parses every rule and dashboard query and
// checks that each metric it reads is one the exporter exposes or one a rule
// records. The exporter's names are scraped from a real exporter running
// --demo (infer_probe_*, infer_exporter_*, infer_server_* from the demo
// simulator) and from a /probe of the demo simulator with the demo module
// (probe_*). infer_gpu_* cannot be exposed by a machine without a GPU; their
// names come from the page captured from a real H200
// (collector/testdata/h200/metrics_under_load.prom) and the NVML collector's
// golden file with every series (collector/testdata/nvml_full.prom).
// --otlp.endpoint points at a port where nothing listens, so that the OTLP
// push's counters are exposed too.
//
// The PromQL of docs/runbooks.md is checked the same way (runbookQueries):
// what an on-call engineer pastes into Prometheus must parse and read
// series that exist.
func TestQueriesReadExposedMetrics(t *testing.T) {
	t.Parallel() // a child process of its own: runs beside the others
	all := queries(t)
	exprs := make([]string, 0, len(all))
	for e := range all {
		exprs = append(exprs, e)
	}
	sort.Strings(exprs)
	parsed := parseQueries(t, exprs)

	exposed := map[string]string{"up": "Prometheus (scrape health)"}
	for _, r := range loadRules(t, repoPath(t, "mixin/generated/rules.yaml")) {
		exposed[r.Record] = "recording rule"
	}
	for _, f := range []string{"collector/testdata/h200/metrics_under_load.prom", "collector/testdata/nvml_full.prom"} {
		b, err := os.ReadFile(repoPath(t, f))
		if err != nil {
			t.Fatal(err)
		}
		addFamilies(t, exposed, f, bytes.NewReader(b))
	}
	scrapeDemo(t, exposed)
	addBenchExport(t, exposed)

	for _, want := range []string{"infer_probe_known_answer_checks_total", "infer_server_kv_cache_usage_ratio", "probe_known_answer_success", "infer_gpu_xid_errors_total", "infer_exporter_otlp_export_failures_total", "infer_exporter_config_last_reload_successful", "infer_probe_target_ready", "infer_server_up", "infer_probe_structured_output_checks_total", "infer_probe_tool_call_checks_total"} {
		if _, ok := exposed[want]; !ok {
			t.Errorf("the sources of truth lack %s: the test would not see it", want)
		}
	}
	for _, q := range parsed {
		where := all[q.Expr]
		if q.Error != "" {
			t.Errorf("%s: %q does not parse: %s", where, q.Expr, q.Error)
			continue
		}
		if len(q.Names) == 0 {
			t.Errorf("%s: %q reads no metric", where, q.Expr)
		}
		for _, n := range q.Names {
			if _, ok := exposed[n]; !ok {
				t.Errorf("%s reads %s, which nothing exposes or records", where, n)
			}
		}
	}
}

// addFamilies adds the series names of an exposition page: a histogram's
// _bucket, _sum and _count and its native form (the family name), a
// summary's quantiles, _sum and _count.
func addFamilies(t *testing.T, names map[string]string, source string, r io.Reader) {
	t.Helper()
	parser := expfmt.NewTextParser(model.UTF8Validation)
	mfs, err := parser.TextToMetricFamilies(r)
	if err != nil {
		t.Fatalf("%s: %v", source, err)
	}
	for name, mf := range mfs {
		names[name] = source
		switch mf.GetType() {
		case dto.MetricType_HISTOGRAM, dto.MetricType_GAUGE_HISTOGRAM:
			for _, s := range []string{"_bucket", "_sum", "_count"} {
				names[name+s] = source
			}
		case dto.MetricType_SUMMARY:
			names[name+"_sum"] = source
			names[name+"_count"] = source
		}
	}
}

// addBenchExport adds the names of the series `bench export` writes of a
// report (the bench history dashboard reads them, once backfilled).
func addBenchExport(t *testing.T, names map[string]string) {
	t.Helper()
	const source = "bench export bench/testdata/golden/h200.json"
	out, err := realstack.Run(t, realstack.BuildExporter(t), "bench", "export", "--format=openmetrics", repoPath(t, "bench/testdata/golden/h200.json"))
	if err != nil {
		t.Fatalf("%s: %v\n%s", source, err, out)
	}
	for _, l := range strings.Split(out, "\n") {
		if f, ok := strings.CutPrefix(l, "# TYPE "); ok {
			name, _, _ := strings.Cut(f, " ")
			names[name] = source
		}
	}
}

var demoTargetURL = regexp.MustCompile(`<code>(http://127\.0\.0\.1:\d+)</code>`)

// scrapeDemo runs the exporter with --demo and adds the names of /metrics
// and of a /probe of the demo simulator.
func scrapeDemo(t *testing.T, names map[string]string) {
	t.Helper()
	bin := realstack.BuildExporter(t)
	addr := realstack.FreeAddr(t)
	p := realstack.Start(t, "exporter-demo", "", bin, "--demo", "--web.listen-address="+addr, "--no-collector.nvml", "--log.level=error",
		"--otlp.endpoint=http://"+realstack.FreeAddr(t))
	base := "http://" + addr
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := p.WaitHTTP(ctx, base+"/-/ready"); err != nil {
		t.Fatal(err)
	}
	// The server collector reads the simulator in the background, and so
	// does the quality probe: wait for their first readings, and for the
	// workloads' first success (infer_probe_prompt_length_tokens is
	// observed on success only).
	for {
		body := get(t, ctx, base+"/metrics")
		if strings.Contains(body, "infer_server_up{") && strings.Contains(body, "infer_probe_perplexity{") &&
			strings.Contains(body, "infer_probe_prompt_length_tokens_bucket{") {
			addFamilies(t, names, "--demo /metrics", strings.NewReader(body))
			break
		}
		if ctx.Err() != nil {
			t.Fatalf("--demo exposes no infer_server_* within a minute")
		}
		time.Sleep(200 * time.Millisecond)
	}
	m := demoTargetURL.FindStringSubmatch(get(t, ctx, base+"/"))
	if m == nil {
		t.Fatal("the landing page does not show the demo simulator's URL")
	}
	probe := get(t, ctx, base+"/probe?module=demo&target="+url.QueryEscape(m[1]))
	addFamilies(t, names, "--demo /probe?module=demo", strings.NewReader(probe))
	scrapeKinds(t, ctx, names, bin, m[1])
}

// kindsConfig has a workload with tools and one with a response format,
// whose answer-check counters (created at zero) the demo does not expose,
// and one with a declared cache-hit rate, whose prefix-cache ratios (the
// server's from the target's counters, read every second) it does not
// either: the demo stays the one workload that docs/benchmarks.md measured.
const kindsConfig = `targets:
  - {name: sim, url: SIMULATOR_URL, model: sim-model, metrics: {interval: 1s, timeout: 1s}}
workloads:
  - name: tools
    target: sim
    arrival: {process: poisson, rate: 1}
    prompt:
      output_tokens: {dist: fixed, mean: 8}
    tools:
      - name: get_weather
        parameters: {type: object, properties: {city: {type: string}}}
    tool_choice: required
  - name: json
    target: sim
    arrival: {process: poisson, rate: 1}
    prompt:
      output_tokens: {dist: fixed, mean: 8}
    response_format: {type: json_object}
  - name: rag
    target: sim
    arrival: {process: poisson, rate: 4}
    prompt:
      input_tokens: {dist: fixed, mean: 64}
      output_tokens: {dist: fixed, mean: 8}
      cache_hit_rate: 0.5
      prefix_pool: 2
`

// scrapeKinds runs a second exporter with kindsConfig against the demo's
// simulator and adds the names of its /metrics.
func scrapeKinds(t *testing.T, ctx context.Context, names map[string]string, bin, simulatorURL string) {
	t.Helper()
	cfg := filepath.Join(t.TempDir(), "kinds.yaml")
	if err := os.WriteFile(cfg, []byte(strings.Replace(kindsConfig, "SIMULATOR_URL", simulatorURL, 1)), 0o644); err != nil {
		t.Fatal(err)
	}
	addr := realstack.FreeAddr(t)
	p := realstack.Start(t, "exporter-kinds", "", bin, "--config.file="+cfg, "--web.listen-address="+addr, "--no-collector.nvml", "--log.level=error")
	base := "http://" + addr
	if err := p.WaitHTTP(ctx, base+"/-/ready"); err != nil {
		t.Fatal(err)
	}
	for {
		body := get(t, ctx, base+"/metrics")
		if strings.Contains(body, "infer_probe_structured_output_checks_total{") && strings.Contains(body, "infer_probe_tool_call_checks_total{") &&
			strings.Contains(body, "infer_probe_server_prefix_cache_hit_ratio{") && strings.Contains(body, "infer_probe_prefix_cache_best_hit_ratio{") {
			addFamilies(t, names, "kinds workloads /metrics", strings.NewReader(body))
			return
		}
		if ctx.Err() != nil {
			t.Fatalf("an exporter with tools, response_format and cache_hit_rate workloads exposes no answer-check counters or prefix-cache ratios within a minute")
		}
		time.Sleep(200 * time.Millisecond)
	}
}

func get(t *testing.T, ctx context.Context, u string) string {
	t.Helper()
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	req.Header.Set("Accept", string(expfmt.NewFormat(expfmt.TypeTextPlain)))
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("GET %s: %d %v", u, resp.StatusCode, err)
	}
	return string(b)
}

// TestRecordingRuleNamesAreValid: every recorded name is a valid metric name
// and is recorded by exactly one kind of expression per label set.
func TestRecordingRuleNamesAreValid(t *testing.T) {
	seen := map[string]string{}
	for _, r := range loadRules(t, repoPath(t, "mixin/generated/rules.yaml")) {
		if !model.LegacyValidation.IsValidMetricName(r.Record) {
			t.Errorf("%q is not a valid metric name", r.Record)
		}
		key := r.Record + fmt.Sprint(r.Labels)
		if prev, ok := seen[key]; ok {
			t.Errorf("%s with labels %v is recorded twice:\n%s\n%s", r.Record, r.Labels, prev, r.Expr)
		}
		seen[key] = r.Expr
	}
}

// runbooksURL is where the default runbookURLPattern points: docs/runbooks.md
// in the repository, the anchor being the alert's name in lower case.
const runbooksURL = "https://github.com/infer-exporter/infer_exporter/blob/main/docs/runbooks.md#"

// runbookSection is one heading of docs/runbooks.md and the text under it,
// up to the next heading.
type runbookSection struct {
	level         int
	title, anchor string
	body          string
}

var headingLine = regexp.MustCompile(`^(#{1,6})\s+(.+?)\s*$`)

// githubAnchor is the anchor GitHub gives a heading: lower case, every
// character but letters, digits, spaces, hyphens and underscores removed,
// spaces turned into hyphens.
func githubAnchor(title string) string {
	var b strings.Builder
	for _, r := range strings.ToLower(title) {
		switch {
		case r >= 'a' && r <= 'z', r >= '0' && r <= '9', r == '-', r == '_':
			b.WriteRune(r)
		case r == ' ':
			b.WriteRune('-')
		}
	}
	return b.String()
}

// runbookSections reads docs/runbooks.md's headings (outside code blocks).
func runbookSections(t *testing.T) []runbookSection {
	t.Helper()
	b, err := os.ReadFile(repoPath(t, "docs/runbooks.md"))
	if err != nil {
		t.Fatal(err)
	}
	var out []runbookSection
	var body strings.Builder
	inCode := false
	flush := func() {
		if len(out) > 0 {
			out[len(out)-1].body = body.String()
		}
		body.Reset()
	}
	for _, l := range strings.Split(string(b), "\n") {
		if strings.HasPrefix(l, "```") {
			inCode = !inCode
		}
		if m := headingLine.FindStringSubmatch(l); m != nil && !inCode {
			flush()
			out = append(out, runbookSection{level: len(m[1]), title: m[2], anchor: githubAnchor(m[2])})
			continue
		}
		body.WriteString(l + "\n")
	}
	flush()
	return out
}

// runbookQuery is one PromQL expression of a ```promql block of
// docs/runbooks.md.
type runbookQuery struct {
	section, expr string
}

var promqlBlock = regexp.MustCompile("(?s)```promql\n(.*?)```")

// runbookQueries returns every expression of the runbooks' promql blocks:
// one a line, an indented line continuing the one before; $target (the
// alert's label, to fill in) replaced by a value.
func runbookQueries(t *testing.T) []runbookQuery {
	t.Helper()
	var out []runbookQuery
	for _, s := range runbookSections(t) {
		for _, m := range promqlBlock.FindAllStringSubmatch(s.body, -1) {
			var exprs []string
			for _, l := range strings.Split(m[1], "\n") {
				switch {
				case strings.TrimSpace(l) == "":
				case (strings.HasPrefix(l, " ") || strings.HasPrefix(l, "\t")) && len(exprs) > 0:
					exprs[len(exprs)-1] += " " + strings.TrimSpace(l)
				default:
					exprs = append(exprs, strings.TrimSpace(l))
				}
			}
			for _, e := range exprs {
				out = append(out, runbookQuery{section: s.title, expr: strings.ReplaceAll(e, "$target", "t")})
			}
		}
	}
	return out
}

// TestEveryAlertHasARunbook: every alert carries a runbook_url from the
// default runbookURLPattern whose anchor is a section of docs/runbooks.md;
// each such section says what the alert means, its impact, how to diagnose
// it (with PromQL) and what to do; no section is left for an alert that no
// longer exists; and the runbooks' own links to sections resolve.
func TestEveryAlertHasARunbook(t *testing.T) {
	sections := map[string]runbookSection{}
	for _, s := range runbookSections(t) {
		sections[s.anchor] = s
	}
	alerts := map[string]bool{}
	for _, a := range loadRules(t, repoPath(t, "mixin/generated/alerts.yaml")) {
		if alerts[a.Alert] {
			continue // one rule per window pair: the same name, the same section
		}
		alerts[a.Alert] = true
		u := a.Annotations["runbook_url"]
		anchor, ok := strings.CutPrefix(u, runbooksURL)
		if !ok {
			t.Errorf("alert %s: runbook_url %q, want %s<anchor>", a.Alert, u, runbooksURL)
			continue
		}
		if anchor != strings.ToLower(a.Alert) {
			t.Errorf("alert %s: runbook_url anchor %q, want the name in lower case, %q", a.Alert, anchor, strings.ToLower(a.Alert))
		}
		s, ok := sections[anchor]
		if !ok {
			t.Errorf("alert %s: docs/runbooks.md has no section #%s", a.Alert, anchor)
			continue
		}
		for _, part := range []string{"**Meaning.**", "**Impact.**", "**Diagnosis.**", "**Mitigation.**", "```promql\n"} {
			if !strings.Contains(s.body, part) {
				t.Errorf("docs/runbooks.md#%s: no %s", anchor, strings.TrimSpace(part))
			}
		}
	}
	for _, s := range runbookSections(t) {
		if s.level == 3 && camelCase.MatchString(s.title) && !alerts[s.title] {
			t.Errorf("docs/runbooks.md: section %q is for no alert of the mixin", s.title)
		}
	}
	b, err := os.ReadFile(repoPath(t, "docs/runbooks.md"))
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range regexp.MustCompile(`\]\(#([^)]+)\)`).FindAllStringSubmatch(string(b), -1) {
		if _, ok := sections[m[1]]; !ok {
			t.Errorf("docs/runbooks.md links to #%s, which is no section", m[1])
		}
	}
	if len(runbookQueries(t)) < len(alerts) {
		t.Errorf("docs/runbooks.md holds %d queries for %d alerts: want one at least for each", len(runbookQueries(t)), len(alerts))
	}
}

// TestRunbookURLPattern: runbookURLPattern is the one source of every
// runbook_url (another pattern moves them all), and an empty one leaves
// the annotation out.
func TestRunbookURLPattern(t *testing.T) {
	t.Parallel() // a child process of its own: runs beside the others
	jsonnet := realstack.Tool(t, realstack.PrometheusModfile, "jsonnet")
	for _, tc := range []struct{ pattern, want string }{
		{`"https://wiki.example.com/runbooks/%s"`, "https://wiki.example.com/runbooks/"},
		{`""`, ""},
		{`null`, ""},
	} {
		dir := t.TempDir()
		if out, err := realstack.Run(t, jsonnet, "-c", "-m", dir, "-S", "mixin/build.jsonnet", "--tla-code", "config={runbookURLPattern: "+tc.pattern+"}"); err != nil {
			t.Fatalf("jsonnet: %v\n%s", err, out)
		}
		alerts := loadRules(t, filepath.Join(dir, "alerts.yaml"))
		if len(alerts) == 0 {
			t.Fatal("no alerts")
		}
		for _, a := range alerts {
			u, ok := a.Annotations["runbook_url"]
			if tc.want == "" {
				if ok {
					t.Errorf("pattern %s: alert %s has runbook_url %q, want none", tc.pattern, a.Alert, u)
				}
			} else if u != tc.want+strings.ToLower(a.Alert) {
				t.Errorf("pattern %s: alert %s has runbook_url %q, want %s%s", tc.pattern, a.Alert, u, tc.want, strings.ToLower(a.Alert))
			}
		}
	}
}

var selectorBody = regexp.MustCompile(`\{[^{}]*\}`)

// TestClusterVariable: every dashboard has the cluster variable
// (dashboardClusterLabel) right after the data source, reading the label's
// values from the exporter's scrape health, and every selector of every
// panel query and of every other variable matches it, so that choosing a
// cluster narrows every panel.
func TestClusterVariable(t *testing.T) {
	const matcher = `cluster=~"$cluster"`
	for name, d := range loadDashboards(t) {
		vars := d.Templating.List
		if len(vars) < 2 || vars[1].Name != "cluster" || vars[1].Type != "query" {
			t.Errorf("%s: variables %v: want cluster second, after datasource", name, vars)
			continue
		}
		if q, _ := vars[1].Query.(map[string]any)["query"].(string); q != `label_values(up{job="infer-exporter"}, cluster)` {
			t.Errorf("%s: cluster variable query %q", name, q)
		}
		var exprs []string
		for _, p := range d.Panels {
			for _, q := range p.Targets {
				exprs = append(exprs, q.Expr)
			}
		}
		for _, v := range vars[2:] {
			if q, ok := v.Query.(map[string]any)["query"].(string); ok {
				exprs = append(exprs, q)
			}
		}
		for _, e := range exprs {
			sels := selectorBody.FindAllString(e, -1)
			if len(sels) == 0 {
				t.Errorf("%s: %q has no selector to hold the cluster matcher", name, e)
			}
			for _, s := range sels {
				if strings.HasPrefix(s, "{{") {
					continue
				}
				if n := strings.Count(s, matcher); n != 1 {
					t.Errorf("%s: selector %s of %q holds %s %d times, want once", name, s, e, matcher, n)
				}
			}
		}
	}
}

// TestOverviewStatusRow: the overview opens with a Status row whose table
// has, per target, the engine's metrics up, readiness, the success ratio,
// the error budget left and the degraded flag, each from the series that
// says it.
func TestOverviewStatusRow(t *testing.T) {
	d := loadDashboards(t)["infer-overview.json"]
	if len(d.Panels) < 2 || d.Panels[0].Type != "row" || d.Panels[0].Title != "Status" || d.Panels[1].Type != "table" {
		t.Fatalf("the overview's first panels are not a Status row and its table")
	}
	table := d.Panels[1]
	want := []string{
		"min by (target) (infer_server_up{",
		"min by (target) (infer_probe_target_ready{",
		"1 - max by (target) (target_model_workload:infer_probe_requests:error_ratio_rate5m{",
		"1 - max by (target) (target_model_workload:infer_probe_requests:error_ratio_rate3d{",
		"max by (target) (infer_probe_measurement_degraded{",
	}
	if len(table.Targets) != len(want) {
		t.Fatalf("status table: %d queries, want %d", len(table.Targets), len(want))
	}
	for i, q := range table.Targets {
		if !strings.HasPrefix(q.Expr, want[i]) {
			t.Errorf("status query %s: %q, want it to start %q", q.RefID, q.Expr, want[i])
		}
	}
	if !strings.HasSuffix(table.Targets[3].Expr, ") / 0.01") {
		t.Errorf("error budget left %q: want the 3d error ratio over the budget, 1 - 0.99", table.Targets[3].Expr)
	}
}

// TestLint runs the real linters over the rendered mixin, as `make
// lint-mixin` does: promtool's (every lint check, fatal) over the rules and
// alerts, and tools/dashlint over the dashboards (Grafana's dashboard
// schema, strictly: an unknown or mistyped field of a dashboard, a panel's
// options or its plugin's field config, or a query is refused; a field
// config's own defaults are only type-checked, as Grafana keeps unknown
// ones there). A dashboard broken in
// each of those ways must be refused, so that the lint is known to look.
func TestLint(t *testing.T) {
	t.Parallel() // a child process of its own: runs beside the others
	promtool := realstack.Tool(t, realstack.PrometheusModfile, "promtool")
	if out, err := realstack.Run(t, promtool, "check", "rules", "--lint=all", "--lint-fatal", "mixin/generated/rules.yaml", "mixin/generated/alerts.yaml"); err != nil {
		t.Errorf("promtool check rules --lint=all: %v\n%s", err, out)
	}
	dashlint := realstack.ModuleTool(t, "tools/dashlint", "dashlint")
	files, _ := filepath.Glob(repoPath(t, "mixin/generated/dashboards/*.json"))
	if out, err := exec.Command(dashlint, files...).CombinedOutput(); err != nil {
		t.Errorf("dashlint: %v\n%s", err, out)
	}

	overview, err := os.ReadFile(repoPath(t, "mixin/generated/dashboards/infer-overview.json"))
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name, want string
		edit       func(d map[string]any)
	}{
		{"unknown dashboard field", "refresh_rate", func(d map[string]any) { d["refresh_rate"] = "30s" }},
		{"mistyped panel option", "options", func(d map[string]any) {
			panelOfType(d, "timeseries")["options"].(map[string]any)["legend"] = "bottom"
		}},
		{"unknown field config field", "lineWidthh", func(d map[string]any) {
			panelOfType(d, "timeseries")["fieldConfig"].(map[string]any)["defaults"].(map[string]any)["custom"].(map[string]any)["lineWidthh"] = 1
		}},
		{"mistyped unit", "unit", func(d map[string]any) {
			panelOfType(d, "table")["fieldConfig"].(map[string]any)["defaults"].(map[string]any)["unit"] = 5
		}},
		{"mistyped query", "expr", func(d map[string]any) {
			panelOfType(d, "timeseries")["targets"].([]any)[0].(map[string]any)["expr"] = 42
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var d map[string]any
			if err := json.Unmarshal(overview, &d); err != nil {
				t.Fatal(err)
			}
			tc.edit(d)
			b, _ := json.Marshal(d)
			f := filepath.Join(t.TempDir(), "broken.json")
			if err := os.WriteFile(f, b, 0o644); err != nil {
				t.Fatal(err)
			}
			out, err := exec.Command(dashlint, f).CombinedOutput()
			if err == nil || !strings.Contains(string(out), f+":") || !strings.Contains(string(out), tc.want) {
				t.Errorf("dashlint on a dashboard with a %s: %v, %q: want it refused, naming the file and %q", tc.name, err, out, tc.want)
			}
		})
	}
}

// panelOfType is the first panel of that type of a decoded dashboard.
func panelOfType(d map[string]any, typ string) map[string]any {
	for _, p := range d["panels"].([]any) {
		if p := p.(map[string]any); p["type"] == typ {
			return p
		}
	}
	panic("no panel of type " + typ)
}

// TestJsonnetExamples renders every ```jsonnet block of mixin/README.md and
// docs/mixin.md with the pinned jsonnet: the mixin imported from the
// repository's root ('mixin/mixin.libsonnet') and as jsonnet-bundler vendors
// it (github.com/infer-exporter/infer_exporter/mixin/...).
func TestJsonnetExamples(t *testing.T) {
	t.Parallel() // a child process of its own: runs beside the others
	jsonnet := realstack.Tool(t, realstack.PrometheusModfile, "jsonnet")
	root := realstack.RepoRoot(t)
	vendor := t.TempDir()
	owner := filepath.Join(vendor, "github.com", "infer-exporter")
	if err := os.MkdirAll(owner, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(root, filepath.Join(owner, "infer_exporter")); err != nil {
		t.Fatal(err)
	}
	block := regexp.MustCompile("(?s)```jsonnet\n(.*?)```")
	n := 0
	for _, doc := range []string{"mixin/README.md", "docs/mixin.md"} {
		b, err := os.ReadFile(repoPath(t, doc))
		if err != nil {
			t.Fatal(err)
		}
		for i, m := range block.FindAllSubmatch(b, -1) {
			n++
			f := filepath.Join(t.TempDir(), "example.jsonnet")
			if err := os.WriteFile(f, m[1], 0o644); err != nil {
				t.Fatal(err)
			}
			out, err := exec.Command(jsonnet, "-J", vendor, "-J", root, f).CombinedOutput()
			if err != nil || !bytes.Contains(out, []byte("rules.yaml")) {
				t.Errorf("%s, jsonnet example %d: %v\n%s", doc, i+1, err, lastLines(string(out), 10))
			}
		}
	}
	if n < 2 {
		t.Fatalf("found %d jsonnet examples in mixin/README.md and docs/mixin.md: the reader is broken", n)
	}
}

// TestJsonnetScript runs mixin/README.md's render lines as written, from a
// directory outside the repository: the README's jsonnet as mine.jsonnet
// beside a vendor/ laid out as jsonnet-bundler lays it out, and
// mixin/jsonnet.sh at the repository's path. It must write the rules,
// the alerts and the dashboards.
func TestJsonnetScript(t *testing.T) {
	t.Parallel()
	realstack.Tool(t, realstack.PrometheusModfile, "jsonnet") // built, or skipped
	root := realstack.RepoRoot(t)
	b, err := os.ReadFile(repoPath(t, "mixin/README.md"))
	if err != nil {
		t.Fatal(err)
	}
	example := regexp.MustCompile("(?s)```jsonnet\n(.*?)```").FindSubmatch(b)
	var steps []byte
	for _, m := range regexp.MustCompile("(?s)```sh\n(.*?)```").FindAllSubmatch(b, -1) {
		if bytes.Contains(m[1], []byte("mixin/jsonnet.sh")) {
			steps = m[1]
		}
	}
	if example == nil || steps == nil {
		t.Fatal("mixin/README.md: no jsonnet example, or no sh block running mixin/jsonnet.sh")
	}
	dir := t.TempDir()
	owner := filepath.Join(dir, "vendor", "github.com", "infer-exporter")
	if err := os.MkdirAll(owner, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(root, filepath.Join(owner, "infer_exporter")); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "mine.jsonnet"), example[1], 0o644); err != nil {
		t.Fatal(err)
	}
	script := strings.ReplaceAll(string(steps), "/path/to/infer_exporter", root)
	cmd := exec.Command("bash", "-e", "-c", script)
	cmd.Dir = dir
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("mixin/README.md's render lines: %v\n%s", err, lastLines(string(out), 20))
	}
	for _, f := range []string{"rules.yaml", "alerts.yaml"} {
		if b, err := os.ReadFile(filepath.Join(dir, "out", f)); err != nil || !bytes.Contains(b, []byte("groups")) {
			t.Errorf("out/%s: %v, %d bytes without groups", f, err, len(b))
		}
	}
	if dash, _ := filepath.Glob(filepath.Join(dir, "out", "dashboards", "*.json")); len(dash) == 0 {
		t.Errorf("no dashboards under out/dashboards; the lines printed:\n%s", out)
	}
}

func lastLines(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}
