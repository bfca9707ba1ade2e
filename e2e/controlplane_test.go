package e2e

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/infer-exporter/infer_exporter/internal/realstack"
	"github.com/infer-exporter/infer_exporter/internal/testenv"
)

// kubeToolDir is the control plane's module: our main over
// k8s.io/kubernetes v1.35.4 (kube-apiserver and four controllers) and an
// embedded etcd, built with `go -C tools/kube tool -n kube` (a module of
// its own, so that k8s.io/kubernetes never enters the exporter's go.mod).
const kubeToolDir = "tools/kube"

// kubeTool returns the path of the pinned control plane's binary, building
// it into Go's cache if needed (minutes cold on 2 cores; `make tools` does
// it once).
func kubeTool(t *testing.T) string {
	t.Helper()
	return realstack.ModuleTool(t, kubeToolDir, "kube")
}

// startControlPlane starts tools/kube on loopback ports with certificates
// generated for this test, waits until the API server is ready, and
// returns a client of it as administrator. The process stops with the test.
func startControlPlane(ctx context.Context, t *testing.T) *kubeAPI {
	t.Helper()
	bin := kubeTool(t)
	dir := t.TempDir()
	pki := newControlPlanePKI(t, dir)
	addr := realstack.FreeAddr(t)
	_, port, err := net.SplitHostPort(addr)
	if err != nil {
		t.Fatal(err)
	}
	server := "https://" + addr
	proc := realstack.Start(t, "kube", "", bin,
		"-etcd-dir", filepath.Join(dir, "etcd"),
		"-etcd-client", realstack.FreeAddr(t),
		"-etcd-peer", realstack.FreeAddr(t),
		"-kubeconfig", pki.kubeconfig(t, dir, server),
		"--",
		"--bind-address=127.0.0.1",
		"--advertise-address=127.0.0.1",
		"--secure-port="+port,
		"--cert-dir="+dir,
		"--tls-cert-file="+pki.ServingCert,
		"--tls-private-key-file="+pki.Serving,
		"--client-ca-file="+pki.CA,
		// A cluster's authoriser; the test's certificate is in
		// system:masters, as an administrator's is.
		"--authorization-mode=RBAC",
		"--service-account-issuer=https://kubernetes.default.svc",
		"--service-account-key-file="+pki.SAPub,
		"--service-account-signing-key-file="+pki.SAKey,
		// The cluster IPs are allocated, never dialled: no proxy runs.
		"--service-cluster-ip-range=10.0.0.0/24",
		// The "kubernetes" Service's endpoints would be 127.0.0.1, which
		// Endpoints refuse: no reconciler, as nothing here reads them.
		"--endpoint-reconciler-type=none",
		"--profiling=false",
	)
	api := newKubeAPI(server, pki)
	err = pollAPI(ctx, "the API server's /readyz", func() (bool, error) {
		if exited, err := proc.Exited(); exited {
			return false, fmt.Errorf("kube exited: %v", err)
		}
		return true, api.do(ctx, http.MethodGet, "/readyz", "", nil, nil)
	})
	if err != nil {
		t.Fatal(err)
	}
	return api
}

// deployObjects builds every kustomization under deploy/ with the pinned
// kustomize, the one that creates the namespace first, and adds the
// standalone manifests that no kustomization lists (the results reader):
// what an operator applies, in the order they would.
func deployObjects(t *testing.T, root, kustomize string) []map[string]any {
	t.Helper()
	kustomizations, manifests := deployInputs(t, root)
	// Depth first: deploy/kubernetes creates the namespace that
	// deploy/kubernetes/bench lands in.
	sort.SliceStable(kustomizations, func(i, j int) bool {
		return strings.Count(kustomizations[i], string(filepath.Separator)) < strings.Count(kustomizations[j], string(filepath.Separator))
	})
	listed := map[string]bool{}
	var objs []map[string]any
	built := t.TempDir()
	for i, k := range kustomizations {
		for _, r := range strs(yamlDocs(t, filepath.Join(k, "kustomization.yaml"))[0]["resources"]) {
			listed[filepath.Join(k, r)] = true
		}
		out, err := exec.Command(kustomize, "build", k).Output()
		if err != nil {
			var stderr []byte
			if ee, ok := err.(*exec.ExitError); ok {
				stderr = ee.Stderr
			}
			t.Fatalf("kustomize build %s: %v\n%s", k, err, stderr)
		}
		f := filepath.Join(built, fmt.Sprintf("%d.yaml", i))
		if err := os.WriteFile(f, out, 0o644); err != nil {
			t.Fatal(err)
		}
		objs = append(objs, yamlDocs(t, f)...)
	}
	for _, m := range manifests {
		if !listed[m] {
			objs = append(objs, yamlDocs(t, m)...)
		}
	}
	return objs
}

// objectKey names an object in messages: Kind namespace/name.
func objectKey(obj map[string]any) string {
	md := asMap(obj["metadata"])
	if ns, _ := md["namespace"].(string); ns != "" {
		return fmt.Sprintf("%s %s/%s", obj["kind"], ns, md["name"])
	}
	return fmt.Sprintf("%s %s", obj["kind"], md["name"])
}

