package bench

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/infer-exporter/infer_exporter/internal/realstack"
)

// exportSample is an OpenMetrics sample line with a timestamp.
var exportSample = regexp.MustCompile(`^(infer_bench_[a-z_]+)\{target="((?:[^"\\]|\\.)*)",load="[^"]*",shape="[^"]*",run_id="[^"]*"(,quantile="0\.[59]9?")?\} [-+.e0-9]+ [0-9]+\.[0-9]{3}$`)

// TestExportOpenMetrics: every cell's figures as infer_bench_* gauges,
// each family's samples together under its TYPE, stamped with the run's
// end, labels escaped, # EOF last.
func TestExportOpenMetrics(t *testing.T) {
	t0 := time.Date(2025, 1, 1, 2, 0, 0, 0, time.UTC)
	r := historyReport(t0, "aaa", historyCell(`a"b\c`, "chat", 0.020, 0.0198, 0.0202), historyCell("sim", "long", 0.05, 0, 0))
	var b bytes.Buffer
	if err := WriteOpenMetrics(&b, r); err != nil {
		t.Fatal(err)
	}
	out := b.String()
	if !strings.HasSuffix(out, "\n# EOF\n") {
		t.Errorf("the export does not end in # EOF:\n%s", out)
	}
	typed := map[string]bool{}
	for _, l := range strings.Split(strings.TrimSuffix(out, "\n"), "\n") {
		if f, ok := strings.CutPrefix(l, "# TYPE "); ok {
			name, _, _ := strings.Cut(f, " ")
			if typed[name] {
				t.Errorf("family %s typed twice", name)
			}
			typed[name] = true
			continue
		}
		if strings.HasPrefix(l, "#") {
			continue
		}
		m := exportSample.FindStringSubmatch(l)
		if m == nil {
			t.Errorf("not a sample of the form expected: %q", l)
			continue
		}
		if !typed[m[1]] {
			t.Errorf("sample of %s before its TYPE: %q", m[1], l)
		}
		if !strings.HasSuffix(l, " 1735696860.000") {
			t.Errorf("not stamped with the run's end (2025-01-01T02:01:00Z): %q", l)
		}
	}
	for _, want := range []string{
		`infer_bench_tpot_seconds{target="a\"b\\c",load="rate=4",shape="chat",run_id="2025-01-01T02:00:00Z",quantile="0.5"} 0.02 1735696860.000`,
		`infer_bench_tpot_lower_seconds{target="a\"b\\c",load="rate=4",shape="chat",run_id="2025-01-01T02:00:00Z",quantile="0.5"} 0.0198 1735696860.000`,
		`infer_bench_tpot_seconds{target="sim",load="rate=4",shape="long",run_id="2025-01-01T02:00:00Z",quantile="0.5"} 0.05 1735696860.000`,
		`infer_bench_output_tokens_per_second{target="sim",load="rate=4",shape="long",run_id="2025-01-01T02:00:00Z"} 100 1735696860.000`,
		"# UNIT infer_bench_goodput_ratio ratio",
	} {
		if !strings.Contains(out, want+"\n") {
			t.Errorf("the export lacks %s:\n%s", want, out)
		}
	}
	// No interval, no interval's ends; no TTFT (no values), no sample.
	for _, absent := range []string{`infer_bench_tpot_lower_seconds{target="sim"`, `infer_bench_ttft_seconds{`} {
		if strings.Contains(out, absent) {
			t.Errorf("the export has %s:\n%s", absent, out)
		}
	}
}

// TestExportBackfill: the pinned promtool turns `bench export`'s output
// into TSDB blocks, and a figure reads back from them.
func TestExportBackfill(t *testing.T) {
	promtool := realstack.Tool(t, realstack.PrometheusModfile, "promtool")
	dir := t.TempDir()
	t0 := time.Now().Add(-48 * time.Hour).UTC().Truncate(time.Second)
	rep := writeReportFile(t, dir, "report.json", historyReport(t0, "aaa", historyCell("sim", "chat", 0.020, 0.0198, 0.0202)))
	code, stdout, stderr := runCLI(t, context.Background(), "bench", "export", "--format=openmetrics", rep)
	if code != ExitOK {
		t.Fatalf("bench export: exit %d\n%s", code, stderr)
	}
	om := writeTestFile(t, dir, "bench.om", stdout)
	data := filepath.Join(dir, "data")
	if out, err := realstack.Run(t, promtool, "tsdb", "create-blocks-from", "openmetrics", om, data); err != nil {
		t.Fatalf("promtool tsdb create-blocks-from openmetrics: %v\n%s", err, out)
	}
	blocks, err := filepath.Glob(filepath.Join(data, "*", "meta.json"))
	if err != nil || len(blocks) == 0 {
		t.Fatalf("no block created in %s (%v)", data, err)
	}
	// tsdb dump opens the directory as Prometheus's data directory, which
	// has a write-ahead log; the backfilled one has none yet.
	if err := os.Mkdir(filepath.Join(data, "wal"), 0o755); err != nil {
		t.Fatal(err)
	}
	out, err := realstack.Run(t, promtool, "tsdb", "dump", `--match=infer_bench_tpot_seconds{quantile="0.5"}`, data)
	if err != nil {
		t.Fatalf("promtool tsdb dump: %v\n%s", err, out)
	}
	end := t0.Add(time.Minute).UnixMilli()
	if !strings.Contains(out, `run_id="`+t0.Format(time.RFC3339)+`"`) || !strings.Contains(out, " 0.02 "+strconv.FormatInt(end, 10)) {
		t.Errorf("tpot_p50 does not read back as 0.02 at the run's end (%d):\n%s", end, out)
	}
}
