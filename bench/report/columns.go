package report

import (
	"math"
	"slices"
	"strconv"
)

// The report's schema: one Record per request (record.go), one Stats per
// repeat and per cell (CellResult.Summary, the medians over its repeats),
// and columns, the cell's figures in the order of the CSV report. The CSV
// header and rows, the Markdown cells table and the merge rule of every
// figure come from columns; a new column is one entry (and its test, see
// CONTRIBUTING.md, "Adding a report column").

// unit says what a column holds and so how each output writes it.
type Unit int

const (
	_ Unit = iota
	// unitText is a name (the cell, its target, shape, load kind).
	UnitText
	// unitCount is an integer count.
	UnitCount
	// unitBool is a flag: true or false.
	UnitBool
	// unitNumber is a plain figure (the load, in-flight requests).
	UnitNumber
	// unitSeconds is a duration in seconds (Markdown shows milliseconds).
	UnitSeconds
	// unitPerSecond is a rate per second of the measured windows.
	UnitPerSecond
	// unitRatio is a ratio in [0, 1].
	UnitRatio
)

// mergeRule says how `bench merge` obtains a column from the shards'
// reports; TestColumnsMergeAsOneProcess holds every column to it.
type MergeRule int

const (
	_ MergeRule = iota
	// mergeSame: the cell's identity, the same in every shard
	// (bench merge checks it), taken from shard 0.
	MergeSame
	// mergeCounts: recomputed by finish from the shards' exact counts and
	// per-window sums (RecorderState), added up: exactly one process's.
	MergeCounts
	// mergePooled: recomputed from the shards' request records and
	// inter-token gaps, pooled (merge.PoolStates): one process's, to rounding,
	// while no shard sampled them (a reservoir of the same fraction of
	// every shard's beyond).
	MergePooled
	// mergeRepeats: from the repeats' merged results (their stability,
	// the worst shard's scheduling latency), as assembleCells judges a
	// single process's: one process's verdict on the same figures.
	MergeRepeats
	// mergeBootstrap: the bootstrap interval, recomputed over the pooled
	// records: an interval of the same figure, from other draws than one
	// process's (the records are pooled shard by shard).
	MergeBootstrap
	// mergeEnergy: the efficiency figures, recomputed over the pooled
	// tokens and windows from the shards' GPU energies, each GPU (by UUID)
	// once: shards on one host read the same GPUs, shards on several add
	// theirs.
	MergeEnergy
)

// column is one figure of a cell.
type Column struct {
	// name is the CSV header; json the report.json field it shows, from the
	// cell (summary.<field>, or a CellResult field).
	Name, JSON string
	Unit       Unit
	// text gives a unitText column's value; num every other one's (a count
	// or a flag as a number), NaN when the cell has none (an empty CSV
	// field, "–" in Markdown).
	Text func(*CellResult) string
	Num  func(*CellResult) float64
	// merge is how the shard merge obtains it.
	Merge MergeRule
	// md, when set, is the column's header in the Markdown cells table, at
	// position mdAt (1-based; the cell's key is column 0).
	MD   string
	MDAt int
	// flag, when set, is what the Markdown table's flags column says when
	// the (unitBool) column's value is flagIf (a unitCount column's: when
	// it is not 0, for flagIf true).
	Flag   string
	FlagIf bool
	// word, when set and it says something of a cell, is written in place
	// of the value by every output (CSV, Markdown, HTML, the console), and
	// as "<name>: <word>" in the flags: a figure that was not judged says
	// so rather than show a value it never had.
	Word func(*CellResult) string
}

