package e2e

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/infer-exporter/infer_exporter/bench"
	"github.com/infer-exporter/infer_exporter/internal/realstack"
)

// benchDir is the sharded bench's kustomization.
const benchDir = "deploy/kubernetes/bench"

// container is the part of a container spec the checks read.
type container struct {
	name, image string
	command     []string
	args        []string
	env         map[string]string
	mounts      map[string]string // volume name -> mount path
	ports       map[string]int    // port name -> container port
	raw         map[string]any
}

func strs(v any) []string {
	var out []string
	for _, e := range asList(v) {
		s, _ := e.(string)
		out = append(out, s)
	}
	return out
}

func asList(v any) []any { l, _ := v.([]any); return l }

func asMap(v any) map[string]any { m, _ := v.(map[string]any); return m }

func containers(podSpec map[string]any, key string) []container {
	var out []container
	for _, e := range asList(podSpec[key]) {
		m := asMap(e)
		c := container{
			name: fmt.Sprint(m["name"]), image: fmt.Sprint(m["image"]),
			command: strs(m["command"]), args: strs(m["args"]),
			env: map[string]string{}, mounts: map[string]string{}, ports: map[string]int{}, raw: m,
		}
		for _, ev := range asList(m["env"]) {
			em := asMap(ev)
			if v, ok := em["value"].(string); ok {
				c.env[fmt.Sprint(em["name"])] = v
			} else if ref, ok := dig(em, "valueFrom", "fieldRef", "fieldPath").(string); ok {
				c.env[fmt.Sprint(em["name"])] = "fieldRef:" + ref
			}
		}
		for _, vm := range asList(m["volumeMounts"]) {
			vmm := asMap(vm)
			c.mounts[fmt.Sprint(vmm["name"])] = fmt.Sprint(vmm["mountPath"])
		}
		for _, p := range asList(m["ports"]) {
			pm := asMap(p)
			n, _ := pm["containerPort"].(int)
			c.ports[fmt.Sprint(pm["name"])] = n
		}
		out = append(out, c)
	}
	return out
}

// benchDoc reads the one document of a file under benchDir.
func benchDoc(t *testing.T, name string) map[string]any {
	t.Helper()
	docs := yamlDocs(t, filepath.Join(realstack.RepoRoot(t), benchDir, name))
	if len(docs) != 1 {
		t.Fatalf("%s: %d documents, want 1", name, len(docs))
	}
	return docs[0]
}

func podSpec(job map[string]any) map[string]any {
	return asMap(dig(job, "spec", "template", "spec"))
}

func byName(cs []container, name string) container {
	for _, c := range cs {
		if c.name == name {
			return c
		}
	}
	return container{}
}

