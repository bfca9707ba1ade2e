package report

import (
	"math"
	"strconv"
	"time"
)

// Schema names the JSON report's format.
const Schema = "infer_exporter/bench/v1"

// OutcomeSuccess is the key of the successful requests in Stats.Outcomes
// (the outcomes are probe/observation's, by name).
const OutcomeSuccess = "success"

// Report is everything a bench run measured: the JSON report is this value.
type Report struct {
	Schema      string        `json:"schema"`
	Environment Environment   `json:"environment"`
	Cells       []CellResult  `json:"cells"`
	Sweeps      []SweepResult `json:"sweeps,omitempty"`
	// Agents is every target's agents search, with bench.agents.
	Agents   []AgentSearch   `json:"agents,omitempty"`
	Accuracy []AccuracyCheck `json:"accuracy,omitempty"`
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
	// Stability is the cell's state: "unstable" when any repeat was,
	// else "not_judged" when any repeat was, else "stable" when any was
	// judged ("" when none was checked). Stable is Stability == "stable"
	// (false when any repeat was unstable or not judged), absent when no
	// repeat was checked (StableOf): the outputs then say "not checked".
	Stability string `json:"stability,omitempty"`
	Stable    *bool  `json:"stable,omitempty"`
	// Degraded is true when the client was degraded in any repeat
	// (RepeatResult.Client: too many of its arrivals sent late, or its
	// goroutines waiting for a CPU), or a replay's drift p99 exceeded 10
	// ms: its latencies include its own delay. DegradedNote says how late,
	// how often and what to change.
	Degraded     bool           `json:"degraded"`
	DegradedNote string         `json:"degraded_note,omitempty"`
	Repeats      []RepeatResult `json:"repeats"`
	// Partial is true when a repeat of the cell is partial: the run was
	// interrupted while it ran (RepeatResult.Partial). Only a run
	// interrupted during its first cell keeps one; it is never ranked.
	Partial bool `json:"partial,omitempty"`
	// BelowMinSuccess is true when the cell's success ratio (SuccessRatio:
	// its repeats' successful measured requests over those sent) is below
	// the ranking's min_success: its target ranks below every target
	// without such a cell, and the bench exits non-zero.
	BelowMinSuccess bool `json:"below_min_success,omitempty"`
	// PrefixCache is the cell's prefix-cache views, the median of its
	// repeats', and what the cache bought (PrefixCache); absent for a
	// cell without them.
	PrefixCache *PrefixCache `json:"prefix_cache,omitempty"`
}

// CellCounts counts r's cells whose every repeat finished, and its partial
// cells (CellResult.Partial).
func (r *Report) CellCounts() (finished, partial int) {
	for i := range r.Cells {
		if r.Cells[i].Partial {
			partial++
		} else {
			finished++
		}
	}
	return finished, partial
}

// CellStability is a cell's state from its repeats': "unstable" when any
// was, else "not_judged" when any was, else "stable" when any was judged,
// else "" (none was checked).
func CellStability(repeats []RepeatResult) string {
	state := ""
	for i := range repeats {
		st := &repeats[i].Stability
		switch {
		case !st.Checked:
		case st.State == StateUnstable:
			return StateUnstable
		case st.State == StateNotJudged || st.State == "":
			state = StateNotJudged
		case state == "":
			state = StateStable
		}
	}
	return state
}

// StableOf is the stable flag of a stability state (a repeat's or a
// cell's): absent for "" (not checked), else whether it is "stable".
func StableOf(state string) *bool {
	if state == "" {
		return nil
	}
	b := state == StateStable
	return &b
}

