package bench

import (
	"encoding/csv"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"math"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strconv"
	"time"
)

// Schema names the JSON report's format.
const Schema = "infer_exporter/bench/v1"

// Report is everything a bench run measured: the JSON report is this value.
type Report struct {
	Schema      string          `json:"schema"`
	Environment Environment     `json:"environment"`
	Cells       []CellResult    `json:"cells"`
	Sweeps      []SweepResult   `json:"sweeps,omitempty"`
	Accuracy    []AccuracyCheck `json:"accuracy,omitempty"`
	// Perplexity is every target's perplexity over the reference text,
	// with bench.perplexity (quality.go).
	Perplexity []PerplexityResult `json:"perplexity,omitempty"`
	Ranking    RankingResult      `json:"ranking"`
	GPU        GPUReport          `json:"gpu"`
	// RequestRecords, with --output.requests, says where every request's
	// record went.
	RequestRecords *RequestRecords `json:"request_records,omitempty"`
	// Timeline holds when each repeat ran, in seconds since the start.
	Timeline []Span      `json:"timeline"`
	Baseline *Comparison `json:"baseline,omitempty"`
	// ColdStart is the cold-start step's result, when the run had one.
	ColdStart *ColdStartReport `json:"cold_start,omitempty"`
	// Shard, in the report of one shard of a split run (`bench --shard`),
	// holds what `bench merge` needs; MergedShards, in a merged report,
	// says how many shards it combines.
	Shard        *ShardPart `json:"shard,omitempty"`
	MergedShards int        `json:"merged_shards,omitempty"`
	// Interrupted says the run was stopped (SIGINT, SIGTERM) before its
	// end: the report holds the cells that finished, every repeat of
	// them, and nothing of the cell that was running.
	Interrupted bool `json:"interrupted,omitempty"`
}

// Environment records what the numbers were measured on.
type Environment struct {
	ExporterVersion  string `json:"exporter_version"`
	ExporterRevision string `json:"exporter_revision"`
	GoVersion        string `json:"go_version"`
	OS               string `json:"os"`
	Arch             string `json:"arch"`
	CPUs             int    `json:"cpus"`
	// Started and Finished are RFC 3339 instants in UTC.
	Started  time.Time `json:"started"`
	Finished time.Time `json:"finished"`
	// Inputs is the audit chain: the exporter binary, the configuration
	// file, every trace and every prompt set, each with its SHA-256
	// (`infer_exporter bench verify report.json` checks them again).
	Inputs     []Input `json:"inputs"`
	ConfigFile string  `json:"config_file"`
	// ConfigSHA256 is the SHA-256 of the configuration file's bytes; Config
	// is the configuration with defaults applied (header values hidden).
	ConfigSHA256 string `json:"config_sha256"`
	Config       string `json:"config"`
	// PromptSetSHA256 is the prompt set's hash (see PromptSet): equal
	// hashes mean byte-identical prompts in the same order.
	PromptSetSHA256  string          `json:"prompt_set_sha256,omitempty"`
	PromptSetSize    int             `json:"prompt_set_size,omitempty"`
	PromptSets       []PromptSetInfo `json:"prompt_sets,omitempty"`
	Traces           []TraceInfo     `json:"traces,omitempty"`
	Seed             int64           `json:"seed"`
	Targets          []TargetInfo    `json:"targets"`
	GPUs             []GPUDevice     `json:"gpus,omitempty"`
	GPUNote          string          `json:"gpu_note,omitempty"`
	Covariates       []Covariate     `json:"covariates,omitempty"`
	MaxSamplesRepeat int             `json:"max_samples_per_repeat"`
}

// TraceInfo describes a replayed trace.
type TraceInfo struct {
	Name    string `json:"name"`
	Source  string `json:"source"`
	Path    string `json:"path"`
	Records int    `json:"records"`
	Skipped int    `json:"skipped"`
}

// Load is one point of the load axis.
type Load struct {
	// Kind is "rate" (open loop, Value requests per second),
	// "concurrency" (closed loop, Value clients) or "replay" (a trace,
	// Value its speed factor).
	Kind  string  `json:"kind"`
	Value float64 `json:"value"`
}

// Load kinds.
const (
	LoadRate        = "rate"
	LoadConcurrency = "concurrency"
	// LoadReplay is a replayed trace; Value is its speed factor.
	LoadReplay = "replay"
)

func (l Load) String() string {
	return l.Kind + "=" + strconv.FormatFloat(l.Value, 'g', -1, 64)
}

