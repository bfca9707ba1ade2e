// Package merge works on bench reports as files, and on nothing else: it
// merges the reports of a split run's shards into the one a single
// process would have written (`bench merge`), checks every shard before
// (check.go), and keeps a report's audit chain: the inputs a run records
// and `bench verify`, which hashes them again (audit.go). It runs no load
// and asks no server.
//
// A merged report's figures are computed by the code that computes a
// single process's, so that they are the same: the merge reads, checks and
// pools the shards' recorders (pool.go), and asks the bench, through Run,
// to read the configuration the shards embedded and to compute the figures
// of the pooled repeats. The package imports nothing of the bench.
package merge

import (
	"context"
	"fmt"

	"github.com/infer-exporter/infer_exporter/bench/report"
)

// ShardFile is one shard's report and the file it was read from, which
// the merge's errors name.
type ShardFile struct {
	File   string
	Report *report.Report
}

// Read reads the shards' report files, each within report.ReadJSON's
// bounds; ctx ends the reads at their next chunk. An error names the file.
func Read(ctx context.Context, files []string) ([]ShardFile, error) {
	var shards []ShardFile
	for _, file := range files {
		r, err := report.ReadJSONContext(ctx, file)
		if err != nil {
			return nil, err
		}
		shards = append(shards, ShardFile{File: file, Report: r})
	}
	return shards, nil
}

// MaxShards bounds N, the shards of a split run.
const MaxShards = 10000

// ReadRun reads the configuration the shards embedded (shard 0's
// environment.config; field names it in errors) as the bench reads its
// own, except that nothing it names is read: the merging machine need not
// hold the shards' traces or bearer_token_files.
type ReadRun func(ctx context.Context, text []byte, field string) (Run, error)

// Run is a split run as the bench read it from its configuration: what
// its shards are checked against, and the figures of their pool.
type Run interface {
	// Matrix is what every shard must share and hold.
	Matrix() Matrix
	// MaxWindows is the most windows repeat ri of cell c can measure
	// under the configuration: the bound of what a shard may claim.
	MaxWindows(c *report.CellResult, ri int) int
	// Figures computes, in place, the figures of a pooled report: each
	// repeat's from its pooled recorder (pooled.Shard holds one per cell
	// and repeat), then the cells' and the ranking, as a single process
	// computes its own. It ends with ctx's error, its only one, when ctx
	// ends.
	Figures(ctx context.Context, pooled *report.Report) error
}

// Matrix is a split run's matrix and the settings its shards must share.
type Matrix struct {
	// Seed and MaxSamplesPerRepeat are bench.seed and
	// bench.max_samples_per_repeat.
	Seed                int64
	MaxSamplesPerRepeat int
	// Targets are the run's targets' names and Groups its loads of each
	// shape, then its replays, in the order the bench runs them: the
	// cells are every target × every group, target by target.
	Targets []string
	Groups  []Group
	// Repeats is bench.repeats, every cell's.
	Repeats int
}

// Group is one column of the matrix: a load and the shape's or the
// replay's name.
type Group struct {
	Shape string
	Load  report.Load
}

// Merge combines the reports of the N shards of one split run into the
// report a single process would have written: per cell and repeat, the
// shards' counts and per-window aggregates add up and their request
// records are pooled (pool.go), then read's Run computes the repeats',
// the cells' (with their bootstrap intervals) and the ranking's figures
// from the pool. The shards must be 0..N-1 of one run (one configuration,
// one N). What is one machine's (the GPU samples, the known-answer
// checks, the timeline) is shard 0's.
//
// A shard report is a file from elsewhere, so every figure the merge
// reads is checked first (check): a crafted or damaged shard is refused
// with an error naming its file and field, never merged into a report or
// let panic or allocate beyond its own size. The merge ends with ctx's
// error when ctx ends.
func Merge(ctx context.Context, shards []ShardFile, read ReadRun) (*report.Report, error) {
	if len(shards) == 0 {
		return nil, fmt.Errorf("no shard report")
	}
	if len(shards) > MaxShards {
		return nil, fmt.Errorf("%d reports: at most %d shards", len(shards), MaxShards)
	}
	byIndex, run, err := check(ctx, shards, read)
	if err != nil {
		return nil, err
	}
	pooled, err := pool(ctx, byIndex, run.Matrix())
	if err != nil {
		return nil, err
	}
	if err := run.Figures(ctx, pooled); err != nil {
		return nil, fmt.Errorf("merge interrupted: %w", err)
	}
	// The pool served the figures; a merged report is no shard's.
	pooled.Shard = nil
	return pooled, nil
}

// interrupted is the error of a merge that ctx ended.
func interrupted(ctx context.Context) error {
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("merge interrupted: %w", err)
	}
	return nil
}