// StabilityChecked reports whether any repeat's stability was judged: a
// cell none of whose repeats was (stability: {enabled: false}, a replay
// too short to judge) has no stable flag (Stable is nil).
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
	// StructuredChecks and ToolCallChecks count the validity of the
	// measured successful requests' answers, by result
	// (observation.ValidityResults: valid, invalid_json,
	// schema_mismatch, unknown_tool, no_call): a structured answer against
	// its shape's response format, a tool call against its tools. Absent
	// for a shape without them.
	StructuredChecks map[string]int `json:"structured_checks,omitempty"`
	ToolCallChecks   map[string]int `json:"tool_call_checks,omitempty"`
	// Goodput: measured requests that succeeded and met every SLO
	// threshold; GoodputRatio is Goodput / Requests. SuccessRatio is
	// Successes / Requests (0 without requests), a figure with an interval.
	Goodput               int     `json:"goodput"`
	GoodputRatio          float64 `json:"goodput_ratio"`
	SuccessRatio          float64 `json:"success_ratio"`
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
	// UsageNotBelieved counts the measured requests whose server's usage
	// count of output tokens could not be true (above max_tokens, or
	// beyond what the events streamed could carry: probe/client's
	// UsageBelievable): their content events were counted instead, so no
	// throughput or TPOT takes the claim.
	UsageNotBelieved int `json:"usage_not_believed"`
	// GoodOutputTokens are the output tokens delivered within the windows
	// (OutputTokens' rule) by the successful requests that met every SLO
	// threshold, warm-up ones included; OutputTokens without an SLO.
	GoodOutputTokens float64 `json:"good_output_tokens"`
	// Efficiency is the energy and cost of the measured span per output
	// token; absent when no GPU was read and no price configured.
	Efficiency *Efficiency `json:"efficiency,omitempty"`
	// ServerTimings is where the time went by the engine's own account;
	// absent when no request's answer carried timings.
	ServerTimings *ServerTimings `json:"server_timings,omitempty"`
}

// Energy sources (Efficiency.Source, GPUEnergy.Source).
const (
	// EnergyCounter: NVML's total energy counter
	// (nvmlDeviceGetTotalEnergyConsumption), its change over the span.
	EnergyCounter = "energy_counter"
	// EnergyPower: the sampled power readings integrated over the span
	// (a GPU whose counter is not supported).
	EnergyPower = "power_samples"
)

// Efficiency is what the measured span of a repeat (or, in a cell's
// summary, the median over its repeats, figure by figure) cost in energy
// and money, per output token. The span is the measured windows
// (Stats.WindowSeconds from the end of the warm-up); the tokens are
// Stats.OutputTokens and Stats.GoodOutputTokens, the ones the throughput
// counts. A figure is null when it cannot be had: no GPU read, a GPU whose
// readings do not cover the span, no price, no tokens.
type Efficiency struct {
	// Source is how the energy was obtained: EnergyCounter when every
	// GPU's counter covered the span, EnergyPower when any GPU's came from
	// its power readings; empty when no GPU was read.
	Source string `json:"source"`
	// EnergyJoules is the GPUs' energy over the span, summed over them.
	EnergyJoules             Num `json:"energy_joules"`
	JoulesPerOutputToken     Num `json:"joules_per_output_token"`
	JoulesPerGoodOutputToken Num `json:"joules_per_good_output_token"`
	// GPUs are the GPUs counted: read over the span, or bench.cost.gpus.
	GPUs int `json:"gpus"`
	// GPUHourUSD is the price of those GPUs together for an hour
	// (bench.cost); CostUSD the price of the span.
	GPUHourUSD                     Num `json:"gpu_hour_usd"`
	CostUSD                        Num `json:"cost_usd"`
	CostPerMillionOutputTokens     Num `json:"cost_per_million_output_tokens_usd"`
	CostPerMillionGoodOutputTokens Num `json:"cost_per_million_good_output_tokens_usd"`
	// Devices are each GPU's share; Note says why a figure is null.
	Devices []GPUEnergy `json:"devices,omitempty"`
	Note    string      `json:"note,omitempty"`
}