// columns are the cell's figures, in the CSV report's order. A column is
// appended at the end: the existing ones keep their places for scripts
// that read them by position.
var Columns = func() []Column {
	text := func(name, json string, f func(*CellResult) string) Column {
		return Column{Name: name, JSON: json, Unit: UnitText, Text: f, Merge: MergeSame}
	}
	stat := func(name string, u Unit, merge MergeRule, f func(*Stats) float64) Column {
		return Column{Name: name, JSON: "summary." + name, Unit: u, Merge: merge, Num: func(c *CellResult) float64 { return f(&c.Summary) }}
	}
	count := func(name string, merge MergeRule, f func(*Stats) int) Column {
		return stat(name, UnitCount, merge, func(s *Stats) float64 { return float64(f(s)) })
	}
	flag := func(name string, f func(*Stats) bool) Column {
		return stat(name, UnitBool, MergeCounts, func(s *Stats) float64 { return B2F(f(s)) })
	}
	md := func(c Column, header string, at int) Column {
		c.MD, c.MDAt = header, at
		return c
	}
	flagged := func(c Column, flag string, when bool) Column {
		c.Flag, c.FlagIf = flag, when
		return c
	}
	worded := func(c Column, word func(*CellResult) string) Column {
		c.Word = word
		return c
	}
	// efficiency is a figure of summary.efficiency, NaN without one.
	validity := func(name, json string, f func(*Stats) map[string]int) Column {
		return Column{Name: name, JSON: json, Unit: UnitRatio, Merge: MergeCounts,
			Num: func(c *CellResult) float64 { return ValidRatio(c, f) }}
	}
	efficiency := func(name string, f func(*Efficiency) Num) Column {
		return Column{Name: name, JSON: "summary.efficiency." + name, Unit: UnitNumber, Merge: MergeEnergy,
			Num: func(c *CellResult) float64 {
				if e := c.Summary.Efficiency; e != nil {
					return float64(f(e))
				}
				return math.NaN()
			}}
	}
	// dist is the columns of one latency distribution, <name>_<q>_seconds;
	// Markdown shows its p50 and p99 at md50 and md99 when set.
	dist := func(name, json, label string, f func(*Stats) *Dist, md50, md99 int) []Column {
		var out []Column
		for _, q := range []struct {
			name string
			get  func(*Dist) float64
		}{
			{"mean", func(d *Dist) float64 { return d.Mean }}, {"p50", func(d *Dist) float64 { return d.P50 }},
			{"p90", func(d *Dist) float64 { return d.P90 }}, {"p95", func(d *Dist) float64 { return d.P95 }},
			{"p99", func(d *Dist) float64 { return d.P99 }}, {"p99_9", func(d *Dist) float64 { return d.P999 }},
			{"max", func(d *Dist) float64 { return d.Max }},
		} {
			c := Column{Name: name + "_" + q.name + "_seconds", JSON: "summary." + json + "." + q.name, Unit: UnitSeconds, Merge: MergePooled,
				Num: func(c *CellResult) float64 {
					if d := f(&c.Summary); d.Count > 0 {
						return q.get(d)
					}
					return math.NaN()
				}}
			switch {
			case q.name == "p50" && md50 > 0:
				c = md(c, label+" p50", md50)
			case q.name == "p99" && md99 > 0:
				c = md(c, label+" p99", md99)
			}
			out = append(out, c)
		}
		return out
	}
	ci := func(figure string) []Column {
		get := func(hi bool) func(*CellResult) float64 {
			return func(c *CellResult) float64 {
				ci, ok := c.CI[figure]
				switch {
				case !ok:
					return math.NaN()
				case hi:
					return ci.Hi
				}
				return ci.Lo
			}
		}
		u := UnitSeconds
		if figure == "output_tokens_per_second" {
			u = UnitPerSecond
		}
		return []Column{
			{Name: figure + "_ci_lo", JSON: "ci." + figure + ".lo", Unit: u, Merge: MergeBootstrap, Num: get(false)},
			{Name: figure + "_ci_hi", JSON: "ci." + figure + ".hi", Unit: u, Merge: MergeBootstrap, Num: get(true)},
		}
	}

	cols := []Column{
		text("cell", "key", func(c *CellResult) string { return c.Key }),
		text("target", "target", func(c *CellResult) string { return c.Target }),
		text("load_kind", "load.kind", func(c *CellResult) string { return c.Load.Kind }),
		{Name: "load", JSON: "load.value", Unit: UnitNumber, Merge: MergeSame, Num: func(c *CellResult) float64 { return c.Load.Value }},
		text("shape", "shape", func(c *CellResult) string { return c.Shape }),
		{Name: "repeats", JSON: "repeats", Unit: UnitCount, Merge: MergeSame, Num: func(c *CellResult) float64 { return float64(len(c.Repeats)) }},
		// Three states: a cell none of whose repeats was checked
		// (stability: {enabled: false}, a replay too short) is "not
		// checked"; one the rule could not judge is "not judged", never
		// the red "unstable".
		worded(flagged(Column{Name: "stable", JSON: "stable", Unit: UnitBool, Merge: MergeRepeats, Num: func(c *CellResult) float64 {
			if c.Stable == nil {
				return math.NaN() // not checked: the word says it
			}
			return B2F(*c.Stable)
		}}, "unstable", false),
			func(c *CellResult) string {
				switch {
				case c.Stable == nil || !c.StabilityChecked():
					return NotChecked
				case c.Stability == StateNotJudged:
					return NotJudged
				}
				return ""
			}),
		// The client's verdict on its own schedule: a cell a repeat of
		// which had too few arrivals to judge, and none degraded, is
		// "not judged" rather than a false it was never shown to be.
		worded(flagged(Column{Name: "degraded", JSON: "degraded", Unit: UnitBool, Merge: MergeRepeats, Num: func(c *CellResult) float64 { return B2F(c.Degraded) }}, "client degraded", true),
			func(c *CellResult) string {
				if !c.Degraded && c.ClientNotJudged() {
					return NotJudged
				}
				return ""
			}),
		md(count("requests", MergeCounts, func(s *Stats) int { return s.Requests }), "requests", 1),
		md(count("successes", MergeCounts, func(s *Stats) int { return s.Successes }), "successes", 2),
		count("goodput", MergeCounts, func(s *Stats) int { return s.Goodput }),
		md(stat("goodput_ratio", UnitRatio, MergeCounts, func(s *Stats) float64 { return s.GoodputRatio }), "goodput", 5),
		stat("window_seconds", UnitSeconds, MergeCounts, func(s *Stats) float64 { return s.WindowSeconds }),
		md(stat("requests_per_second", UnitPerSecond, MergeCounts, func(s *Stats) float64 { return s.RequestsPerSecond }), "req/s", 3),
		md(stat("output_tokens_per_second", UnitPerSecond, MergeCounts, func(s *Stats) float64 { return s.OutputTokensPerSecond }), "output tokens/s", 4),
		stat("goodput_per_second", UnitPerSecond, MergeCounts, func(s *Stats) float64 { return s.GoodputPerSecond }),
	}
	cols = append(cols, dist("ttft", "ttft_seconds", "TTFT", func(s *Stats) *Dist { return &s.TTFT }, 6, 7)...)
	cols = append(cols, dist("tpot", "tpot_seconds", "TPOT", func(s *Stats) *Dist { return &s.TPOT }, 8, 9)...)
	cols = append(cols, dist("itl", "itl_seconds", "ITL", func(s *Stats) *Dist { return &s.ITL }, 0, 0)...)
	cols = append(cols, dist("e2e", "e2e_seconds", "E2E", func(s *Stats) *Dist { return &s.E2E }, 10, 11)...)
	// The schedule lag's p99 is written as is, 0 without values.
	cols = append(cols, Column{Name: "schedule_lag_p99_seconds", JSON: "summary.schedule_lag_seconds.p99", Unit: UnitSeconds, Merge: MergePooled,
		Num: func(c *CellResult) float64 { return c.Summary.ScheduleLag.P99 }})
	cols = append(cols, ci("output_tokens_per_second")...)
	cols = append(cols, ci("e2e_p99")...)
	// Added after the columns above, which keep their places.
	cols = append(cols, dist("ttfa", "ttfa_seconds", "TTFA", func(s *Stats) *Dist { return &s.TTFA }, 0, 0)...)
	cols = append(cols,
		count("reasoning_tokens", MergeCounts, func(s *Stats) int { return s.ReasoningTokens }),
		count("reasoning_requests", MergeCounts, func(s *Stats) int { return s.ReasoningRequests }),
		stat("offered_per_second", UnitPerSecond, MergeCounts, func(s *Stats) float64 { return s.OfferedPerSecond }),
		stat("sent_per_second", UnitPerSecond, MergeCounts, func(s *Stats) float64 { return s.SentPerSecond }),
		stat("dropped_per_second", UnitPerSecond, MergeCounts, func(s *Stats) float64 { return s.DroppedPerSecond }),
		flagged(flag("overloaded", func(s *Stats) bool { return s.Overloaded }), "overloaded", true),
		count("in_flight_at_end", MergeCounts, func(s *Stats) int { return s.InFlightAtEnd }),
		// Little's law: sent/s x the mean E2E of the pooled records.
		stat("in_flight_expected", UnitNumber, MergePooled, func(s *Stats) float64 { return s.InFlightExpected }),
		count("in_flight_at_start", MergeCounts, func(s *Stats) int { return s.InFlightAtStart }),
		flagged(flag("draining", func(s *Stats) bool { return s.Draining }), "draining", true),
		// The percentiles come from a reservoir sample of the requests
		// (more than max_samples_per_repeat); the counts stay exact.
		stat("sampled", UnitBool, MergePooled, func(s *Stats) float64 { return B2F(s.Sampled) }),
		// Requests answered 429 (rate limited), apart from the other
		// failures (summary.http_errors has every code of the set).
		Column{Name: "http_429", JSON: "summary.http_errors", Unit: UnitCount, Merge: MergeCounts,
			Num: func(c *CellResult) float64 { return float64(c.Summary.HTTPErrors["429"]) }},
		// The totals behind the throughputs (the result block's), and
		// input and output tokens together per second.
		count("input_tokens", MergeCounts, func(s *Stats) int { return s.InputTokens }),
		stat("output_tokens", UnitNumber, MergeCounts, func(s *Stats) float64 { return s.OutputTokens }),
		stat("total_tokens_per_second", UnitPerSecond, MergeCounts, func(s *Stats) float64 { return s.TotalTokensPerSecond }),
		// The output tokens of the requests that met the SLO, and the
		// energy and cost per output token (summary.efficiency; empty
		// without a GPU read or a price).
		stat("good_output_tokens", UnitNumber, MergeCounts, func(s *Stats) float64 { return s.GoodOutputTokens }),
		Column{Name: "energy_source", JSON: "summary.efficiency.source", Unit: UnitText, Merge: MergeEnergy,
			Text: func(c *CellResult) string {
				if e := c.Summary.Efficiency; e != nil {
					return e.Source
				}
				return ""
			}},
		efficiency("energy_joules", func(e *Efficiency) Num { return e.EnergyJoules }),
		efficiency("joules_per_output_token", func(e *Efficiency) Num { return e.JoulesPerOutputToken }),
		efficiency("joules_per_good_output_token", func(e *Efficiency) Num { return e.JoulesPerGoodOutputToken }),
		efficiency("cost_per_million_output_tokens_usd", func(e *Efficiency) Num { return e.CostPerMillionOutputTokens }),
		efficiency("cost_per_million_good_output_tokens_usd", func(e *Efficiency) Num { return e.CostPerMillionGoodOutputTokens }),
		// The answers' validity, for a shape with a response format or
		// tools: the share judged valid, pooled over the repeats.
		validity("structured_valid_ratio", "summary.structured_checks", func(s *Stats) map[string]int { return s.StructuredChecks }),
		validity("tool_call_valid_ratio", "summary.tool_call_checks", func(s *Stats) map[string]int { return s.ToolCallChecks }),
		// The success ratio bench.min_success holds every cell to, pooled
		// over the repeats (beside goodput_ratio, which the SLO also
		// judges), and whether the cell fell below it: its target then
		// ranks below every target without such a cell.
		Column{Name: "success_ratio", JSON: "repeats", Unit: UnitRatio, Merge: MergeCounts, Num: SuccessRatio},
		flagged(Column{Name: "below_min_success", JSON: "below_min_success", Unit: UnitBool, Merge: MergeCounts,
			Num: func(c *CellResult) float64 { return B2F(c.BelowMinSuccess) }}, "below min_success", true),
		// The requests whose usage count could not be true, counted by
		// their events instead: a server that lies about its tokens.
		flagged(count("usage_not_believed", MergeCounts, func(s *Stats) int { return s.UsageNotBelieved }), "usage not believed", true),
	)
	return cols
}()

