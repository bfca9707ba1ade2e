package bench

import (
	"bytes"
	"context"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/alecthomas/kingpin/v2"

	"github.com/infer-exporter/infer_exporter/bench/render"
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
		!strings.Contains(stdout.String(), "Cell:                                    first/rate=10/s") {
		t.Errorf("console:\n%s", stdout.String())
	}
	if !strings.Contains(stderr.b.String(), "bench: interrupted") {
		t.Errorf("stderr:\n%s", stderr.b.String())
	}
}