// GPUEnergy is one GPU's energy over a measured span.
type GPUEnergy struct {
	GPU    string `json:"gpu"`
	UUID   string `json:"uuid"`
	Name   string `json:"name"`
	Joules Num    `json:"joules"`
	// Source is EnergyCounter or EnergyPower; empty when neither covered
	// the span (Joules null).
	Source string `json:"source"`
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
	case "success_ratio":
		return s.SuccessRatio
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
	Index int `json:"index"`
	// Started is the instant the repeat's schedule starts from, its
	// arrivals' origin (t0): with --shard.start-at the instant the shards
	// agreed on, whenever this process woke (WakeupLateSeconds), unless it
	// reached it after it had passed (then the instant it did).
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
	// WarmupEndedBy says what ended the warm-up: WarmupPipelineFull (the
	// requests sent first had ended, 90% of them within 1/1.5 of the
	// warm-up so far: the count in flight was at its level),
	// WarmupBound (max_warmup, or the repeat's end, came first),
	// WarmupTrace (a replay's, the configured length on the trace's
	// clock) or WarmupConfigured (a shard's). Absent from reports written before it.
	WarmupEndedBy string `json:"warmup_ended_by,omitempty"`
	// Precision says how precise the repeat's headline percentiles are,
	// given how many independent requests its successes are worth (the
	// stability rule's serial-correlation factor); absent when the
	// stability rule did not judge the repeat.
	Precision *Precision `json:"precision,omitempty"`
	// Partial is true when the run was interrupted while the repeat ran:
	// its figures are over the time it measured before the interrupt
	// (stats.window_seconds), its requests that the interrupt cut short
	// are counted cancelled, and its stability is not judged.
	Partial bool `json:"partial,omitempty"`
	// FirstError is what the repeat's first failed request met, warm-up
	// included: its error (for a non-2xx answer the status and the start
	// of the body), else its outcome; at most MaxFirstErrorBytes. Absent
	// when no request failed.
	FirstError string `json:"first_error,omitempty"`
	// StoppedEarly, when set, says why the repeat stopped before its
	// planned end: its first requests all failed with one 4xx status,
	// which no later request would have changed. Its figures are over the
	// time it ran.
	StoppedEarly string `json:"stopped_early,omitempty"`
	// Client is the client's verdict on its own schedule (ClientCheck);
	// absent from reports written before it.
	Client *ClientCheck `json:"client,omitempty"`
	// Replay is what a replay repeat did with its trace; nil for other
	// loads.
	Replay *ReplayResult `json:"replay,omitempty"`
	// WakeupLateSeconds, with --shard.start-at, is how long after the
	// repeat's agreed start this process woke to start it (its started
	// instant less the agreed one): a timer's lateness on a busy host, or
	// an earlier repeat's overrun. The schedule still starts at the agreed
	// instant (Started) unless that had passed before the process waited;
	// the arrivals due before it woke are sent late, their lag counted.
	// Absent without --shard.start-at, and in a merged report, whose
	// ShardWakeupLate has every shard's.
	WakeupLateSeconds Num `json:"wakeup_late_seconds,omitempty"`
	// ShardStartOffsets, in a merged report, is each shard's schedule
	// origin of this repeat (its started, shard by shard) after the
	// earliest shard's, in seconds: how far apart the shards' schedules
	// are, 0 when they shared --shard.start-at (each shard's schedule
	// starts at the agreed instant, however late its host woke: that is
	// ShardWakeupLate), more for a shard that reached the agreed start
	// after it had passed, or that started on its own; null for a shard
	// that sent none of the repeat (a closed loop of fewer clients than
	// shards).
	ShardStartOffsets []Num `json:"shard_start_offsets_seconds,omitempty"`
	// ShardWakeupLate, in a merged report of shards given
	// --shard.start-at, is each shard's WakeupLateSeconds, in seconds:
	// how late each host woke after the agreed start (null for a shard
	// that sent none of the repeat); absent when the shards started on
	// their own.
	ShardWakeupLate []Num `json:"shard_wakeup_late_seconds,omitempty"`
	// Distribution is the repeat's TTFT, TPOT and E2E quantiles at 1%
	// steps, for the report's CDF charts; Windows its measured windows over
	// time. Both are absent from reports written before them.
	Distribution *Distribution  `json:"distribution,omitempty"`
	Windows      *RepeatWindows `json:"windows,omitempty"`
	// PrefixCache is the repeat's prefix-cache views over its measured
	// windows (PrefixCache); absent for a shape without a cache_hit_rate
	// whose answers reported no cached tokens.
	PrefixCache *PrefixCache `json:"prefix_cache,omitempty"`
	// State is the repeat's recorder, kept for a shard report (in its
	// ShardPart); not written with the repeat.
	State *RecorderState `json:"-"`
}