// Label is the load for people: "4 req/s" or "8 clients".
func (l Load) Label() string {
	v := strconv.FormatFloat(l.Value, 'g', -1, 64)
	switch l.Kind {
	case LoadConcurrency:
		return v + " clients"
	case LoadReplay:
		return "replay ×" + v
	}
	return v + " req/s"
}

// CellKey names a cell: target/load/shape, e.g. "vllm-a/rate=4/in128-out32".
func CellKey(target string, l Load, shape string) string {
	return target + "/" + l.String() + "/" + shape
}

// CellResult is one target at one load and shape, over its repeats.
type CellResult struct {
	Key    string `json:"key"`
	Target string `json:"target"`
	Load   Load   `json:"load"`
	Shape  string `json:"shape"`
	// Summary holds, for every figure, the median over the repeats.
	Summary Stats `json:"summary"`
	// CI holds bootstrap intervals of the summary's figures (FigureNames),
	// at the ranking's confidence, from resampling each repeat's requests.
	CI map[string]Interval `json:"ci"`
	// Stable is false when any repeat's windows never agreed.
	Stable bool `json:"stable"`
	// Degraded is true when, in any repeat, the schedule lag p99 or the
	// process's goroutine scheduling latency p99 exceeded 10 ms (as the
	// exporter's infer_probe_measurement_degraded): the client fell behind
	// or was CPU-saturated, and its latencies include its own delay.
	Degraded bool           `json:"degraded"`
	Repeats  []RepeatResult `json:"repeats"`
}

// StabilityChecked reports whether any repeat's stability was judged: a
// cell none of whose repeats was (stability: {enabled: false}, a replay
// too short to judge) is Stable by default, which says nothing.
func (c *CellResult) StabilityChecked() bool {
	for i := range c.Repeats {
		if c.Repeats[i].Stability.Checked {
			return true
		}
	}
	return false
}

// Stats are one repeat's figures (or their medians over repeats).
// Latencies are in seconds.
type Stats struct {
	// Requests measured (scheduled after the warm-up), by outcome.
	Requests  int            `json:"requests"`
	Outcomes  map[string]int `json:"outcomes"`
	Successes int            `json:"successes"`
	// HTTPErrors counts the measured requests answered with a non-2xx
	// status (outcomes http_4xx and http_5xx) by code, on the bounded set
	// observation.StatusCodes (400 ... 504, other); absent without any.
	HTTPErrors map[string]int `json:"http_errors,omitempty"`
	// Goodput: measured requests that succeeded and met every SLO
	// threshold; GoodputRatio is Goodput / Requests.
	Goodput               int     `json:"goodput"`
	GoodputRatio          float64 `json:"goodput_ratio"`
	WindowSeconds         float64 `json:"window_seconds"`
	RequestsPerSecond     float64 `json:"requests_per_second"`
	OutputTokensPerSecond float64 `json:"output_tokens_per_second"`
	GoodputPerSecond      float64 `json:"goodput_per_second"`
	// The token totals behind the throughputs, by the same rules, so that
	// a total over WindowSeconds is its rate: OutputTokens are the output
	// tokens delivered within the windows (OutputTokensPerSecond's
	// numerator, weighted per content event, so not always whole);
	// InputTokens the prompt tokens, as the server's usage counted them (0
	// where it reports none), of the successful requests that ended within
	// the windows (RequestsPerSecond's); TotalTokensPerSecond is their sum
	// over the windows' length.
	InputTokens          int     `json:"input_tokens"`
	OutputTokens         float64 `json:"output_tokens"`
	TotalTokensPerSecond float64 `json:"total_tokens_per_second"`
	// The load side by side over the same windows: arrivals the schedule
	// offered, those sent and those dropped (by the in-flight cap or the
	// rate ceiling), per second, beside the completions of
	// RequestsPerSecond. Overloaded says the server fell behind: it
	// completed under 90% of what was sent, so requests piled up in
	// flight (Little's law, in-flight = rate x E2E, no longer held), and
	// OverloadNote says by how much.
	OfferedPerSecond float64 `json:"offered_per_second"`
	SentPerSecond    float64 `json:"sent_per_second"`
	DroppedPerSecond float64 `json:"dropped_per_second"`
	// InFlightAtEnd is the number of requests sent (warm-up included) and
	// not yet ended at the end of the measured windows; InFlightExpected
	// is Little's law's count for the figures measured, sent/s x mean E2E
	// of the measured successes. Far more in flight than expected is a
	// queue growing.
	// InFlightAtStart is the same count at the start of the windows.
	// Draining says the opposite of Overloaded: over 110% of what was
	// sent completed in the windows, because they began with a backlog
	// from the warm-up (a server slow at first, a warm-up too short), so
	// the rates overstate the steady state; DrainingNote says by how much.
	InFlightAtEnd    int     `json:"in_flight_at_end"`
	InFlightExpected float64 `json:"in_flight_expected"`
	InFlightAtStart  int     `json:"in_flight_at_start"`
	Overloaded       bool    `json:"overloaded"`
	OverloadNote     string  `json:"overload_note,omitempty"`
	Draining         bool    `json:"draining"`
	DrainingNote     string  `json:"draining_note,omitempty"`
	TTFT             Dist    `json:"ttft_seconds"`
	TTFA             Dist    `json:"ttfa_seconds"` // to the first answer token, after any reasoning (TTFT's for a model that does not reason)
	TPOT             Dist    `json:"tpot_seconds"`
	ITL              Dist    `json:"itl_seconds"`
	E2E              Dist    `json:"e2e_seconds"`
	ScheduleLag      Dist    `json:"schedule_lag_seconds"`
	// Sampled is true when the percentiles come from a reservoir sample
	// (more requests than max_samples_per_repeat); counts stay exact.
	Sampled bool `json:"sampled"`
	// ReasoningTokens are the reasoning tokens of the measured successful
	// requests (the server's usage count, else reasoning-only content
	// events), among their output tokens; ReasoningRequests of those
	// requests reasoned. Both are 0 for a model that does not reason.
	ReasoningTokens   int `json:"reasoning_tokens"`
	ReasoningRequests int `json:"reasoning_requests"`
}

