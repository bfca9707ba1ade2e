package e2e

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	yaml "go.yaml.in/yaml/v3"

	"github.com/infer-exporter/infer_exporter/internal/realstack"
)

// podSecurityDir is the pinned Pod Security check's module, the control
// plane's (tools/kube): the check is our main over
// k8s.io/pod-security-admission's policy package (tools/kube/podsecurity),
// at the control plane's release, v0.35.4, whose libraries it shares and
// which its admission plugin enforces too; a module apart from the
// exporter's, so that the Kubernetes libraries never mix with its
// dependencies.
const (
	podSecurityDir = "tools/kube"
	podSecurityPkg = "github.com/infer-exporter/infer_exporter/tools/kube/podsecurity"
)

// podSecurityTool returns the path of the pinned podsecurity binary,
// building it into Go's cache if needed (seconds once the control plane's
// libraries are; `make tools` does it once).
func podSecurityTool(t *testing.T) string {
	t.Helper()
	return realstack.ModuleTool(t, podSecurityDir, "podsecurity")
}

// podTemplateKinds are the kinds whose Pod templates the check evaluates.
var podTemplateKinds = map[string]bool{
	"Pod": true, "PodTemplate": true, "ReplicationController": true,
	"Deployment": true, "StatefulSet": true, "DaemonSet": true, "ReplicaSet": true,
	"Job": true, "CronJob": true,
}

// runPodSecurity runs the check at level restricted, latest version, and
// returns its output and exit status (0 all admitted, 1 one refused or
// more, 2 an error).
func runPodSecurity(t *testing.T, bin string, files ...string) (string, int) {
	t.Helper()
	cmd := exec.Command(bin, append([]string{"-level", "restricted", "-version", "latest"}, files...)...)
	out, err := cmd.CombinedOutput()
	var ee *exec.ExitError
	switch {
	case err == nil:
		return string(out), 0
	case errors.As(err, &ee):
		return string(out), ee.ExitCode()
	default:
		t.Fatalf("podsecurity: %v", err)
		return "", 0
	}
}

var podSecuritySummary = regexp.MustCompile(`(?m)^(\d+) pod templates, (\d+) refused$`)