// StabilityResult is how a repeat's steady state was judged
// (bench/stability): State is "stable", "unstable" or "not_judged" ("" when
// the repeat was not checked), Note says why in words.
type StabilityResult struct {
	Checked bool `json:"checked"`
	// State is the verdict; Stable is State == "stable", absent when the
	// repeat was not checked (StableOf).
	State  string `json:"state,omitempty"`
	Stable *bool  `json:"stable,omitempty"`
	// WindowSeconds is the windows' length, Windows those judged, Extended
	// of them added because the drift was suggestive.
	WindowSeconds float64 `json:"window_seconds"`
	Windows       int     `json:"windows"`
	Extended      int     `json:"extended"`
	// Medians are each window's median E2E (for the charts; the rule
	// judges the requests, not these).
	Medians []Num `json:"window_e2e_medians"`
	// Growth is the drift of the length-normalised E2E across the judged
	// span (0.25: the end 25% slower than the start), with its interval
	// [GrowthLow, GrowthHigh]; NaN when not computed.
	Growth     Num `json:"growth"`
	GrowthLow  Num `json:"growth_low"`
	GrowthHigh Num `json:"growth_high"`
	// Step is the largest step of the length-normalised E2E within the
	// span (0.3: 30% slower after StepAtSeconds than before), whether or
	// not it was significant; NaN when not computed.
	Step          Num `json:"step"`
	StepAtSeconds Num `json:"step_at_seconds"`
	// EffectiveRequests are the Requests over the serial-correlation
	// factor: as many independent requests hold as much information.
	EffectiveRequests Num `json:"effective_requests"`
	// Requests are the successful requests judged; NeedSeconds, when not
	// judged, the span this rate would need.
	Requests    int    `json:"requests"`
	NeedSeconds Num    `json:"need_seconds"`
	Note        string `json:"note,omitempty"`
}

// Precision is the margin of error of a repeat's headline percentiles.
// Requests that overlap share the server's state, so n successes carry
// the information of EffectiveRequests = n / Inflation independent ones
// (Inflation: the stability rule's serial-correlation factor, at least
// 1). A percentile p's 95% interval is the sample's quantiles at
// p ± 1.96·√(p(1−p)/EffectiveRequests) (distribution-free: the order
// statistics' binomial law, its variance inflated); it is TooFew when
// fewer than MinBeyond effective requests lie beyond it
// (EffectiveRequests·(1−p) < 5): the figure then rests on a handful of
// requests and its interval reaches the sample's end.
type Precision struct {
	EffectiveRequests Num                        `json:"effective_requests"`
	Inflation         Num                        `json:"inflation"`
	Figures           map[string]FigurePrecision `json:"figures"`
}

// FigurePrecision is one percentile's interval ([Low, High], in the
// figure's unit), its margin (the larger distance from the figure to an
// end, over the figure: 0.12 is ±12%), and whether too few effective
// requests lie beyond it.
type FigurePrecision struct {
	Low    Num  `json:"low"`
	High   Num  `json:"high"`
	Margin Num  `json:"margin"`
	TooFew bool `json:"too_few,omitempty"`
}

// MinBeyond is the fewest effective requests beyond a percentile for it
// not to be TooFew.
const MinBeyond = 5