// CSVHeader is the CSV report's header: one row per cell, the medians over
// repeats; latencies in seconds.
var CSVHeader = func() []string {
	h := make([]string, len(Columns))
	for i, c := range Columns {
		h[i] = c.Name
	}
	return h
}()

// notChecked is the word of a figure that was not judged.
const NotChecked = "not checked"

// NotJudged is the word of a cell the stability rule could not judge (too
// few requests for the drift it must catch).
const NotJudged = "not judged"

// wordOf is the column's word for the cell ("" when it has none).
func (c *Column) WordOf(cell *CellResult) string {
	if c.Word == nil {
		return ""
	}
	return c.Word(cell)
}

// csv is the column's value in the CSV report: as JSON writes a number,
// empty when the cell has none.
func (c *Column) CSV(cell *CellResult) string {
	if w := c.WordOf(cell); w != "" {
		return w
	}
	if c.Unit == UnitText {
		return c.Text(cell)
	}
	v := c.Num(cell)
	switch {
	case math.IsNaN(v):
		return ""
	case c.Unit == UnitCount:
		return strconv.Itoa(int(v))
	case c.Unit == UnitBool:
		return strconv.FormatBool(v != 0)
	}
	return FormatFloat(v)
}

// markdown is the column's value in the Markdown cells table.
func (c *Column) Markdown(cell *CellResult) string {
	if w := c.WordOf(cell); w != "" {
		return w
	}
	if c.Unit == UnitText {
		return MarkdownCell(c.Text(cell))
	}
	v := c.Num(cell)
	switch c.Unit {
	case UnitCount:
		return strconv.Itoa(int(v))
	case UnitBool:
		return strconv.FormatBool(v != 0)
	case UnitSeconds:
		return MarkdownMillis(v)
	case UnitPerSecond:
		return MarkdownRate(v)
	case UnitRatio:
		return MarkdownRatio(v)
	}
	return FormatNumber(v)
}

