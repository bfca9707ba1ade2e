package e2e

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/infer-exporter/infer_exporter/internal/kubeschema"
	"github.com/infer-exporter/infer_exporter/internal/realstack"
)

// The pinned schema check's tools (tools/*/go.mod) and the list of modules
// its schemas are converted from.
const (
	kubeconformModfile = "tools/kubeconform/go.mod"
	kustomizeModfile   = "tools/kustomize/go.mod"
	schemaModules      = "tools/kubeconform/schema-modules.txt"
)

// unavailableTool fails in CI and skips elsewhere, as realstack does for
// its tools: with CI set, a check that cannot run is a failure.
func unavailableTool(t *testing.T, format string, args ...any) {
	t.Helper()
	msg := fmt.Sprintf(format, args...)
	if os.Getenv("CI") != "" {
		t.Fatalf("%s (CI is set: a missing tool is a failure)", msg)
	}
	t.Skipf("%s; skipped because CI is not set (run `make tools` first)", msg)
}

// schemaSource is one line of schema-modules.txt.
type schemaSource struct {
	Module, Version, Sum, Files string
}

func readSchemaSources(t *testing.T, path string) []schemaSource {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var out []schemaSource
	sc := bufio.NewScanner(f)
	for n := 1; sc.Scan(); n++ {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		fields := strings.Fields(line)
		if len(fields) != 4 || !strings.HasPrefix(fields[2], "h1:") {
			t.Fatalf("%s:%d: %q is not \"module version h1:hash files\"", path, n, line)
		}
		out = append(out, schemaSource{fields[0], fields[1], fields[2], fields[3]})
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	if len(out) == 0 {
		t.Fatalf("%s lists no module", path)
	}
	return out
}

// moduleDirs downloads the modules into Go's module cache (a no-op when
// they are there) and returns each one's directory, checking its hash
// against the pinned one. It runs outside any module, so that no go.mod
// or go.sum is touched.
func moduleDirs(t *testing.T, srcs []schemaSource) map[string]string {
	t.Helper()
	args := []string{"mod", "download", "-json"}
	for _, s := range srcs {
		args = append(args, s.Module+"@"+s.Version)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "go", args...)
	cmd.Dir = t.TempDir()
	cmd.Env = append(os.Environ(), "GOWORK=off")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, runErr := cmd.Output()
	type download struct {
		Path, Version, Dir, Sum, Error string
	}
	dirs := map[string]string{}
	dec := json.NewDecoder(bytes.NewReader(out))
	var failures []string
	for {
		var d download
		if err := dec.Decode(&d); errors.Is(err, io.EOF) {
			break
		} else if err != nil {
			unavailableTool(t, "go %s: %v: %s", strings.Join(args, " "), err, stderr.String())
		}
		if d.Error != "" {
			failures = append(failures, d.Path+"@"+d.Version+": "+d.Error)
			continue
		}
		for _, s := range srcs {
			if s.Module == d.Path && s.Version == d.Version && s.Sum != d.Sum {
				t.Fatalf("%s@%s: hash %s, %s pins %s", d.Path, d.Version, d.Sum, schemaModules, s.Sum)
			}
		}
		dirs[d.Path] = d.Dir
	}
	if runErr != nil || len(failures) > 0 {
		unavailableTool(t, "go %s: %v %v: %s", strings.Join(args, " "), runErr, failures, stderr.String())
	}
	return dirs
}

// kubeSchemaSet reads the pinned modules' OpenAPI document and CRDs.
func kubeSchemaSet(t *testing.T) *kubeschema.Set {
	t.Helper()
	root := realstack.RepoRoot(t)
	srcs := readSchemaSources(t, filepath.Join(root, schemaModules))
	dirs := moduleDirs(t, srcs)
	set := kubeschema.New()
	for _, s := range srcs {
		files, err := filepath.Glob(filepath.Join(dirs[s.Module], filepath.FromSlash(s.Files)))
		if err != nil || len(files) == 0 {
			t.Fatalf("%s@%s has no %s (%v)", s.Module, s.Version, s.Files, err)
		}
		for _, f := range files {
			r, err := os.Open(f)
			if err != nil {
				t.Fatal(err)
			}
			switch filepath.Ext(f) {
			case ".json":
				err = set.AddOpenAPIV2(r)
			case ".yaml":
				var n int
				if n, err = set.AddCRDs(r, f); err == nil && n == 0 {
					err = errors.New("no CustomResourceDefinition")
				}
			default:
				err = errors.New("neither .json (OpenAPI v2) nor .yaml (CRDs)")
			}
			r.Close()
			if err != nil {
				t.Fatalf("%s: %v", f, err)
			}
		}
	}
	return set
}

// writeSchemas writes the schemas of the kinds that files hold (all of
// them would take seconds more under the race detector) and returns
// kubeconform's -schema-location for them. A kind the Set lacks gets no
// file, so kubeconform reports it.
func writeSchemas(t *testing.T, set *kubeschema.Set, files []string) string {
	t.Helper()
	var kinds []kubeschema.GVK
	for _, f := range files {
		for _, d := range yamlDocs(t, f) {
			av, _ := d["apiVersion"].(string)
			kind, _ := d["kind"].(string)
			group, version, ok := strings.Cut(av, "/")
			if !ok {
				group, version = "", av
			}
			kinds = append(kinds, kubeschema.GVK{Group: group, Version: version, Kind: kind})
		}
	}
	dir := t.TempDir()
	if _, err := set.WriteDir(context.Background(), dir, kinds...); err != nil {
		t.Fatal(err)
	}
	return filepath.Join(dir, kubeschema.Location)
}

// kubeconformResult is kubeconform's -output json.
type kubeconformResult struct {
	Resources []struct {
		Filename string `json:"filename"`
		Kind     string `json:"kind"`
		Name     string `json:"name"`
		Status   string `json:"status"`
		Msg      string `json:"msg"`
	} `json:"resources"`
	Summary struct {
		Valid, Invalid, Errors, Skipped int
	} `json:"summary"`
}

// runKubeconform validates files strictly, failing on a resource without
// a schema (no -ignore-missing-schemas), and returns what it reported.
func runKubeconform(t *testing.T, bin, location string, files ...string) (kubeconformResult, error) {
	t.Helper()
	args := append([]string{"-strict", "-summary", "-verbose", "-output", "json", "-schema-location", location}, files...)
	cmd := exec.Command(bin, args...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	var ee *exec.ExitError
	if err != nil && !errors.As(err, &ee) {
		t.Fatalf("kubeconform: %v", err)
	}
	var res kubeconformResult
	if jerr := json.Unmarshal(out, &res); jerr != nil {
		t.Fatalf("kubeconform's output is not JSON (%v): %s\n%s", jerr, out, stderr.String())
	}
	return res, err
}

// countResources counts the YAML documents of a file that name a kind.
func countResources(t *testing.T, path string) int {
	t.Helper()
	n := 0
	for _, d := range yamlDocs(t, path) {
		if k, _ := d["kind"].(string); k != "" {
			n++
		}
	}
	return n
}

// deployInputs finds, under deploy/, every directory with a
// kustomization.yaml and every standalone manifest: a YAML file each of
// whose documents names an apiVersion and a kind, other than a
// Kustomization (configuration files of the exporter, Prometheus, compose
// and Grafana name no kind).
func deployInputs(t *testing.T, root string) (kustomizations, manifests []string) {
	t.Helper()
	err := filepath.WalkDir(filepath.Join(root, "deploy"), func(p string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		ext := filepath.Ext(p)
		if ext != ".yaml" && ext != ".yml" {
			return nil
		}
		if d.Name() == "kustomization.yaml" {
			kustomizations = append(kustomizations, filepath.Dir(p))
			return nil
		}
		docs := yamlDocs(t, p)
		for _, doc := range docs {
			kind, _ := doc["kind"].(string)
			if _, ok := doc["apiVersion"].(string); !ok || kind == "" {
				return nil
			}
		}
		if len(docs) > 0 {
			manifests = append(manifests, p)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return kustomizations, manifests
}

// TestKubeconform: the output of `kustomize build` of every kustomization
// under deploy/, and every standalone manifest there, pass kubeconform
// -strict against the Kubernetes API's and the Prometheus Operator's
// schemas: every resource valid, none without a schema. Broken manifests
// are rejected, so that the check is known to be in force.
func TestKubeconform(t *testing.T) {
	root := realstack.RepoRoot(t)
	kustomize := realstack.Tool(t, kustomizeModfile, "kustomize")
	kubeconform := realstack.Tool(t, kubeconformModfile, "kubeconform")
	start := time.Now()
	set := kubeSchemaSet(t)
	t.Logf("schemas of %d kinds read in %v", len(set.Kinds()), time.Since(start).Round(time.Millisecond))

	kustomizations, manifests := deployInputs(t, root)
	rel := func(p string) string { r, _ := filepath.Rel(root, p); return r }
	for _, want := range []string{"deploy/kubernetes", "deploy/kubernetes/bench"} {
		if !slices.ContainsFunc(kustomizations, func(k string) bool { return rel(k) == want }) {
			t.Errorf("no kustomization found at %s (found %v)", want, kustomizations)
		}
	}
	if len(manifests) < 10 {
		t.Errorf("found only %d standalone manifests under deploy/: %v", len(manifests), manifests)
	}

	built := t.TempDir()
	inputs := slices.Clone(manifests)
	for _, k := range kustomizations {
		out, err := exec.Command(kustomize, "build", k).Output()
		if err != nil {
			var stderr []byte
			if ee, ok := err.(*exec.ExitError); ok {
				stderr = ee.Stderr
			}
			t.Errorf("kustomize build %s: %v\n%s", rel(k), err, stderr)
			continue
		}
		f := filepath.Join(built, strings.ReplaceAll(rel(k), string(filepath.Separator), "_")+".yaml")
		if err := os.WriteFile(f, out, 0o644); err != nil {
			t.Fatal(err)
		}
		inputs = append(inputs, f)
	}
	want := 0
	for _, f := range inputs {
		want += countResources(t, f)
	}
	res, err := runKubeconform(t, kubeconform, writeSchemas(t, set, inputs), inputs...)
	for _, r := range res.Resources {
		if r.Status != "statusValid" {
			t.Errorf("%s: %s %s: %s %s", r.Filename, r.Kind, r.Name, r.Status, r.Msg)
		}
	}
	t.Logf("kubeconform -strict: %d resources in %d files (%d kustomizations built, %d standalone manifests): %+v", want, len(inputs), len(kustomizations), len(manifests), res.Summary)
	if err != nil || res.Summary.Valid != want || res.Summary.Invalid+res.Summary.Errors+res.Summary.Skipped != 0 {
		t.Errorf("kubeconform: %v; summary %+v, want all %d resources of %d files valid", err, res.Summary, want, len(inputs))
	}

	// The check fails where it should: an unknown field of a built-in kind,
	// a wrong type, unknown fields of a CRD's spec and of its metadata
	// (ObjectMeta, put in the CRDs' schemas), and a kind with no schema.
	// Each manifest is valid before the one change that breaks it, so that
	// the rejection is that change's.
	for _, tc := range []struct {
		name, manifest, from, to, status string
	}{
		{"unknown field of a Job",
			"apiVersion: batch/v1\nkind: Job\nmetadata: {name: x}\nspec:\n  completionMode: Indexed\n  parallelism: 4\n  template: {spec: {restartPolicy: Never, containers: [{name: c, image: i}]}}\n",
			"parallelism", "paralelism", "statusInvalid"},
		{"wrong type in a Deployment",
			"apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: x}\nspec:\n  replicas: 2\n  selector: {matchLabels: {a: b}}\n  template: {metadata: {labels: {a: b}}, spec: {containers: [{name: c, image: i}]}}\n",
			"replicas: 2", "replicas: two", "statusInvalid"},
		{"unknown field of a PodMonitor's spec",
			"apiVersion: monitoring.coreos.com/v1\nkind: PodMonitor\nmetadata: {name: x}\nspec:\n  selector: {}\n  podMetricsEndpoints: [{port: metrics, interval: 5s}]\n",
			"interval:", "intervall:", "statusInvalid"},
		{"unknown field of a PodMonitor's metadata",
			"apiVersion: monitoring.coreos.com/v1\nkind: PodMonitor\nmetadata: {name: x, labels: {a: b}}\nspec: {selector: {}}\n",
			"labels:", "lables:", "statusInvalid"},
		{"a kind without a schema",
			"apiVersion: v1\nkind: ConfigMap\nmetadata: {name: x}\n",
			"apiVersion: v1\nkind: ConfigMap", "apiVersion: example.com/v1\nkind: Widget", "statusError"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			for _, c := range []struct {
				manifest, status string
			}{
				{tc.manifest, "statusValid"},
				{strings.Replace(tc.manifest, tc.from, tc.to, 1), tc.status},
			} {
				f := filepath.Join(t.TempDir(), "manifest.yaml")
				if err := os.WriteFile(f, []byte(c.manifest), 0o644); err != nil {
					t.Fatal(err)
				}
				res, err := runKubeconform(t, kubeconform, writeSchemas(t, set, []string{f}), f)
				if len(res.Resources) != 1 || res.Resources[0].Status != c.status || (err == nil) != (c.status == "statusValid") {
					t.Errorf("kubeconform on\n%s: %v %+v, want %s", c.manifest, err, res, c.status)
				}
			}
		})
	}
}

// TestSchemaModulesListed: schema-modules.txt and the Makefile's tools
// target download the same modules (the Makefile reads the file), and the
// file names a Kubernetes API document and CRDs.
func TestSchemaModulesListed(t *testing.T) {
	root := realstack.RepoRoot(t)
	srcs := readSchemaSources(t, filepath.Join(root, schemaModules))
	var openapi, crds bool
	for _, s := range srcs {
		openapi = openapi || strings.HasSuffix(s.Files, ".json")
		crds = crds || strings.HasSuffix(s.Files, ".yaml")
	}
	if !openapi || !crds {
		t.Errorf("%s: an OpenAPI document (.json) %v, CRDs (.yaml) %v: want both", schemaModules, openapi, crds)
	}
	mk, err := os.ReadFile(filepath.Join(root, "Makefile"))
	if err != nil {
		t.Fatal(err)
	}
	tools := map[string]bool{}
	for _, l := range strings.Split(string(mk), "\n") {
		for _, tool := range []string{"tool-run," + filepath.Dir(kubeconformModfile) + ",-exec echo github.com/yannh/kubeconform/cmd/kubeconform)", "tool-run," + filepath.Dir(kustomizeModfile) + ",-exec echo sigs.k8s.io/kustomize/kustomize/v5)", schemaModules} {
			if strings.Contains(l, tool) {
				tools[tool] = true
			}
		}
	}
	if len(tools) != 3 {
		t.Errorf("the Makefile's tools target builds or downloads only %v of kubeconform, kustomize and %s", tools, schemaModules)
	}
}
