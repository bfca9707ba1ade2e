package bench

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"os"
	"path/filepath"
)

// Input is one link of a report's audit chain: an input of the run and
// the SHA-256 of its bytes when the run read it. `bench verify` hashes the
// ones it can find again.
type Input struct {
	// Kind is exporter (the binary that ran), config (the bench file),
	// trace (a replayed trace file) or prompt_set (the prompts one target
	// got for one shape: their hash, prompt.HashPrompts; they were made
	// against the target's tokenizer, so they are not files).
	Kind string `json:"kind"`
	// Name is the trace's or the prompt set's name ("target/shape").
	Name string `json:"name,omitempty"`
	// Path is the file's absolute path, for the kinds that are files.
	Path   string `json:"path,omitempty"`
	SHA256 string `json:"sha256"`
	Bytes  int64  `json:"bytes,omitempty"`
}

// Input kinds.
const (
	InputExporter  = "exporter"
	InputConfig    = "config"
	InputTrace     = "trace"
	InputPromptSet = "prompt_set"
)

// hashFile returns the hex SHA-256 and size of a file's bytes.
func hashFile(path string) (string, int64, error) {
	f, err := os.Open(path)
	if err != nil {
		return "", 0, err
	}
	defer f.Close()
	h := sha256.New()
	n, err := io.Copy(h, f)
	if err != nil {
		return "", 0, err
	}
	return hex.EncodeToString(h.Sum(nil)), n, nil
}

// fileInput hashes one file input; a file that cannot be read (an
// executable deleted since it started) is recorded with the reason in
// place of its hash.
func fileInput(kind, name, path string) Input {
	if abs, err := filepath.Abs(path); err == nil {
		path = abs
	}
	in := Input{Kind: kind, Name: name, Path: path}
	sum, n, err := hashFile(path)
	if err != nil {
		in.SHA256 = "unreadable: " + err.Error()
		return in
	}
	in.SHA256, in.Bytes = sum, n
	return in
}

// auditInputs lists a run's inputs: the running binary, the configuration
// file, every trace and every prompt set.
func auditInputs(configFile string, traces []TraceInfo, prompts []PromptSetInfo) []Input {
	var ins []Input
	if exe, err := os.Executable(); err == nil {
		ins = append(ins, fileInput(InputExporter, "", exe))
	} else {
		ins = append(ins, Input{Kind: InputExporter, SHA256: "unreadable: " + err.Error()})
	}
	if configFile != "" {
		ins = append(ins, fileInput(InputConfig, "", configFile))
	}
	for _, t := range traces {
		ins = append(ins, fileInput(InputTrace, t.Name, t.Path))
	}
	for _, p := range prompts {
		ins = append(ins, Input{Kind: InputPromptSet, Name: p.Target + "/" + p.Shape, SHA256: p.SHA256})
	}
	return ins
}

// Verification is what `bench verify` found for one input.
type Verification struct {
	Input Input
	// Status: match, changed (Now is the new hash), missing (Err says
	// why) or not_recomputable (a prompt set: it needs the target).
	Status string
	Now    string
	Err    error
}

// Verification statuses.
const (
	VerifyMatch      = "match"
	VerifyChanged    = "changed"
	VerifyMissing    = "missing"
	VerifyNotOffline = "not_recomputable"
)

// Verify hashes again every input of r that is a file, and says for each
// whether it still matches.
func Verify(r *Report) []Verification {
	var out []Verification
	for _, in := range r.Environment.Inputs {
		v := Verification{Input: in}
		switch {
		case in.Path == "":
			v.Status = VerifyNotOffline
		default:
			sum, _, err := hashFile(in.Path)
			switch {
			case err != nil:
				v.Status, v.Err = VerifyMissing, err
			case sum == in.SHA256:
				v.Status = VerifyMatch
			default:
				v.Status, v.Now = VerifyChanged, sum
			}
		}
		out = append(out, v)
	}
	return out
}

// writeVerification prints one line per input and returns whether every
// input that is a file was found and matches.
func writeVerification(w io.Writer, vs []Verification) bool {
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
			fmt.Fprintf(w, "CHANGED  %-28s %s, now %s  %s\n", name, short(v.Input.SHA256), short(v.Now), v.Input.Path)
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