// mdColumns are the columns of the Markdown cells table, in its order.
var MDColumns = func() []*Column {
	var out []*Column
	for i := range Columns {
		if c := &Columns[i]; c.MD != "" {
			out = append(out, c)
		}
	}
	// TestColumnsComplete: the positions are 1..n, each once.
	slices.SortStableFunc(out, func(a, b *Column) int { return a.MDAt - b.MDAt })
	return out
}()

// cellFlag is one thing the flags say of a cell: a flag set (Raised: a
// warning), or a column's word ("stable: not checked").
type CellFlag struct {
	Text   string
	Raised bool
}

// cellFlags is what the Markdown table's flags column and the HTML
// report's cell headings say of a cell: whether it is partial or stopped
// early, then the columns' flags in their order.
func CellFlags(cell *CellResult) []CellFlag {
	var flags []CellFlag
	if cell.Partial {
		// First: every figure after it is over a cut-short repeat.
		flags = append(flags, CellFlag{Text: "PARTIAL (interrupted)", Raised: true})
	}
	if slices.ContainsFunc(cell.Repeats, func(r RepeatResult) bool { return r.StoppedEarly != "" }) {
		// Its figures are over the few requests it sent.
		flags = append(flags, CellFlag{Text: "stopped early", Raised: true})
	}
	for i := range Columns {
		c := &Columns[i]
		if w := c.WordOf(cell); w != "" {
			flags = append(flags, CellFlag{Text: c.Name + ": " + w})
			continue
		}
		if c.Flag != "" && (c.Num(cell) != 0) == c.FlagIf {
			flags = append(flags, CellFlag{Text: c.Flag, Raised: true})
		}
	}
	return flags
}

