package bench

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/infer-exporter/infer_exporter/bench/render"
)

// A run never overwrites a report: the hour of measurement it holds is
// lost the moment a second run's files replace it, and a second quick
// start is the easiest way to do that (both write bench-out/). So:
//
//   - the quick start's default directory, when it already holds a
//     report, gives way to the first free one beside it: bench-out-2,
//     bench-out-3, ... (as a browser saves a second download), and the
//     run says on stderr where it writes;
//   - a directory named by --output.dir (or bench merge's) that already
//     holds a report is refused before anything is sent, unless
//     --output.overwrite: a script that reads DIR/report.json after the
//     run must not read an earlier run's while this one's went
//     elsewhere.

// reportFiles are the files whose presence says a directory holds a
// report (WriteFiles writes them).
var reportFiles = []string{JSONFile, CSVFile, HTMLFile, render.MarkdownFile, ColdStartCSVFile}

// maxOutputSiblings bounds the search for a free directory beside the
// default one: past bench-out-1000 something else is wrong.
const maxOutputSiblings = 1000

// errHoldsReport is a directory that already holds a report.
var errHoldsReport = errors.New("already holds a report")

// heldReport is the first report file dir holds, "" when none (or dir
// does not exist).
func heldReport(dir string) string {
	for _, name := range reportFiles {
		if _, err := os.Lstat(filepath.Join(dir, name)); err == nil {
			return name
		}
	}
	return ""
}

// outputDir is where a run writes its report, asked for dir: dir itself
// when it holds no report (or overwrite); else, when dir is the default
// (defaulted), the first sibling dir-N (N from 2) that does not exist,
// created here so that a run started beside this one takes the next, or
// that exists without a report; else an error wrapping errHoldsReport.
func outputDir(dir string, defaulted, overwrite bool) (string, error) {
	held := heldReport(dir)
	switch {
	case overwrite || held == "":
		return dir, nil
	case !defaulted:
		return "", fmt.Errorf("%s %w (%s): a second run would overwrite it; give another --output.dir, or --output.overwrite to replace it",
			dir, errHoldsReport, filepath.Join(dir, held))
	}
	for n := 2; n <= maxOutputSiblings; n++ {
		cand := fmt.Sprintf("%s-%d", filepath.Clean(dir), n)
		err := os.Mkdir(cand, 0o755)
		if err == nil || errors.Is(err, fs.ErrExist) && heldReport(cand) == "" && isDir(cand) {
			return cand, nil
		}
		if !errors.Is(err, fs.ErrExist) {
			return "", err
		}
	}
	return "", fmt.Errorf("%s and %s-2 ... %s-%d all hold a report: give --output.dir", dir, dir, dir, maxOutputSiblings)
}

// isDir reports whether path is a directory.
func isDir(path string) bool {
	fi, err := os.Stat(path)
	return err == nil && fi.IsDir()
}
