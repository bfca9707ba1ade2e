package merge

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/infer-exporter/infer_exporter/bench/report"
)

// TestVerifyRefusesWhatIsNotItsInput (issue 23): an input now a FIFO or a
// device, or larger than its recorded size, is changed, found without
// reading it.
func TestVerifyRefusesWhatIsNotItsInput(t *testing.T) {
	dir := t.TempDir()
	fifo := filepath.Join(dir, "fifo")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	grown := filepath.Join(dir, "grown")
	if err := os.WriteFile(grown, []byte("0123456789"), 0o644); err != nil {
		t.Fatal(err)
	}
	r := &report.Report{Environment: report.Environment{Inputs: []report.Input{
		{Kind: report.InputTrace, Path: fifo, SHA256: "00", Bytes: 10},
		{Kind: report.InputTrace, Path: "/dev/zero", SHA256: "00", Bytes: 10},
		{Kind: report.InputTrace, Path: grown, SHA256: "00", Bytes: 4},
	}}}
	for i, v := range Verify(context.Background(), r) {
		want := []string{"not a regular file", "not a regular file", "10 bytes, recorded 4"}[i]
		if v.Status != VerifyChanged || !strings.Contains(v.Note, want) {
			t.Errorf("%s: %s %q, want changed with %q", v.Input.Path, v.Status, v.Note, want)
		}
	}
}