// mdFlags is the texts of cellFlags.
func MDFlags(cell *CellResult) []string {
	var out []string
	for _, f := range CellFlags(cell) {
		out = append(out, f.Text)
	}
	return out
}

func B2F(b bool) float64 {
	if b {
		return 1
	}
	return 0
}

// ColumnNamed is the column of that name; a name of the block that is no
// column is a programming error, caught by every test that prints one.
func ColumnNamed(name string) *Column {
	for i := range Columns {
		if Columns[i].Name == name {
			return &Columns[i]
		}
	}
	panic("bench: no column " + name)
}

// ResultValid is the validity result of a valid answer in
// Stats.StructuredChecks and ToolCallChecks: observation.Valid, spelled
// here so that the schema stays a leaf (TestValidityCountsThroughShards
// checks they agree).
const ResultValid = "valid"

// ValidRatio is the share of a cell's checked answers that were valid,
// pooled over its repeats: counts(stats) are one check's results by name
// (Stats.StructuredChecks or ToolCallChecks). NaN when none was checked.
func ValidRatio(c *CellResult, counts func(*Stats) map[string]int) float64 {
	var valid, all int
	for i := range c.Repeats {
		for r, n := range counts(&c.Repeats[i].Stats) {
			all += n
			if r == ResultValid {
				valid += n
			}
		}
	}
	if all == 0 {
		return math.NaN()
	}
	return float64(valid) / float64(all)
}
