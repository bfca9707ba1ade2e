package config

import (
	"fmt"
	"math"
	"os"
	"path/filepath"
	"slices"
	"time"

	yaml "go.yaml.in/yaml/v3"
)

// Replay replays a trace of requests as a workload's traffic, in place of an
// arrival process and synthetic prompts: each record is sent at its instant
// in the trace, with its recorded body or a prompt synthesised to its exact
// token lengths (probe/replay).
//
// The trace file is read when the workload starts, not here, so a
// malformed line is reported then (with its file and line), by
// --config.check only as far as the file's existence; but an
// agent_sessions trace is read here too, so that --config.check reports
// its malformed lines.
type Replay struct {
	// Source is the trace format: jsonl (our own recorded requests, a file
	// or a shadow store directory), azure, mooncake or burstgpt; or
	// agent_sessions, recorded agent jobs replayed turn by turn (the
	// sessions machinery's, not probe/replay's; see AgentTrace).
	Source string `yaml:"source"`
	// Path is the trace file (or store directory); a relative path is
	// resolved against the configuration file's directory.
	Path string `yaml:"path"`
	// Speed is trace seconds per wall second (2 replays twice as fast).
	// Default 1.
	Speed float64 `yaml:"speed"`
	// Start and End bound the replayed window of the trace, measured from
	// its first request. End 0 means the end of the trace.
	Start time.Duration `yaml:"start"`
	End   time.Duration `yaml:"end"`
	// Loop starts the window again when it ends.
	Loop bool `yaml:"loop"`
	// Sample is the fraction of records replayed, in (0, 1]. Default 1.
	Sample float64 `yaml:"sample"`
	// Seed selects the sample and the synthesised prompt words.
	Seed int64 `yaml:"seed"`
	// BlockSize is the tokens per hash id of a mooncake trace. Default 512.
	BlockSize int `yaml:"block_size"`
	// MaxRate is the hard ceiling in requests/s. 0 means 10 times the
	// busiest second of the window, after speed and sample.
	MaxRate float64 `yaml:"max_rate"`
	// OnMalformed is what a malformed line, or a record that cannot be
	// replayed exactly, does: refuse (the workload does not start; the
	// default) or skip (the line is left out, logged and counted).
	OnMalformed string `yaml:"on_malformed"`
	// ForceOutputTokens (jsonl only) sets max_tokens and ignore_eos from a
	// record's output_tokens, so the replay generates what production did.
	ForceOutputTokens bool `yaml:"force_output_tokens"`
}

// ReplaySourceAgentSessions replays recorded agent jobs (AgentTrace): the
// sessions machinery sends them, not probe/replay, whose formats are the
// other sources.
const ReplaySourceAgentSessions = "agent_sessions"

// Replay sources and malformed-line policies, as probe/replay names them
// (but ReplaySourceAgentSessions).
var (
	ReplaySources        = []string{"jsonl", "azure", "mooncake", "burstgpt", ReplaySourceAgentSessions}
	ReplayMalformedRules = []string{"refuse", "skip"}
)

// Defaults of a replay block.
const (
	DefaultReplayBlockSize = 512
	DefaultReplayMalformed = "refuse"
)

// validateReplay applies the replay block's defaults, resolves its path
// against the configuration file's directory and checks it. p is the
// workload's path.
func validateReplay(v *validator, p path, r *Replay) {
	rp := append(append(path{}, p...), "replay")
	if r.Speed == 0 {
		r.Speed = 1
	}
	if r.Sample == 0 {
		r.Sample = 1
	}
	if r.OnMalformed == "" {
		r.OnMalformed = DefaultReplayMalformed
	}
	if r.BlockSize == 0 && r.Source == "mooncake" {
		r.BlockSize = DefaultReplayBlockSize
	}

	// Replay decides when requests go and what they say: the synthetic
	// workload's own blocks would be silently ignored.
	for _, key := range []string{"arrival", "prompt", "checks"} {
		if n := nodeAt(v.root, append(append(path{}, p...), key)); n != nil {
			v.add(p, key, "cannot be set with replay: the trace decides when requests are sent and what they hold")
		}
	}
	if !slices.Contains(ReplaySources, r.Source) {
		v.add(rp, "source", fmt.Sprintf("%s is not one of %v", quote(r.Source), ReplaySources)+didYouMean(r.Source, ReplaySources))
	}
	if r.Path == "" {
		v.add(rp, "path", "is required")
	} else {
		if !filepath.IsAbs(r.Path) {
			r.Path = filepath.Join(filepath.Dir(v.file), r.Path)
		}
		switch fi, err := os.Stat(r.Path); {
		case err != nil:
			v.add(rp, "path", fmt.Sprintf("cannot read: %v", err))
		case fi.IsDir() && r.Source != "jsonl":
			v.add(rp, "path", fmt.Sprintf("%s is a directory; only source jsonl reads a directory (a shadow store)", r.Path))
		}
	}
	if math.IsNaN(r.Speed) || math.IsInf(r.Speed, 0) || r.Speed <= 0 {
		v.add(rp, "speed", "must be a finite number > 0")
	}
	if r.Start < 0 {
		v.add(rp, "start", "must not be negative")
	}
	if r.End != 0 && r.End <= r.Start {
		v.add(rp, "end", fmt.Sprintf("%v must be after start %v", r.End, r.Start))
	}
	if !(r.Sample > 0 && r.Sample <= 1) {
		v.add(rp, "sample", fmt.Sprintf("%v must be in (0, 1]", r.Sample))
	}
	if r.BlockSize != 0 && r.Source != "mooncake" {
		v.add(rp, "block_size", "only applies to source mooncake")
	} else if r.BlockSize < 0 {
		v.add(rp, "block_size", "must be positive")
	} else {
		v.checkTokens(rp, "block_size", r.BlockSize)
	}
	if math.IsNaN(r.MaxRate) || r.MaxRate < 0 || r.MaxRate > MaxRateLimit {
		v.add(rp, "max_rate", fmt.Sprintf("must be in [0, %g] requests/s", float64(MaxRateLimit)))
	}
	if !slices.Contains(ReplayMalformedRules, r.OnMalformed) {
		v.add(rp, "on_malformed", fmt.Sprintf("%s is not one of %v", quote(r.OnMalformed), ReplayMalformedRules)+didYouMean(r.OnMalformed, ReplayMalformedRules))
	}
	if r.ForceOutputTokens && r.Source != "jsonl" {
		v.add(rp, "force_output_tokens", "only applies to source jsonl (token traces always force their output length)")
	}
}

// nodeAt returns the node at p in the document, or nil when the file does
// not hold it.
func nodeAt(root *yaml.Node, p path) *yaml.Node {
	n, _ := walk(root, p)
	return n
}
