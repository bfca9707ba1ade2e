package bench

import "github.com/infer-exporter/infer_exporter/bench/report"

// The report's schema is bench/report's. The bench's tests, written when
// it was the bench's, name its types by these aliases, so that their
// bodies did not change when it moved; new tests name report.X.
type (
	Report           = report.Report
	Environment      = report.Environment
	TraceInfo        = report.TraceInfo
	Load             = report.Load
	CellResult       = report.CellResult
	Stats            = report.Stats
	RepeatResult     = report.RepeatResult
	StabilityResult  = report.StabilityResult
	Span             = report.Span
	SweepResult      = report.SweepResult
	RequestRecords   = report.RequestRecords
	SweepPoint       = report.SweepPoint
	AccuracyCheck    = report.AccuracyCheck
	CheckResult      = report.CheckResult
	Comparison       = report.Comparison
	CellComparison   = report.CellComparison
	ColdStartReport  = report.ColdStartReport
	ColdStartRepeat  = report.ColdStartRepeat
	Weights          = report.Weights
	Distribution     = report.Distribution
	RepeatWindows    = report.RepeatWindows
	Num              = report.Num
	GPUReport        = report.GPUReport
	GPUDevice        = report.GPUDevice
	GPUSample        = report.GPUSample
	Covariate        = report.Covariate
	Range            = report.Range
	TargetInfo       = report.TargetInfo
	EngineInfo       = report.EngineInfo
	PromptSetInfo    = report.PromptSetInfo
	PerplexityResult = report.PerplexityResult
	RankingResult    = report.RankingResult
	RefsJSON         = report.RefsJSON
	RankEntry        = report.RankEntry
	Record           = report.Record
	ReplayResult     = report.ReplayResult
	RecorderState    = report.RecorderState
	ShardPart        = report.ShardPart
	ShardCells       = report.ShardCells
	Dist             = report.Dist
	Interval         = report.Interval
	Input            = report.Input
)

// The schema's constants, as bench/report names them.
const (
	Schema          = report.Schema
	LoadRate        = report.LoadRate
	LoadConcurrency = report.LoadConcurrency
	LoadReplay      = report.LoadReplay
)

// CellKey is report.CellKey.
func CellKey(target string, l Load, shape string) string { return report.CellKey(target, l, shape) }
