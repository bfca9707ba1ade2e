package bench

import (
	"bytes"
	"context"
	"log/slog"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/alecthomas/kingpin/v2"

	"github.com/infer-exporter/infer_exporter/bench/render"
	"github.com/infer-exporter/infer_exporter/internal/testenv"
)

// cancelOn is a command's stderr that cancels the run's context when a
// line containing its mark is written (the plain progress line of the
// first cell's end): the interrupt comes while the second cell runs.
type cancelOn struct {
	mark   string
	cancel context.CancelFunc
	mu     sync.Mutex
	b      bytes.Buffer
}

func (c *cancelOn) Write(p []byte) (int, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.b.Write(p)
	if strings.Contains(c.b.String(), c.mark) {
		c.cancel()
	}
	return len(p), nil
}

// TestInterruptWritesFinishedCells: a two-cell bench interrupted (its
// context cancelled, as SIGINT and SIGTERM do) while its second cell runs
// writes the report of the first, said to be interrupted in report.json,
// report.md, report.html and on the console, and exits 1.
func TestInterruptWritesFinishedCells(t *testing.T) {
	sim := startSim(t, 10*time.Millisecond, 1, 0)
	dir := t.TempDir()
	yml := targetsYAML([]string{"first", "second"}, []*simTarget{sim, sim}) + `
bench:
  matrix:
    process: constant
    rates: [10]
    shapes: [{name: s, input_tokens: 16, output_tokens: 4}]
  warmup: 100ms
  duration: 1s
  repeats: 1
  prompt_set_size: 10
  stability: {enabled: false}
  ranking: {resamples: 100}
`
	out := filepath.Join(dir, "out")
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	stderr := &cancelOn{mark: "cell 1/2 ", cancel: cancel}
	var stdout bytes.Buffer
	app := kingpin.New("infer_exporter", "")
	_, run := addCommand(app, false, &stdout, stderr)
	if _, err := app.Parse([]string{"bench", "--config.file=" + writeTestFile(t, dir, "b.yml", yml), "--output.dir=" + out}); err != nil {
		t.Fatal(err)
	}
	code := run(ctx, slog.New(slog.DiscardHandler))
	if code != ExitError {
		t.Errorf("exit %d, want %d (interrupted)\n%s\n%s", code, ExitError, stdout.String(), stderr.b.String())
	}
	r := readReport(t, out)
	if !r.Interrupted || len(r.Cells) != 1 || r.Cells[0].Key != "first/rate=10/s" || len(r.Cells[0].Repeats) != 1 {
		t.Fatalf("interrupted %v, cells %d (want first/rate=10/s alone)", r.Interrupted, len(r.Cells))
	}
	if c := r.Cells[0]; c.Summary.Successes == 0 || len(c.CI) == 0 {
		t.Errorf("the finished cell lost its figures: %d successes, %d intervals", c.Summary.Successes, len(c.CI))
	}
	if len(r.Ranking.Entries) != 0 {
		t.Errorf("a group that one target did not finish is ranked: %+v", r.Ranking.Entries)
	}
	for file, want := range map[string]string{
		JSONFile: `"interrupted": true`, render.MarkdownFile: "**INTERRUPTED**", HTMLFile: `id="interrupted"`,
	} {
		b, err := os.ReadFile(filepath.Join(out, file))
		if err != nil || !bytes.Contains(b, []byte(want)) {
			t.Errorf("%s does not say %s (%v)", file, want, err)
		}
	}
	if !strings.Contains(stdout.String(), "INTERRUPTED: the run was stopped; the report holds the 1 cell that finished") ||
		!strings.Contains(stdout.String(), "Cell key (report.json, --baseline):      first/rate=10/s") {
		t.Errorf("console:\n%s", stdout.String())
	}
	if !strings.Contains(stderr.b.String(), "bench: interrupted") {
		t.Errorf("stderr:\n%s", stderr.b.String())
	}
}

// barDone finds the progress bar's count of completed requests.
var barDone = regexp.MustCompile(`(\d+) done`)

// cancelAtDone is a command's stderr, its progress bar and its log both,
// that cancels the run's context once the bar shows at least n requests
// done: the interrupt comes while the first cell measures.
type cancelAtDone struct {
	n      int
	cancel context.CancelFunc
	mu     sync.Mutex
	b      bytes.Buffer
}