func findObject(objs []map[string]any, kind, name string) map[string]any {
	for _, o := range objs {
		if o["kind"] == kind && dig(o, "metadata", "name") == name {
			return o
		}
	}
	return nil
}

// num reads a JSON number as an int (-1 when absent).
func num(v any) int {
	switch n := v.(type) {
	case float64:
		return int(n)
	case int:
		return n
	}
	return -1
}

// TestControlPlaneEndToEnd admits the deploy files into a real control
// plane: kube-apiserver v1.35.4 (the version of kubeconform's schemas) on
// an embedded etcd, with the Job, Deployment, ReplicaSet and ServiceAccount
// controllers of the same release (tools/kube). The Prometheus Operator's
// CRDs (v0.94.1, the schemas' version) are installed, then everything
// kustomize builds from deploy/ is server-side applied, as `kubectl apply
// --server-side -k` does, into the namespace the manifests create, which
// enforces Pod Security "restricted". Then:
//
//   - every resource is admitted, and applying them again changes none of
//     them (the server's defaults do not fight the manifests);
//   - every Pod template is admitted as a Pod by Pod Security, and one
//     without a seccomp profile (or privileged, or as root) is refused, as
//     a Pod and, on the controller's path, when the Job controller creates
//     a Job's pods: the admission is live;
//   - a PodMonitor with an invalid field is refused by the CRD's schema;
//   - the shards' Job template cannot be changed in place (the bench's
//     kustomization tells operators to delete the Jobs to re-run);
//   - the Job controller creates the Indexed Job's N pods with completion
//     indexes 0..N-1 in their annotation, label and hostname, and each pod's
//     arguments, expanded from its environment as the kubelet does, are
//     --shard=i/N and its own output directory; the barrier's JOB_UID is
//     the Job's uid; the PodMonitors and the Service select the pods the
//     controllers made;
//   - with the test as the kubelet (binding each pod to a Node and
//     reporting it Running, then Succeeded), the Job completes with indexes
//     0..N-1.
//
// Then the same for the Helm chart's output (charts/infer-exporter, rendered
// by the pinned helm; chartReleases says which releases): each release's
// objects admitted into a namespace of its own that enforces Pod Security
// "restricted", applying them again a no-op, every Pod template admitted,
// the Job controller's pods of the chart's bench with their indexes and
// arguments, and the pods of its Deployments selected by its Services and
// PodMonitors.
//
// About a minute once the tools are built.
func TestControlPlaneEndToEnd(t *testing.T) {
	if testenv.RaceEnabled {
		t.Skip("runs without the race detector, in `make test-e2e`: the control plane is a process of its own")
	}
	testenv.Slow(t, "starts a control plane")
	root := realstack.RepoRoot(t)
	kustomize := realstack.Tool(t, kustomizeModfile, "kustomize")
	crdFiles := operatorCRDFiles(t, root)
	objs := deployObjects(t, root, kustomize)
	releases := chartReleases(t, root)

	ctx, cancel := context.WithTimeout(context.Background(), 8*time.Minute)
	defer cancel()
	start := time.Now()
	api := startControlPlane(ctx, t)
	t.Logf("control plane ready in %v", time.Since(start).Round(time.Millisecond))

	installCRDs(ctx, t, api, crdFiles)

	// Everything admitted: the namespace first, then, once its "default"
	// ServiceAccount exists (without it every pod is refused), the rest in
	// the order kustomize wrote them.
	const ns = "inference"
	applied := map[string]map[string]any{}
	applyAll := func(kinds func(string) bool) {
		for _, o := range objs {
			kind, _ := o["kind"].(string)
			if !kinds(kind) {
				continue
			}
			out, err := api.apply(ctx, o, nil)
			if err != nil {
				t.Errorf("%s refused: %v", objectKey(o), err)
				continue
			}
			applied[objectKey(o)] = out
		}
	}
	applyAll(func(k string) bool { return k == "Namespace" })
	if n := applied["Namespace "+ns]; dig(n, "metadata", "labels", "pod-security.kubernetes.io/enforce") != "restricted" {
		t.Fatalf("namespace %s: labels %v, want Pod Security enforce=restricted", ns, dig(n, "metadata", "labels"))
	}
	if err := pollAPI(ctx, "the namespace's default ServiceAccount", func() (bool, error) {
		_, err := api.get(ctx, "v1", "ServiceAccount", ns, "default")
		return true, err
	}); err != nil {
		t.Fatal(err)
	}
	applyAll(func(k string) bool { return k != "Namespace" })
	if t.Failed() {
		t.FailNow()
	}
	kinds := map[string]int{}
	for _, o := range objs {
		kinds[o["kind"].(string)]++
	}
	t.Logf("%d resources admitted by server-side apply: %v", len(applied), kinds)
	for _, k := range []string{"Namespace", "Deployment", "Service", "ConfigMap", "PodMonitor", "Probe", "PrometheusRule", "PersistentVolumeClaim", "Job", "Pod"} {
		if kinds[k] == 0 {
			t.Errorf("deploy/ gave no %s: the test would not admit one", k)
		}
	}

	reapply(ctx, t, api, objs, applied)

	checkPodSecurity(ctx, t, api, objs, ns)
	checkCRDSchema(ctx, t, api, objs)

	// Jobs cannot be changed in place: the reason the bench's
	// kustomization says to delete them before a re-run.
	shards := findObject(objs, "Job", "infer-bench-shards")
	changed := deepCopy(t, shards)
	bench := asMap(asList(dig(changed, "spec", "template", "spec", "containers"))[0])
	bench["args"] = append(asList(bench["args"]), "--log.level=debug")
	if _, err := api.apply(ctx, changed, url.Values{"dryRun": {"All"}}); err == nil || !strings.Contains(err.Error(), "spec.template") || !strings.Contains(err.Error(), "field is immutable") {
		t.Errorf("the shards' Job with a changed template: %v, want it refused as immutable", err)
	}

	checkIndexedShards(ctx, t, api, objs, ns, deployBench)
	checkControllersPods(ctx, t, api, objs, ns, deployBench.merge, "vllm", "infer-exporter")

	// The chart's output, as deploy/'s.
	for _, rel := range releases {
		t.Run(rel.name, func(t *testing.T) { applyRelease(ctx, t, api, rel) })
	}
	t.Logf("control-plane checks done %v after the start", time.Since(start).Round(time.Millisecond))
}