// Figure returns a figure of FigureNames by name, or a TTFA quantile
// (ttfa_p50, ttfa_p90, ttfa_p99), which has no interval; NaN for others.
func (s *Stats) Figure(name string) float64 {
	d := map[string]*Dist{"ttft": &s.TTFT, "ttfa": &s.TTFA, "tpot": &s.TPOT, "e2e": &s.E2E, "itl": &s.ITL}
	switch name {
	case "output_tokens_per_second":
		return s.OutputTokensPerSecond
	case "goodput_ratio":
		return s.GoodputRatio
	}
	if len(name) > 4 {
		for prefix, dist := range d {
			if name[:len(prefix)] == prefix && name[len(prefix)] == '_' {
				if dist.Count == 0 {
					return math.NaN()
				}
				switch name[len(prefix)+1:] {
				case "p50":
					return dist.P50
				case "p90":
					return dist.P90
				case "p99":
					return dist.P99
				}
			}
		}
	}
	return math.NaN()
}

// RepeatResult is one repeat of a cell.
type RepeatResult struct {
	Index     int             `json:"index"`
	Started   time.Time       `json:"started"`
	Stats     Stats           `json:"stats"`
	Stability StabilityResult `json:"stability"`
	// PromptsDrawn counts prompts taken from the set, warm-up included.
	PromptsDrawn int `json:"prompts_drawn"`
	// SchedulingLatencyP99 is the process's goroutine scheduling latency
	// p99 at the end of the repeat, over the last max(warmup + duration,
	// 5 s), in seconds (runtime/metrics bucket bounds).
	SchedulingLatencyP99 float64 `json:"scheduling_latency_p99_seconds"`
	// WarmupSeconds is the warm-up actually used: the configured one, or
	// longer, until the pipeline was full; WarmupNote says when it was
	// extended or cut short, or when the windows were too short.
	WarmupSeconds float64 `json:"warmup_seconds"`
	WarmupNote    string  `json:"warmup_note,omitempty"`
	// Replay is what a replay repeat did with its trace; nil for other
	// loads.
	Replay *ReplayResult `json:"replay,omitempty"`
	// Distribution is the repeat's TTFT, TPOT and E2E quantiles at 1%
	// steps, for the report's CDF charts; Windows its measured windows over
	// time. Both are absent from reports written before them.
	Distribution *Distribution  `json:"distribution,omitempty"`
	Windows      *RepeatWindows `json:"windows,omitempty"`
	// state is the repeat's recorder, kept for a shard report.
	state *RecorderState
}

// StabilityResult says whether a repeat's windows agreed.
type StabilityResult struct {
	Checked       bool    `json:"checked"`
	Stable        bool    `json:"stable"`
	WindowSeconds float64 `json:"window_seconds"`
	// Windows measured, Extended of them added by the check.
	Windows  int `json:"windows"`
	Extended int `json:"extended"`
	// Medians are each window's median E2E; Spread the last check's
	// max/min - 1 of the compared windows.
	Medians []Num  `json:"window_e2e_medians"`
	Spread  Num    `json:"spread"`
	Note    string `json:"note,omitempty"`
}

