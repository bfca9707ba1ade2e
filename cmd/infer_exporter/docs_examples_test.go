package main

import (
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	yaml "go.yaml.in/yaml/v3"

	"github.com/infer-exporter/infer_exporter/bench"
	"github.com/infer-exporter/infer_exporter/internal/config"
)

// docExample is one ```yaml block of the documentation.
type docExample struct {
	file string // as the reader finds it: README.md, docs/probe.md
	line int    // of the opening fence
	text string
}

// docExamples reads every ```yaml block of README.md and docs/*.md.
func docExamples(t *testing.T) []docExample {
	t.Helper()
	files, err := filepath.Glob("../../docs/*.md")
	if err != nil {
		t.Fatal(err)
	}
	files = append([]string{"../../README.md"}, files...)
	var out []docExample
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		var cur *docExample
		var b strings.Builder
		for i, line := range strings.Split(string(data), "\n") {
			switch {
			case cur == nil && strings.TrimSpace(line) == "```yaml":
				cur = &docExample{file: strings.TrimPrefix(f, "../../"), line: i + 1}
				b.Reset()
			case cur != nil && strings.TrimSpace(line) == "```":
				cur.text = b.String()
				out = append(out, *cur)
				cur = nil
			case cur != nil:
				b.WriteString(line + "\n")
			}
		}
	}
	return out
}

// standInTarget is the target a fragment that names one but defines none
// is checked with: the documentation's examples call it local-vllm.
const standInTarget = "targets:\n  - {name: %s, url: http://127.0.0.1:8000, model: m}\n"

var targetRefRE = regexp.MustCompile(`(?m)^\s*target: ([A-Za-z0-9_.-]+)`)

// TestDocExamplesCheck: every configuration block of README.md and docs/
// passes the check its reader would run on it: `infer_exporter
// --config.check` (config.LoadFile) for the exporter's file, `bench
// --config.check` (bench.LoadFile) for a bench file. A fragment that names
// a target without defining it gets a stand-in target of that name; a
// bearer_token_file gets a stand-in file; a trace or prompt path a stand-in
// trace of one row. Blocks of other programs' files (an OpenTelemetry
// Collector's configuration) are named and left to their own tests.
func TestDocExamplesCheck(t *testing.T) {
	examples := docExamples(t)
	if len(examples) < 8 {
		t.Fatalf("found %d yaml blocks in README.md and docs/: the reader is broken", len(examples))
	}
	for _, ex := range examples {
		name := ex.file + ":" + strconv.Itoa(ex.line)
		t.Run(name, func(t *testing.T) {
			var top map[string]any
			if err := yaml.Unmarshal([]byte(ex.text), &top); err != nil {
				t.Fatalf("%s: not YAML: %v", name, err)
			}
			keys := make([]string, 0, len(top))
			for k := range top {
				keys = append(keys, k)
			}
			if slices.Contains(keys, "receivers") || slices.Contains(keys, "apiVersion") {
				t.Skipf("%s is another program's configuration (keys %v)", name, keys)
			}
			dir := t.TempDir()
			text := ex.text
			if _, ok := top["targets"]; !ok {
				if m := targetRefRE.FindStringSubmatch(text); m != nil {
					text = strings.Replace(standInTarget, "%s", m[1], 1) + text
				}
			}
			text = standInFiles(t, dir, text)
			file := filepath.Join(dir, "example.yml")
			if err := os.WriteFile(file, []byte(text), 0o600); err != nil {
				t.Fatal(err)
			}
			var err error
			if _, ok := top["bench"]; ok {
				_, err = bench.LoadFile(file)
			} else {
				_, err = config.LoadFile(file)
			}
			if err != nil {
				t.Errorf("%s fails its check:\n%v\n--- as checked:\n%s", name, err, text)
			}
		})
	}
}

var fileRefRE = regexp.MustCompile(`(bearer_token_file|path): ([^\s#,}]+)`)

// standInFiles writes a stand-in for every file the example names, under
// dir, and points the example at it.
func standInFiles(t *testing.T, dir, text string) string {
	return fileRefRE.ReplaceAllStringFunc(text, func(m string) string {
		sub := fileRefRE.FindStringSubmatch(m)
		key, ref := sub[1], sub[2]
		stand := filepath.Join(dir, "standin-"+filepath.Base(ref))
		content := "sk-stand-in\n"
		if key == "path" {
			content = standInTrace(ref, text)
		}
		if err := os.WriteFile(stand, []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
		return key + ": " + stand
	})
}

// standInTrace is a one-row trace in the format the file name suggests, or
// a one-turn recorded agent job for an agent_sessions replay.
func standInTrace(ref, text string) string {
	if strings.Contains(text, "source: agent_sessions") {
		return `{"session": "job-1", "turn": 1, "offset": 0, "body": {"messages": [{"role": "user", "content": "hi"}]}}` + "\n"
	}
	if strings.HasSuffix(ref, ".csv") {
		return "TIMESTAMP,ContextTokens,GeneratedTokens\n2023-11-16 18:15:46.6805900,100,10\n"
	}
	return `{"timestamp": 0, "input_length": 100, "output_length": 10, "hash_ids": [1]}` + "\n"
}