// heldContent is what the server holds of an object that a manifest
// applied: less its status and the labels and annotations that controllers
// add (a Deployment's revision) and the manifest does not set, with its
// generation, which counts changes of its spec.
func heldContent(t *testing.T, manifest, o map[string]any) string {
	t.Helper()
	md := asMap(o["metadata"])
	own := func(key string) map[string]any {
		m := map[string]any{}
		for k := range asMap(dig(manifest, "metadata", key)) {
			m[k] = dig(md, key, k)
		}
		return m
	}
	c := map[string]any{"labels": own("labels"), "annotations": own("annotations"), "finalizers": md["finalizers"], "generation": md["generation"]}
	for k, v := range o {
		if k != "metadata" && k != "status" {
			c[k] = v
		}
	}
	b, err := json.Marshal(c)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// reapply applies the same objects again, and checks it changes nothing: no
// field the manifests set is rewritten by a default, so `kubectl apply`
// twice is a no-op. applied holds what the first apply returned, by
// objectKey.
func reapply(ctx context.Context, t *testing.T, api *kubeAPI, objs []map[string]any, applied map[string]map[string]any) {
	t.Helper()
	for _, o := range objs {
		key := objectKey(o)
		out, err := api.apply(ctx, o, nil)
		if err != nil {
			t.Errorf("%s refused the second time: %v", key, err)
			continue
		}
		if first, second := heldContent(t, o, applied[key]), heldContent(t, o, out); first != second {
			t.Errorf("%s: applied again, the server changed what it holds:\nfirst:  %s\nsecond: %s", key, first, second)
		}
	}
}

// operatorCRDFiles are the Prometheus Operator's CRDs, from the module
// kubeconform's schemas are converted from (schema-modules.txt), so that
// the schema check and the API server hold the same CRDs.
func operatorCRDFiles(t *testing.T, root string) []string {
	t.Helper()
	srcs := readSchemaSources(t, filepath.Join(root, schemaModules))
	dirs := moduleDirs(t, srcs)
	for _, s := range srcs {
		if s.Module != "github.com/prometheus-operator/prometheus-operator" {
			continue
		}
		files, err := filepath.Glob(filepath.Join(dirs[s.Module], filepath.FromSlash(s.Files)))
		if err != nil || len(files) == 0 {
			t.Fatalf("%s@%s has no %s (%v)", s.Module, s.Version, s.Files, err)
		}
		return files
	}
	t.Fatalf("%s lists no Prometheus Operator module", schemaModules)
	return nil
}

// installCRDs applies every CRD, waits until each is established and its
// kind is served.
func installCRDs(ctx context.Context, t *testing.T, api *kubeAPI, files []string) {
	t.Helper()
	start := time.Now()
	var crds []map[string]any
	for _, f := range files {
		for _, d := range yamlDocs(t, f) {
			if d["kind"] != "CustomResourceDefinition" {
				continue
			}
			if _, err := api.apply(ctx, d, nil); err != nil {
				t.Fatalf("CRD %s (%s) refused: %v", dig(d, "metadata", "name"), filepath.Base(f), err)
			}
			crds = append(crds, d)
		}
	}
	for _, d := range crds {
		name, _ := dig(d, "metadata", "name").(string)
		err := pollAPI(ctx, "CRD "+name+" established", func() (bool, error) {
			crd, err := api.get(ctx, "apiextensions.k8s.io/v1", "CustomResourceDefinition", "", name)
			if err != nil {
				return false, err
			}
			for _, c := range asList(dig(crd, "status", "conditions")) {
				if cm := asMap(c); cm["type"] == "Established" && cm["status"] == "True" {
					return true, nil
				}
			}
			return false, nil
		})
		if err != nil {
			t.Fatal(err)
		}
		group, _ := dig(d, "spec", "group").(string)
		kind, _ := dig(d, "spec", "names", "kind").(string)
		for _, v := range asList(dig(d, "spec", "versions")) {
			if served, _ := asMap(v)["served"].(bool); !served {
				continue
			}
			av := group + "/" + asMap(v)["name"].(string)
			if err := pollAPI(ctx, kind+" served in "+av, func() (bool, error) {
				_, err := api.resource(ctx, av, kind)
				return true, err
			}); err != nil {
				t.Fatal(err)
			}
		}
	}
	t.Logf("%d Prometheus Operator CRDs established in %v", len(crds), time.Since(start).Round(time.Millisecond))
}

// podFromTemplate is the Pod a controller would create from an object's
// Pod template (a Pod is its own).
func podFromTemplate(t *testing.T, obj map[string]any, name, ns string) map[string]any {
	t.Helper()
	if obj["kind"] == "Pod" {
		p := deepCopy(t, obj)
		md := asMap(p["metadata"])
		md["name"], md["namespace"] = name, ns
		return p
	}
	tmpl := deepCopy(t, asMap(dig(obj, "spec", "template")))
	md := asMap(tmpl["metadata"])
	if md == nil {
		md = map[string]any{}
	}
	md["name"], md["namespace"] = name, ns
	return map[string]any{"apiVersion": "v1", "kind": "Pod", "metadata": md, "spec": tmpl["spec"]}
}

// checkPodSecurity: every Pod template of deploy/ is admitted as a Pod in
// the namespace, and one change that breaks the level is refused, by the
// admission controller of the API server itself; a Job whose template is
// refused is admitted (Pod Security enforces on pods), and the Job
// controller's attempts to create its pods are refused.
func checkPodSecurity(ctx context.Context, t *testing.T, api *kubeAPI, objs []map[string]any, ns string) {
	dryRun := url.Values{"dryRun": {"All"}}
	const refusal = `violates PodSecurity "restricted:latest"`
	checkTemplatesAdmitted(ctx, t, api, objs, ns)

	spec := func(p map[string]any) map[string]any { return asMap(dig(p, "spec")) }
	container := func(p map[string]any, name string) map[string]any {
		for _, c := range asList(spec(p)["containers"]) {
			if asMap(c)["name"] == name {
				return asMap(c)
			}
		}
		t.Fatalf("no container %q", name)
		return nil
	}
	for _, tc := range []struct {
		name, kind, object string
		change             func(pod map[string]any)
		want               string
	}{
		{"no seccomp profile", "Job", "infer-bench-shards", func(p map[string]any) {
			delete(asMap(spec(p)["securityContext"]), "seccompProfile")
		}, `seccompProfile (pod or containers "image", "barrier", "bench" must set securityContext.seccompProfile.type to "RuntimeDefault" or "Localhost")`},
		{"a capability added to the sidecar", "Deployment", "vllm", func(p map[string]any) {
			asMap(asMap(container(p, "infer-exporter")["securityContext"])["capabilities"])["add"] = []any{"NET_ADMIN"}
		}, `unrestricted capabilities (container "infer-exporter" must not include "NET_ADMIN" in securityContext.capabilities.add)`},
		{"the merge as root", "Job", "infer-bench-merge", func(p map[string]any) {
			sc := asMap(spec(p)["securityContext"])
			delete(sc, "runAsNonRoot")
			sc["runAsUser"] = 0
		}, `runAsUser=0`},
	} {
		t.Run("Pod Security refuses "+tc.name, func(t *testing.T) {
			pod := podFromTemplate(t, findObject(objs, tc.kind, tc.object), "infer-e2e-refused", ns)
			tc.change(pod)
			_, err := api.create(ctx, pod, dryRun)
			ae, _ := err.(*apiError)
			if ae == nil || ae.Code != http.StatusForbidden || !strings.Contains(ae.Message, refusal) || !strings.Contains(ae.Message, tc.want) {
				t.Errorf("the Pod of %s %s with %s: %v, want 403 %s naming %s", tc.kind, tc.object, tc.name, err, refusal, tc.want)
			}
		})
	}

	// On the controller's path: the Job is admitted, its pods are not.
	t.Run("the Job controller's pods refused", func(t *testing.T) {
		job := deepCopy(t, findObject(objs, "Job", "infer-bench-shards"))
		md := asMap(job["metadata"])
		md["name"] = "infer-e2e-no-seccomp"
		delete(asMap(dig(job, "spec", "template", "spec", "securityContext")), "seccompProfile")
		if _, err := api.apply(ctx, job, nil); err != nil {
			t.Fatalf("the Job without a seccomp profile refused: %v, want it admitted (Pod Security enforces on pods)", err)
		}
		var msg string
		err := pollAPI(ctx, "the Job controller's FailedCreate event", func() (bool, error) {
			events, err := api.list(ctx, "v1", "Event", ns, "", "involvedObject.name=infer-e2e-no-seccomp")
			for _, e := range events {
				if e["reason"] == "FailedCreate" {
					msg, _ = e["message"].(string)
					return true, err
				}
			}
			return false, err
		})
		if err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(msg, refusal) || !strings.Contains(msg, "seccompProfile") {
			t.Errorf("FailedCreate: %q, want Pod Security's refusal naming seccompProfile", msg)
		}
		pods, err := api.list(ctx, "v1", "Pod", ns, "batch.kubernetes.io/job-name=infer-e2e-no-seccomp", "")
		if err != nil || len(pods) != 0 {
			t.Errorf("pods of the refused Job: %d (%v), want none", len(pods), err)
		}
	})
}

// checkTemplatesAdmitted: every Pod template of objs, made into a Pod, is
// admitted in the namespace (a server-side dry run), Pod Security among
// the admission plugins.
func checkTemplatesAdmitted(ctx context.Context, t *testing.T, api *kubeAPI, objs []map[string]any, ns string) {
	t.Helper()
	for _, o := range objs {
		if !podTemplateKinds[o["kind"].(string)] {
			continue
		}
		pod := podFromTemplate(t, o, "infer-e2e-template", ns)
		if _, err := api.create(ctx, pod, url.Values{"dryRun": {"All"}}); err != nil {
			t.Errorf("the Pod of %s's template refused: %v", objectKey(o), err)
		}
	}
}

// checkCRDSchema: a PodMonitor that kubeconform accepts is admitted, and
// one invalid field is refused by the CRD's OpenAPI schema (a value out of
// its enum, a value off its pattern) or by strict field validation (an
// unknown field).
func checkCRDSchema(ctx context.Context, t *testing.T, api *kubeAPI, objs []map[string]any) {
	dryRun := url.Values{"dryRun": {"All"}}
	valid := deepCopy(t, findObject(objs, "PodMonitor", "infer-exporter"))
	asMap(valid["metadata"])["name"] = "infer-e2e-podmonitor"
	if _, err := api.apply(ctx, valid, dryRun); err != nil {
		t.Fatalf("a copy of the PodMonitor refused: %v", err)
	}
	endpoint := func(pm map[string]any) map[string]any {
		return asMap(asList(dig(pm, "spec", "podMetricsEndpoints"))[0])
	}
	for _, tc := range []struct {
		name   string
		change func(endpoint map[string]any)
		code   int // the refusal's HTTP status
		want   []string
	}{
		{"a scheme out of its enum", func(e map[string]any) { e["scheme"] = "ftp" },
			http.StatusUnprocessableEntity, []string{"spec.podMetricsEndpoints[0].scheme", `Unsupported value: "ftp"`}},
		{"an interval off its pattern", func(e map[string]any) { e["interval"] = "15 seconds" },
			http.StatusUnprocessableEntity, []string{"spec.podMetricsEndpoints[0].interval", "should match"}},
		// Server-side apply turns the patch into the schema's type before
		// field validation runs, and kube-apiserver v1.35 answers that
		// failure with a 500 (its apply path returns the error untyped);
		// kubectl prints the same message.
		{"an unknown field", func(e map[string]any) { e["intervall"] = e["interval"] },
			http.StatusInternalServerError, []string{".spec.podMetricsEndpoints[0].intervall: field not declared in schema"}},
	} {
		t.Run("CRD schema refuses "+tc.name, func(t *testing.T) {
			pm := deepCopy(t, valid)
			tc.change(endpoint(pm))
			_, err := api.apply(ctx, pm, dryRun)
			ae, _ := err.(*apiError)
			ok := ae != nil && ae.Code == tc.code
			for _, w := range tc.want {
				ok = ok && strings.Contains(ae.Message, w)
			}
			if !ok {
				t.Errorf("the PodMonitor with %s: %v, want a %d refusal naming %q", tc.name, err, tc.code, tc.want)
			}
		})
	}
}

// fieldRefPath is a downward API field path into a pod's metadata.
var fieldRefPath = regexp.MustCompile(`^metadata\.(annotations|labels)\['([^']+)'\]$`)

// containerEnv resolves a container's environment as the kubelet would:
// values, and field references into the pod's metadata.
func containerEnv(t *testing.T, pod, c map[string]any) map[string]string {
	t.Helper()
	env := map[string]string{}
	for _, e := range asList(c["env"]) {
		em := asMap(e)
		name, _ := em["name"].(string)
		if v, ok := em["value"].(string); ok {
			env[name] = expandVars(v, env)
			continue
		}
		path, _ := dig(em, "valueFrom", "fieldRef", "fieldPath").(string)
		switch m := fieldRefPath.FindStringSubmatch(path); {
		case m != nil:
			env[name], _ = dig(pod, "metadata", m[1], m[2]).(string)
		case path == "metadata.name" || path == "metadata.namespace" || path == "metadata.uid":
			env[name], _ = dig(pod, "metadata", strings.TrimPrefix(path, "metadata.")).(string)
		case path != "":
			t.Fatalf("container %s: env %s: field path %q not resolved by the test", c["name"], name, path)
		}
	}
	return env
}

// expandVars expands $(VAR) from env as the kubelet expands a container's
// arguments: an undefined variable stays as written, $$ is a $.
func expandVars(s string, env map[string]string) string {
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] != '$' || i+1 == len(s) {
			b.WriteByte(s[i])
			continue
		}
		switch s[i+1] {
		case '$':
			b.WriteByte('$')
			i++
		case '(':
			end := strings.IndexByte(s[i:], ')')
			if end < 0 {
				b.WriteString(s[i:])
				return b.String()
			}
			name := s[i+2 : i+end]
			if v, ok := env[name]; ok {
				b.WriteString(v)
			} else {
				b.WriteString(s[i : i+end+1])
			}
			i += end
		default:
			b.WriteByte(s[i])
		}
	}
	return b.String()
}