// What ended a repeat's warm-up (RepeatResult.WarmupEndedBy).
const (
	WarmupPipelineFull = "pipeline_full"
	WarmupBound        = "bound"
	WarmupTrace        = "trace"
	// WarmupConfigured: a shard's, the configured length (the shards
	// cannot agree on when the run's pipeline filled).
	WarmupConfigured = "configured"
)

// Stability states, as StabilityResult.State and CellResult.Stability say
// them.
const (
	StateStable    = "stable"
	StateUnstable  = "unstable"
	StateNotJudged = "not_judged"
)

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
	FirstFailingRate float64 `json:"first_failing_rate"`
	// ClientLimitedRate is the rate at which the client was degraded,
	// which ended the sweep: the client's limit, not the server's (0: it
	// kept up at every rate tried).
	ClientLimitedRate float64      `json:"client_limited_rate,omitempty"`
	Points            []SweepPoint `json:"points"`
	Note              string       `json:"note,omitempty"`
}

// AgentSearch is one target's agents search: the most agents, each
// running jobs closed-loop, whose turns met the tier.
type AgentSearch struct {
	Target string `json:"target"`
	// Tier is the SLO tier, e.g. "success >= 0.99, TTFT p90 <= 1s, TPOT
	// p90 <= 50ms".
	Tier string `json:"tier"`
	// Quantile is the tier's quantile of TTFT and TPOT.
	Quantile float64 `json:"quantile"`
	// MaxAgents is the most agents tried that passed (0: none did);
	// JobsPerHourPerAgent was measured there. FirstFailingAgents is the
	// fewest that failed (0: none did).
	MaxAgents           int     `json:"max_agents"`
	JobsPerHourPerAgent float64 `json:"jobs_per_hour_per_agent"`
	FirstFailingAgents  int     `json:"first_failing_agents"`
	// ClientLimitedAgents is the count at which the client was degraded,
	// which ended the search: the client's limit, not the server's (0: it
	// kept up at every count tried).
	ClientLimitedAgents int          `json:"client_limited_agents,omitempty"`
	Points              []AgentPoint `json:"points"`
	Note                string       `json:"note,omitempty"`
}

// AgentPoint is one agent count of an agents search, over its measured
// window: the turns scheduled in it, the jobs that ended in it.
type AgentPoint struct {
	Agents int `json:"agents"`
	// Turns measured (a dropped or failed turn counts against the success
	// ratio; one cut short by the run's end is not measured).
	Turns        int     `json:"turns"`
	SuccessRatio float64 `json:"success_ratio"`
	// TTFTSeconds and TPOTSeconds are at the tier's quantile, over the
	// successful turns.
	TTFTSeconds Num `json:"ttft_seconds"`
	TPOTSeconds Num `json:"tpot_seconds"`
	// JobsCompleted ended completed in the window; JobsPerHourPerAgent is
	// them over the agents times the window's hours; MeanJobSeconds their
	// mean duration (first turn's instant to last reply's end).
	JobsCompleted       int     `json:"jobs_completed"`
	JobsPerHourPerAgent float64 `json:"jobs_per_hour_per_agent"`
	MeanJobSeconds      Num     `json:"mean_job_seconds"`
	Pass                bool    `json:"pass"`
	// Degraded: the client did not keep up in the window (the matrix's
	// client verdict on the point's turns), so the point measured the
	// client, not the server, and counts for neither side.
	Degraded bool `json:"degraded,omitempty"`
	// Note says which bounds a failing point missed, or why the client
	// was degraded.
	Note string `json:"note,omitempty"`
}

// RequestRecords says where the run's per-request records went
// (--output.requests) and how many: Written, the lines the file holds
// (confirmed by a flush and a close without error); Dropped, records within
// the bound that a write error kept out of it, with Error; and LeftOut,
// beyond the bound.
type RequestRecords struct {
	Path    string `json:"path"`
	Written int    `json:"written"`
	Dropped int    `json:"dropped"`
	LeftOut int    `json:"left_out"`
	Error   string `json:"error,omitempty"`
}

