package render

import (
	"bytes"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/infer-exporter/infer_exporter/bench/report"
)

// goldenDir holds the bench's golden reports: report.json and its
// renderings, written by bench's TestGoldenReport.
var goldenDir = filepath.Join("..", "testdata", "golden")

// readGolden reads a golden report.json with report's own reader.
func readGolden(t *testing.T, name string) *report.Report {
	t.Helper()
	r, err := report.ReadJSON(filepath.Join(goldenDir, name))
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// TestGoldenRenderings: each golden report.json, read back, renders its
// golden JSON, CSV, Markdown and HTML byte for byte: the renderers read
// nothing but what report.json holds (a report read back by bench merge
// or --baseline renders as the run's own).
func TestGoldenRenderings(t *testing.T) {
	outputs := []struct {
		ext   string
		write func(io.Writer, *report.Report) error
	}{{"json", WriteJSON}, {"csv", WriteCSV}, {"md", WriteMarkdown}, {"html", WriteHTML}}
	for _, tc := range []struct{ input, prefix string }{
		{"report.json", "report"}, {"merged.json", "merged"}, {"h200.json", "h200"}, {"h200.input.json", "h200"},
	} {
		r := readGolden(t, tc.input)
		for _, o := range outputs {
			t.Run(tc.input+"/"+o.ext, func(t *testing.T) {
				var b bytes.Buffer
				if err := o.write(&b, r); err != nil {
					t.Fatal(err)
				}
				want, err := os.ReadFile(filepath.Join(goldenDir, tc.prefix+"."+o.ext))
				if err != nil {
					t.Fatal(err)
				}
				if !bytes.Equal(b.Bytes(), want) {
					got, wl := strings.Split(b.String(), "\n"), strings.Split(string(want), "\n")
					for i := 0; i < max(len(got), len(wl)); i++ {
						var g, w string
						if i < len(got) {
							g = got[i]
						}
						if i < len(wl) {
							w = wl[i]
						}
						if g != w {
							t.Fatalf("%s.%s differs at line %d:\ngot  %.300s\nwant %.300s", tc.prefix, o.ext, i+1, g, w)
						}
					}
				}
			})
		}
	}
}

// blockValues are the values of a console block's lines under a label,
// block by block.
func blockValues(console, label string) []string {
	var out []string
	for _, m := range regexp.MustCompile(`(?m)^`+regexp.QuoteMeta(label)+` +(.*)$`).FindAllStringSubmatch(console, -1) {
		out = append(out, m[1])
	}
	return out
}

// TestGoldenResultBlocks: the console's result blocks of the golden
// report, one per cell in its order, say the cell's figures as
// report.json holds them, at the block's precision.
func TestGoldenResultBlocks(t *testing.T) {
	r := readGolden(t, "report.json")
	var b strings.Builder
	WriteResultBlocks(&b, r)
	out := b.String()
	if n := strings.Count(out, "\n"+BlockRule+"\n"); n != len(r.Cells) {
		t.Fatalf("%d blocks, want one per cell (%d):\n%s", n, len(r.Cells), out)
	}
	cells := blockValues(out, "Cell key (report.json, --baseline):")
	succeeded := blockValues(out, "Successful requests:")
	failed := blockValues(out, "Failed requests:")
	tput := blockValues(out, "Output token throughput (tok/s):")
	e2e := blockValues(out, "Median E2E (ms):")
	below := blockValues(out, "Below min_success:")
	if len(cells) != 4 || len(succeeded) != 4 || len(failed) != 4 || len(tput) != 4 || len(e2e) != 4 || len(below) != 4 {
		t.Fatalf("lines missing from the blocks:\n%s", out)
	}
	for i := range r.Cells {
		c := &r.Cells[i]
		nFailed := 0
		for o, n := range c.Summary.Outcomes {
			if o != report.OutcomeSuccess {
				nFailed += n
			}
		}
		switch {
		case cells[i] != c.Key:
			t.Errorf("block %d: cell %q, want %q", i, cells[i], c.Key)
		case succeeded[i] != strconv.Itoa(c.Summary.Successes):
			t.Errorf("%s: %s successful, want %d", c.Key, succeeded[i], c.Summary.Successes)
		case failed[i] != strconv.Itoa(nFailed):
			t.Errorf("%s: %s failed, want %d", c.Key, failed[i], nFailed)
		case tput[i] != strconv.FormatFloat(c.Summary.OutputTokensPerSecond, 'f', 2, 64):
			t.Errorf("%s: throughput %s, want %.2f", c.Key, tput[i], c.Summary.OutputTokensPerSecond)
		case e2e[i] != strconv.FormatFloat(c.Summary.E2E.P50*1000, 'f', 2, 64):
			t.Errorf("%s: median E2E %s ms, want %.2f", c.Key, e2e[i], c.Summary.E2E.P50*1000)
		case below[i] != strconv.FormatBool(c.BelowMinSuccess):
			t.Errorf("%s: below min_success %s, want %v", c.Key, below[i], c.BelowMinSuccess)
		}
	}
	// The unstable repeat's note, with its repeat's number.
	if !strings.Contains(out, "Note:") || !strings.Contains(out, "repeat 2: stability: unstable: length-normalised latency grew +30.0%") {
		t.Errorf("the unstable repeat's note is missing:\n%s", out)
	}
	if strings.Contains(out, "INTERRUPTED") || strings.Contains(out, "PARTIAL") {
		t.Error("a finished run's blocks say it was interrupted")
	}
}

// TestGoldenBelowFloor: the golden report's cells below min_success are
// named in report.md's section as report.FailingCells counts them.
func TestGoldenBelowFloor(t *testing.T) {
	r := readGolden(t, "report.json")
	var b bytes.Buffer
	if err := WriteMarkdown(&b, r); err != nil {
		t.Fatal(err)
	}
	rows := mdTable(b.String(), "Below min_success")
	failing := report.FailingCells(r)
	if len(rows) != len(failing) || len(rows) != 2 {
		t.Fatalf("below min_success rows %q, want the %d failing cells", rows, len(failing))
	}
	for i, f := range failing {
		want := []string{f.Key, ConsoleRatio(report.Num(f.Ratio)), strconv.Itoa(f.Successes), strconv.Itoa(f.Sent)}
		for j, w := range want {
			if rows[i][j] != w {
				t.Errorf("row %d column %d: %q, want %q", i, j, rows[i][j], w)
			}
		}
		if !strings.HasPrefix(FailingCellLine(&f), f.Key+": "+strconv.Itoa(f.Successes)+" of "+strconv.Itoa(f.Sent)+" measured requests sent succeeded ("+rows[i][1]+")") {
			t.Errorf("console line %q disagrees with report.md's row %q", FailingCellLine(&f), rows[i])
		}
	}
}
