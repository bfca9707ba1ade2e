package merge

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"os"
	"path/filepath"

	"github.com/infer-exporter/infer_exporter/bench/report"
)

// hashFile returns the hex SHA-256 and size of a regular file's bytes, of
// at most max of them (max < 0: any size). It reads in chunks and ends
// with ctx's error when ctx does. A FIFO or a device (/dev/zero) is
// refused before it is opened: it has no size, and hashing it might never
// end.
func hashFile(ctx context.Context, path string, max int64) (string, int64, error) {
	f, _, err := report.OpenRegular(path, max)
	if err != nil {
		return "", 0, err
	}
	defer f.Close()
	h := sha256.New()
	var r io.Reader = report.ContextReader(ctx, f)
	if max >= 0 {
		r = io.LimitReader(r, max+1)
	}
	n, err := io.CopyBuffer(h, r, make([]byte, report.ReadChunk))
	if err != nil {
		return "", 0, err
	}
	if max >= 0 && n > max {
		return "", 0, fmt.Errorf("%s: grew past %d bytes while read", path, max)
	}
	return hex.EncodeToString(h.Sum(nil)), n, nil
}

// fileInput hashes one file input; a file that cannot be read (an
// executable deleted since it started) is recorded with the reason in
// place of its hash.
func fileInput(kind, name, path string) report.Input {
	if abs, err := filepath.Abs(path); err == nil {
		path = abs
	}
	in := report.Input{Kind: kind, Name: name, Path: path}
	sum, n, err := hashFile(context.Background(), path, -1)
	if err != nil {
		in.SHA256 = "unreadable: " + err.Error()
		return in
	}
	in.SHA256, in.Bytes = sum, n
	return in
}

// Inputs lists a run's inputs, the links of its report's audit chain: the
// running binary, the configuration file, every trace and every prompt
// set, each file hashed now (Verify hashes them again).
func Inputs(configFile string, traces []report.TraceInfo, prompts []report.PromptSetInfo) []report.Input {
	var ins []report.Input
	if exe, err := os.Executable(); err == nil {
		ins = append(ins, fileInput(report.InputExporter, filepath.Base(exe), exe)) // the report names it; verify reads Path
	} else {
		ins = append(ins, report.Input{Kind: report.InputExporter, SHA256: "unreadable: " + err.Error()})
	}
	if configFile != "" {
		ins = append(ins, fileInput(report.InputConfig, "", configFile))
	}
	for _, t := range traces {
		ins = append(ins, fileInput(report.InputTrace, t.Name, t.Path))
	}
	for _, p := range prompts {
		ins = append(ins, report.Input{Kind: report.InputPromptSet, Name: p.Target + "/" + p.Shape, SHA256: p.SHA256})
	}
	return ins
}

// Verification is what `bench verify` found for one input.
type Verification struct {
	Input report.Input
	// Status: match, changed (Now is the new hash), missing (Err says
	// why) or not_recomputable (a prompt set: it needs the target).
	Status string
	Now    string
	// Note, for a changed input that was not hashed, says why: not a
	// regular file any more, or larger than recorded.
	Note string
	Err  error
}

// Verification statuses.
const (
	VerifyMatch      = "match"
	VerifyChanged    = "changed"
	VerifyMissing    = "missing"
	VerifyNotOffline = "not_recomputable"
)

// Verify hashes again every input of r that is a file, and says for each
// whether it still matches. An input that is no longer a regular file, or
// that is now larger than the size recorded with its hash, is changed
// without being read (a 20 GB sparse file in a trace's place is not
// hashed to its end). The hashing ends when ctx does: the inputs not yet
// hashed are then missing, with ctx's error.
func Verify(ctx context.Context, r *report.Report) []Verification {
	var out []Verification
	for _, in := range r.Environment.Inputs {
		v := Verification{Input: in}
		switch {
		case in.Path == "":
			v.Status = VerifyNotOffline
		default:
			v = verifyFile(ctx, in)
		}
		out = append(out, v)
	}
	return out
}

// verifyFile hashes one file input again.
func verifyFile(ctx context.Context, in report.Input) Verification {
	v := Verification{Input: in}
	// The recorded size bounds the read: a file that grew is changed
	// whatever its bytes. A report from before sizes were recorded (or an
	// input recorded unreadable) has none, and is read to its end.
	limit := int64(-1)
	if in.Bytes > 0 || in.SHA256 == emptySHA256 {
		limit = in.Bytes
	}
	fi, err := os.Stat(in.Path)
	switch {
	case err != nil:
		v.Status, v.Err = VerifyMissing, err
		return v
	case !fi.Mode().IsRegular():
		v.Status, v.Note = VerifyChanged, fmt.Sprintf("not a regular file (%s)", fi.Mode().Type())
		return v
	case limit >= 0 && fi.Size() > limit:
		v.Status, v.Note = VerifyChanged, fmt.Sprintf("%d bytes, recorded %d (not hashed)", fi.Size(), limit)
		return v
	}
	sum, _, err := hashFile(ctx, in.Path, limit)
	switch {
	case err != nil:
		v.Status, v.Err = VerifyMissing, err
	case sum == in.SHA256:
		v.Status = VerifyMatch
	default:
		v.Status, v.Now = VerifyChanged, sum
	}
	return v
}

// emptySHA256 is the SHA-256 of no bytes: an input recorded empty has a
// size of 0, which Input's JSON leaves out.
const emptySHA256 = "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"

// WriteVerification prints one line per input and returns whether every
// input that is a file was found and matches.
func WriteVerification(w io.Writer, vs []Verification) bool {
	ok := len(vs) > 0
	for _, v := range vs {
		name := v.Input.Kind
		if v.Input.Name != "" {
			name += " " + v.Input.Name
		}
		switch v.Status {
		case VerifyMatch:
			fmt.Fprintf(w, "match    %-28s %s  %s\n", name, short(v.Input.SHA256), v.Input.Path)
		case VerifyChanged:
			ok = false
			now := short(v.Now)
			if v.Note != "" {
				now = v.Note
			}
			fmt.Fprintf(w, "CHANGED  %-28s %s, now %s  %s\n", name, short(v.Input.SHA256), now, v.Input.Path)
		case VerifyMissing:
			ok = false
			fmt.Fprintf(w, "MISSING  %-28s %s  %s: %v\n", name, short(v.Input.SHA256), v.Input.Path, v.Err)
		default:
			fmt.Fprintf(w, "recorded %-28s %s  (not a file: made against the target's tokenizer, so not recomputed here)\n", name, short(v.Input.SHA256))
		}
	}
	return ok
}

func short(sum string) string {
	if len(sum) > 16 {
		return sum[:16]
	}
	return sum
}