// Span is when one repeat ran, in seconds since the run started.
type Span struct {
	Target string  `json:"target"`
	Cell   string  `json:"cell"`
	Repeat int     `json:"repeat"`
	Start  float64 `json:"start"`
	End    float64 `json:"end"`
}

// SweepResult is the rate sweep of one target and shape.
type SweepResult struct {
	Target string `json:"target"`
	Shape  string `json:"shape"`
	// Rule is the pass rule, e.g. "goodput >= 0.95" or "success >= 0.999".
	Rule string `json:"rule"`
	// MaxRate is the highest rate tried that passed (0: none did);
	// GoodputPerSecond and SuccessRatio were measured there.
	MaxRate          float64 `json:"max_rate"`
	GoodputPerSecond float64 `json:"goodput_per_second"`
	SuccessRatio     float64 `json:"success_ratio"`
	// FirstFailingRate is the lowest rate tried that failed (0: none did).
	FirstFailingRate float64      `json:"first_failing_rate"`
	Points           []SweepPoint `json:"points"`
	Note             string       `json:"note,omitempty"`
}

// SweepPoint is one rate of a sweep.
// RequestRecords says where the run's per-request records went
// (--output.requests) and how many: Written, and LeftOut beyond the bound.
type RequestRecords struct {
	Path    string `json:"path"`
	Written int    `json:"written"`
	LeftOut int    `json:"left_out"`
	Error   string `json:"error,omitempty"`
}

type SweepPoint struct {
	Rate                  float64 `json:"rate"`
	GoodputRatio          float64 `json:"goodput_ratio"`
	GoodputPerSecond      float64 `json:"goodput_per_second"`
	OutputTokensPerSecond float64 `json:"output_tokens_per_second"`
	E2EP99                Num     `json:"e2e_p99"`
	// Requests measured, and the share of them that succeeded (dropped
	// and failed ones count against it).
	Requests     int     `json:"requests"`
	SuccessRatio float64 `json:"success_ratio"`
	Pass         bool    `json:"pass"`
	// Overloaded and Degraded say that the point was not in steady state
	// (the cells' rules): a point whose queue grows, or whose client fell
	// behind, fails whatever its ratio, since its ratio holds only until
	// the backlog reaches the timeout. Note says why a point failed.
	Overloaded bool   `json:"overloaded,omitempty"`
	Degraded   bool   `json:"degraded,omitempty"`
	Note       string `json:"note,omitempty"`
}

// AccuracyCheck is the known-answer checks of one target.
type AccuracyCheck struct {
	Target string        `json:"target"`
	Passed int           `json:"passed"`
	Total  int           `json:"total"`
	Checks []CheckResult `json:"checks"`
}

// CheckResult is one known-answer check.
type CheckResult struct {
	Prompt string `json:"prompt"`
	Expect string `json:"expect"`
	Passed bool   `json:"passed"`
	Answer string `json:"answer"`
	Error  string `json:"error,omitempty"`
}

// Output file names in the output directory.
const (
	JSONFile = "report.json"
	CSVFile  = "report.csv"
	HTMLFile = "report.html"
)

// WriteFiles writes the JSON, CSV and HTML reports into dir, creating it.
func WriteFiles(dir string, r *Report) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	for _, f := range []struct {
		name  string
		write func(io.Writer, *Report) error
	}{{JSONFile, WriteJSON}, {CSVFile, WriteCSV}, {HTMLFile, WriteHTML}, {MarkdownFile, WriteMarkdown}} {
		if err := writeFile(filepath.Join(dir, f.name), func(w io.Writer) error { return f.write(w, r) }); err != nil {
			return fmt.Errorf("%s: %w", f.name, err)
		}
	}
	return writeColdStartFile(dir, r)
}

// writeFile writes through a temporary file and a rename, so a reader never
// sees half a report.
func writeFile(path string, write func(io.Writer) error) error {
	tmp, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".*")
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name())
	if err := write(tmp); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	if err := os.Chmod(tmp.Name(), 0o644); err != nil {
		return err
	}
	return os.Rename(tmp.Name(), path)
}

// WriteJSON writes the full report as indented JSON.
func WriteJSON(w io.Writer, r *Report) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(r)
}

