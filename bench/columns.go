package bench

import (
	"math"
	"slices"
	"strconv"

	"github.com/infer-exporter/infer_exporter/bench/report"
)

// The report's schema: one Record per request (record.go), one Stats per
// repeat and per cell (CellResult.Summary, the medians over its repeats),
// and columns, the cell's figures in the order of the CSV report. The CSV
// header and rows, the Markdown cells table and the merge rule of every
// figure come from columns; a new column is one entry (and its test, see
// CONTRIBUTING.md, "Adding a report column").

// unit says what a column holds and so how each output writes it.
type unit int

const (
	_ unit = iota
	// unitText is a name (the cell, its target, shape, load kind).
	unitText
	// unitCount is an integer count.
	unitCount
	// unitBool is a flag: true or false.
	unitBool
	// unitNumber is a plain figure (the load, in-flight requests).
	unitNumber
	// unitSeconds is a duration in seconds (Markdown shows milliseconds).
	unitSeconds
	// unitPerSecond is a rate per second of the measured windows.
	unitPerSecond
	// unitRatio is a ratio in [0, 1].
	unitRatio
)

// mergeRule says how `bench merge` obtains a column from the shards'
// reports; TestColumnsMergeAsOneProcess holds every column to it.
type mergeRule int

const (
	_ mergeRule = iota
	// mergeSame: the cell's identity, the same in every shard
	// (validateShards checks it), taken from shard 0.
	mergeSame
	// mergeCounts: recomputed by finish from the shards' exact counts and
	// per-window sums (RecorderState), added up: exactly one process's.
	mergeCounts
	// mergePooled: recomputed from the shards' request records and
	// inter-token gaps, pooled (mergeStates): one process's, to rounding,
	// while no shard sampled them (a reservoir of the same fraction of
	// every shard's beyond).
	mergePooled
	// mergeRepeats: from the repeats' merged results (their stability,
	// the worst shard's scheduling latency), as assembleCells judges a
	// single process's: one process's verdict on the same figures.
	mergeRepeats
	// mergeBootstrap: the bootstrap interval, recomputed over the pooled
	// records: an interval of the same figure, from other draws than one
	// process's (the records are pooled shard by shard).
	mergeBootstrap
)

// column is one figure of a cell.
type column struct {
	// name is the CSV header; json the report.json field it shows, from the
	// cell (summary.<field>, or a CellResult field).
	name, json string
	unit       unit
	// text gives a unitText column's value; num every other one's (a count
	// or a flag as a number), NaN when the cell has none (an empty CSV
	// field, "–" in Markdown).
	text func(*CellResult) string
	num  func(*CellResult) float64
	// merge is how the shard merge obtains it.
	merge mergeRule
	// md, when set, is the column's header in the Markdown cells table, at
	// position mdAt (1-based; the cell's key is column 0).
	md   string
	mdAt int
	// flag, when set, is what the Markdown table's flags column says when
	// the (unitBool) column's value is flagIf.
	flag   string
	flagIf bool
	// word, when set and it says something of a cell, is written in place
	// of the value by every output (CSV, Markdown, HTML, the console), and
	// as "<name>: <word>" in the flags: a figure that was not judged says
	// so rather than show a value it never had.
	word func(*CellResult) string
}

