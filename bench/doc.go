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
// Files: config.go (the bench configuration, validated section by
// section), run.go (the matrix), runplan.go (how long the matrix is
// planned to take, and may), progress.go (the bar and its estimate),
// repeat.go (one repeat: a builder per load kind, the stability rule, the
// replay's part), schedule.go (stopping at window ends, closed loop),
// record.go (per-request records and window
// accounting), stats.go (percentiles, bootstrap), rank.go (the composite
// score and its intervals), baseline.go (the regression gate), gpu.go (GPU
// sampling), info.go (engine info), report.go (writing the files),
// shard.go, merge.go and mergecheck.go (shards and bench merge),
// command.go (the kingpin command). The report's schema is bench/report's,
// its renderers bench/render's. docs/bench.md defines every figure.
package bench
