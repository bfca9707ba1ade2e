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

// TestVerifyAndWrite: each input is found matching, changed (its bytes,
// not its size), missing, or not recomputable (a prompt set); the lines
// say so, and the run verifies only when every file matches.
func TestVerifyAndWrite(t *testing.T) {
	dir := t.TempDir()
	same, edited, empty := filepath.Join(dir, "same.yml"), filepath.Join(dir, "edited.jsonl"), filepath.Join(dir, "empty")
	for path, text := range map[string]string{same: "bench: {}\n", edited: "abc\n", empty: ""} {
		if err := os.WriteFile(path, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	recorded := Inputs(same, []report.TraceInfo{{Name: "t", Path: edited}, {Name: "e", Path: empty}}, []report.PromptSetInfo{{Target: "a", Shape: "s", SHA256: "f00d"}})
	if len(recorded) != 5 || recorded[0].Kind != report.InputExporter || recorded[1].Kind != report.InputConfig || recorded[1].Bytes != 10 ||
		recorded[4].Kind != report.InputPromptSet || recorded[4].Name != "a/s" || recorded[4].Path != "" {
		t.Fatalf("inputs %+v", recorded)
	}
	// The trace is edited in place, same size.
	if err := os.WriteFile(edited, []byte("abd\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	r := &report.Report{Environment: report.Environment{Inputs: append(recorded[1:],
		report.Input{Kind: report.InputTrace, Name: "gone", Path: filepath.Join(dir, "gone"), SHA256: "00", Bytes: 1})}}
	vs := Verify(context.Background(), r)
	want := []string{VerifyMatch, VerifyChanged, VerifyMatch, VerifyNotOffline, VerifyMissing}
	if len(vs) != len(want) {
		t.Fatalf("%d verifications, want %d", len(vs), len(want))
	}
	for i, v := range vs {
		if v.Status != want[i] {
			t.Errorf("%s %s: %s, want %s", v.Input.Kind, v.Input.Path, v.Status, want[i])
		}
	}
	if vs[1].Now == "" || vs[1].Now == vs[1].Input.SHA256 || vs[1].Note != "" {
		t.Errorf("changed trace: now %q, note %q: want its new hash", vs[1].Now, vs[1].Note)
	}
	var b strings.Builder
	if WriteVerification(&b, vs) {
		t.Error("a changed and a missing input verified")
	}
	lines := strings.Split(strings.TrimSuffix(b.String(), "\n"), "\n")
	for i, prefix := range []string{"match    config", "CHANGED  trace t", "match    trace e", "recorded prompt_set a/s", "MISSING  trace gone"} {
		if i >= len(lines) || !strings.HasPrefix(lines[i], prefix) {
			t.Errorf("line %d: %q, want it to begin with %q", i, lines, prefix)
		}
	}
	b.Reset()
	if !WriteVerification(&b, []Verification{vs[0], vs[2], vs[3]}) {
		t.Errorf("matching inputs do not verify:\n%s", b.String())
	}
	if WriteVerification(&b, nil) {
		t.Error("a report without inputs verified")
	}
}