func (c *cancelAtDone) Write(p []byte) (int, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.b.Write(p)
	for _, m := range barDone.FindAllSubmatch(p, -1) {
		if n, _ := strconv.Atoi(string(m[1])); n >= c.n {
			c.cancel()
		}
	}
	return len(p), nil
}

func (c *cancelAtDone) String() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.b.String()
}

// TestInterruptDuringFirstCell: a bench interrupted during its first (and
// only) cell keeps what that cell measured, marked partial in report.json,
// report.md, report.html and on the console, unranked, and exits 1; the
// interrupt's log line starts on a line of its own, not after the
// progress bar that stderr shares.
func TestInterruptDuringFirstCell(t *testing.T) {
	testenv.Slow(t, "runs a bench in real time until it has 20 requests done")
	sim := startSim(t, 5*time.Millisecond, 1, 0)
	dir := t.TempDir()
	yml := targetsYAML([]string{"only"}, []*simTarget{sim}) + `
bench:
  matrix:
    process: constant
    rates: [20]
    shapes: [{name: s, input_tokens: 16, output_tokens: 4}]
  warmup: 100ms
  duration: 60s
  repeats: 1
  prompt_set_size: 10
  stability: {enabled: false}
  ranking: {resamples: 100}
`
	out := filepath.Join(dir, "out")
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	stderr := &cancelAtDone{n: 20, cancel: cancel}
	var stdout bytes.Buffer
	app := kingpin.New("infer_exporter", "")
	_, run := addCommand(app, false, &stdout, stderr)
	if _, err := app.Parse([]string{"bench", "--config.file=" + writeTestFile(t, dir, "b.yml", yml), "--output.dir=" + out, "--progress=always"}); err != nil {
		t.Fatal(err)
	}
	// The log goes where the bar is drawn, as on a terminal.
	code := run(ctx, slog.New(slog.NewTextHandler(stderr, nil)))
	if code != ExitError {
		t.Errorf("exit %d, want %d (interrupted)\n%s\n%s", code, ExitError, stdout.String(), stderr)
	}
	r := readReport(t, out)
	if !r.Interrupted || len(r.Cells) != 1 {
		t.Fatalf("interrupted %v, %d cells; want the first cell kept", r.Interrupted, len(r.Cells))
	}
	c := r.Cells[0]
	if !c.Partial || len(c.Repeats) != 1 || !c.Repeats[0].Partial || c.Summary.Successes == 0 || c.Summary.WindowSeconds <= 0 {
		t.Errorf("cell partial %v, repeats %d, successes %d over %v s: want the partial figures of what was measured",
			c.Partial, len(c.Repeats), c.Summary.Successes, c.Summary.WindowSeconds)
	}
	if st := c.Repeats[0].Stability; st.Checked || !strings.Contains(st.Note, "interrupted") {
		t.Errorf("stability %+v: want not judged, said interrupted", st)
	}
	if len(r.Ranking.Entries) != 0 {
		t.Errorf("a partial cell is ranked: %+v", r.Ranking.Entries)
	}
	for file, want := range map[string]string{
		JSONFile: `"partial": true`, render.MarkdownFile: "PARTIAL", HTMLFile: "PARTIAL",
	} {
		b, err := os.ReadFile(filepath.Join(out, file))
		if err != nil || !bytes.Contains(b, []byte(want)) {
			t.Errorf("%s does not say %s (%v)", file, want, err)
		}
	}
	for _, want := range []string{"INTERRUPTED: the run was stopped; the report holds 1 cell cut short by the interrupt, marked PARTIAL",
		"PARTIAL:                                 interrupted after"} {
		if !strings.Contains(stdout.String(), want) {
			t.Errorf("the console lacks %q:\n%s", want, stdout.String())
		}
	}
	logged := stderr.String()
	if !strings.Contains(logged, "bench: interrupted: the report in "+out+" holds 1 cell cut short") {
		t.Errorf("stderr:\n%s", logged)
	}
	said := false
	for line := range strings.Lines(logged) {
		if strings.Contains(line, "bench interrupted") {
			said = true
			if !strings.HasPrefix(line, "time=") {
				t.Errorf("the interrupt's log line does not start a line of its own: %q", line)
			}
		}
	}
	if !said {
		t.Errorf("no log line of the interrupt:\n%s", logged)
	}
}
