package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strings"
	"testing"

	yaml "go.yaml.in/yaml/v3"

	"github.com/infer-exporter/infer_exporter/bench"
	"github.com/infer-exporter/infer_exporter/internal/config"
	"github.com/infer-exporter/infer_exporter/internal/realstack"
)

// The chart, and the module of the helm its checks run: helm v4.1.4, in the
// control plane's module (tools/kube/go.mod says why that version), so that
// helm's Kubernetes libraries are the control plane's and compile once, and
// never mix with the exporter's dependencies.
const (
	chartDir    = "charts/infer-exporter"
	helmToolDir = "tools/kube"
	helmVersion = "v4.1.4"
)

// helmTool returns the path of the pinned helm, building it into Go's
// cache if needed (minutes cold, the control plane's libraries with it;
// `make tools` does it once).
func helmTool(t *testing.T) string {
	t.Helper()
	return realstack.ModuleTool(t, helmToolDir, "helm")
}

// runHelm runs helm in the repository's root and returns its standard
// output and error apart.
func runHelm(t *testing.T, bin string, args ...string) (stdout, stderr string, err error) {
	t.Helper()
	cmd := exec.Command(bin, args...)
	cmd.Dir = realstack.RepoRoot(t)
	// No configuration, cache or repositories of the machine's user.
	home := t.TempDir()
	cmd.Env = append(os.Environ(), "HELM_CONFIG_HOME="+filepath.Join(home, "config"),
		"HELM_CACHE_HOME="+filepath.Join(home, "cache"), "HELM_DATA_HOME="+filepath.Join(home, "data"))
	var out, errOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	err = cmd.Run()
	var ee *exec.ExitError
	if err != nil && !errors.As(err, &ee) {
		t.Fatalf("helm %s: %v", strings.Join(args, " "), err)
	}
	return out.String(), errOut.String(), err
}

// chartExample is one way the documentation installs the chart, as the
// arguments of `helm template` (the release's name, the chart, the flags).
type chartExample struct {
	where string // README.md:60, or "the defaults"
	args  []string
}

// The documentation whose `helm install` lines the tests render.
var chartDocs = []string{chartDir + "/README.md", "docs/deploy.md", "README.md"}

var (
	inlineHelmRE = regexp.MustCompile("`(helm (?:install|upgrade --install) [^`]+)`")
	lineHelmRE   = regexp.MustCompile(`^\s*(helm (?:install|upgrade --install) .+)$`)
)

// shellWords splits a command line as the shell would, for the quoting the
// documentation uses (single and double quotes, no expansions).
func shellWords(s string) []string {
	var words []string
	var cur strings.Builder
	in, quote := false, byte(0)
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case quote != 0 && c == quote:
			quote = 0
		case quote != 0:
			cur.WriteByte(c)
		case c == '\'' || c == '"':
			quote, in = c, true
		case c == ' ' || c == '\t':
			if in {
				words = append(words, cur.String())
				cur.Reset()
				in = false
			}
		default:
			cur.WriteByte(c)
			in = true
		}
	}
	if in {
		words = append(words, cur.String())
	}
	return words
}