// SweepPoint is one rate of a sweep.
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
	// Overloaded says that the point was not in steady state (the cells'
	// rule): a point whose queue grows fails whatever its ratio, since its
	// ratio holds only until the backlog reaches the timeout. Degraded
	// says that its client fell behind (RepeatResult.Client): the point
	// measured the client, so it does not pass, and it does not count
	// against the server either: it ends the sweep. Note says why a point
	// failed.
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

// Dist summarises one latency's distribution, in seconds. Quantiles
// interpolate linearly between the two nearest order statistics (numpy's
// default, as vLLM's benchmark reports them): with n sorted values x, the
// p-quantile is x[h] for integer h = (n-1)p, and between x[floor h] and
// x[floor h + 1] otherwise. An empty distribution has Count 0 and zeros.
type Dist struct {
	Count int     `json:"count"`
	Mean  float64 `json:"mean"`
	Min   float64 `json:"min"`
	P50   float64 `json:"p50"`
	P90   float64 `json:"p90"`
	P95   float64 `json:"p95"`
	P99   float64 `json:"p99"`
	P999  float64 `json:"p99_9"`
	Max   float64 `json:"max"`
}

// Interval is a two-sided confidence interval.
type Interval struct {
	Lo float64 `json:"lo"`
	Hi float64 `json:"hi"`
}

// Distribution is a repeat's latency distributions, each as its quantiles
// at 0%, 1%, ..., 100% (101 values, seconds; absent without values),
// computed by Dist's interpolation from the same values as the repeat's
// percentiles (the kept sample of its measured requests): enough to draw
// the CDF whatever the number of requests.
type Distribution struct {
	TTFT []float64 `json:"ttft,omitempty"`
	TPOT []float64 `json:"tpot,omitempty"`
	E2E  []float64 `json:"e2e,omitempty"`
}

// RepeatWindows is a repeat over time: what happened in each measured
// window, from the recorder's exact per-window counts (so bounded by the
// windows' number), and the median TTFT of the kept sample by window.
type RepeatWindows struct {
	WindowSeconds float64 `json:"window_seconds"`
	// Sent are the requests sent in each window, warm-up ones before it
	// excluded; Ended the sent requests (any outcome) that ended in it;
	// Completed the successful ones that ended in it, warm-up requests
	// included (RequestsPerSecond's numerator); Dropped the arrivals
	// scheduled in it and never sent.
	Sent      []int `json:"sent"`
	Ended     []int `json:"ended"`
	Completed []int `json:"completed"`
	Dropped   []int `json:"dropped"`
	// InFlight is the number of requests sent and not ended at the end of
	// each window (warm-up ones included); InFlightAtStart in Stats is the
	// count at the start of the first.
	InFlight []int `json:"in_flight"`
	// TTFTP50 is the median TTFT of the measured requests scheduled in each
	// window, from the kept sample (null for a window without one); the
	// E2E medians by window of the end are StabilityResult.Medians.
	TTFTP50 []Num `json:"ttft_p50"`
}

// Record is one request, in the one shape the bench keeps it: the
// recorder's sample for the percentiles and the bootstrap, and, as is, a
// shard report's records (RecorderState.Records), which the merge pools.
// Seconds; a latency is NaN (null in JSON) when undefined or not measured.
type Record struct {
	Sched    float64 `json:"s"` // seconds from warmupEnd; negative for warm-up requests
	TTFT     Num     `json:"ttft"`
	TTFA     Num     `json:"ttfa"`
	TPOT     Num     `json:"tpot"`
	E2E      Num     `json:"e2e"`
	Lag      Num     `json:"lag"`
	Measured bool    `json:"m"`
	Goodput  bool    `json:"g"`
	// WinTokens[k] are the output tokens delivered in window FirstWin+k.
	FirstWin  int32     `json:"w"`
	WinTokens []float32 `json:"t,omitempty"`
	// Server is a measured successful request's timings by the engine's
	// own account; nil when its answer carried none.
	Server *ServerParts `json:"sv,omitempty"`
}

