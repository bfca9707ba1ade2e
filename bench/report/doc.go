// Package report is the bench report's schema and only it: report.json as
// Go types, the page a script author reads to know what a report holds.
//
// A Report holds the run's Environment, one CellResult per target and
// load (its Repeats, each with its Stats, and Summary, the medians over
// them, with bootstrap intervals in CI), the rate sweeps, the accuracy
// and perplexity checks, the RankingResult, the GPUReport, the timeline,
// the Comparison with a baseline, the ColdStartReport, and, in a shard's
// report, the ShardPart that bench merge reads (a RecorderState per
// repeat, and its per-request Records). Schema names the format; a field
// is added, never renamed or removed, within it.
//
// GateVerdict is the regression gate's rule on a change's interval
// (regressed, inconclusive, ok), kept beside the Comparison it fills so
// that every comparison of two reports judges alike.
//
// ReadJSON reads a report back within bounds (MaxReportBytes,
// MaxReportDecodedBytes), refusing what is not a regular file.
//
// The package imports nothing of the bench: the bench fills a Report,
// its renderers and bench merge read one.
package report