// selector turns matchLabels into a label selector.
func selector(labels map[string]any) string {
	var parts []string
	for k, v := range labels {
		parts = append(parts, fmt.Sprintf("%s=%v", k, v))
	}
	sort.Strings(parts)
	return strings.Join(parts, ",")
}

// benchNames are the names of a sharded bench's objects: deploy/'s, or
// the chart's.
type benchNames struct {
	shards, merge, podMonitor string
}

// deployBench are deploy/kubernetes/bench's.
var deployBench = benchNames{shards: "infer-bench-shards", merge: "infer-bench-merge", podMonitor: "infer-bench"}

// checkIndexedShards: the Job controller creates the shards' N pods with
// completion indexes 0..N-1, each with the arguments of its shard, the
// PodMonitor selects exactly them and reads their index label, and, with
// the test as their kubelet, the Job completes with every index.
func checkIndexedShards(ctx context.Context, t *testing.T, api *kubeAPI, objs []map[string]any, ns string, names benchNames) {
	job, err := api.get(ctx, "batch/v1", "Job", ns, names.shards)
	if err != nil {
		t.Fatal(err)
	}
	n := num(dig(job, "spec", "completions"))
	uid, _ := dig(job, "metadata", "uid").(string)
	if n < 2 || dig(job, "spec", "completionMode") != "Indexed" || num(dig(job, "spec", "parallelism")) != n {
		t.Fatalf("the shards' Job: completions %d, parallelism %v, mode %v: want an Indexed Job of N ≥ 2 pods at once", n, dig(job, "spec", "parallelism"), dig(job, "spec", "completionMode"))
	}
	var pods []map[string]any
	if err := pollAPI(ctx, fmt.Sprintf("the Job controller's %d shard pods", n), func() (bool, error) {
		// A refused pod is never created: say so now, not at the deadline.
		events, _ := api.list(ctx, "v1", "Event", ns, "", "involvedObject.name="+names.shards)
		for _, e := range events {
			if msg, _ := e["message"].(string); e["reason"] == "FailedCreate" && strings.Contains(msg, "PodSecurity") {
				t.Fatalf("the Job controller could not create the pods of %s: %s", names.shards, msg)
			}
		}
		pods, err = api.list(ctx, "v1", "Pod", ns, "batch.kubernetes.io/job-name="+names.shards, "")
		return len(pods) >= n, err
	}); err != nil {
		t.Fatal(err)
	}
	if len(pods) != n {
		t.Fatalf("%d shard pods, want %d", len(pods), n)
	}

	const indexKey = "batch.kubernetes.io/job-completion-index"
	var indexes []int
	for _, p := range pods {
		name, _ := dig(p, "metadata", "name").(string)
		idx, _ := dig(p, "metadata", "annotations", indexKey).(string)
		i, err := strconv.Atoi(idx)
		if err != nil {
			t.Errorf("pod %s: annotation %s = %q", name, indexKey, idx)
			continue
		}
		indexes = append(indexes, i)
		if l := dig(p, "metadata", "labels", indexKey); l != idx {
			t.Errorf("pod %s: label %s = %v, annotation %s: the PodMonitor's shard label reads the label", name, indexKey, l, idx)
		}
		if h := dig(p, "spec", "hostname"); h != fmt.Sprintf("%s-%d", names.shards, i) {
			t.Errorf("pod %s: hostname %v, want %s-%d", name, h, names.shards, i)
		}
		if l := dig(p, "metadata", "labels", "batch.kubernetes.io/controller-uid"); l != uid {
			t.Errorf("pod %s: controller-uid label %v, want the Job's uid %s (the barrier's JOB_UID)", name, l, uid)
		}
		byName := map[string]map[string]any{}
		for _, key := range []string{"initContainers", "containers"} {
			for _, c := range asList(dig(p, "spec", key)) {
				cm := asMap(c)
				byName[cm["name"].(string)] = cm
			}
		}
		barrier := containerEnv(t, p, byName["barrier"])
		if barrier["JOB_COMPLETION_INDEX"] != idx || barrier["JOB_UID"] != uid || barrier["SHARDS"] != strconv.Itoa(n) {
			t.Errorf("pod %s: the barrier's JOB_COMPLETION_INDEX %q, JOB_UID %q, SHARDS %q: want %s, %s, %d",
				name, barrier["JOB_COMPLETION_INDEX"], barrier["JOB_UID"], barrier["SHARDS"], idx, uid, n)
		}
		benchC := byName["bench"]
		env := containerEnv(t, p, benchC)
		var args []string
		for _, a := range strs(benchC["args"]) {
			args = append(args, expandVars(a, env))
		}
		for _, want := range []string{fmt.Sprintf("--shard=%d/%d", i, n), fmt.Sprintf("--output.dir=/results/shard-%d", i)} {
			if !slices.Contains(args, want) {
				t.Errorf("pod %s: the bench's arguments, expanded, are %q: want %s", name, args, want)
			}
		}
	}
	sort.Ints(indexes)
	want := make([]int, n)
	for i := range want {
		want[i] = i
	}
	if !slices.Equal(indexes, want) {
		t.Errorf("completion indexes %v, want %v", indexes, want)
	}
	t.Logf("the Job controller made %d shard pods, completion indexes %v", len(pods), indexes)

	// The PodMonitor selects these pods and no others, and its relabeling
	// reads the index label by Prometheus's name for it.
	pm := findObject(objs, "PodMonitor", names.podMonitor)
	sel := selector(asMap(dig(pm, "spec", "selector", "matchLabels")))
	if selected, err := api.list(ctx, "v1", "Pod", ns, sel, ""); err != nil || len(selected) != n {
		t.Errorf("the PodMonitor's selector %s selects %d pods (%v), want the %d shards", sel, len(selected), err, n)
	}
	metaLabel := "__meta_kubernetes_pod_label_" + regexp.MustCompile(`[^a-zA-Z0-9_]`).ReplaceAllString(indexKey, "_")
	var reads bool
	for _, r := range asList(asMap(asList(dig(pm, "spec", "podMetricsEndpoints"))[0])["relabelings"]) {
		reads = reads || slices.Contains(strs(asMap(r)["sourceLabels"]), metaLabel)
	}
	if !reads {
		t.Errorf("the PodMonitor's relabelings do not read %s, the label the Job controller sets", metaLabel)
	}

	// The test as the kubelet: a Node, each pod bound to it, Running, then
	// Succeeded; the Job controller counts each index once.
	if _, err := api.apply(ctx, map[string]any{"apiVersion": "v1", "kind": "Node", "metadata": map[string]any{"name": "infer-e2e-node"}}, nil); err != nil {
		t.Fatalf("a Node: %v", err)
	}
	for _, phase := range []string{"", "Running", "Succeeded"} {
		for _, p := range pods {
			name, _ := dig(p, "metadata", "name").(string)
			var err error
			if phase == "" {
				err = api.subresource(ctx, http.MethodPost, "v1", "Pod", ns, name, "binding", "application/json", map[string]any{
					"apiVersion": "v1", "kind": "Binding", "metadata": map[string]any{"name": name},
					"target": map[string]any{"apiVersion": "v1", "kind": "Node", "name": "infer-e2e-node"},
				})
			} else {
				err = api.subresource(ctx, http.MethodPatch, "v1", "Pod", ns, name, "status", "application/merge-patch+json",
					map[string]any{"status": map[string]any{"phase": phase}})
			}
			if err != nil {
				t.Fatalf("pod %s: %s: %v", name, cmp.Or(phase, "binding"), err)
			}
		}
	}
	wantIndexes := fmt.Sprintf("0-%d", n-1)
	if err := pollAPI(ctx, "the shards' Job complete", func() (bool, error) {
		job, err = api.get(ctx, "batch/v1", "Job", ns, names.shards)
		for _, c := range asList(dig(job, "status", "conditions")) {
			if cm := asMap(c); cm["type"] == "Complete" && cm["status"] == "True" {
				return true, err
			}
		}
		return false, err
	}); err != nil {
		t.Fatalf("%v; status %v", err, dig(job, "status"))
	}
	if got := dig(job, "status", "completedIndexes"); got != wantIndexes || num(dig(job, "status", "succeeded")) != n {
		t.Errorf("the complete Job: completedIndexes %v, succeeded %v: want %s and %d", got, dig(job, "status", "succeeded"), wantIndexes, n)
	}
	t.Logf("the shards' Job complete: completedIndexes %v, succeeded %v", dig(job, "status", "completedIndexes"), dig(job, "status", "succeeded"))
}

