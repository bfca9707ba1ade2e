// Package bench runs `infer_exporter bench`: a benchmark matrix of targets ×
// loads (open-loop request rates, closed-loop concurrencies) × input/output
// shapes, and replayed traces, with warm-up, repeats, a stability check and
// an optional rate sweep, and writes the result as JSON, CSV and a
// self-contained HTML report with a ranking and, against a baseline, a
// regression gate for CI.
//
// It measures with the exporter's own pieces, so that the bench and the live
// exporter tell the same truth about a request: the open-loop
// workload.Runner and its client, the observation.Request record, the
// exact-length prompt generator calibrated against each target's tokenizer
// (prompt.NewCalibrated), the replay sources (probe/replay), the
// engine scraper for engine identity (engine.Scraper) and
// the NVML collector for the GPUs.
//
// Files, roughly from the bottom up (the configuration first, the command
// last): config.go (the bench configuration, validated section by section),
// schedule.go (stopping at window ends, closed loop), prompts.go, stats.go
// (percentiles, bootstrap), record.go (per-request records, window
// accounting and the stability verdict), requests.go (--output.requests),
// rank.go (the composite score and its intervals), progress.go (the bar and
// its estimate), gpu.go (GPU sampling), info.go (engine info), quality.go
// (perplexity), report.go (writing the files), run.go (the matrix, its plan
// and the known-answer checks), shard.go (a shard's share of a split run,
// and the bench's side of bench merge: merge.Run), repeat.go (one repeat: a
// builder per load kind, the stability extension, the replay's part),
// coldstart.go, baseline.go (the regression gate), failed.go,
// quickstart.go, live.go and command.go (the kingpin command). The report's
// schema is bench/report's, its renderers bench/render's; bench merge, its
// checks and bench verify work on files alone in bench/merge. docs/bench.md
// defines every figure.
package bench