// ReplayResult is what a replay repeat did with its trace, beside the
// latency figures every cell has. A bench replay sends its whole window
// (the replay's start..end of the trace, at its speed), the same rows to
// every target; only a looping replay, which never ends, is cut, at the
// warm-up plus the measured duration, and Cut says so.
type ReplayResult struct {
	// Rows is the number of rows of the window (one pass), after the
	// sample; Replayed of them (and of later passes, when looping) were
	// sent or dropped; Dropped of those were never sent.
	Rows     int `json:"rows"`
	Replayed int `json:"replayed"`
	Dropped  int `json:"dropped"`
	// WindowSeconds is the window's length at the replay's speed, from its
	// first row's instant to its last's.
	WindowSeconds float64 `json:"window_seconds"`
	// Clamped counts rows the rate ceiling sent later than their trace
	// instant.
	Clamped uint64 `json:"clamped"`
	// Drift is, over every row sent (warm-up included), the send instant
	// minus the row's trace instant: the ceiling's delay plus the client's
	// own lag, in seconds. It is measured from the trace, not from the
	// instants the ceiling moved rows to, so a clamped row's delay is in it.
	Drift Dist `json:"drift"`
	// Degraded: drift p99 above the degraded-lag bound (10 ms), so the
	// server did not see the trace's timing.
	Degraded bool `json:"degraded"`
	// Words says what the synthesised prompts held: "per_repeat" (words of
	// this repeat's own), "reuse" (the same words every repeat) or
	// "recorded" (the trace's recorded bodies, sent as they were).
	Words string `json:"words"`
	// Cut is empty when the whole window was replayed; otherwise where the
	// replay was cut and why.
	Cut string `json:"cut,omitempty"`
}

// ColdStartReport is the cold-start step's result: per repeat and, for each
// figure, the median over the repeats that reached it. Every repeat's
// server is stopped before the next starts, except the last one's, which
// serves the rest of the run (the prompt calibration, the engine info and
// the matrix meet it) and is stopped when the run ends.
type ColdStartReport struct {
	Target   string   `json:"target"`
	Command  []string `json:"command"`
	ReadyURL string   `json:"ready_url,omitempty"`
	// RequestMaxTokens is the first-token request's max_tokens.
	RequestMaxTokens int `json:"request_max_tokens"`
	// Seconds from the start to readiness (ready_url's first 200), to the
	// first token of the first successful request, and that request's own
	// TTFT (from its sending).
	ReadySeconds            Num               `json:"ready_seconds"`
	FirstTokenSeconds       Num               `json:"first_token_seconds"`
	FirstRequestTTFTSeconds Num               `json:"first_request_ttft_seconds"`
	Failed                  int               `json:"failed"`
	Repeats                 []ColdStartRepeat `json:"repeats"`
}

// ColdStartRepeat is one start.
type ColdStartRepeat struct {
	Index int `json:"index"`
	// Started is the instant just before the command was started: the
	// start every figure counts from.
	Started time.Time `json:"started"`
	// ReadySeconds is Started to the first poll of ready_url that answered
	// 200; null without ready_url or when it never did.
	ReadySeconds Num `json:"ready_seconds"`
	// FirstTokenSeconds is Started to the first token of the first
	// successful request; null when none succeeded.
	FirstTokenSeconds Num `json:"first_token_seconds"`
	// FirstRequestTTFTSeconds is that request's time to first token.
	FirstRequestTTFTSeconds Num `json:"first_request_ttft_seconds"`
	// Requests counts the first-token requests sent, the successful one
	// included.
	Requests int `json:"requests"`
	// Error says why the repeat failed (the command exited, the timeout
	// passed), with the tail of the server's output.
	Error string `json:"error,omitempty"`
}

