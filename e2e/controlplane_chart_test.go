package e2e

import (
	"context"
	"path/filepath"
	"testing"
)

// chartRelease is one release of the chart the control-plane test applies
// into a namespace of its own, as `helm install` would (Helm applies what
// helm template renders, in the same order), with the manifests applied
// beside it.
type chartRelease struct {
	name, ns string
	objs     []map[string]any
	check    func(ctx context.Context, t *testing.T, api *kubeAPI, objs []map[string]any, ns string)
}

// chartReleases renders the chart's releases the control-plane test
// applies:
//
//   - the defaults with the bench (bench.enabled=true), in infer-helm: the
//     exporter's Deployment, its Service, PodMonitor, Probe, PrometheusRule
//     and dashboards, and the bench's claim, Indexed Job, merge Job and
//     PodMonitor; the Job controller makes the shards' pods, with their
//     indexes and arguments, and the merge's, and the ReplicaSet controller
//     the exporter's, which the Service and the PodMonitor select;
//   - the sidecar example (examples/sidecar-vllm.yaml) with vLLM's pod of
//     deploy/kubernetes/deployment.yaml, in infer-sidecar, as the chart's
//     README installs them: the ReplicaSet controller makes vLLM's pod with
//     the exporter in it, which the chart's Service and PodMonitor select.
//
// Both namespaces enforce Pod Security "restricted".
func chartReleases(t *testing.T, root string) []chartRelease {
	t.Helper()
	helm := helmTool(t)
	dir := t.TempDir()
	render := func(ns string, args ...string) []map[string]any {
		r, err := renderChart(t, helm, dir, chartExample{ns, append([]string{"infer-exporter", chartDir, "--namespace", ns}, args...)})
		if err != nil {
			t.Fatal(err)
		}
		return r.objs
	}
	bench := benchNames{shards: "infer-exporter-bench-shards", merge: "infer-exporter-bench-merge", podMonitor: "infer-exporter-bench"}
	withBench := chartRelease{name: "the chart with the bench", ns: "infer-helm", objs: render("infer-helm", "--set", "bench.enabled=true"),
		check: func(ctx context.Context, t *testing.T, api *kubeAPI, objs []map[string]any, ns string) {
			checkIndexedShards(ctx, t, api, objs, ns, bench)
			checkControllersPods(ctx, t, api, objs, ns, bench.merge, "infer-exporter", "infer-exporter")
		}}
	sidecar := chartRelease{name: "the chart as vLLM's sidecar", ns: "infer-sidecar",
		objs: render("infer-sidecar", "-f", chartDir+"/examples/sidecar-vllm.yaml"),
		check: func(ctx context.Context, t *testing.T, api *kubeAPI, objs []map[string]any, ns string) {
			checkDeploymentSelected(ctx, t, api, objs, ns, "vllm", "infer-exporter")
		}}
	sidecar.objs = append(sidecar.objs, yamlDocs(t, filepath.Join(root, "deploy/kubernetes/deployment.yaml"))...)
	return []chartRelease{withBench, sidecar}
}

// applyRelease applies a release into its namespace, created here with
// Pod Security "restricted" enforced (the chart creates no namespace, as
// Helm charts do not): every object admitted, the same again changing
// nothing, every Pod template admitted as a Pod; then the release's own
// checks of what the controllers made.
func applyRelease(ctx context.Context, t *testing.T, api *kubeAPI, rel chartRelease) {
	ns := map[string]any{"apiVersion": "v1", "kind": "Namespace", "metadata": map[string]any{"name": rel.ns, "labels": map[string]any{
		"pod-security.kubernetes.io/enforce": "restricted", "pod-security.kubernetes.io/enforce-version": "latest"}}}
	if _, err := api.apply(ctx, ns, nil); err != nil {
		t.Fatalf("namespace %s: %v", rel.ns, err)
	}
	if err := pollAPI(ctx, "the default ServiceAccount of "+rel.ns, func() (bool, error) {
		_, err := api.get(ctx, "v1", "ServiceAccount", rel.ns, "default")
		return true, err
	}); err != nil {
		t.Fatal(err)
	}
	kinds := map[string]int{}
	applied := map[string]map[string]any{}
	for _, o := range rel.objs {
		md := asMap(o["metadata"])
		if md["namespace"] == nil && o["kind"] != "Namespace" {
			md["namespace"] = rel.ns // a manifest applied with --namespace
		}
		if md["namespace"] != rel.ns {
			t.Errorf("%s: namespace %v, want the release's %s", objectKey(o), md["namespace"], rel.ns)
		}
		out, err := api.apply(ctx, o, nil)
		if err != nil {
			t.Errorf("%s refused: %v", objectKey(o), err)
			continue
		}
		applied[objectKey(o)] = out
		kinds[o["kind"].(string)]++
	}
	if t.Failed() {
		t.FailNow()
	}
	t.Logf("%d resources admitted in %s by server-side apply: %v", len(applied), rel.ns, kinds)
	reapply(ctx, t, api, rel.objs, applied)
	checkTemplatesAdmitted(ctx, t, api, rel.objs, rel.ns)
	rel.check(ctx, t, api, rel.objs, rel.ns)
}