// WriteCSV writes one row per cell, a field per column (columns.go).
func WriteCSV(w io.Writer, r *Report) error {
	cw := csv.NewWriter(w)
	if err := cw.Write(CSVHeader); err != nil {
		return err
	}
	row := make([]string, len(columns))
	for i := range r.Cells {
		for j := range columns {
			row[j] = columns[j].csv(&r.Cells[i])
		}
		if err := cw.Write(row); err != nil {
			return err
		}
	}
	cw.Flush()
	return cw.Error()
}

// fmtF writes a float exactly as JSON does (shortest round-trip form).
func fmtF(f float64) string { return strconv.FormatFloat(f, 'g', -1, 64) }

// medianStats is the figure-by-figure median of repeats' stats, field by
// field of Stats, by its type: a float64 is the median (0 when no repeat
// has one), an int the median rounded down; a Dist is the median of each
// of its figures over the repeats that have values (Count > 0); a bool is
// true when any repeat's is, a string (the note of a flag) the first
// repeat's that is set; Outcomes is each outcome's median count. A field
// of Stats needs nothing here (TestMedianStatsEveryField).
func medianStats(all []Stats) Stats {
	out := Stats{Outcomes: map[string]int{}}
	if len(all) == 0 {
		return out
	}
	col := func(f func(*Stats) float64) float64 {
		v := make([]float64, len(all))
		for i := range all {
			v[i] = f(&all[i])
		}
		m := median(v)
		if math.IsNaN(m) {
			return 0
		}
		return m
	}
	icol := func(f func(*Stats) int) int {
		return int(math.Floor(col(func(s *Stats) float64 { return float64(f(s)) })))
	}
	ov := reflect.ValueOf(&out).Elem()
	for i := 0; i < ov.NumField(); i++ {
		field := func(s *Stats) reflect.Value { return reflect.ValueOf(s).Elem().Field(i) }
		switch dst := ov.Field(i); dst.Interface().(type) {
		case float64:
			dst.SetFloat(col(func(s *Stats) float64 { return field(s).Float() }))
		case int:
			dst.SetInt(int64(icol(func(s *Stats) int { return int(field(s).Int()) })))
		case bool:
			for j := range all {
				if field(&all[j]).Bool() {
					dst.SetBool(true)
					break
				}
			}
		case string:
			for j := range all {
				if v := field(&all[j]).String(); v != "" {
					dst.SetString(v)
					break
				}
			}
		case Dist:
			dst.Set(reflect.ValueOf(medianDist(all, func(s *Stats) *Dist { return field(s).Addr().Interface().(*Dist) })))
		case map[string]int:
			keys := map[string]bool{}
			for _, s := range all {
				for k := range field(&s).Interface().(map[string]int) {
					keys[k] = true
				}
			}
			if len(keys) == 0 {
				break
			}
			if dst.IsNil() {
				dst.Set(reflect.ValueOf(map[string]int{}))
			}
			m := dst.Interface().(map[string]int)
			for _, k := range slices.Sorted(maps.Keys(keys)) {
				m[k] = icol(func(s *Stats) int { return field(s).Interface().(map[string]int)[k] })
			}
		default:
			panic("medianStats: no rule for Stats." + ov.Type().Field(i).Name)
		}
	}
	return out
}

// medianDist is the median of each figure of one distribution over the
// repeats that have values (repeats without values, Count 0, do not vote).
func medianDist(all []Stats, f func(*Stats) *Dist) Dist {
	var have []*Dist
	for i := range all {
		if d := f(&all[i]); d.Count > 0 {
			have = append(have, d)
		}
	}
	if len(have) == 0 {
		return Dist{}
	}
	dcol := func(g func(*Dist) float64) float64 {
		v := make([]float64, len(have))
		for i, d := range have {
			v[i] = g(d)
		}
		return median(v)
	}
	return Dist{
		Count: int(math.Floor(dcol(func(d *Dist) float64 { return float64(d.Count) }))),
		Mean:  dcol(func(d *Dist) float64 { return d.Mean }),
		Min:   dcol(func(d *Dist) float64 { return d.Min }),
		P50:   dcol(func(d *Dist) float64 { return d.P50 }),
		P90:   dcol(func(d *Dist) float64 { return d.P90 }),
		P95:   dcol(func(d *Dist) float64 { return d.P95 }),
		P99:   dcol(func(d *Dist) float64 { return d.P99 }),
		P999:  dcol(func(d *Dist) float64 { return d.P999 }),
		Max:   dcol(func(d *Dist) float64 { return d.Max }),
	}
}