// TestBenchManifests: the sharded bench's files agree with each other and
// with the bench command. The shards' Job is Indexed with completions =
// parallelism = N, runs shard $(JOB_COMPLETION_INDEX)/N into its own
// directory of the shared volume, serves its metrics on the port the
// PodMonitor scrapes, and its barrier counts N; the merge Job waits for N
// reports and merges exactly shard-0..N-1; both mount the one
// ReadWriteMany claim; the ConfigMap's bench.yml passes the bench's own
// validation; and every pod runs as non-root with a read-only root
// filesystem, no privilege escalation, requests and a memory limit.
func TestBenchManifests(t *testing.T) {
	root := realstack.RepoRoot(t)
	dir := filepath.Join(root, benchDir)
	kust := yamlDocs(t, filepath.Join(dir, "kustomization.yaml"))[0]
	resources := strs(kust["resources"])
	if !slices.Equal(resources, []string{"pvc.yaml", "shards-job.yaml", "merge-job.yaml", "podmonitor.yaml"}) {
		t.Errorf("resources = %v", resources)
	}
	if kust["namespace"] != "inference" {
		t.Errorf("namespace %v: want inference, beside the vLLM Service the bench targets", kust["namespace"])
	}
	// Every file is a resource, the ConfigMap's source, or the standalone
	// reader (validated on its own by TestKubeconform).
	files, _ := filepath.Glob(filepath.Join(dir, "*"))
	for _, f := range files {
		if b := filepath.Base(f); !slices.Contains(append(resources, "kustomization.yaml", "bench.yml", "results-reader.yaml"), b) {
			t.Errorf("%s is neither a resource of the kustomization nor its bench.yml nor results-reader.yaml", b)
		}
	}
	gen := asList(kust["configMapGenerator"])
	if len(gen) != 1 || dig(asMap(gen[0]), "name") != "infer-bench-config" || !slices.Equal(strs(asMap(gen[0])["files"]), []string{"bench.yml"}) {
		t.Fatalf("configMapGenerator = %v, want infer-bench-config from bench.yml", gen)
	}
	cfg, err := bench.LoadFileContext(context.Background(), filepath.Join(dir, "bench.yml"))
	if err != nil {
		t.Fatalf("bench.yml: %v", err)
	}
	if cfg.Bench.Stability.On() {
		t.Error("bench.yml: stability extension is on: each shard would extend its repeats on its own")
	}

	shards := benchDoc(t, "shards-job.yaml")
	spec := asMap(shards["spec"])
	n, _ := spec["completions"].(int)
	if spec["completionMode"] != "Indexed" || n < 2 || spec["parallelism"] != n {
		t.Fatalf("shards: completionMode %v, completions %v, parallelism %v: want Indexed with completions = parallelism >= 2", spec["completionMode"], spec["completions"], spec["parallelism"])
	}
	if spec["backoffLimit"] != 0 {
		t.Errorf("shards: backoffLimit %v, want 0: a retried shard would send its share late", spec["backoffLimit"])
	}
	ps := podSpec(shards)
	if ps["restartPolicy"] != "Never" {
		t.Errorf("shards: restartPolicy %v, want Never", ps["restartPolicy"])
	}
	main := byName(containers(ps, "containers"), "bench")
	barrier := byName(containers(ps, "initContainers"), "barrier")
	wantArgs := []string{
		"bench",
		"--config.file=/config/bench.yml",
		"--output.dir=/results/shard-$(JOB_COMPLETION_INDEX)",
		fmt.Sprintf("--shard=$(JOB_COMPLETION_INDEX)/%d", n),
		"--web.listen-address=:9750",
		"--progress=never",
		"--no-collector.nvml",
		// --shard.start-at, from the barrier (TestBenchScripts).
		"@" + barrier.env["START_FILE"],
	}
	if !slices.Equal(main.args, wantArgs) {
		t.Errorf("shard args = %q, want %q", main.args, wantArgs)
	}
	if main.ports["metrics"] != 9750 {
		t.Errorf("shard ports = %v, want metrics 9750 (its --web.listen-address)", main.ports)
	}
	if main.mounts["config"] != "/config" || main.mounts["results"] != "/results" {
		t.Errorf("shard mounts = %v, want config on /config and results on /results", main.mounts)
	}
	if barrier.env["SHARDS"] != strconv.Itoa(n) || barrier.env["RESULTS_DIR"] != barrier.mounts["results"] || barrier.mounts["results"] != "/results" {
		t.Errorf("barrier env %v, mounts %v: want SHARDS=%d and RESULTS_DIR its results mount /results", barrier.env, barrier.mounts, n)
	}
	// The barrier writes the start on the pod's own volume "start", which
	// the bench reads.
	if sm := barrier.mounts["start"]; sm == "" || filepath.Dir(barrier.env["START_FILE"]) != sm || main.mounts["start"] != sm {
		t.Errorf("barrier START_FILE %q, mounts %v, bench mounts %v: want the file on the volume start, mounted by both", barrier.env["START_FILE"], barrier.mounts, main.mounts)
	}
	for _, v := range asList(ps["volumes"]) {
		if asMap(v)["name"] == "start" && asMap(v)["emptyDir"] == nil {
			t.Errorf("shards: volume start is %v, want an emptyDir: the pod's own, never another run's", v)
		}
	}
	if lead, err := strconv.Atoi(barrier.env["START_LEAD_SECONDS"]); err != nil || lead < 10 {
		t.Errorf("barrier START_LEAD_SECONDS %q: want at least 10 s, room for every pod to see the barrier full and load its bench", barrier.env["START_LEAD_SECONDS"])
	}
	if barrier.env["JOB_UID"] != "fieldRef:metadata.labels['batch.kubernetes.io/controller-uid']" {
		t.Errorf("barrier JOB_UID = %q, want the Job's uid label", barrier.env["JOB_UID"])
	}
	if inits := containers(ps, "initContainers"); len(inits) != 2 || inits[0].name != "image" || inits[0].image != main.image || !slices.Equal(inits[0].args, []string{"--version"}) || inits[1].name != "barrier" {
		t.Errorf("init containers %v: want the bench's image (%s) pulled by --version, then the barrier", ps["initContainers"], main.image)
	}

	merge := benchDoc(t, "merge-job.yaml")
	mps := podSpec(merge)
	mergeMain := byName(containers(mps, "containers"), "merge")
	wait := byName(containers(mps, "initContainers"), "wait-for-shards")
	// The merge reads its N reports from the list the wait writes beside
	// its mark (TestBenchScripts runs it).
	wantMerge := []string{"bench", "merge", "--output.dir=/results/merged", "@/results/.merge/$(JOB_UID).args"}
	if !slices.Equal(mergeMain.args, wantMerge) || mergeMain.image != main.image {
		t.Errorf("merge: image %s args %q, want %s %q", mergeMain.image, mergeMain.args, main.image, wantMerge)
	}
	if mergeMain.env["JOB_UID"] != wait.env["JOB_UID"] || wait.env["JOB_UID"] != "fieldRef:metadata.labels['batch.kubernetes.io/controller-uid']" {
		t.Errorf("merge JOB_UID %q, wait's %q: want both the Job's uid label", mergeMain.env["JOB_UID"], wait.env["JOB_UID"])
	}
	if wait.env["SHARDS"] != strconv.Itoa(n) || wait.env["RESULTS_DIR"] != wait.mounts["results"] || mergeMain.mounts["results"] != "/results" {
		t.Errorf("merge wait env %v mounts %v, merge mounts %v: want SHARDS=%d, RESULTS_DIR its results mount, /results", wait.env, wait.mounts, mergeMain.mounts, n)
	}
	if sd, md := dig(shards, "spec", "activeDeadlineSeconds").(int), dig(merge, "spec", "activeDeadlineSeconds").(int); md <= sd {
		t.Errorf("merge deadline %ds is not after the shards' %ds", md, sd)
	}

	// One ReadWriteMany claim, mounted by both Jobs and the reader.
	pvc := benchDoc(t, "pvc.yaml")
	claim := dig(pvc, "metadata", "name")
	if !slices.Equal(strs(dig(pvc, "spec", "accessModes")), []string{"ReadWriteMany"}) {
		t.Errorf("pvc accessModes %v, want ReadWriteMany: the shards run on several nodes", dig(pvc, "spec", "accessModes"))
	}
	reader := benchDoc(t, "results-reader.yaml")
	for name, spec := range map[string]map[string]any{"shards": ps, "merge": mps, "reader": asMap(reader["spec"])} {
		found := false
		for _, v := range asList(spec["volumes"]) {
			if asMap(v)["name"] == "results" && dig(asMap(v), "persistentVolumeClaim", "claimName") == claim {
				found = true
			}
		}
		if !found {
			t.Errorf("%s: no volume results from the claim %v", name, claim)
		}
	}
	for _, v := range asList(ps["volumes"]) {
		if asMap(v)["name"] == "config" && dig(asMap(v), "configMap", "name") != "infer-bench-config" {
			t.Errorf("shards: volume config is %v, want the ConfigMap infer-bench-config", v)
		}
	}

	// The PodMonitor scrapes the shards' pods, on their metrics port.
	pm := benchDoc(t, "podmonitor.yaml")
	podLabels := asMap(dig(shards, "spec", "template", "metadata", "labels"))
	for k, v := range asMap(dig(pm, "spec", "selector", "matchLabels")) {
		if podLabels[k] != v {
			t.Errorf("PodMonitor selects %s=%v, the shards' pods have %v", k, v, podLabels[k])
		}
	}
	eps := asList(dig(pm, "spec", "podMetricsEndpoints"))
	if len(eps) != 1 || asMap(eps[0])["port"] != "metrics" {
		t.Errorf("PodMonitor endpoints %v, want the port metrics", eps)
	}
	if mergeLabels := asMap(dig(merge, "spec", "template", "metadata", "labels")); mergeLabels["app.kubernetes.io/component"] == podLabels["app.kubernetes.io/component"] {
		t.Error("the merge pod carries the shards' component label: the PodMonitor would scrape it")
	}

	// Every pod is locked down and sized.
	for name, spec := range map[string]map[string]any{"shards": ps, "merge": mps, "reader": asMap(reader["spec"])} {
		podNonRoot := dig(spec, "securityContext", "runAsNonRoot") == true
		uid, _ := dig(spec, "securityContext", "runAsUser").(int)
		for _, c := range append(containers(spec, "initContainers"), containers(spec, "containers")...) {
			sc := asMap(c.raw["securityContext"])
			where := name + "/" + c.name
			if !podNonRoot && sc["runAsNonRoot"] != true {
				t.Errorf("%s: not runAsNonRoot", where)
			}
			if uid == 0 {
				t.Errorf("%s: no numeric runAsUser: runAsNonRoot cannot check the image's named user", where)
			}
			if sc["readOnlyRootFilesystem"] != true || sc["allowPrivilegeEscalation"] != false || sc["privileged"] == true {
				t.Errorf("%s: securityContext %v: want a read-only root, no privilege escalation, not privileged", where, sc)
			}
			if !slices.Equal(strs(dig(sc, "capabilities", "drop")), []string{"ALL"}) {
				t.Errorf("%s: capabilities %v, want drop ALL", where, sc["capabilities"])
			}
			if dig(c.raw, "resources", "requests", "cpu") == nil || dig(c.raw, "resources", "requests", "memory") == nil || dig(c.raw, "resources", "limits", "memory") == nil {
				t.Errorf("%s: resources %v: want cpu and memory requests and a memory limit", where, c.raw["resources"])
			}
		}
	}
}