// chartExamples: the defaults, and every `helm install` (or `helm upgrade
// --install`) of the chart in the documentation, inline or on a line of its
// own (with its continuations), as helm template's arguments.
func chartExamples(t *testing.T, root string) []chartExample {
	t.Helper()
	examples := []chartExample{{"the defaults", []string{"infer-exporter", chartDir}}}
	for _, doc := range chartDocs {
		b, err := os.ReadFile(filepath.Join(root, doc))
		if err != nil {
			t.Fatal(err)
		}
		lines := strings.Split(string(b), "\n")
		for i := 0; i < len(lines); i++ {
			n := i + 1
			line := lines[i]
			for strings.HasSuffix(line, `\`) && i+1 < len(lines) {
				i++
				line = strings.TrimSuffix(line, `\`) + " " + strings.TrimSpace(lines[i])
			}
			var cmds []string
			for _, m := range inlineHelmRE.FindAllStringSubmatch(line, -1) {
				cmds = append(cmds, m[1])
			}
			if m := lineHelmRE.FindStringSubmatch(line); m != nil && len(cmds) == 0 {
				cmds = append(cmds, m[1])
			}
			for _, c := range cmds {
				words := shellWords(c)
				if !slices.Contains(words, chartDir) {
					continue // another chart (kube-prometheus-stack)
				}
				var args []string
				for _, w := range words[2:] {
					if w != "--install" {
						args = append(args, w)
					}
				}
				where := fmt.Sprintf("%s:%d", doc, n)
				// The same command in several places is rendered once.
				if i := slices.IndexFunc(examples, func(ex chartExample) bool { return slices.Equal(ex.args, args) }); i >= 0 {
					examples[i].where += ", " + where
					continue
				}
				examples = append(examples, chartExample{where, args})
			}
		}
	}
	return examples
}

// rendering is what helm template made of one example: the file it wrote
// and its objects.
type rendering struct {
	chartExample
	file string
	objs []map[string]any
}

// renderChart runs helm template with an example's arguments into a file.
func renderChart(t *testing.T, helm, dir string, ex chartExample) (rendering, error) {
	t.Helper()
	out, stderr, err := runHelm(t, helm, append([]string{"template"}, ex.args...)...)
	if err != nil {
		return rendering{}, fmt.Errorf("helm template %s: %v\n%s", strings.Join(ex.args, " "), err, stderr)
	}
	f := filepath.Join(dir, strings.NewReplacer("/", "_", ":", "_", " ", "_", ",", "").Replace(ex.where)+".yaml")
	if err := os.WriteFile(f, []byte(out), 0o644); err != nil {
		t.Fatal(err)
	}
	return rendering{ex, f, yamlDocs(t, f)}, nil
}

var sourceRE = regexp.MustCompile(`(?m)^# Source: infer-exporter/(templates/\S+)$`)

// chartTemplates lists the chart's templates that render objects (the
// helpers and NOTES.txt do not).
func chartTemplates(t *testing.T, root string) []string {
	t.Helper()
	var out []string
	dir := filepath.Join(root, chartDir)
	err := filepath.WalkDir(filepath.Join(dir, "templates"), func(p string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() || strings.HasPrefix(d.Name(), "_") || d.Name() == "NOTES.txt" {
			return err
		}
		r, _ := filepath.Rel(dir, p)
		out = append(out, filepath.ToSlash(r))
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	sort.Strings(out)
	return out
}

// mixinGroups reads the groups of mixin/generated's rules and alerts, in
// the order the PrometheusRule lists them.
func mixinGroups(t *testing.T, root string) []any {
	t.Helper()
	var groups []any
	for _, f := range []string{"rules.yaml", "alerts.yaml"} {
		docs := yamlDocs(t, filepath.Join(root, "mixin/generated", f))
		groups = append(groups, asList(docs[0]["groups"])...)
	}
	return groups
}

// jsonOf is a value's JSON, to compare decoded YAML (an int and the same
// float64 of deepCopy's are one JSON number; keys sorted) and to show it.
func jsonOf(t *testing.T, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// TestHelmChart runs the pinned helm (v4.1.4, in tools/kube) over
// charts/infer-exporter:
//
//   - helm lint --strict is clean for the defaults and every example
//     values file, and every example file is one the chart's README uses;
//   - helm template renders the defaults and every `helm install` of the
//     chart in its README, docs/deploy.md and README.md, and between them
//     every template of the chart renders an object;
//   - every object of every rendering passes kubeconform -strict (the
//     Kubernetes API's and the Prometheus Operator's schemas, as
//     TestKubeconform), and every Pod template the Pod Security Standards'
//     level restricted (as TestPodSecurityRestricted);
//   - each rendering's configuration loads with the exporter's own loader
//     (its bench's with the bench's), its PrometheusRule's groups are the
//     mixin's, and its dashboards are the mixin's, labelled for Grafana;
//   - the schema refuses a value of the wrong type, out of its range or
//     unknown, and helm's error names its path; the templates refuse values
//     that do not fit each other (a PodMonitor and a ServiceMonitor both),
//     saying why.
//
// TestChartMatchesDeploy compares it with deploy/. A few seconds once the
// tools are built.
func TestHelmChart(t *testing.T) {
	root := realstack.RepoRoot(t)
	helm := helmTool(t)
	kubeconform := realstack.Tool(t, kubeconformModfile, "kubeconform")
	podsecurity := podSecurityTool(t)

	if out, _, err := runHelm(t, helm, "version", "--short"); err != nil || !strings.HasPrefix(out, helmVersion[:len("v4.1")]) {
		t.Errorf("helm version %q (%v), want %s (%s)", out, err, helmVersion, helmToolDir)
	}

	// Every example values file is used by the README, with -f.
	readme, err := os.ReadFile(filepath.Join(root, chartDir, "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	valuesFiles, _ := filepath.Glob(filepath.Join(root, chartDir, "examples", "*.yaml"))
	if len(valuesFiles) < 4 {
		t.Fatalf("%s/examples holds %d values files", chartDir, len(valuesFiles))
	}
	for i, f := range valuesFiles {
		rel, _ := filepath.Rel(root, f)
		valuesFiles[i] = filepath.ToSlash(rel)
		if !strings.Contains(string(readme), "-f "+valuesFiles[i]) {
			t.Errorf("%s: no helm install of the chart's README uses %s", chartDir, valuesFiles[i])
		}
	}

	t.Run("lint", func(t *testing.T) {
		for _, vf := range append([]string{""}, valuesFiles...) {
			name := "the defaults"
			if vf != "" {
				name = filepath.Base(vf)
			}
			t.Run(name, func(t *testing.T) {
				t.Parallel()
				args := []string{"lint", "--strict", chartDir}
				if vf != "" {
					args = append(args, "-f", vf)
				}
				out, stderr, err := runHelm(t, helm, args...)
				if err != nil || !strings.Contains(out, "1 chart(s) linted, 0 chart(s) failed") || strings.Contains(out, "[WARNING]") || strings.Contains(out, "[ERROR]") {
					t.Errorf("helm %s: %v\n%s%s", strings.Join(args, " "), err, out, stderr)
				}
			})
		}
	})

	examples := chartExamples(t, root)
	for _, vf := range valuesFiles {
		if !slices.ContainsFunc(examples, func(ex chartExample) bool { return slices.Contains(ex.args, vf) }) {
			t.Errorf("no helm install of %v installs the chart with %s", chartDocs, vf)
		}
	}
	dir := t.TempDir()
	renderings := make([]rendering, len(examples))
	t.Run("template", func(t *testing.T) {
		for i, ex := range examples {
			t.Run(ex.where, func(t *testing.T) {
				t.Parallel()
				r, err := renderChart(t, helm, dir, ex)
				if err != nil {
					t.Fatal(err)
				}
				renderings[i] = r
			})
		}
	})
	if t.Failed() {
		t.FailNow()
	}
	for _, r := range renderings {
		t.Logf("rendered %s: helm template %s", r.where, strings.Join(r.args, " "))
	}

	// Every template renders an object in one rendering or another.
	rendered := map[string]bool{}
	var files []string
	for _, r := range renderings {
		b, err := os.ReadFile(r.file)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range sourceRE.FindAllStringSubmatch(string(b), -1) {
			rendered[m[1]] = true
		}
		files = append(files, r.file)
	}
	for _, tmpl := range chartTemplates(t, root) {
		if !rendered[tmpl] {
			t.Errorf("%s/%s renders no object for the defaults or any documented example: add an example that uses it", chartDir, tmpl)
		}
	}

	t.Run("kubeconform", func(t *testing.T) {
		want := 0
		for _, f := range files {
			want += countResources(t, f)
		}
		res, err := runKubeconform(t, kubeconform, writeSchemas(t, kubeSchemaSet(t), files), files...)
		for _, r := range res.Resources {
			if r.Status != "statusValid" {
				t.Errorf("%s: %s %s: %s %s", r.Filename, r.Kind, r.Name, r.Status, r.Msg)
			}
		}
		if err != nil || res.Summary.Valid != want || res.Summary.Invalid+res.Summary.Errors+res.Summary.Skipped != 0 {
			t.Errorf("kubeconform: %v; summary %+v, want all %d resources of %d renderings valid", err, res.Summary, want, len(files))
		}
		t.Logf("kubeconform -strict: %d resources of %d renderings: %+v", want, len(files), res.Summary)
	})

	t.Run("Pod Security restricted", func(t *testing.T) {
		want := 0
		for _, r := range renderings {
			for _, o := range r.objs {
				if k, _ := o["kind"].(string); podTemplateKinds[k] {
					want++
				}
			}
		}
		out, code := runPodSecurity(t, podsecurity, files...)
		m := podSecuritySummary.FindStringSubmatch(out)
		if code != 0 || m == nil || m[1] != fmt.Sprint(want) || m[2] != "0" {
			t.Errorf("podsecurity: exit %d, summary %q, want all %d pod templates admitted at restricted:latest:\n%s", code, m, want, out)
		}
	})

	groups := mixinGroups(t, root)
	dashboards, _ := filepath.Glob(filepath.Join(root, "mixin/generated/dashboards/*.json"))
	for _, r := range renderings {
		t.Run("contents of "+r.where, func(t *testing.T) {
			checkRendering(t, r, groups, dashboards)
		})
	}

	// Values that fit the schema but not each other: the templates refuse
	// them, saying why.
	t.Run("refusals", func(t *testing.T) {
		for _, tc := range []struct {
			set  []string
			want string
		}{
			{[]string{"--set", "serviceMonitor.enabled=true"}, "serviceMonitor.enabled and podMonitor.enabled: enable one"},
			{[]string{"--set", "service.enabled=false"}, "probe.enabled needs service.enabled"},
		} {
			t.Run(strings.Join(tc.set, " "), func(t *testing.T) {
				t.Parallel()
				_, stderr, err := runHelm(t, helm, append([]string{"template", "x", chartDir}, tc.set...)...)
				if err == nil || !strings.Contains(stderr, tc.want) {
					t.Errorf("helm template %s: %v\n%s\nwant a refusal naming %q", strings.Join(tc.set, " "), err, stderr, tc.want)
				}
			})
		}
	})

	t.Run("schema", func(t *testing.T) {
		for _, tc := range []struct {
			set  []string
			want string // in helm's error
		}{
			{[]string{"--set", "replicaCount=abc"}, "at '/replicaCount': got string, want integer"},
			{[]string{"--set", "bench.shards=0"}, "at '/bench/shards': minimum: got 0, want 1"},
			{[]string{"--set-string", "podMonitor.enabled=yes"}, "at '/podMonitor/enabled': got string, want boolean"},
			{[]string{"--set", "mode=daemonset"}, "at '/mode': value must be one of 'deployment', 'sidecar', 'none'"},
			{[]string{"--set", "probe.interval=1minute"}, "at '/probe/interval'"},
			{[]string{"--set", "replicas=2"}, "additional properties 'replicas' not allowed"},
			{[]string{"--set", "nvml.resources.nvidia\\.com/gpu=true"}, "at '/nvml/resources/nvidia.com~1gpu': got boolean, want number or string"},
		} {
			t.Run(strings.Join(tc.set, " "), func(t *testing.T) {
				t.Parallel()
				_, stderr, err := runHelm(t, helm, append([]string{"template", "x", chartDir}, tc.set...)...)
				if err == nil || !strings.Contains(stderr, "values don't meet the specifications of the schema") || !strings.Contains(stderr, tc.want) {
					t.Errorf("helm template %s: %v\n%s\nwant the schema's refusal naming %q", strings.Join(tc.set, " "), err, stderr, tc.want)
				}
			})
		}
	})
}

// checkRendering checks what one rendering holds: its configurations
// load, its PrometheusRule's groups are the mixin's, its dashboards the
// mixin's files.
func checkRendering(t *testing.T, r rendering, groups []any, dashboards []string) {
	dir := t.TempDir()
	load := func(key, text string, loader func(string) error) {
		f := filepath.Join(dir, key)
		if err := os.WriteFile(f, []byte(text), 0o600); err != nil {
			t.Fatal(err)
		}
		if err := loader(f); err != nil {
			t.Errorf("%s of %s: %v", key, r.where, err)
		}
	}
	for _, o := range r.objs {
		data := asMap(o["data"])
		switch o["kind"] {
		case "ConfigMap":
			if c, ok := data["config.yml"].(string); ok {
				load("config.yml", c, func(f string) error { _, err := config.LoadFile(f); return err })
			}
			if c, ok := data["bench.yml"].(string); ok {
				load("bench.yml", c, func(f string) error { _, err := bench.LoadFileContext(context.Background(), f); return err })
			}
			for key, v := range data {
				if !strings.HasSuffix(key, ".json") {
					continue
				}
				want, err := os.ReadFile(filepath.Join(filepath.Dir(dashboards[0]), key))
				if err != nil || v != string(want) {
					t.Errorf("%s: the dashboard %s is not mixin/generated/dashboards/%s (%v)", objectKey(o), key, key, err)
				}
				if l := dig(o, "metadata", "labels", "grafana_dashboard"); l != "1" {
					t.Errorf("%s: label grafana_dashboard %v, want \"1\" (Grafana's dashboard sidecar)", objectKey(o), l)
				}
			}
		case "PrometheusRule":
			if got := asList(dig(o, "spec", "groups")); jsonOf(t, got) != jsonOf(t, groups) {
				t.Errorf("%s: its groups are not mixin/generated's rules and alerts:\n%.2000s\nwant:\n%.2000s", objectKey(o), jsonOf(t, got), jsonOf(t, groups))
			}
		}
	}
	if n := countKind(r.objs, "ConfigMap", func(o map[string]any) bool {
		return dig(o, "metadata", "labels", "app.kubernetes.io/component") == "dashboard"
	}); n != 0 && n != len(dashboards) {
		t.Errorf("%d dashboard ConfigMaps, want one per dashboard of mixin/generated (%d)", n, len(dashboards))
	}
}

func countKind(objs []map[string]any, kind string, match func(map[string]any) bool) int {
	n := 0
	for _, o := range objs {
		if o["kind"] == kind && match(o) {
			n++
		}
	}
	return n
}

// TestChartFilesMatchMixin: the chart's copies of the mixin's rules,
// alerts and dashboards (a chart reads only files inside its directory)
// are mixin/generated's, byte for byte: `make mixin` writes both.
func TestChartFilesMatchMixin(t *testing.T) {
	root := realstack.RepoRoot(t)
	list := func(dir string) []string {
		var out []string
		err := filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
			if err == nil && !d.IsDir() {
				r, _ := filepath.Rel(dir, p)
				out = append(out, filepath.ToSlash(r))
			}
			return err
		})
		if err != nil {
			t.Fatal(err)
		}
		return out
	}
	generated, files := filepath.Join(root, "mixin/generated"), filepath.Join(root, chartDir, "files")
	want, got := list(generated), list(files)
	if !slices.Equal(got, want) {
		t.Fatalf("stale, run make mixin: %s/files holds %v, mixin/generated %v", chartDir, got, want)
	}
	for _, f := range want {
		a, err := os.ReadFile(filepath.Join(generated, f))
		if err != nil {
			t.Fatal(err)
		}
		b, err := os.ReadFile(filepath.Join(files, f))
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(a, b) {
			t.Errorf("stale, run make mixin: %s/files/%s differs from mixin/generated/%s", chartDir, f, f)
		}
	}
}

// TestHelmToolPinned: the control plane's module (tools/kube) requires helm
// at the version the tests expect and names its command a tool, and `make
// tools` builds it.
func TestHelmToolPinned(t *testing.T) {
	root := realstack.RepoRoot(t)
	b, err := os.ReadFile(filepath.Join(root, helmToolDir, "go.mod"))
	if err != nil {
		t.Fatal(err)
	}
	if !regexp.MustCompile(`(?m)^\s*helm\.sh/helm/v4 `+regexp.QuoteMeta(helmVersion)+`\b`).Match(b) ||
		!regexp.MustCompile(`(?m)^(tool\s+|\s+)helm\.sh/helm/v4/cmd/helm$`).Match(b) {
		t.Errorf("%s/go.mod does not pin the tool helm.sh/helm/v4/cmd/helm at %s", helmToolDir, helmVersion)
	}
	mk, err := os.ReadFile(filepath.Join(root, "Makefile"))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(mk), "module-run,"+helmToolDir+",-exec echo helm.sh/helm/v4/cmd/helm)") {
		t.Errorf("the Makefile's tools target does not build %s", helmToolDir)
	}
}

// sidecarNotes runs `helm install --dry-run=client` of the sidecar example
// as its README does and returns the container and the volume its notes
// print for the server's pod.
func sidecarNotes(t *testing.T, helm string, extra ...string) (containers, volumes []any) {
	t.Helper()
	args := append([]string{"install", "infer-exporter", chartDir, "--namespace", "inference",
		"-f", chartDir + "/examples/sidecar-vllm.yaml", "--dry-run=client"}, extra...)
	out, stderr, err := runHelm(t, helm, args...)
	if err != nil {
		t.Fatalf("helm %s: %v\n%s", strings.Join(args, " "), err, stderr)
	}
	_, notes, ok := strings.Cut(out, "\nNOTES:\n")
	_, rest, ok1 := strings.Cut(notes, "# infer-exporter sidecar: containers\n")
	cs, rest, ok2 := strings.Cut(rest, "# infer-exporter sidecar: volumes\n")
	vs, _, ok3 := strings.Cut(rest, "# infer-exporter sidecar: end\n")
	if !ok || !ok1 || !ok2 || !ok3 {
		t.Fatalf("helm install --dry-run=client printed no sidecar in its notes:\n%s", out)
	}
	if err := yaml.Unmarshal([]byte(cs), &containers); err != nil {
		t.Fatalf("the notes' containers: %v\n%s", err, cs)
	}
	if err := yaml.Unmarshal([]byte(vs), &volumes); err != nil {
		t.Fatalf("the notes' volumes: %v\n%s", err, vs)
	}
	return containers, volumes
}

// trimStrings is v with the trailing newlines of its strings cut.
func trimStrings(v any) any {
	switch x := v.(type) {
	case string:
		return strings.TrimRight(x, "\n")
	case []any:
		out := make([]any, len(x))
		for i, e := range x {
			out[i] = trimStrings(e)
		}
		return out
	case map[string]any:
		out := make(map[string]any, len(x))
		for k, e := range x {
			out[k] = trimStrings(e)
		}
		return out
	}
	return v
}

// kustomizeBuild builds a kustomization with the pinned kustomize.
func kustomizeBuild(t *testing.T, kustomize, dir string) []map[string]any {
	t.Helper()
	out, err := exec.Command(kustomize, "build", dir).Output()
	if err != nil {
		var stderr []byte
		if ee, ok := err.(*exec.ExitError); ok {
			stderr = ee.Stderr
		}
		t.Fatalf("kustomize build %s: %v\n%s", dir, err, stderr)
	}
	f := filepath.Join(t.TempDir(), "build.yaml")
	if err := os.WriteFile(f, out, 0o644); err != nil {
		t.Fatal(err)
	}
	return yamlDocs(t, f)
}

// kustomizedImage is the image kustomize gives a container whose image is
// name: the kustomization's images entry.
func kustomizedImage(t *testing.T, kustomization, name string) string {
	t.Helper()
	for _, im := range asList(yamlDocs(t, kustomization)[0]["images"]) {
		if m := asMap(im); m["name"] == name {
			return fmt.Sprintf("%v:%v", m["newName"], m["newTag"])
		}
	}
	t.Fatalf("%s: no image %s", kustomization, name)
	return ""
}

// TestChartMatchesDeploy: the chart renders what deploy/ applies, so that
// the two stay one design.
//
//   - The sidecar example (examples/sidecar-vllm.yaml, as the release
//     infer-exporter in the namespace inference): the container and the
//     volume `helm install` prints are those of vLLM's pod in
//     deploy/kubernetes/deployment.yaml (the README's vLLM example; the
//     image is the one kustomize sets), and its configuration, Service,
//     PodMonitor, Probe and PrometheusRule are those kustomize builds from
//     deploy/kubernetes.
//   - A chart of the server's that depends on this one renders the same
//     container and volume with the chart's named templates.
//   - With bench.config set to deploy/kubernetes/bench/bench.yml, the
//     bench's Jobs, claim and PodMonitor are those of
//     deploy/kubernetes/bench, but for the chart's names and labels, its
//     ServiceAccount and the bench ConfigMap's name; and the chart's default
//     bench.config is bench.yml but for the target's URL (in the release's
//     namespace).
func TestChartMatchesDeploy(t *testing.T) {
	root := realstack.RepoRoot(t)
	helm := helmTool(t)
	kustomize := realstack.Tool(t, kustomizeModfile, "kustomize")
	image := kustomizedImage(t, filepath.Join(root, "deploy/kubernetes/kustomization.yaml"), "infer-exporter")
	deployObjs := kustomizeBuild(t, kustomize, filepath.Join(root, "deploy/kubernetes"))

	// The pod of deploy/kubernetes/deployment.yaml as written (kustomize
	// renames its ConfigMap, which the release's has no hash in).
	vllm := yamlDocs(t, filepath.Join(root, "deploy/kubernetes/deployment.yaml"))[0]
	ps := podSpec(vllm)
	containers, volumes := sidecarNotes(t, helm)
	t.Run("the sidecar is deploy/kubernetes's", func(t *testing.T) {
		if len(containers) != 1 || len(volumes) != 1 {
			t.Fatalf("the notes print %d containers and %d volumes, want 1 and 1", len(containers), len(volumes))
		}
		want := deepCopy(t, asMap(asList(ps["containers"])[1]))
		if want["name"] != "infer-exporter" || want["image"] != "infer-exporter" {
			t.Fatalf("deploy/kubernetes/deployment.yaml's second container is %v (%v), want infer-exporter", want["name"], want["image"])
		}
		want["image"] = image
		if got := asMap(containers[0]); jsonOf(t, got) != jsonOf(t, want) {
			t.Errorf("the chart's sidecar:\n%s\ndeploy/kubernetes/deployment.yaml's:\n%s", jsonOf(t, got), jsonOf(t, want))
		}
		vol := asMap(volumes[0])
		var deployVol map[string]any
		for _, v := range asList(ps["volumes"]) {
			if asMap(v)["name"] == vol["name"] {
				deployVol = asMap(v)
			}
		}
		if deployVol == nil || dig(deployVol, "configMap", "name") != dig(vol, "configMap", "name") || dig(vol, "configMap", "items") == nil {
			t.Errorf("the chart's volume %v, deploy/kubernetes/deployment.yaml's %v: want the same ConfigMap", vol, deployVol)
		}
	})

	t.Run("the sidecar's objects are deploy/kubernetes's", func(t *testing.T) {
		r, err := renderChart(t, helm, t.TempDir(), chartExample{"sidecar", []string{"infer-exporter", chartDir,
			"--namespace", "inference", "-f", chartDir + "/examples/sidecar-vllm.yaml"}})
		if err != nil {
			t.Fatal(err)
		}
		find := func(objs []map[string]any, kind string, match func(map[string]any) bool) map[string]any {
			t.Helper()
			var found []map[string]any
			for _, o := range objs {
				if o["kind"] == kind && match(o) {
					found = append(found, o)
				}
			}
			if len(found) != 1 {
				t.Fatalf("%d %s objects, want 1", len(found), kind)
			}
			return found[0]
		}
		all := func(map[string]any) bool { return true }
		named := func(n string) func(map[string]any) bool {
			return func(o map[string]any) bool { return dig(o, "metadata", "name") == n }
		}
		exporterConfig := func(o map[string]any) bool { _, ok := asMap(o["data"])["config.yml"]; return ok }
		for _, tc := range []struct {
			kind        string
			chart, kust func(map[string]any) bool
			field       func(map[string]any) any
		}{
			{"ConfigMap", exporterConfig, exporterConfig, func(o map[string]any) any {
				var c any
				if err := yaml.Unmarshal([]byte(asMap(o["data"])["config.yml"].(string)), &c); err != nil {
					t.Fatal(err)
				}
				return c
			}},
			{"Service", named("infer-exporter"), named("infer-exporter"), func(o map[string]any) any {
				s := deepCopy(t, asMap(o["spec"]))
				if s["type"] == "ClusterIP" {
					delete(s, "type") // the default
				}
				return s
			}},
			{"PodMonitor", all, all, func(o map[string]any) any { return o["spec"] }},
			{"Probe", all, all, func(o map[string]any) any { return o["spec"] }},
			// Written by two generators: the mixin's files end each
			// expression with a newline, deploy/'s does not.
			{"PrometheusRule", all, all, func(o map[string]any) any { return trimStrings(o["spec"]) }},
		} {
			got, want := tc.field(find(r.objs, tc.kind, tc.chart)), tc.field(find(deployObjs, tc.kind, tc.kust))
			if jsonOf(t, got) != jsonOf(t, want) {
				t.Errorf("the chart's %s:\n%.3000s\ndeploy/kubernetes's:\n%.3000s", tc.kind, jsonOf(t, got), jsonOf(t, want))
			}
		}
	})

	t.Run("a server's chart includes the sidecar", func(t *testing.T) {
		parent := t.TempDir()
		abs := filepath.Join(root, chartDir)
		files := map[string]string{
			"Chart.yaml":  "apiVersion: v2\nname: my-vllm\nversion: 0.1.0\ndependencies:\n  - name: infer-exporter\n    version: 0.1.0\n    repository: file://" + abs + "\n",
			"values.yaml": "infer-exporter:\n  fullnameOverride: infer-exporter\n",
			"templates/deployment.yaml": `apiVersion: apps/v1
kind: Deployment
metadata:
  name: vllm
spec:
  selector: {matchLabels: {app.kubernetes.io/name: vllm}}
  template:
    metadata: {labels: {app.kubernetes.io/name: vllm}}
    spec:
      containers:
        - name: vllm
          image: vllm/vllm-openai:v0.11.0
        {{- include "infer-exporter.container" (index .Subcharts "infer-exporter") | nindent 8 }}
      volumes:
        {{- include "infer-exporter.configVolume" (index .Subcharts "infer-exporter") | nindent 8 }}
`,
		}
		for name, text := range files {
			p := filepath.Join(parent, name)
			if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(p, []byte(text), 0o644); err != nil {
				t.Fatal(err)
			}
		}
		// The sidecar example's values, as the dependency's.
		example, err := os.ReadFile(filepath.Join(abs, "examples/sidecar-vllm.yaml"))
		if err != nil {
			t.Fatal(err)
		}
		var ev map[string]any
		if err := yaml.Unmarshal(example, &ev); err != nil {
			t.Fatal(err)
		}
		ev["fullnameOverride"] = "infer-exporter"
		vb, err := yaml.Marshal(map[string]any{"infer-exporter": ev})
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(parent, "values.yaml"), vb, 0o644); err != nil {
			t.Fatal(err)
		}
		if _, stderr, err := runHelm(t, helm, "dependency", "build", parent); err != nil {
			t.Fatalf("helm dependency build: %v\n%s", err, stderr)
		}
		out, stderr, err := runHelm(t, helm, "template", "my-vllm", parent, "--namespace", "inference", "--show-only", "templates/deployment.yaml")
		if err != nil {
			t.Fatalf("helm template of the server's chart: %v\n%s", err, stderr)
		}
		var dep map[string]any
		if err := yaml.Unmarshal([]byte(strings.TrimPrefix(out, "---\n")), &dep); err != nil {
			t.Fatal(err)
		}
		cs, vs := asList(dig(dep, "spec", "template", "spec", "containers")), asList(dig(dep, "spec", "template", "spec", "volumes"))
		if len(cs) != 2 || jsonOf(t, cs[1]) != jsonOf(t, containers[0]) || len(vs) != 1 || jsonOf(t, vs[0]) != jsonOf(t, volumes[0]) {
			t.Errorf("the server's chart renders containers %s and volumes %s, want vllm and the notes' %s and %s",
				jsonOf(t, cs), jsonOf(t, vs), jsonOf(t, containers), jsonOf(t, volumes))
		}
	})

	t.Run("the bench is deploy/kubernetes/bench's", func(t *testing.T) {
		benchYML := yamlDocs(t, filepath.Join(root, benchDir, "bench.yml"))[0]
		vf := filepath.Join(t.TempDir(), "values.yaml")
		vb, err := yaml.Marshal(map[string]any{"mode": "none", "fullnameOverride": "infer",
			"prometheusRule": map[string]any{"enabled": false}, "dashboards": map[string]any{"enabled": false},
			"bench": map[string]any{"enabled": true, "config": benchYML}})
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(vf, vb, 0o644); err != nil {
			t.Fatal(err)
		}
		r, err := renderChart(t, helm, t.TempDir(), chartExample{"bench", []string{"infer-bench", chartDir, "--namespace", "inference", "-f", vf}})
		if err != nil {
			t.Fatal(err)
		}
		kust := kustomizeBuild(t, kustomize, filepath.Join(root, benchDir))
		benchImage := kustomizedImage(t, filepath.Join(root, benchDir, "kustomization.yaml"), "infer-exporter")
		// What may differ: names, labels and selectors (the chart's), the
		// chart's ServiceAccount, the bench ConfigMap's name and items.
		normalize := func(o map[string]any, chart bool) map[string]any {
			o = deepCopy(t, o)
			delete(o, "metadata")
			if data := asMap(o["data"]); data != nil {
				var c any
				if err := yaml.Unmarshal([]byte(fmt.Sprint(data["bench.yml"])), &c); err != nil {
					t.Fatal(err)
				}
				data["bench.yml"] = c
			}
			spec := asMap(o["spec"])
			delete(spec, "selector")
			if ps := asMap(dig(o, "spec", "template", "spec")); ps != nil {
				delete(asMap(dig(o, "spec", "template")), "metadata")
				delete(ps, "serviceAccountName")
				delete(ps, "automountServiceAccountToken")
				for _, c := range asList(ps["topologySpreadConstraints"]) {
					delete(asMap(c), "labelSelector")
				}
				for _, key := range []string{"initContainers", "containers"} {
					for _, c := range asList(ps[key]) {
						if cm := asMap(c); !chart && cm["image"] == "infer-exporter" {
							cm["image"] = benchImage
						}
					}
				}
				for _, v := range asList(ps["volumes"]) {
					if cm := asMap(asMap(v)["configMap"]); cm != nil {
						delete(cm, "name")
						delete(cm, "items")
					}
				}
			}
			return o
		}
		for _, kind := range []string{"Job", "PersistentVolumeClaim", "PodMonitor", "ConfigMap"} {
			var chartObjs, kustObjs []map[string]any
			for _, o := range r.objs {
				if o["kind"] == kind {
					chartObjs = append(chartObjs, o)
				}
			}
			for _, o := range kust {
				if o["kind"] == kind {
					kustObjs = append(kustObjs, o)
				}
			}
			if len(chartObjs) != len(kustObjs) || len(chartObjs) == 0 {
				t.Errorf("%d %s objects in the chart's bench, %d in deploy/kubernetes/bench's", len(chartObjs), kind, len(kustObjs))
				continue
			}
			for _, c := range chartObjs {
				name, _ := dig(c, "metadata", "name").(string)
				var k map[string]any
				for _, o := range kustObjs {
					// infer-bench-config-<hash> and infer-bench-<hash>: the
					// same prefix.
					if kn, _ := dig(o, "metadata", "name").(string); kn == name || kind == "ConfigMap" || kind == "PodMonitor" {
						k = o
					}
				}
				if k == nil {
					t.Errorf("the chart's %s %s: deploy/kubernetes/bench has none of that name", kind, name)
					continue
				}
				got, want := normalize(c, true), normalize(k, false)
				if jsonOf(t, got) != jsonOf(t, want) {
					t.Errorf("the chart's %s %s:\n%s\ndeploy/kubernetes/bench's:\n%s", kind, name, jsonOf(t, got), jsonOf(t, want))
				}
			}
		}

		// The default bench.config is bench.yml, in the release's namespace.
		values := yamlDocs(t, filepath.Join(root, chartDir, "values.yaml"))[0]
		def := deepCopy(t, asMap(dig(values, "bench", "config")))
		asMap(asList(def["targets"])[0])["url"] = "http://vllm.inference.svc.cluster.local:8000"
		if got, want := jsonOf(t, def), jsonOf(t, benchYML); got != want {
			t.Errorf("values.yaml's bench.config, its URL that of deploy/'s namespace:\n%s\nbench.yml:\n%s", got, want)
		}
	})
}

// newlineValue is what issue 54 (F7) set priorityClassName to: unquoted in
// the template, its second line became a field of the pod. The test below
// numbers its first line, one number for each place it puts it.
const newlineValue = "a\nhostPID: true"

// schemaString is one place of the values where a string goes: a value,
// or a key of a map (its propertyNames).
type schemaString struct {
	path []string // the values' keys down to it; "[]" is an array's first item
	key  bool     // a key of the map at path, not a value
	free bool     // the schema gives it neither a pattern nor an enum
}

// pointer is the JSON pointer helm's schema errors name it by.
func (s schemaString) pointer() string {
	var b strings.Builder
	for _, p := range s.path {
		if p == "[]" {
			p = "0"
		}
		b.WriteString("/" + p)
	}
	return b.String()
}

// values is a values document that holds v at the string's place, beside
// siblings in its object (a key of a map is given the value "1", which
// every map of the chart takes).
func (s schemaString) values(v string, siblings map[string]any) map[string]any {
	var leaf any = v
	if s.key {
		leaf = map[string]any{v: "1"}
	}
	for i := len(s.path) - 1; i >= 0; i-- {
		if s.path[i] == "[]" {
			leaf = []any{leaf}
			continue
		}
		m := map[string]any{s.path[i]: leaf}
		if i == len(s.path)-1 {
			for k, sv := range siblings {
				m[k] = sv
			}
		}
		leaf = m
	}
	return asMap(leaf)
}

// schemaStrings walks values.schema.json, its references to its own
// definitions resolved, and returns every place a string may go. It does
// not enter `config` and `bench.config`: they are the exporter's and the
// bench's configuration files, which the chart writes whole into a
// ConfigMap with toYaml and the exporter checks strictly at start (a
// prompt may hold newlines). A definition met again on its own path (one
// that nests itself) ends the walk there.
func schemaStrings(t *testing.T, schema map[string]any) []schemaString {
	t.Helper()
	defs := asMap(schema["definitions"])
	resolve := func(n map[string]any, seen []string) (map[string]any, []string, bool) {
		for n["$ref"] != nil {
			name, ok := strings.CutPrefix(fmt.Sprint(n["$ref"]), "#/definitions/")
			def := asMap(defs[name])
			if !ok || def == nil {
				t.Fatalf("values.schema.json: $ref %v is not one of its definitions", n["$ref"])
			}
			if slices.Contains(seen, name) {
				return nil, seen, false
			}
			seen = append(slices.Clip(seen), name)
			n = def
		}
		return n, seen, true
	}
	takesString := func(n map[string]any) bool {
		switch ty := n["type"].(type) {
		case string:
			return ty == "string"
		case []any:
			return slices.Contains(ty, any("string"))
		}
		return false
	}
	free := func(n map[string]any) bool { return n["pattern"] == nil && n["enum"] == nil }
	var out []schemaString
	var walk func(n map[string]any, path, seen []string)
	walk = func(n map[string]any, path, seen []string) {
		n, seen, ok := resolve(n, seen)
		if !ok {
			return
		}
		path = slices.Clip(path)
		if takesString(n) {
			out = append(out, schemaString{path: path, free: free(n)})
		}
		props := asMap(n["properties"])
		keys := make([]string, 0, len(props))
		for k := range props {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		for _, k := range keys {
			if p := strings.Join(append(path, k), "."); p == "global" || p == "config" || p == "bench.config" {
				continue
			}
			walk(asMap(props[k]), append(path, k), seen)
		}
		if items := asMap(n["items"]); items != nil {
			walk(items, append(path, "[]"), seen)
		}
		if extra := asMap(n["additionalProperties"]); extra != nil {
			walk(extra, append(path, "x"), seen)
		}
		if names := asMap(n["propertyNames"]); names != nil {
			if names, _, ok := resolve(names, seen); ok && takesString(names) {
				out = append(out, schemaString{path: path, key: true, free: free(names)})
			}
		}
	}
	walk(schema, nil, nil)
	return out
}

// mergeValues merges b into a, when no place of b is already a's (two
// strings at one place, or a string where the other has a map); then it
// changes nothing and says false. An array holds one item, its first.
func mergeValues(a, b map[string]any) bool {
	var clash func(x, y any) bool
	clash = func(x, y any) bool {
		xm, ym := asMap(x), asMap(y)
		xl, yl := asList(x), asList(y)
		switch {
		case xm != nil && ym != nil:
			for k, v := range ym {
				if w, ok := xm[k]; ok && clash(w, v) {
					return true
				}
			}
			return false
		case xl != nil && yl != nil:
			return clash(xl[0], yl[0])
		}
		return true
	}
	var into func(x, y any)
	into = func(x, y any) {
		if xl := asList(x); xl != nil {
			into(xl[0], asList(y)[0])
			return
		}
		xm := asMap(x)
		for k, v := range asMap(y) {
			if w, ok := xm[k]; ok {
				into(w, v)
			} else {
				xm[k] = v
			}
		}
	}
	if clash(a, b) {
		return false
	}
	into(a, b)
	return true
}

// TestHelmChartRefusesNewlines: every string of the chart's values, each
// value and each key of a map, set to a line and "hostPID: true" (issue
// 54, F7: priorityClassName so set gave the pod hostPID), is refused by
// values.schema.json, and helm names it; the few the schema leaves free
// (Kubernetes takes any string there) render as one string each, with no
// field of their second line in any object.
//
// The places come from the schema itself, so a string value added without
// a pattern fails here until it has one or is listed as free with the
// reason; and the values the templates wrote unquoted until F7 are among
// them, so that the walk is known to reach them.
//
// Each place has a string of its own (numbered), and the places share as
// few values files as hold them without two at one place: three helm runs
// for the 188 places of now, where one run a place took 25 s of CPU on
// the 2-core machine. That loses nothing: the schema has no anyOf, oneOf
// or dependencies (checked below), so its refusal of one place does not
// depend on any other, and helm lists every refusal, each with its place
// or its key.
func TestHelmChartRefusesNewlines(t *testing.T) {
	root := realstack.RepoRoot(t)
	helm := helmTool(t)
	b, err := os.ReadFile(filepath.Join(root, chartDir, "values.schema.json"))
	if err != nil {
		t.Fatal(err)
	}
	var schema map[string]any
	if err := json.Unmarshal(b, &schema); err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(b), `"anyOf"`) || strings.Contains(string(b), `"oneOf"`) || strings.Contains(string(b), `"dependencies"`) {
		t.Fatal("values.schema.json has anyOf, oneOf or dependencies: a refusal may then depend on another value, and the places cannot share a values file")
	}
	strs := schemaStrings(t, schema)

	// Free text: Kubernetes keeps any string in an annotation's value and
	// an environment variable's, a line break included (a certificate, a
	// template), and the chart writes both with toYaml. Each with what its
	// object needs beside it.
	freeText := map[string]map[string]any{
		"/podAnnotations/x":             nil,
		"/serviceAccount/annotations/x": nil,
		"/service/annotations/x":        nil,
		"/dashboards/annotations/x":     nil,
		"/extraEnv/0/value":             {"name": "EXAMPLE"},
	}
	// The values the templates wrote unquoted, as they were, until F7.
	unquoted := []string{
		"/nameOverride", "/fullnameOverride", "/image/repository", "/image/tag", "/image/pullPolicy",
		"/existingConfigMap", "/existingConfigMapKey", "/priorityClassName", "/serviceAccount/name",
		"/nvml/runtimeClassName", "/service/type", "/podMonitor/interval", "/podMonitor/job",
		"/serviceMonitor/interval", "/serviceMonitor/job", "/probe/module", "/probe/jobName",
		"/probe/interval", "/probe/scrapeTimeout", "/dashboards/label", "/dashboards/namespace",
		"/bench/existingConfigMap", "/bench/existingConfigMapKey", "/bench/results/existingClaim",
		"/bench/results/storageClassName", "/bench/results/size", "/bench/helperImage",
		"/bench/podMonitor/interval",
	}
	found := map[string]bool{}
	for _, s := range strs {
		if !s.key {
			found[s.pointer()] = true
		}
	}
	for _, p := range unquoted {
		if !found[p] {
			t.Errorf("values.schema.json: no string at %s", p)
		}
	}
	for p := range freeText {
		if !found[p] {
			t.Errorf("%s is listed as free text, but values.schema.json has no string there", p)
		}
	}

	// One string for each place, and the values files that hold them.
	type place struct {
		schemaString
		name, value string
		free        bool // listed in freeText: rendered, not refused
		batch       int
	}
	var places []place
	var refused, rendered []map[string]any
	for i, s := range strs {
		p := place{schemaString: s, name: s.pointer(), value: fmt.Sprintf("a%d%s", i, strings.TrimPrefix(newlineValue, "a"))}
		siblings, free := freeText[p.name]
		p.free = free && !s.key
		if s.key {
			p.name += " (a key)"
		}
		batches := &refused
		if p.free {
			batches = &rendered
		}
		doc := s.values(p.value, siblings)
		p.batch = slices.IndexFunc(*batches, func(b map[string]any) bool { return mergeValues(b, doc) })
		if p.batch < 0 {
			p.batch = len(*batches)
			*batches = append(*batches, doc)
		}
		places = append(places, p)
	}
	t.Logf("%d places of a string in values.schema.json, in %d values files refused and %d rendered", len(places), len(refused), len(rendered))

	dir := t.TempDir()
	run := func(kind string, i int, doc map[string]any) (vb []byte, out, stderr string, err error) {
		vb, err = yaml.Marshal(doc)
		if err != nil {
			t.Fatal(err)
		}
		vf := filepath.Join(dir, fmt.Sprintf("%s-%d.yaml", kind, i))
		if err := os.WriteFile(vf, vb, 0o644); err != nil {
			t.Fatal(err)
		}
		out, stderr, err = runHelm(t, helm, "template", "x", chartDir, "-f", vf)
		return vb, out, stderr, err
	}
	refusals := make([]string, len(refused))
	for i, doc := range refused {
		vb, _, stderr, err := run("refused", i, doc)
		if err == nil || !strings.Contains(stderr, "values don't meet the specifications of the schema") {
			t.Fatalf("helm template with\n%s: %v\n%s\nwant the schema's refusal", vb, err, stderr)
		}
		refusals[i] = stderr
	}
	objs := make([][]map[string]any, len(rendered))
	for i, doc := range rendered {
		vb, out, stderr, err := run("rendered", i, doc)
		if err != nil {
			t.Fatalf("helm template with\n%s: %v\n%s", vb, err, stderr)
		}
		f := filepath.Join(dir, fmt.Sprintf("rendered-%d.out.yaml", i))
		if err := os.WriteFile(f, []byte(out), 0o644); err != nil {
			t.Fatal(err)
		}
		objs[i] = yamlDocs(t, f)
		for _, o := range objs[i] {
			if k := findKey(o, "hostPID"); k != "" {
				t.Errorf("%s: a value's second line is a field: %s", objectKey(o), k)
			}
		}
	}

	for _, p := range places {
		t.Run(p.name, func(t *testing.T) {
			if p.free {
				held := false
				for _, o := range objs[p.batch] {
					held = held || holdsString(o, p.value)
				}
				if !held {
					t.Errorf("no rendered object holds %q as one string", p.value)
				}
				return
			}
			if p.schemaString.free {
				t.Errorf("values.schema.json gives %s neither a pattern nor an enum", p.name)
			}
			// helm names a value by its place; a key by itself, at the
			// place '' (the schema library's).
			want := "at '" + p.pointer() + "': "
			if p.key {
				want = "invalid propertyName '" + strings.ReplaceAll(p.value, "\n", `\n`) + "'"
			}
			if !strings.Contains(refusals[p.batch], want) {
				t.Errorf("helm's refusal names no %s:\n%s", want, refusals[p.batch])
			}
		})
	}
}

// findKey returns the path of the first key named key in v, or "".
func findKey(v any, key string) string {
	switch x := v.(type) {
	case map[string]any:
		for k, e := range x {
			if k == key {
				return k
			}
			if p := findKey(e, key); p != "" {
				return k + "." + p
			}
		}
	case []any:
		for i, e := range x {
			if p := findKey(e, key); p != "" {
				return fmt.Sprintf("%d.%s", i, p)
			}
		}
	}
	return ""
}

// holdsString says whether s is one of v's strings.
func holdsString(v any, s string) bool {
	switch x := v.(type) {
	case string:
		return x == s
	case map[string]any:
		for _, e := range x {
			if holdsString(e, s) {
				return true
			}
		}
	case []any:
		for _, e := range x {
			if holdsString(e, s) {
				return true
			}
		}
	}
	return false
}

// everyValueFile sets every value of the chart's values.yaml
// (TestHelmChartEveryValue).
const everyValueFile = "e2e/testdata/chart-every-value.yaml"

// TestHelmChartEveryValue: the chart rendered with every value of its
// values.yaml set (e2e/testdata/chart-every-value.yaml, and again with its
// alternatives the other way: the chart's own ConfigMaps, claim and
// PodMonitor) is valid Kubernetes (kubeconform -strict), each rendering's
// Deployment, two Jobs and Pod are admitted at Pod Security "restricted"
// by the pinned check, and the values reach the pods: their security
// contexts are the file's, and integers past a million are integers. The
// file must set every value of values.yaml, each empty default to
// something, so that a value added to the chart is exercised here.
func TestHelmChartEveryValue(t *testing.T) {
	root := realstack.RepoRoot(t)
	helm := helmTool(t)
	kubeconform := realstack.Tool(t, kubeconformModfile, "kubeconform")
	podsecurity := podSecurityTool(t)

	defaults := yamlDocs(t, filepath.Join(root, chartDir, "values.yaml"))[0]
	every := yamlDocs(t, filepath.Join(root, everyValueFile))[0]
	b, err := os.ReadFile(filepath.Join(root, chartDir, "values.schema.json"))
	if err != nil {
		t.Fatal(err)
	}
	var schema map[string]any
	if err := json.Unmarshal(b, &schema); err != nil {
		t.Fatal(err)
	}
	t.Run("the file sets every value", func(t *testing.T) {
		for _, p := range unsetValues(schema, asMap(schema["definitions"]), defaults, every, nil) {
			t.Errorf("%s does not set %s (or leaves it empty)", everyValueFile, p)
		}
	})

	dir := t.TempDir()
	var renderings []rendering
	for _, ex := range []chartExample{
		{"every value", []string{"infer-exporter", chartDir, "--namespace", "inference", "-f", everyValueFile}},
		{"every value, the alternatives the other way", []string{"infer-exporter", chartDir, "--namespace", "inference", "-f", everyValueFile,
			"--set", "existingConfigMap=,bench.existingConfigMap=,bench.results.existingClaim=,podMonitor.enabled=true,serviceMonitor.enabled=false"}},
	} {
		r, err := renderChart(t, helm, dir, ex)
		if err != nil {
			t.Fatal(err)
		}
		renderings = append(renderings, r)
	}
	var files []string
	for _, r := range renderings {
		files = append(files, r.file)
		kinds := map[string]int{}
		for _, o := range r.objs {
			if k, _ := o["kind"].(string); podTemplateKinds[k] {
				kinds[k]++
			}
		}
		if kinds["Deployment"] != 1 || kinds["Job"] != 2 || kinds["Pod"] != 1 || len(kinds) != 3 {
			t.Errorf("%s: pod templates %v, want the Deployment, the bench's two Jobs and the results reader", r.where, kinds)
		}
	}

	t.Run("kubeconform", func(t *testing.T) {
		want := 0
		for _, f := range files {
			want += countResources(t, f)
		}
		res, err := runKubeconform(t, kubeconform, writeSchemas(t, kubeSchemaSet(t), files), files...)
		for _, r := range res.Resources {
			if r.Status != "statusValid" {
				t.Errorf("%s: %s %s: %s %s", r.Filename, r.Kind, r.Name, r.Status, r.Msg)
			}
		}
		if err != nil || res.Summary.Valid != want || res.Summary.Invalid+res.Summary.Errors+res.Summary.Skipped != 0 {
			t.Errorf("kubeconform: %v; summary %+v, want all %d resources valid", err, res.Summary, want)
		}
	})

	t.Run("Pod Security restricted", func(t *testing.T) {
		out, code := runPodSecurity(t, podsecurity, files...)
		m := podSecuritySummary.FindStringSubmatch(out)
		if code != 0 || m == nil || m[1] != "8" || m[2] != "0" {
			t.Errorf("podsecurity: exit %d, summary %q, want the 8 pod templates of both renderings admitted at restricted:latest:\n%s", code, m, out)
		}
	})

	t.Run("the values reach the pods", func(t *testing.T) {
		for _, r := range renderings {
			for _, o := range r.objs {
				spec := asMap(dig(o, "spec", "template", "spec"))
				if o["kind"] == "Pod" {
					spec = asMap(o["spec"])
				}
				if spec == nil {
					continue
				}
				podSC, sc := every["podSecurityContext"], every["securityContext"]
				if o["kind"] != "Deployment" {
					podSC, sc = dig(every, "bench", "podSecurityContext"), dig(every, "bench", "securityContext")
				} else {
					// Compared as decoded, type and all: 1e+06 decodes as a
					// float, and JSON would print it 1000000.
					for _, f := range []string{"priorityClassName", "terminationGracePeriodSeconds"} {
						if spec[f] != every[f] {
							t.Errorf("%s: %s: %s %v (%T), want %v (%T)", r.where, objectKey(o), f, spec[f], spec[f], every[f], every[f])
						}
					}
					if got, want := spec["runtimeClassName"], dig(every, "nvml", "runtimeClassName"); got != want {
						t.Errorf("%s: %s: runtimeClassName %v, want %v", r.where, objectKey(o), got, want)
					}
				}
				if jsonOf(t, spec["securityContext"]) != jsonOf(t, podSC) {
					t.Errorf("%s: %s: the pod's securityContext %s, want %s", r.where, objectKey(o), jsonOf(t, spec["securityContext"]), jsonOf(t, podSC))
				}
				for _, key := range []string{"initContainers", "containers"} {
					for _, c := range asList(spec[key]) {
						if got := asMap(c)["securityContext"]; jsonOf(t, got) != jsonOf(t, sc) {
							t.Errorf("%s: %s: container %v's securityContext %s, want %s", r.where, objectKey(o), asMap(c)["name"], jsonOf(t, got), jsonOf(t, sc))
						}
					}
				}
				if o["kind"] == "Job" {
					want, _ := dig(every, "bench", "activeDeadlineSeconds").(int)
					if strings.HasSuffix(fmt.Sprint(dig(o, "metadata", "name")), "-merge") {
						want += 300
					}
					if got := dig(o, "spec", "activeDeadlineSeconds"); got != want {
						t.Errorf("%s: %s: activeDeadlineSeconds %v (%T), want the integer %d", r.where, objectKey(o), got, got, want)
					}
				}
			}
		}
	})

	groups := mixinGroups(t, root)
	dashboards, _ := filepath.Glob(filepath.Join(root, "mixin/generated/dashboards/*.json"))
	for _, r := range renderings {
		t.Run("contents of "+r.where, func(t *testing.T) {
			checkRendering(t, r, groups, dashboards)
		})
	}
}

// unsetValues lists the values of values.yaml (defaults) that file does
// not set, or sets empty (nil, "", a map or list of nothing): an empty
// value renders nothing. It descends into the objects the chart defines
// (the schema's properties, its references to its definitions resolved)
// and takes a map of the user's (labels, resources) or a list as one
// value.
func unsetValues(schema, defs map[string]any, defaults, file any, path []string) []string {
	for schema["$ref"] != nil {
		name, _ := strings.CutPrefix(fmt.Sprint(schema["$ref"]), "#/definitions/")
		schema = asMap(defs[name])
	}
	props, dm := asMap(schema["properties"]), asMap(defaults)
	if props == nil || dm == nil {
		if empty(file) {
			return []string{strings.Join(path, ".")}
		}
		return nil
	}
	fm := asMap(file)
	keys := make([]string, 0, len(dm))
	for k := range dm {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var out []string
	for _, k := range keys {
		p := append(slices.Clip(path), k)
		if _, ok := fm[k]; !ok {
			out = append(out, strings.Join(p, "."))
			continue
		}
		out = append(out, unsetValues(asMap(props[k]), defs, dm[k], fm[k], p)...)
	}
	return out
}

// empty: nil, "", or a map or list of nothing.
func empty(v any) bool {
	switch x := v.(type) {
	case nil:
		return true
	case string:
		return x == ""
	case map[string]any:
		return len(x) == 0
	case []any:
		return len(x) == 0
	}
	return false
}