// checkControllersPods: the merge Job's pod carries its Job's uid (its
// wait's JOB_UID), and the Deployment controller's pod, admitted by Pod
// Security as the ReplicaSet controller creates it, is the one the Service
// and the sidecar's PodMonitor select.
func checkControllersPods(ctx context.Context, t *testing.T, api *kubeAPI, objs []map[string]any, ns string, merge, deployment, podMonitor string) {
	checkMergePod(ctx, t, api, ns, merge)
	checkDeploymentSelected(ctx, t, api, objs, ns, deployment, podMonitor)
}

// checkMergePod: the merge Job's pod exists and carries its Job's uid.
func checkMergePod(ctx context.Context, t *testing.T, api *kubeAPI, ns, name string) {
	merge, err := api.get(ctx, "batch/v1", "Job", ns, name)
	if err != nil {
		t.Fatal(err)
	}
	var pods []map[string]any
	if err := pollAPI(ctx, "the merge Job's pod", func() (bool, error) {
		pods, err = api.list(ctx, "v1", "Pod", ns, "batch.kubernetes.io/job-name="+name, "")
		return len(pods) == 1, err
	}); err != nil {
		t.Fatal(err)
	}
	if got, want := dig(pods[0], "metadata", "labels", "batch.kubernetes.io/controller-uid"), dig(merge, "metadata", "uid"); got != want {
		t.Errorf("the merge pod's controller-uid %v, want its Job's %v", got, want)
	}
}

