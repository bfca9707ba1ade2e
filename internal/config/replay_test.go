package config

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

const replayTargets = `targets:
  - name: local
    url: http://127.0.0.1:8000
    model: m
workloads:
`

func TestReplayConfig(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "code.csv"), []byte("TIMESTAMP,ContextTokens,GeneratedTokens\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(dir, "c.yml")
	c, err := Parse([]byte(replayTargets+`  - name: r
    target: local
    replay:
      source: azure
      path: code.csv
      speed: 2
      start: 1m
      end: 2m
      loop: true
      sample: 0.5
      max_rate: 40
      on_malformed: skip
`), file)
	if err != nil {
		t.Fatal(err)
	}
	r := c.Workloads[0].Replay
	want := Replay{Source: "azure", Path: filepath.Join(dir, "code.csv"), Speed: 2, Start: time.Minute, End: 2 * time.Minute,
		Loop: true, Sample: 0.5, MaxRate: 40, OnMalformed: "skip"}
	if r == nil || *r != want {
		t.Errorf("replay = %+v, want %+v", r, want)
	}

	// Defaults.
	c, err = Parse([]byte(replayTargets+"  - {name: r, target: local, replay: {source: mooncake, path: code.csv}}\n"), file)
	if err != nil {
		t.Fatal(err)
	}
	r = c.Workloads[0].Replay
	if r.Speed != 1 || r.Sample != 1 || r.BlockSize != 512 || r.OnMalformed != "refuse" || r.End != 0 {
		t.Errorf("defaults = %+v", r)
	}
}

// TestReplayConfigErrors: every problem is reported with its file and line.
func TestReplayConfigErrors(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "t.jsonl"), nil, 0o600); err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(dir, "c.yml")
	for _, tc := range []struct {
		name, yaml string
		want       []string
	}{
		{"arrival beside replay", `  - name: r
    target: local
    arrival: {rate: 1}
    replay: {source: jsonl, path: t.jsonl}
`, []string{"c.yml:8: workloads[0].arrival: cannot be set with replay"}},
		{"prompt and checks beside replay", `  - name: r
    target: local
    replay: {source: jsonl, path: t.jsonl}
    prompt: {seed: 3}
    checks: []
`, []string{"c.yml:9: workloads[0].prompt: cannot be set with replay", "c.yml:10: workloads[0].checks: cannot be set with replay"}},
		{"bad values", `  - name: r
    target: local
    replay:
      source: sharegpt
      path: missing.csv
      speed: -1
      start: -1s
      sample: 1.5
      block_size: 16
      max_rate: -3
      on_malformed: ignore
      force_output_tokens: true
`, []string{
			`c.yml:9: workloads[0].replay.source: "sharegpt" is not one of`,
			"c.yml:10: workloads[0].replay.path: cannot read",
			"c.yml:11: workloads[0].replay.speed: must be a finite number > 0",
			"c.yml:12: workloads[0].replay.start: must not be negative",
			"c.yml:13: workloads[0].replay.sample: 1.5 must be in (0, 1]",
			"c.yml:14: workloads[0].replay.block_size: only applies to source mooncake",
			"c.yml:15: workloads[0].replay.max_rate: must be in",
			`c.yml:16: workloads[0].replay.on_malformed: "ignore" is not one of`,
			"c.yml:17: workloads[0].replay.force_output_tokens: only applies to source jsonl",
		}},
		{"end before start", `  - name: r
    target: local
    replay: {source: jsonl, path: t.jsonl, start: 2m, end: 1m}
`, []string{"c.yml:8: workloads[0].replay.end: 1m0s must be after start 2m0s"}},
		{"directory for a csv", `  - name: r
    target: local
    replay: {source: azure, path: .}
`, []string{"c.yml:8: workloads[0].replay.path:", "only source jsonl reads a directory"}},
		{"unknown field", `  - name: r
    target: local
    replay: {source: jsonl, path: t.jsonl, sped: 2}
`, []string{`c.yml:8: workloads[0].replay.sped: unknown field "sped"; did you mean speed?`}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Parse([]byte(replayTargets+tc.yaml), file)
			if err == nil {
				t.Fatal("accepted")
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q\nlacks %q", err, w)
				}
			}
		})
	}
}