// script returns the shell script of a container run as sh -c SCRIPT.
func script(t *testing.T, c container) string {
	t.Helper()
	if len(c.command) != 3 || c.command[0] != "sh" || c.command[1] != "-c" {
		t.Fatalf("container %s: command %q, want sh -c SCRIPT", c.name, c.command)
	}
	return c.command[2]
}

// lockedBuffer is the output of a script, read by the test while the
// process may still write it.
type lockedBuffer struct {
	mu sync.Mutex
	b  strings.Builder
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// shellProc is one run of a container's script, as a process.
type shellProc struct {
	cmd  *exec.Cmd
	out  *lockedBuffer
	done chan error
}

// startScript runs a container's script under the system's POSIX sh (the
// pods run busybox's), with the container's env, RESULTS_DIR pointing at
// dir and overrides on top.
func startScript(t *testing.T, ctx context.Context, c container, dir string, overrides map[string]string) *shellProc {
	t.Helper()
	env := []string{"PATH=" + os.Getenv("PATH")}
	for k, v := range c.env {
		if !strings.HasPrefix(v, "fieldRef:") {
			env = append(env, k+"="+v)
		}
	}
	env = append(env, "RESULTS_DIR="+dir)
	for k, v := range overrides {
		env = append(env, k+"="+v)
	}
	cmd := exec.CommandContext(ctx, "sh", "-c", script(t, c))
	cmd.Env = env
	p := &shellProc{cmd: cmd, out: &lockedBuffer{}, done: make(chan error, 1)}
	cmd.Stdout, cmd.Stderr = p.out, p.out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { p.done <- cmd.Wait() }()
	return p
}

// wait returns the script's exit error, or fails the test after limit.
func (p *shellProc) wait(t *testing.T, limit time.Duration) error {
	t.Helper()
	select {
	case err := <-p.done:
		return err
	case <-time.After(limit):
		t.Fatalf("the script did not end within %v; its output:\n%s", limit, p.out)
		return nil
	}
}

// running reports whether the script is still running.
func (p *shellProc) running() bool {
	select {
	case err := <-p.done:
		p.done <- err
		return false
	default:
		return true
	}
}

func writeReport(t *testing.T, dir string, shard int, mtime time.Time) string {
	t.Helper()
	p := filepath.Join(dir, fmt.Sprintf("shard-%d", shard), "report.json")
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, []byte("{}"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Chtimes(p, mtime, mtime); err != nil {
		t.Fatal(err)
	}
	return p
}

func exists(p string) bool { _, err := os.Stat(p); return err == nil }

// TestBenchScripts runs the barrier of the shards' pods and the merge's
// wait, as the manifests hold them, on a directory standing in for the
// shared volume: no shard passes the barrier before all N have arrived,
// each removes the report an earlier run left in its directory, and the
// merge waits for a report from every shard written after its own start,
// ignoring older ones, and keeps its first mark when started again.
func TestBenchScripts(t *testing.T) {
	shards := benchDoc(t, "shards-job.yaml")
	n := dig(shards, "spec", "completions").(int)
	barrier := byName(containers(podSpec(shards), "initContainers"), "barrier")
	wait := byName(containers(podSpec(benchDoc(t, "merge-job.yaml")), "initContainers"), "wait-for-shards")
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	hourAgo := time.Now().Add(-time.Hour)

	t.Run("barrier and merge", func(t *testing.T) {
		dir := t.TempDir()
		stale := make([]string, n)
		for i := range n {
			stale[i] = writeReport(t, dir, i, hourAgo)
		}
		// Every format of an earlier run's report, not report.json alone.
		var staleOthers []string
		for _, ext := range []string{"csv", "html", "md"} {
			for i := range n - 1 {
				f := filepath.Join(dir, fmt.Sprintf("shard-%d", i), "report."+ext)
				if err := os.WriteFile(f, []byte("old"), 0o644); err != nil {
					t.Fatal(err)
				}
				staleOthers = append(staleOthers, f)
			}
		}
		merge := startScript(t, ctx, wait, dir, map[string]string{"JOB_UID": "merge-run"})
		// Each pod's start file is on its own volume.
		startFile := func(i int) string { return filepath.Join(dir, fmt.Sprintf("start-%d", i)) }
		shard := func(i int) map[string]string {
			return map[string]string{"JOB_UID": "run-2", "JOB_COMPLETION_INDEX": strconv.Itoa(i), "START_FILE": startFile(i)}
		}
		var procs []*shellProc
		for i := range n - 1 {
			procs = append(procs, startScript(t, ctx, barrier, dir, shard(i)))
		}
		// The first N-1 arrive and remove their stale reports; none passes.
		deadline := time.Now().Add(20 * time.Second)
		for i := 0; i < n-1; {
			if !exists(stale[i]) {
				i++
				continue
			}
			if time.Now().After(deadline) {
				t.Fatalf("shard %d's barrier did not remove the stale report %s", i, stale[i])
			}
			time.Sleep(50 * time.Millisecond)
		}
		if !exists(stale[n-1]) {
			t.Errorf("shard %d's stale report was removed before its pod arrived", n-1)
		}
		// One rm removes a shard's report.json, then its other formats:
		// on a busy CPU the test can look between the two, so it waits
		// for them with the same deadline.
		for _, f := range staleOthers {
			for exists(f) && time.Now().Before(deadline) {
				time.Sleep(50 * time.Millisecond)
			}
			if exists(f) {
				t.Errorf("the barrier left an earlier run's %s", f)
			}
		}
		// Longer than the barrier's poll (1 s): a barrier that let a shard
		// through would have ended by now.
		time.Sleep(1500 * time.Millisecond)
		for i, p := range procs {
			if !p.running() {
				t.Fatalf("shard %d passed the barrier with %d of %d shards arrived:\n%s", i, n-1, n, p.out)
			}
		}
		if !merge.running() {
			t.Fatalf("the merge went ahead on stale reports:\n%s", merge.out)
		}
		last := time.Now().Unix()
		procs = append(procs, startScript(t, ctx, barrier, dir, shard(n-1)))
		for i, p := range procs {
			if err := p.wait(t, 20*time.Second); err != nil {
				t.Errorf("shard %d's barrier: %v\n%s", i, err, p.out)
			}
		}
		// Every shard got one start: the last arrival plus the lead, as
		// the bench's --shard.start-at.
		lead, _ := strconv.ParseInt(barrier.env["START_LEAD_SECONDS"], 10, 64)
		var starts []string
		for i := range n {
			b, err := os.ReadFile(startFile(i))
			if err != nil {
				t.Fatalf("shard %d: no start file: %v", i, err)
			}
			starts = append(starts, strings.TrimSpace(string(b)))
		}
		at, err := strconv.ParseInt(strings.TrimPrefix(starts[0], "--shard.start-at="), 10, 64)
		if err != nil || !strings.HasPrefix(starts[0], "--shard.start-at=") || at < last+lead || at > last+lead+2 {
			t.Errorf("shard 0's start file %q: want --shard.start-at= the last arrival (%d) plus %d s", starts[0], last, lead)
		}
		for i, s := range starts {
			if s != starts[0] {
				t.Errorf("shard %d starts at %q, shard 0 at %q: want one instant", i, s, starts[0])
			}
		}
		if !merge.running() {
			t.Fatalf("the merge went ahead before any shard wrote a report:\n%s", merge.out)
		}
		// The shards write their reports (after the merge's mark, as a run
		// of minutes does; the mtime is set past it explicitly, since both
		// happen within a second here).
		later := time.Now().Add(5 * time.Second)
		for i := range n {
			writeReport(t, dir, i, later)
		}
		if err := merge.wait(t, 20*time.Second); err != nil {
			t.Errorf("merge wait: %v\n%s", err, merge.out)
		}
		// It lists the N reports for the merge's @FILE argument.
		var want []string
		for i := range n {
			want = append(want, filepath.Join(dir, fmt.Sprintf("shard-%d", i), "report.json"))
		}
		b, err := os.ReadFile(filepath.Join(dir, ".merge", "merge-run.args"))
		if got := strings.Fields(string(b)); err != nil || !slices.Equal(got, want) {
			t.Errorf("the merge's arguments file: %q (%v), want %q", got, err, want)
		}
		// A restart of the same merge pod keeps its first mark, so the
		// reports still count.
		again := startScript(t, ctx, wait, dir, map[string]string{"JOB_UID": "merge-run"})
		if err := again.wait(t, 20*time.Second); err != nil {
			t.Errorf("merge wait, restarted: %v\n%s", err, again.out)
		}
	})

	// Time-outs: a barrier that never fills, and reports that are all from
	// an earlier run, end in a failure that says why.
	for _, tc := range []struct {
		name string
		run  func(dir string) *shellProc
		want *regexp.Regexp
	}{
		{"barrier times out", func(dir string) *shellProc {
			return startScript(t, ctx, barrier, dir, map[string]string{"JOB_UID": "run-3", "JOB_COMPLETION_INDEX": "0", "BARRIER_TIMEOUT_SECONDS": "1", "START_FILE": filepath.Join(dir, "start")})
		}, regexp.MustCompile(fmt.Sprintf(`barrier: 1 of %d shards arrived within 1s`, n))},
		{"merge ignores an earlier run's reports", func(dir string) *shellProc {
			for i := range n {
				writeReport(t, dir, i, hourAgo)
			}
			return startScript(t, ctx, wait, dir, map[string]string{"JOB_UID": "merge-3", "WAIT_TIMEOUT_SECONDS": "1"})
		}, regexp.MustCompile(`merge: shard 0 wrote no report within 1s`)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := tc.run(t.TempDir())
			err := p.wait(t, 20*time.Second)
			if err == nil || !tc.want.MatchString(p.out.String()) {
				t.Errorf("exit %v, output %q: want a failure matching %s", err, p.out, tc.want)
			}
		})
	}
}

// TestBenchCommandLines runs the exporter with the command lines of the
// manifests, so that they stay ones the bench command accepts: a shard's,
// with its index and the local bench.yml in place of the pod's, under
// --config.check (the flags parse and the configuration loads, nothing is
// sent); the merge's, on reports that do not exist, which must fail on the
// missing files (exit 1), not on the command line (exit 2).
func TestBenchCommandLines(t *testing.T) {
	root := realstack.RepoRoot(t)
	bin := realstack.BuildExporter(t)
	shards := benchDoc(t, "shards-job.yaml")
	main := byName(containers(podSpec(shards), "containers"), "bench")
	// The start file as the barrier writes it (TestBenchScripts).
	startFile := filepath.Join(t.TempDir(), "start")
	if err := os.WriteFile(startFile, fmt.Appendf(nil, "--shard.start-at=%d\n", time.Now().Unix()+30), 0o644); err != nil {
		t.Fatal(err)
	}
	var args []string
	for _, a := range main.args {
		a = strings.ReplaceAll(a, "$(JOB_COMPLETION_INDEX)", "1")
		switch {
		case strings.HasPrefix(a, "@"):
			a = "@" + startFile
		case strings.HasPrefix(a, "--config.file="):
			a = "--config.file=" + filepath.Join(root, benchDir, "bench.yml")
		case strings.HasPrefix(a, "--output.dir="):
			a = "--output.dir=" + t.TempDir()
		}
		args = append(args, a)
	}
	out, err := exec.Command(bin, append(args, "--config.check")...).CombinedOutput()
	if err != nil || !strings.Contains(string(out), "OK") {
		t.Errorf("infer_exporter %s --config.check: %v\n%s", strings.Join(args, " "), err, out)
	}

	// The merge's reports come from the arguments file the wait writes (one
	// path a line), here of reports that were never written.
	merge := byName(containers(podSpec(benchDoc(t, "merge-job.yaml")), "containers"), "merge")
	dir := t.TempDir()
	n := dig(shards, "spec", "completions").(int)
	var list strings.Builder
	for i := range n {
		fmt.Fprintf(&list, "%s/shard-%d/report.json\n", dir, i)
	}
	must := func(err error) {
		if err != nil {
			t.Fatal(err)
		}
	}
	must(os.MkdirAll(filepath.Join(dir, ".merge"), 0o755))
	must(os.WriteFile(filepath.Join(dir, ".merge", "uid.args"), []byte(list.String()), 0o644))
	var margs []string
	for _, a := range merge.args {
		margs = append(margs, strings.ReplaceAll(strings.ReplaceAll(a, "/results", dir), "$(JOB_UID)", "uid"))
	}
	out, err = exec.Command(bin, margs...).CombinedOutput()
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.ExitCode() != 1 || !strings.Contains(string(out), dir+"/shard-0/report.json") {
		t.Errorf("infer_exporter %s: %v, want exit 1 on the first report of the file, missing\n%s", strings.Join(margs, " "), err, out)
	}
}

// TestBenchShardCountSetOnce: N, the number of shards, is set in one place
// (the shards' Job's completions) and kustomize's replacements carry it
// everywhere else: built with another N, the shards' parallelism, their
// barrier's SHARDS, their --shard argument and the merge's SHARDS all say
// it. Takes a second once kustomize is built.
func TestBenchShardCountSetOnce(t *testing.T) {
	root := realstack.RepoRoot(t)
	kustomize := realstack.Tool(t, kustomizeModfile, "kustomize")
	dir := filepath.Join(t.TempDir(), "bench")
	if err := os.CopyFS(dir, os.DirFS(filepath.Join(root, benchDir))); err != nil {
		t.Fatal(err)
	}
	completions := regexp.MustCompile(`(?m)^  completions: \d+`)
	for _, n := range []int{4, 7} {
		f := filepath.Join(dir, "shards-job.yaml")
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		if len(completions.FindAll(b, -1)) != 1 {
			t.Fatalf("shards-job.yaml: want one line 'completions: N'")
		}
		if err := os.WriteFile(f, completions.ReplaceAll(b, []byte(fmt.Sprintf("  completions: %d", n))), 0o644); err != nil {
			t.Fatal(err)
		}
		out, err := exec.Command(kustomize, "build", dir).Output()
		if err != nil {
			t.Fatalf("kustomize build: %v", err)
		}
		built := filepath.Join(t.TempDir(), "built.yaml")
		if err := os.WriteFile(built, out, 0o644); err != nil {
			t.Fatal(err)
		}
		jobs := map[string]map[string]any{}
		for _, d := range yamlDocs(t, built) {
			if d["kind"] == "Job" {
				jobs[fmt.Sprint(dig(d, "metadata", "name"))] = d
			}
		}
		shards, merge := jobs["infer-bench-shards"], jobs["infer-bench-merge"]
		if shards == nil || merge == nil {
			t.Fatalf("N=%d: the build lacks a Job: %v", n, jobs)
		}
		ps := podSpec(shards)
		got := map[string]string{
			"completions":    fmt.Sprint(dig(shards, "spec", "completions")),
			"parallelism":    fmt.Sprint(dig(shards, "spec", "parallelism")),
			"barrier SHARDS": byName(containers(ps, "initContainers"), "barrier").env["SHARDS"],
			"merge SHARDS":   byName(containers(podSpec(merge), "initContainers"), "wait-for-shards").env["SHARDS"],
		}
		for _, a := range byName(containers(ps, "containers"), "bench").args {
			if v, ok := strings.CutPrefix(a, "--shard=$(JOB_COMPLETION_INDEX)/"); ok {
				got["--shard"] = v
			}
		}
		for _, k := range []string{"completions", "parallelism", "barrier SHARDS", "merge SHARDS", "--shard"} {
			if got[k] != strconv.Itoa(n) {
				t.Errorf("N=%d: %s is %q", n, k, got[k])
			}
		}
	}
}