// checkDeploymentSelected: the ReplicaSet controller makes the
// Deployment's pods, admitted by Pod Security, and the PodMonitor and
// every Service select them.
func checkDeploymentSelected(ctx context.Context, t *testing.T, api *kubeAPI, objs []map[string]any, ns, deployment, podMonitor string) {
	var pods []map[string]any
	var err error
	dep := findObject(objs, "Deployment", deployment)
	replicas := num(dig(dep, "spec", "replicas"))
	depSel := selector(asMap(dig(dep, "spec", "selector", "matchLabels")))
	if err := pollAPI(ctx, "the Deployment's pods", func() (bool, error) {
		pods, err = api.list(ctx, "v1", "Pod", ns, depSel, "")
		return len(pods) == replicas, err
	}); err != nil {
		t.Fatal(err)
	}
	selectors := map[string]string{
		"the PodMonitor " + podMonitor: selector(asMap(dig(findObject(objs, "PodMonitor", podMonitor), "spec", "selector", "matchLabels"))),
	}
	for _, o := range objs {
		if o["kind"] == "Service" {
			selectors[objectKey(o)] = selector(asMap(dig(o, "spec", "selector")))
		}
	}
	for what, sel := range selectors {
		got, err := api.list(ctx, "v1", "Pod", ns, sel, "")
		if err != nil || len(got) != replicas || dig(got[0], "metadata", "name") != dig(pods[0], "metadata", "name") {
			t.Errorf("%s selects %d pods (%v) with %s, want the Deployment's %d", what, len(got), err, sel, replicas)
		}
	}
	t.Logf("the ReplicaSet controller made pod %v, admitted by Pod Security", dig(pods[0], "metadata", "name"))
}

