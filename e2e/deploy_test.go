package e2e

import (
	"bytes"
	"context"
	"errors"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	yaml "go.yaml.in/yaml/v3"

	"github.com/infer-exporter/infer_exporter/internal/config"
	"github.com/infer-exporter/infer_exporter/internal/realstack"
)

// yamlDocs parses every document of a YAML file.
func yamlDocs(t *testing.T, path string) []map[string]any {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	dec := yaml.NewDecoder(bytes.NewReader(b))
	var docs []map[string]any
	for {
		var d map[string]any
		err := dec.Decode(&d)
		if errors.Is(err, io.EOF) {
			return docs
		}
		if err != nil {
			t.Fatalf("%s: %v", path, err)
		}
		if d != nil {
			docs = append(docs, d)
		}
	}
}

func dig(m map[string]any, keys ...string) any {
	var v any = m
	for _, k := range keys {
		mm, ok := v.(map[string]any)
		if !ok {
			return nil
		}
		v = mm[k]
	}
	return v
}

// TestKubernetesManifests: every manifest parses, names its kind, and is
// listed in the kustomization; the sidecar's configuration loads with the
// exporter's own loader; the generated PrometheusRule's groups pass promtool.
func TestKubernetesManifests(t *testing.T) {
	root := realstack.RepoRoot(t)
	dir := filepath.Join(root, "deploy/kubernetes")
	kust := yamlDocs(t, filepath.Join(dir, "kustomization.yaml"))[0]
	var resources []string
	for _, r := range kust["resources"].([]any) {
		resources = append(resources, r.(string))
	}
	kinds := map[string]bool{}
	for _, r := range resources {
		for _, d := range yamlDocs(t, filepath.Join(dir, r)) {
			kind, _ := d["kind"].(string)
			if d["apiVersion"] == nil || kind == "" || dig(d, "metadata", "name") == nil {
				t.Errorf("%s: a document without apiVersion, kind or metadata.name", r)
			}
			kinds[kind] = true
		}
	}
	for _, want := range []string{"Deployment", "Service", "PodMonitor", "Probe", "PrometheusRule"} {
		if !kinds[want] {
			t.Errorf("the kustomization has no %s", want)
		}
	}
	files, _ := filepath.Glob(filepath.Join(dir, "*.yaml"))
	for _, f := range files {
		if b := filepath.Base(f); b != "kustomization.yaml" && !slices.Contains(resources, b) {
			t.Errorf("%s is not in kustomization.yaml's resources", b)
		}
	}

	// The Deployment: vLLM and the exporter in one pod.
	var containers []string
	for _, d := range yamlDocs(t, filepath.Join(dir, "deployment.yaml")) {
		for _, c := range dig(d, "spec", "template", "spec", "containers").([]any) {
			containers = append(containers, c.(map[string]any)["name"].(string))
		}
	}
	if !slices.Equal(containers, []string{"vllm", "infer-exporter"}) {
		t.Errorf("containers = %v, want vllm with the infer-exporter sidecar", containers)
	}

	// The sidecar's configuration, as the exporter loads it.
	c, err := config.LoadFile(filepath.Join(dir, "exporter-config.yml"))
	if err != nil {
		t.Fatalf("exporter-config.yml: %v", err)
	}
	probe := yamlDocs(t, filepath.Join(dir, "probe.yaml"))[0]
	if m, _ := dig(probe, "spec", "module").(string); c.Modules[m].Requests == 0 {
		t.Errorf("the Probe's module %q is not in exporter-config.yml", m)
	}
	if len(c.Workloads) == 0 || len(c.Workloads[0].Checks) == 0 {
		t.Error("the sidecar's workload carries no known-answer checks: the ranking would have no accuracy")
	}

	// The PrometheusRule's groups are a valid rule file.
	rule := yamlDocs(t, filepath.Join(dir, "prometheusrule.yaml"))[0]
	out, err := yaml.Marshal(map[string]any{"groups": dig(rule, "spec", "groups")})
	if err != nil {
		t.Fatal(err)
	}
	rules := filepath.Join(t.TempDir(), "rules.yaml")
	if err := os.WriteFile(rules, out, 0o644); err != nil {
		t.Fatal(err)
	}
	promtool := realstack.Tool(t, realstack.PrometheusModfile, "promtool")
	if out, err := realstack.Run(t, promtool, "check", "rules", rules); err != nil {
		t.Errorf("promtool check rules on the PrometheusRule's groups: %v\n%s", err, out)
	}
}

// TestComposeStack: the compose file parses and holds the five services, the
// files it mounts exist, the exporter's configuration loads, promtool accepts
// Prometheus's configuration, and Alertmanager starts with its own.
func TestComposeStack(t *testing.T) {
	root := realstack.RepoRoot(t)
	dir := filepath.Join(root, "deploy/compose")
	compose := yamlDocs(t, filepath.Join(dir, "compose.yaml"))[0]
	services, _ := compose["services"].(map[string]any)
	for _, s := range []string{"simulator", "exporter", "prometheus", "alertmanager", "grafana"} {
		if services[s] == nil {
			t.Errorf("compose.yaml has no service %s", s)
		}
	}
	for name, s := range services {
		vols, _ := s.(map[string]any)["volumes"].([]any)
		for _, v := range vols {
			host, _, _ := strings.Cut(v.(string), ":")
			if _, err := os.Stat(filepath.Join(dir, host)); err != nil {
				t.Errorf("service %s mounts %s: %v", name, host, err)
			}
		}
	}
	if _, err := config.LoadFile(filepath.Join(dir, "exporter/config.yml")); err != nil {
		t.Errorf("exporter/config.yml: %v", err)
	}
	for _, f := range []string{"grafana/provisioning/datasources/prometheus.yml", "grafana/provisioning/dashboards/infer-exporter.yml"} {
		if d := yamlDocs(t, filepath.Join(dir, f)); len(d) != 1 || d[0]["apiVersion"] != 1 {
			t.Errorf("%s: not a Grafana provisioning file", f)
		}
	}

	promtool := realstack.Tool(t, realstack.PrometheusModfile, "promtool")
	if out, err := realstack.Run(t, promtool, "check", "config", "--syntax-only", filepath.Join(dir, "prometheus/prometheus.yml")); err != nil {
		t.Errorf("promtool check config: %v\n%s", err, out)
	}

	// Alertmanager refuses to start on a configuration it cannot load.
	alertmanager := realstack.Tool(t, realstack.AlertmanagerModfile, "alertmanager")
	addr := realstack.FreeAddr(t)
	am := realstack.Start(t, "alertmanager-compose", "", alertmanager,
		"--config.file="+filepath.Join(dir, "alertmanager/alertmanager.yml"),
		"--storage.path="+t.TempDir(), "--web.listen-address="+addr, "--cluster.listen-address=")
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := am.WaitHTTP(ctx, "http://"+addr+"/-/ready"); err != nil {
		t.Errorf("Alertmanager with deploy/compose/alertmanager/alertmanager.yml: %v", err)
	}
}
