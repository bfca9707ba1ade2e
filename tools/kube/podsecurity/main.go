// Command podsecurity evaluates every Pod template of Kubernetes manifests
// against a Pod Security Standards level with the admission controller's own
// checks (k8s.io/pod-security-admission/policy), as a namespace labelled
// pod-security.kubernetes.io/enforce=<level> would admit them:
//
//	podsecurity [-level restricted] [-version latest] FILE... (- for stdin)
//
// It reads multi-document YAML (kustomize build output, plain manifests),
// finds the Pod template of each Pod, Deployment, StatefulSet, DaemonSet,
// ReplicaSet, ReplicationController, PodTemplate, Job and CronJob, and
// prints one line per template: "allowed" or the violations. Documents of
// other kinds are skipped. Exit status 1 when a template is refused, 2 on
// an error (a file that does not parse, a bad flag).
package main

import (
	"bufio"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"sort"

	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/pod-security-admission/api"
	"k8s.io/pod-security-admission/policy"
	"sigs.k8s.io/yaml"
)

// template is one Pod template found in a document.
type template struct {
	where string
	meta  *metav1.ObjectMeta
	spec  *corev1.PodSpec
}

func main() {
	level := flag.String("level", string(api.LevelRestricted), "Pod Security Standards level: privileged, baseline or restricted")
	version := flag.String("version", "latest", "the level's version: latest or v1.N")
	flag.Usage = func() {
		fmt.Fprintf(flag.CommandLine.Output(), "usage: podsecurity [-level restricted] [-version latest] FILE... (- for stdin)\n")
		flag.PrintDefaults()
	}
	flag.Parse()
	if flag.NArg() == 0 {
		flag.Usage()
		os.Exit(2)
	}
	refused, err := run(os.Stdout, *level, *version, flag.Args())
	if err != nil {
		fmt.Fprintln(os.Stderr, "podsecurity:", err)
		os.Exit(2)
	}
	if refused > 0 {
		os.Exit(1)
	}
}

// run evaluates every template of the files and returns how many were
// refused.
func run(w io.Writer, level, version string, files []string) (int, error) {
	l, err := api.ParseLevel(level)
	if err != nil {
		return 0, err
	}
	v, err := api.ParseVersion(version)
	if err != nil {
		return 0, err
	}
	lv := api.LevelVersion{Level: l, Version: v}
	evaluator, err := policy.NewEvaluator(policy.DefaultChecks(), nil)
	if err != nil {
		return 0, err
	}
	refused, templates := 0, 0
	for _, f := range files {
		ts, err := readFile(f)
		if err != nil {
			return 0, err
		}
		for _, t := range ts {
			templates++
			res := policy.AggregateCheckResults(evaluator.EvaluatePod(lv, t.meta, t.spec))
			if res.Allowed {
				fmt.Fprintf(w, "%s: allowed at %s\n", t.where, lv)
				continue
			}
			refused++
			fmt.Fprintf(w, "%s: refused at %s: %s\n", t.where, lv, violations(res))
		}
	}
	fmt.Fprintf(w, "%d pod templates, %d refused\n", templates, refused)
	return refused, nil
}

// violations lists each forbidden reason with its detail, in a stable
// order.
func violations(res policy.AggregateCheckResult) string {
	var out []string
	for i, r := range res.ForbiddenReasons {
		s := r
		if i < len(res.ForbiddenDetails) && res.ForbiddenDetails[i] != "" {
			s += " (" + res.ForbiddenDetails[i] + ")"
		}
		out = append(out, s)
	}
	sort.Strings(out)
	s := ""
	for i, v := range out {
		if i > 0 {
			s += "; "
		}
		s += v
	}
	return s
}

// readFile returns the Pod templates of every document of a file.
func readFile(name string) ([]template, error) {
	var r io.Reader = os.Stdin
	if name != "-" {
		f, err := os.Open(name)
		if err != nil {
			return nil, err
		}
		defer f.Close()
		r = f
	}
	reader := utilyaml.NewYAMLReader(bufio.NewReader(r))
	var out []template
	for n := 1; ; n++ {
		doc, err := reader.Read()
		if errors.Is(err, io.EOF) {
			return out, nil
		}
		if err != nil {
			return nil, fmt.Errorf("%s: document %d: %w", name, n, err)
		}
		t, err := podTemplate(doc)
		if err != nil {
			return nil, fmt.Errorf("%s: document %d: %w", name, n, err)
		}
		if t != nil {
			t.where = name + ": " + t.where
			out = append(out, *t)
		}
	}
}

// podTemplate decodes one document and returns its Pod template, or nil for
// a document of a kind without one (or an empty document).
func podTemplate(doc []byte) (*template, error) {
	var head struct {
		APIVersion string            `json:"apiVersion"`
		Kind       string            `json:"kind"`
		Metadata   metav1.ObjectMeta `json:"metadata"`
	}
	if err := yaml.Unmarshal(doc, &head); err != nil {
		return nil, err
	}
	where := head.Kind + " " + head.Metadata.Name
	decode := func(into any) error {
		// Strict: a misspelt field would otherwise be dropped here and its
		// setting silently not evaluated.
		return yaml.UnmarshalStrict(doc, into)
	}
	var pt *corev1.PodTemplateSpec
	switch head.APIVersion + " " + head.Kind {
	case "v1 Pod":
		var o corev1.Pod
		if err := decode(&o); err != nil {
			return nil, err
		}
		return &template{where: where, meta: &o.ObjectMeta, spec: &o.Spec}, nil
	case "v1 PodTemplate":
		var o corev1.PodTemplate
		if err := decode(&o); err != nil {
			return nil, err
		}
		pt = &o.Template
	case "v1 ReplicationController":
		var o corev1.ReplicationController
		if err := decode(&o); err != nil {
			return nil, err
		}
		pt = o.Spec.Template
	case "apps/v1 Deployment":
		var o appsv1.Deployment
		if err := decode(&o); err != nil {
			return nil, err
		}
		pt = &o.Spec.Template
	case "apps/v1 StatefulSet":
		var o appsv1.StatefulSet
		if err := decode(&o); err != nil {
			return nil, err
		}
		pt = &o.Spec.Template
	case "apps/v1 DaemonSet":
		var o appsv1.DaemonSet
		if err := decode(&o); err != nil {
			return nil, err
		}
		pt = &o.Spec.Template
	case "apps/v1 ReplicaSet":
		var o appsv1.ReplicaSet
		if err := decode(&o); err != nil {
			return nil, err
		}
		pt = &o.Spec.Template
	case "batch/v1 Job":
		var o batchv1.Job
		if err := decode(&o); err != nil {
			return nil, err
		}
		pt = &o.Spec.Template
	case "batch/v1 CronJob":
		var o batchv1.CronJob
		if err := decode(&o); err != nil {
			return nil, err
		}
		pt = &o.Spec.JobTemplate.Spec.Template
	default:
		return nil, nil
	}
	if pt == nil {
		return nil, fmt.Errorf("%s has no pod template", where)
	}
	return &template{where: where, meta: &pt.ObjectMeta, spec: &pt.Spec}, nil
}