// columns are the cell's figures, in the CSV report's order. A column is
// appended at the end: the existing ones keep their places for scripts
// that read them by position.
var columns = func() []column {
	text := func(name, json string, f func(*CellResult) string) column {
		return column{name: name, json: json, unit: unitText, text: f, merge: mergeSame}
	}
	stat := func(name string, u unit, merge mergeRule, f func(*Stats) float64) column {
		return column{name: name, json: "summary." + name, unit: u, merge: merge, num: func(c *CellResult) float64 { return f(&c.Summary) }}
	}
	count := func(name string, merge mergeRule, f func(*Stats) int) column {
		return stat(name, unitCount, merge, func(s *Stats) float64 { return float64(f(s)) })
	}
	flag := func(name string, f func(*Stats) bool) column {
		return stat(name, unitBool, mergeCounts, func(s *Stats) float64 { return b2f(f(s)) })
	}
	md := func(c column, header string, at int) column {
		c.md, c.mdAt = header, at
		return c
	}
	flagged := func(c column, flag string, when bool) column {
		c.flag, c.flagIf = flag, when
		return c
	}
	worded := func(c column, word func(*CellResult) string) column {
		c.word = word
		return c
	}
	// dist is the columns of one latency distribution, <name>_<q>_seconds;
	// Markdown shows its p50 and p99 at md50 and md99 when set.
	dist := func(name, json, label string, f func(*Stats) *Dist, md50, md99 int) []column {
		var out []column
		for _, q := range []struct {
			name string
			get  func(*Dist) float64
		}{
			{"mean", func(d *Dist) float64 { return d.Mean }}, {"p50", func(d *Dist) float64 { return d.P50 }},
			{"p90", func(d *Dist) float64 { return d.P90 }}, {"p95", func(d *Dist) float64 { return d.P95 }},
			{"p99", func(d *Dist) float64 { return d.P99 }}, {"p99_9", func(d *Dist) float64 { return d.P999 }},
			{"max", func(d *Dist) float64 { return d.Max }},
		} {
			c := column{name: name + "_" + q.name + "_seconds", json: "summary." + json + "." + q.name, unit: unitSeconds, merge: mergePooled,
				num: func(c *CellResult) float64 {
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
	ci := func(figure string) []column {
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
		u := unitSeconds
		if figure == "output_tokens_per_second" {
			u = unitPerSecond
		}
		return []column{
			{name: figure + "_ci_lo", json: "ci." + figure + ".lo", unit: u, merge: mergeBootstrap, num: get(false)},
			{name: figure + "_ci_hi", json: "ci." + figure + ".hi", unit: u, merge: mergeBootstrap, num: get(true)},
		}
	}

	cols := []column{
		text("cell", "key", func(c *CellResult) string { return c.Key }),
		text("target", "target", func(c *CellResult) string { return c.Target }),
		text("load_kind", "load.kind", func(c *CellResult) string { return c.Load.Kind }),
		{name: "load", json: "load.value", unit: unitNumber, merge: mergeSame, num: func(c *CellResult) float64 { return c.Load.Value }},
		text("shape", "shape", func(c *CellResult) string { return c.Shape }),
		{name: "repeats", json: "repeats", unit: unitCount, merge: mergeSame, num: func(c *CellResult) float64 { return float64(len(c.Repeats)) }},
		// A cell none of whose repeats was judged (stability: {enabled:
		// false}, a replay too short) is not stable: it is not checked.
		worded(flagged(column{name: "stable", json: "stable", unit: unitBool, merge: mergeRepeats, num: func(c *CellResult) float64 { return b2f(c.Stable) }}, "unstable", false),
			func(c *CellResult) string {
				if !c.StabilityChecked() {
					return notChecked
				}
				return ""
			}),
		flagged(column{name: "degraded", json: "degraded", unit: unitBool, merge: mergeRepeats, num: func(c *CellResult) float64 { return b2f(c.Degraded) }}, "client degraded", true),
		md(count("requests", mergeCounts, func(s *Stats) int { return s.Requests }), "requests", 1),
		md(count("successes", mergeCounts, func(s *Stats) int { return s.Successes }), "successes", 2),
		count("goodput", mergeCounts, func(s *Stats) int { return s.Goodput }),
		md(stat("goodput_ratio", unitRatio, mergeCounts, func(s *Stats) float64 { return s.GoodputRatio }), "goodput", 5),
		stat("window_seconds", unitSeconds, mergeCounts, func(s *Stats) float64 { return s.WindowSeconds }),
		md(stat("requests_per_second", unitPerSecond, mergeCounts, func(s *Stats) float64 { return s.RequestsPerSecond }), "req/s", 3),
		md(stat("output_tokens_per_second", unitPerSecond, mergeCounts, func(s *Stats) float64 { return s.OutputTokensPerSecond }), "output tokens/s", 4),
		stat("goodput_per_second", unitPerSecond, mergeCounts, func(s *Stats) float64 { return s.GoodputPerSecond }),
	}
	cols = append(cols, dist("ttft", "ttft_seconds", "TTFT", func(s *Stats) *Dist { return &s.TTFT }, 6, 7)...)
	cols = append(cols, dist("tpot", "tpot_seconds", "TPOT", func(s *Stats) *Dist { return &s.TPOT }, 8, 9)...)
	cols = append(cols, dist("itl", "itl_seconds", "ITL", func(s *Stats) *Dist { return &s.ITL }, 0, 0)...)
	cols = append(cols, dist("e2e", "e2e_seconds", "E2E", func(s *Stats) *Dist { return &s.E2E }, 10, 11)...)
	// The schedule lag's p99 is written as is, 0 without values.
	cols = append(cols, column{name: "schedule_lag_p99_seconds", json: "summary.schedule_lag_seconds.p99", unit: unitSeconds, merge: mergePooled,
		num: func(c *CellResult) float64 { return c.Summary.ScheduleLag.P99 }})
	cols = append(cols, ci("output_tokens_per_second")...)
	cols = append(cols, ci("e2e_p99")...)
	// Added after the columns above, which keep their places.
	cols = append(cols, dist("ttfa", "ttfa_seconds", "TTFA", func(s *Stats) *Dist { return &s.TTFA }, 0, 0)...)
	cols = append(cols,
		count("reasoning_tokens", mergeCounts, func(s *Stats) int { return s.ReasoningTokens }),
		count("reasoning_requests", mergeCounts, func(s *Stats) int { return s.ReasoningRequests }),
		stat("offered_per_second", unitPerSecond, mergeCounts, func(s *Stats) float64 { return s.OfferedPerSecond }),
		stat("sent_per_second", unitPerSecond, mergeCounts, func(s *Stats) float64 { return s.SentPerSecond }),
		stat("dropped_per_second", unitPerSecond, mergeCounts, func(s *Stats) float64 { return s.DroppedPerSecond }),
		flagged(flag("overloaded", func(s *Stats) bool { return s.Overloaded }), "overloaded", true),
		count("in_flight_at_end", mergeCounts, func(s *Stats) int { return s.InFlightAtEnd }),
		// Little's law: sent/s x the mean E2E of the pooled records.
		stat("in_flight_expected", unitNumber, mergePooled, func(s *Stats) float64 { return s.InFlightExpected }),
		count("in_flight_at_start", mergeCounts, func(s *Stats) int { return s.InFlightAtStart }),
		flagged(flag("draining", func(s *Stats) bool { return s.Draining }), "draining", true),
		// The percentiles come from a reservoir sample of the requests
		// (more than max_samples_per_repeat); the counts stay exact.
		stat("sampled", unitBool, mergePooled, func(s *Stats) float64 { return b2f(s.Sampled) }),
		// Requests answered 429 (rate limited), apart from the other
		// failures (summary.http_errors has every code of the set).
		column{name: "http_429", json: "summary.http_errors", unit: unitCount, merge: mergeCounts,
			num: func(c *CellResult) float64 { return float64(c.Summary.HTTPErrors["429"]) }},
		// The totals behind the throughputs (the result block's), and
		// input and output tokens together per second.
		count("input_tokens", mergeCounts, func(s *Stats) int { return s.InputTokens }),
		stat("output_tokens", unitNumber, mergeCounts, func(s *Stats) float64 { return s.OutputTokens }),
		stat("total_tokens_per_second", unitPerSecond, mergeCounts, func(s *Stats) float64 { return s.TotalTokensPerSecond }),
	)
	return cols
}()

// CSVHeader is the CSV report's header: one row per cell, the medians over
// repeats; latencies in seconds.
var CSVHeader = func() []string {
	h := make([]string, len(columns))
	for i, c := range columns {
		h[i] = c.name
	}
	return h
}()

// notChecked is the word of a figure that was not judged.
const notChecked = "not checked"

// wordOf is the column's word for the cell ("" when it has none).
func (c *column) wordOf(cell *CellResult) string {
	if c.word == nil {
		return ""
	}
	return c.word(cell)
}

// csv is the column's value in the CSV report: as JSON writes a number,
// empty when the cell has none.
func (c *column) csv(cell *CellResult) string {
	if w := c.wordOf(cell); w != "" {
		return w
	}
	if c.unit == unitText {
		return c.text(cell)
	}
	v := c.num(cell)
	switch {
	case math.IsNaN(v):
		return ""
	case c.unit == unitCount:
		return strconv.Itoa(int(v))
	case c.unit == unitBool:
		return strconv.FormatBool(v != 0)
	}
	return fmtF(v)
}

// markdown is the column's value in the Markdown cells table.
func (c *column) markdown(cell *CellResult) string {
	if w := c.wordOf(cell); w != "" {
		return w
	}
	if c.unit == unitText {
		return mdCell(c.text(cell))
	}
	v := c.num(cell)
	switch c.unit {
	case unitCount:
		return strconv.Itoa(int(v))
	case unitBool:
		return strconv.FormatBool(v != 0)
	case unitSeconds:
		return mdMillis(v)
	case unitPerSecond:
		return mdRate(v)
	case unitRatio:
		return mdRatio(v)
	}
	return report.FormatNumber(v)
}

// mdColumns are the columns of the Markdown cells table, in its order.
var mdColumns = func() []*column {
	var out []*column
	for i := range columns {
		if c := &columns[i]; c.md != "" {
			out = append(out, c)
		}
	}
	// TestColumnsComplete: the positions are 1..n, each once.
	slices.SortStableFunc(out, func(a, b *column) int { return a.mdAt - b.mdAt })
	return out
}()

// cellFlag is one thing the flags say of a cell: a flag set (Raised: a
// warning), or a column's word ("stable: not checked").
type cellFlag struct {
	Text   string
	Raised bool
}

// cellFlags is what the Markdown table's flags column, the HTML report's
// cell headings and the console's result blocks say of a cell, in the
// columns' order.
func cellFlags(cell *CellResult) []cellFlag {
	var flags []cellFlag
	for i := range columns {
		c := &columns[i]
		if w := c.wordOf(cell); w != "" {
			flags = append(flags, cellFlag{Text: c.name + ": " + w})
			continue
		}
		if c.flag != "" && (c.num(cell) != 0) == c.flagIf {
			flags = append(flags, cellFlag{Text: c.flag, Raised: true})
		}
	}
	return flags
}

// mdFlags is the texts of cellFlags.
func mdFlags(cell *CellResult) []string {
	var out []string
	for _, f := range cellFlags(cell) {
		out = append(out, f.Text)
	}
	return out
}

func b2f(b bool) float64 {
	if b {
		return 1
	}
	return 0
}