// PerplexityResult is one target's perplexity figure.
type PerplexityResult struct {
	Target string `json:"target"`
	// Perplexity is the median of the successful scores; null when none
	// succeeded. Min and Max bound them.
	Perplexity Num `json:"perplexity"`
	Min        Num `json:"min"`
	Max        Num `json:"max"`
	// MeanLogprob is -log(Perplexity), nats per token; Tokens the tokens
	// scored (the text's tokens as the server counts them, less the
	// first).
	MeanLogprob Num `json:"mean_logprob"`
	Tokens      int `json:"tokens"`
	// Scores of Repeats succeeded; Failures counts the others by reason
	// (quality.Reasons), Error is the last failure's message.
	Scores   int            `json:"scores"`
	Repeats  int            `json:"repeats"`
	Failures map[string]int `json:"failures,omitempty"`
	Error    string         `json:"error,omitempty"`
	Dialect  string         `json:"dialect,omitempty"`
	// Text names the bytes scored: compare perplexities only over equal
	// hashes (and a model's own tokenizer).
	Text       string `json:"text"`
	TextSHA256 string `json:"text_sha256"`
}

// TargetInfo is what the report records of a target: its configuration and
// what its info endpoints said.
type TargetInfo struct {
	Name            string `json:"name"`
	URL             string `json:"url"`
	Flavor          string `json:"flavor"`
	ConfiguredModel string `json:"configured_model"`
	EngineInfo
}

// EngineInfo is what a server says about itself. Empty fields are unknown.
type EngineInfo struct {
	Engine           string `json:"engine"`
	EngineVersion    string `json:"engine_version"`
	ServedModel      string `json:"served_model"`
	MaxContextLength int    `json:"max_context_length,omitempty"`
	// Up is whether the server's metrics (or, for Ollama, its info
	// endpoint) answered.
	Up bool `json:"up"`
}

// PromptSetInfo describes the prompts one target gets for one shape.
type PromptSetInfo struct {
	Target string `json:"target"`
	Shape  string `json:"shape"`
	// Tokenizer is how lengths were made exact: server (the target's own
	// /tokenize, chat template included), server_content, or estimate (N
	// words; the server has no tokenizer endpoint).
	Tokenizer string `json:"tokenizer"`
	// SHA256 covers the whole set (Size prompts), SHA256First64 the first
	// 64: the hash the exporter's infer_probe_prompt_info shows for a
	// workload with the same seed and lengths against the same server.
	// Both are prompt.HashPrompts.
	SHA256        string `json:"sha256"`
	SHA256First64 string `json:"sha256_first64"`
}

// Weights of the composite score's components.
type Weights struct {
	Latency    float64 `yaml:"latency" json:"latency"`
	Throughput float64 `yaml:"throughput" json:"throughput"`
	Memory     float64 `yaml:"memory" json:"memory"`
	Accuracy   float64 `yaml:"accuracy" json:"accuracy"`
	// Efficiency weighs joules per output token (default 0: not part of
	// the score unless asked for).
	Efficiency float64 `yaml:"efficiency" json:"efficiency"`
}

// Input is one link of a report's audit chain: an input of the run and
// the SHA-256 of its bytes when the run read it. `bench verify` hashes the
// ones it can find again.
type Input struct {
	// Kind is exporter (the binary that ran), config (the bench file),
	// trace (a replayed trace file) or prompt_set (the prompts one target
	// got for one shape: their hash, prompt.HashPrompts; they were made
	// against the target's tokenizer, so they are not files).
	Kind string `json:"kind"`
	// Name is the trace's or the prompt set's name ("target/shape").
	Name string `json:"name,omitempty"`
	// Path is the file's absolute path, for the kinds that are files.
	Path   string `json:"path,omitempty"`
	SHA256 string `json:"sha256"`
	Bytes  int64  `json:"bytes,omitempty"`
}

// The kinds of Input.
const (
	InputExporter  = "exporter"
	InputConfig    = "config"
	InputTrace     = "trace"
	InputPromptSet = "prompt_set"
)