// TestPodSecurityRestricted: every Pod template under deploy/ (the output of
// `kustomize build` of each kustomization, and every standalone manifest:
// the vLLM Deployment with its sidecar, the bench's Indexed Job of shards,
// its merge Job, the results reader Pod) is admitted at the Pod Security
// Standards' level restricted, latest version, as evaluated by the
// admission controller's own checks (k8s.io/pod-security-admission/policy,
// pinned in tools/kube/go.mod); the namespace enforces that level.
// Broken templates are refused, each for its one change, so that the check
// is known to be in force. Takes a few seconds once the tools are built.
func TestPodSecurityRestricted(t *testing.T) {
	root := realstack.RepoRoot(t)
	bin := podSecurityTool(t)
	kustomize := realstack.Tool(t, kustomizeModfile, "kustomize")
	rel := func(p string) string { r, _ := filepath.Rel(root, p); return r }

	kustomizations, manifests := deployInputs(t, root)
	built := t.TempDir()
	inputs := append([]string(nil), manifests...)
	for _, k := range kustomizations {
		out, err := exec.Command(kustomize, "build", k).Output()
		if err != nil {
			var stderr []byte
			if ee, ok := err.(*exec.ExitError); ok {
				stderr = ee.Stderr
			}
			t.Fatalf("kustomize build %s: %v\n%s", rel(k), err, stderr)
		}
		f := filepath.Join(built, strings.ReplaceAll(rel(k), string(filepath.Separator), "_")+".yaml")
		if err := os.WriteFile(f, out, 0o644); err != nil {
			t.Fatal(err)
		}
		inputs = append(inputs, f)
	}
	want := 0
	kinds := map[string]int{}
	for _, f := range inputs {
		for _, d := range yamlDocs(t, f) {
			if k, _ := d["kind"].(string); podTemplateKinds[k] {
				want++
				kinds[k]++
			}
		}
	}
	// The Deployment and the Jobs twice (their files and the builds), the
	// reader once.
	if kinds["Deployment"] < 2 || kinds["Job"] < 4 || kinds["Pod"] < 1 {
		t.Errorf("pod templates found under deploy/: %v, want the Deployment, the bench's two Jobs and the reader Pod", kinds)
	}
	out, code := runPodSecurity(t, bin, inputs...)
	t.Logf("podsecurity over %d files:\n%s", len(inputs), out)
	m := podSecuritySummary.FindStringSubmatch(out)
	if code != 0 || m == nil || m[1] != fmt.Sprint(want) || m[2] != "0" {
		t.Errorf("podsecurity: exit %d, summary %q: want all %d pod templates admitted at restricted:latest", code, m, want)
	}

	// The namespace the manifests land in enforces the level they pass.
	ns := yamlDocs(t, filepath.Join(root, "deploy/kubernetes/namespace.yaml"))[0]
	labels := asMap(dig(ns, "metadata", "labels"))
	if labels["pod-security.kubernetes.io/enforce"] != "restricted" || labels["pod-security.kubernetes.io/enforce-version"] != "latest" {
		t.Errorf("namespace labels %v: want pod-security.kubernetes.io/enforce=restricted at version latest", labels)
	}

	// The check refuses what it should. Each case changes one thing in a
	// template that passes (the real Deployment, or the bench's Indexed Job
	// of shards), and the refusal must name that thing.
	containersOf := func(d map[string]any, key string) []map[string]any {
		var out []map[string]any
		for _, c := range asList(dig(d, "spec", "template", "spec", key)) {
			out = append(out, asMap(c))
		}
		return out
	}
	securityContext := func(c map[string]any) map[string]any {
		if c["securityContext"] == nil {
			c["securityContext"] = map[string]any{}
		}
		return asMap(c["securityContext"])
	}
	for _, tc := range []struct {
		name, file string
		change     func(d map[string]any)
		want       string
	}{
		{"a privileged sidecar", "deploy/kubernetes/deployment.yaml", func(d map[string]any) {
			securityContext(containersOf(d, "containers")[1])["privileged"] = true
		}, `privileged (container "infer-exporter" must not set securityContext.privileged=true)`},
		{"no seccomp profile", "deploy/kubernetes/deployment.yaml", func(d map[string]any) {
			delete(asMap(dig(d, "spec", "template", "spec")), "securityContext")
		}, `seccompProfile (pod or containers "vllm", "infer-exporter" must set securityContext.seccompProfile.type to "RuntimeDefault" or "Localhost")`},
		{"vLLM as root", "deploy/kubernetes/deployment.yaml", func(d map[string]any) {
			sc := securityContext(containersOf(d, "containers")[0])
			delete(sc, "runAsNonRoot")
			sc["runAsUser"] = 0
		}, `runAsUser=0`},
		{"a capability added", "deploy/kubernetes/deployment.yaml", func(d map[string]any) {
			asMap(securityContext(containersOf(d, "containers")[1])["capabilities"])["add"] = []any{"NET_ADMIN"}
		}, `unrestricted capabilities (container "infer-exporter" must not include "NET_ADMIN" in securityContext.capabilities.add)`},
		{"a shard's barrier that may escalate", "deploy/kubernetes/bench/shards-job.yaml", func(d map[string]any) {
			securityContext(containersOf(d, "initContainers")[1])["allowPrivilegeEscalation"] = true
		}, `allowPrivilegeEscalation != false (container "barrier" must set securityContext.allowPrivilegeEscalation=false)`},
		{"a shard on the host's network", "deploy/kubernetes/bench/shards-job.yaml", func(d map[string]any) {
			asMap(dig(d, "spec", "template", "spec"))["hostNetwork"] = true
		}, `host namespaces (hostNetwork=true)`},
		{"a hostPath volume", "deploy/kubernetes/bench/shards-job.yaml", func(d map[string]any) {
			spec := asMap(dig(d, "spec", "template", "spec"))
			spec["volumes"] = append(asList(spec["volumes"]), map[string]any{"name": "host", "hostPath": map[string]any{"path": "/"}})
		}, `restricted volume types (volume "host" uses restricted volume type "hostPath")`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			docs := yamlDocs(t, filepath.Join(root, tc.file))
			if len(docs) != 1 {
				t.Fatalf("%s: %d documents", tc.file, len(docs))
			}
			dir := t.TempDir()
			write := func(d map[string]any) string {
				b, err := yaml.Marshal(d)
				if err != nil {
					t.Fatal(err)
				}
				f := filepath.Join(dir, fmt.Sprintf("manifest-%d.yaml", len(b)))
				if err := os.WriteFile(f, b, 0o644); err != nil {
					t.Fatal(err)
				}
				return f
			}
			if out, code := runPodSecurity(t, bin, write(docs[0])); code != 0 {
				t.Fatalf("%s before the change: exit %d\n%s", tc.file, code, out)
			}
			tc.change(docs[0])
			out, code := runPodSecurity(t, bin, write(docs[0]))
			if code != 1 || !strings.Contains(out, tc.want) || !strings.Contains(out, "1 pod templates, 1 refused") {
				t.Errorf("exit %d, output:\n%s\nwant exit 1 and a refusal naming %s", code, out, tc.want)
			}
		})
	}

	// A misspelt field is an error, not a setting silently dropped.
	t.Run("a misspelt field", func(t *testing.T) {
		b, err := os.ReadFile(filepath.Join(root, "deploy/kubernetes/deployment.yaml"))
		if err != nil {
			t.Fatal(err)
		}
		f := filepath.Join(t.TempDir(), "deployment.yaml")
		if err := os.WriteFile(f, bytes.Replace(b, []byte("seccompProfile:"), []byte("seccompProfil:"), 1), 0o644); err != nil {
			t.Fatal(err)
		}
		if out, code := runPodSecurity(t, bin, f); code != 2 || !strings.Contains(out, "seccompProfil") {
			t.Errorf("exit %d, output:\n%s\nwant exit 2 naming the unknown field", code, out)
		}
	})

	// make tools builds it, as it builds kubeconform and kustomize.
	mk, err := os.ReadFile(filepath.Join(root, "Makefile"))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(mk), "module-run,"+podSecurityDir+",-exec echo "+podSecurityPkg+")") {
		t.Errorf("the Makefile's tools target does not build %s", podSecurityDir)
	}
}