// TestKubeToolPinned: the control plane is the Kubernetes release whose
// OpenAPI document kubeconform's schemas come from (schema-modules.txt),
// each of its staging modules (the k8s.io/* it requires at v0.0.0, which
// its own go.mod replaces with directories of its repository) is replaced
// by the same release's v0.MINOR.PATCH, and `make tools` builds it.
func TestKubeToolPinned(t *testing.T) {
	root := realstack.RepoRoot(t)
	var kubernetes string
	for _, s := range readSchemaSources(t, filepath.Join(root, schemaModules)) {
		if s.Module == "k8s.io/kubernetes" {
			kubernetes = s.Version
		}
	}
	major, rest, ok := strings.Cut(strings.TrimPrefix(kubernetes, "v"), ".")
	if !ok || major != "1" {
		t.Fatalf("%s pins k8s.io/kubernetes at %q, want v1.MINOR.PATCH", schemaModules, kubernetes)
	}
	staging := "v0." + rest

	b, err := os.ReadFile(filepath.Join(root, kubeToolDir, "go.mod"))
	if err != nil {
		t.Fatal(err)
	}
	required := map[string]string{} // module -> version
	replaced := map[string]string{} // module -> the version it is replaced by
	block := ""                     // the directive of the block the line is in
	for _, line := range strings.Split(string(b), "\n") {
		line, _, _ = strings.Cut(line, "//")
		f := strings.Fields(line)
		directive := block
		switch {
		case len(f) == 0:
			continue
		case len(f) == 2 && f[1] == "(":
			block = f[0]
			continue
		case f[0] == ")":
			block = ""
			continue
		case block == "":
			directive, f = f[0], f[1:]
		}
		switch {
		case directive == "require" && len(f) == 2:
			required[f[0]] = f[1]
		case directive == "replace" && len(f) == 4 && f[1] == "=>":
			replaced[f[0]] = f[3]
		}
	}
	if required["k8s.io/kubernetes"] != kubernetes {
		t.Errorf("%s/go.mod requires k8s.io/kubernetes %q, want %s (the schemas' release)", kubeToolDir, required["k8s.io/kubernetes"], kubernetes)
	}
	n := 0
	for m, v := range required {
		if v != "v0.0.0" {
			continue
		}
		n++
		if !strings.HasPrefix(m, "k8s.io/") || replaced[m] != staging {
			t.Errorf("%s/go.mod: %s v0.0.0 is replaced by %q, want %s %s", kubeToolDir, m, replaced[m], m, staging)
		}
	}
	for m, v := range replaced {
		if v != staging {
			t.Errorf("%s/go.mod replaces %s by %s, want %s", kubeToolDir, m, v, staging)
		}
	}
	if n == 0 {
		t.Errorf("%s/go.mod requires no staging module at v0.0.0", kubeToolDir)
	}

	mk, err := os.ReadFile(filepath.Join(root, "Makefile"))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(mk), "module-run,"+kubeToolDir+",-exec echo github.com/infer-exporter/infer_exporter/tools/kube)") {
		t.Errorf("the Makefile's tools target does not build %s", kubeToolDir)
	}
}
