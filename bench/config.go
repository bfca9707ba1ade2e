package bench

import (
	"cmp"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"maps"
	"math"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	yaml "go.yaml.in/yaml/v3"

	"github.com/infer-exporter/infer_exporter/bench/report"
	"github.com/infer-exporter/infer_exporter/bench/stability"
	"github.com/infer-exporter/infer_exporter/internal/config"
	"github.com/infer-exporter/infer_exporter/probe/replay"
)

// Config is a bench configuration file: the exporter's targets section,
// exactly as in the exporter's configuration, and a bench block.
type Config struct {
	Targets []config.Target `yaml:"targets"`
	Bench   Spec            `yaml:"bench"`

	// File is the path it was read from; SHA256 the hex SHA-256 of its bytes.
	File   string `yaml:"-"`
	SHA256 string `yaml:"-"`
}

// Spec is the bench block.
type Spec struct {
	// Targets restricts the run to these target names; empty means all.
	Targets []string `yaml:"targets"`
	// Seed seeds the prompt set, the arrival processes and the bootstrap.
	Seed   int64      `yaml:"seed"`
	Matrix MatrixSpec `yaml:"matrix"`
	// Warmup runs before each repeat's measurement, on the same schedule;
	// its requests are not measured. Unset: DefaultWarmup; 0: none.
	WarmupSetting *time.Duration `yaml:"warmup"`
	// Warmup is WarmupSetting resolved.
	Warmup time.Duration `yaml:"-"`
	// MaxWarmup bounds the warm-up, which lasts at least Warmup and until
	// the pipeline is full (1.5 x the p90 E2E of the first requests; see
	// docs/bench.md). Unset (0): Warmup + Duration.
	MaxWarmup time.Duration `yaml:"max_warmup"`
	// Duration is the measured time of one repeat, before any extension by
	// the stability check.
	Duration time.Duration `yaml:"duration"`
	// Repeats of every cell; the cell reports the median of each figure.
	Repeats int `yaml:"repeats"`
	// MaxInFlight caps open-loop requests in flight; arrivals beyond it are
	// dropped and counted, never delayed.
	MaxInFlight int           `yaml:"max_in_flight"`
	Stability   StabilitySpec `yaml:"stability"`
	Sweep       *SweepSpec    `yaml:"sweep"`
	// Agents, when set, searches every target for the most agents whose
	// turns meet an SLO tier, after the matrix (agents.go).
	Agents   *AgentsSpec     `yaml:"agents,omitempty"`
	SLO      config.SLO      `yaml:"slo"`
	Sampling config.Sampling `yaml:"sampling"`
	// PromptSetSize is the number of prompts generated per shape. Every
	// repeat of every cell sends them in the same order from the first,
	// cycling when it needs more.
	PromptSetSize int `yaml:"prompt_set_size"`
	// MaxSamplesPerRepeat bounds the per-request records kept for one
	// repeat's percentiles and bootstrap; beyond it a uniform reservoir
	// sample is kept (counts stay exact).
	MaxSamplesPerRepeat int             `yaml:"max_samples_per_repeat"`
	Weights             *report.Weights `yaml:"weights"`
	References          References      `yaml:"references"`
	Ranking             RankingSpec     `yaml:"ranking"`
	Regression          RegressionSpec  `yaml:"regression"`
	// MinSuccessSetting is the success ratio every cell is held to
	// (min_success, 0..1; unset: DefaultMinSuccess; 0: no floor): a target
	// with a cell whose successful measured requests over those sent
	// (report.SuccessRatio) fall below it ranks below every target without
	// one, and the run exits ExitBelowSuccessFloor. MinSuccess is it
	// resolved.
	MinSuccessSetting *float64 `yaml:"min_success"`
	MinSuccess        float64  `yaml:"-"`
	// KnownAnswers are accuracy checks run against every target before the
	// matrix, with the semantics of the exporter's known_answers.
	KnownAnswers []config.KnownAnswer `yaml:"known_answers"`
	// GPUSampleInterval is how often GPU memory, temperature and power are
	// read during the run.
	GPUSampleInterval time.Duration `yaml:"gpu_sample_interval"`
	// ColdStart, when set, starts the server itself before everything
	// else and measures start → ready → first token (coldstart.go).
	ColdStart *ColdStartSpec `yaml:"cold_start"`
	// Perplexity, when set, scores every target's perplexity over the
	// reference text before the matrix, for the report and the ranking's
	// accuracy component (quality.go).
	Perplexity *PerplexitySpec `yaml:"perplexity"`
	// Cost, when set, prices the GPUs by the hour, for each cell's cost
	// per million output tokens (efficiency.go).
	Cost *CostSpec `yaml:"cost"`
}

// CostSpec prices the GPUs that serve the targets, in US dollars per GPU
// and hour. A GPU the bench reads through NVML is priced by its model
// (GPUHourUSDByModel, keyed by NVML's name, e.g. "NVIDIA H100 80GB
// HBM3"), else at GPUHourUSD. GPUs, when set, is the number of GPUs to
// price at GPUHourUSD in place of those NVML reads: a server on another
// host, whose GPUs this one cannot see.
type CostSpec struct {
	GPUHourUSD        *float64           `yaml:"gpu_hour_usd"`
	GPUHourUSDByModel map[string]float64 `yaml:"gpu_hour_usd_by_model"`
	GPUs              int                `yaml:"gpus"`
}

// MatrixSpec is the set of cells: every target × every load × every shape.
// A load is an open-loop request rate or a closed-loop concurrency.
type MatrixSpec struct {
	// Arrival is the open-loop arrival process of the rates (process:
	// constant, poisson (default) or gamma; burstiness; max_rate), each
	// rate of Rates its rate: every parameter of the exporter's arrival
	// reaches the bench's. Its rate, ramp and stages are the matrix's
	// Rates' to set, and refused here.
	config.Arrival `yaml:",inline"`
	// Rates are open-loop request rates, in requests per second.
	Rates []float64 `yaml:"rates"`
	// Concurrencies are closed-loop loads: N clients, each sending its next
	// request when its previous one ends.
	Concurrencies []int   `yaml:"concurrencies"`
	Shapes        []Shape `yaml:"shapes"`
	// Replays are replayed traces, each a cell of its own per target: the
	// trace sets when requests go and what they hold (probe/replay).
	Replays []ReplaySpec `yaml:"replays"`
}

// ReplaySpec is a named trace replay, with the exporter's replay settings.
type ReplaySpec struct {
	Name string `yaml:"name"`
	// Words says what the synthesised prompts of successive repeats hold:
	// per_repeat (the default) gives each repeat words of its own, with the
	// same rows, instants, lengths and prefix structure, so that a server's
	// prefix cache meets every repeat cold, as it met the first; reuse
	// sends the same words every repeat, so repeats after the first hit a
	// cache the first one warmed. Recorded bodies are always sent as they
	// were.
	Words         string `yaml:"words"`
	config.Replay `yaml:",inline"`
}

// Replay word policies (ReplaySpec.Words).
const (
	WordsPerRepeat = "per_repeat"
	WordsReuse     = "reuse"
)

// Shape is an input/output length pair.
type Shape struct {
	// Name labels the shape; default "in<N>-out<M>" from the means.
	Name         string `yaml:"name"`
	InputTokens  Length `yaml:"input_tokens"`
	OutputTokens Length `yaml:"output_tokens"`
	// Kinds are the tools, response format and images every request of
	// the shape carries, as a workload's (config.RequestKinds, inline):
	// its answers are checked, and the cells count the checks' results.
	config.RequestKinds `yaml:",inline"`
	// CacheHitRate, PrefixPool and BlockSize are a workload's prompt
	// options of the same names (config.Prompt): the share of each
	// prompt's tokens that repeats a prefix already sent, the pool's
	// prefixes and the block they are aligned to (prefixcache.go).
	// Empty, they are left out of the effective configuration, which a
	// shape without them writes as before.
	CacheHitRate float64 `yaml:"cache_hit_rate,omitempty"`
	PrefixPool   int     `yaml:"prefix_pool,omitempty"`
	BlockSize    int     `yaml:"block_size,omitempty"`
}

// Length is a token-length distribution. A plain integer means a fixed
// length: `input_tokens: 128` is `{dist: fixed, mean: 128}`.
type Length struct{ config.Distribution }

var lengthKeys = map[string]bool{"dist": true, "mean": true, "stddev": true, "min": true, "max": true}

// UnmarshalYAML accepts an integer or a distribution mapping, strictly.
func (l *Length) UnmarshalYAML(n *yaml.Node) error {
	switch n.Kind {
	case yaml.ScalarNode:
		v, err := strconv.Atoi(n.Value)
		if err != nil {
			return fmt.Errorf("line %d: %q is not a token count or a distribution", n.Line, n.Value)
		}
		l.Distribution = config.Distribution{Dist: "fixed", Mean: float64(v)}
		return nil
	case yaml.MappingNode:
		// A custom unmarshaler's Decode is not strict: check keys here.
		for i := 0; i+1 < len(n.Content); i += 2 {
			if k := n.Content[i]; !lengthKeys[k.Value] {
				return fmt.Errorf("line %d: field %s not found in a length (fields: dist, mean, stddev, min, max)", k.Line, k.Value)
			}
		}
		if err := n.Decode(&l.Distribution); err != nil {
			return err
		}
		if l.Dist == "" {
			l.Dist = "fixed"
		}
		return nil
	}
	return fmt.Errorf("line %d: a length is an integer or a mapping", n.Line)
}

// MarshalYAML writes a fixed length as a plain integer.
func (l Length) MarshalYAML() (any, error) {
	if l.Dist == "fixed" && l.Min == 0 && l.Max == 0 {
		return int(l.Mean), nil
	}
	return l.Distribution, nil
}

// StabilitySpec configures the stability check (bench/stability, whose
// README derives the rule): the repeat's successful measured requests are
// tested for a drift of their length-normalised E2E over completion time.
// A repeat is unstable when the drift, or a step, is significant and at
// least Tolerance, stable when a drift of 25% would have been caught and
// none that large fits its interval, and not judged otherwise (with the
// span it would need). A repeat not judged yet runs on, in whole windows,
// until it is judged or reaches MaxDuration.
type StabilitySpec struct {
	// Enabled defaults to true.
	Enabled *bool `yaml:"enabled"`
	// Window is the extension's step and the latency-by-window chart's
	// point (default Duration / Windows).
	Window  time.Duration `yaml:"window"`
	Windows int           `yaml:"windows"` // default 3
	// Tolerance is the effect floor: a drift smaller than this across the
	// measured span is never unstable, however significant (default 0.1).
	Tolerance   float64       `yaml:"tolerance"`
	MaxDuration time.Duration `yaml:"max_duration"` // default max(3 × Duration, 5 min)
	// MinRequests is the fewest successful requests a measured span needs
	// to be judged at all (default 20).
	MinRequests int `yaml:"min_requests"`
}

// Rule is the stability rule these settings make.
func (s StabilitySpec) Rule() stability.Spec {
	return stability.Spec{MinRequests: s.MinRequests, MaxGrowth: s.Tolerance}.Defaults()
}

// On reports whether the stability check runs.
func (s StabilitySpec) On() bool { return s.Enabled == nil || *s.Enabled }

// SweepSpec configures the rate sweep that finds, per target and shape, the
// highest open-loop rate at which at least MinGoodput of the requests meet
// the SLO: rates Start, Start×Factor, ... up to MaxRate until one fails,
// then Refine bisection steps between the last passing and first failing
// rate.
type SweepSpec struct {
	Start      float64 `yaml:"start"`       // req/s, default 1
	Factor     float64 `yaml:"factor"`      // default 2
	MaxRate    float64 `yaml:"max_rate"`    // default 1024
	Refine     *int    `yaml:"refine"`      // default 3; an explicit 0: none
	MinGoodput float64 `yaml:"min_goodput"` // ratio 0..1, default 0.95
	// Pass is the rule a rate must meet: "goodput" (at least MinGoodput
	// of the requests met bench.slo; the default when an SLO is set) or
	// "success" (at least MinSuccess of them succeeded, whatever their
	// latency: capacity as the highest rate held at, say, 99.9% success;
	// the default without an SLO).
	Pass       string        `yaml:"pass"`
	MinSuccess float64       `yaml:"min_success"` // ratio 0..1, default 0.999
	Duration   time.Duration `yaml:"duration"`    // per point; default bench.duration
	// WarmupSetting per point; unset: bench.warmup. Warmup is it resolved.
	WarmupSetting *time.Duration `yaml:"warmup"`
	Warmup        time.Duration  `yaml:"-"`
}

// AgentsSpec configures the agents search: for every target, the most
// agents running jobs closed-loop (probe/sessions's Options.Agents, each
// starting its next job when its last one ends) whose turns in the
// measured window meet SLO. Agent counts Start, 2×Start, ... up to
// MaxAgents until one fails, then bisection between the last passing and
// the first failing count until they are adjacent.
type AgentsSpec struct {
	// Tools are what the model is offered on every turn (required).
	Tools []config.Tool `yaml:"tools"`
	// UserTokens is a job's task, its first message; OutputTokens each
	// turn's max_tokens; MaxConversationTokens ends a job whose next turn
	// would not fit. As a sessions workload's (config.Sessions).
	UserTokens            Length `yaml:"user_tokens"`
	OutputTokens          Length `yaml:"output_tokens"`
	MaxConversationTokens int    `yaml:"max_conversation_tokens"`
	// Agent is the tools' latency and results and the turn limit, as a
	// sessions workload's agent block.
	Agent config.Agent `yaml:"agent"`
	// SLO is the tier every turn is held to.
	SLO AgentSLO `yaml:"slo"`
	// Start is the first count tried (default 1), MaxAgents the last
	// (default 64).
	Start     int `yaml:"start"`
	MaxAgents int `yaml:"max_agents"`
	// WarmupSetting per point; unset: bench.warmup. Warmup is it resolved.
	// Duration is each point's measured window; default bench.duration.
	WarmupSetting *time.Duration `yaml:"warmup"`
	Warmup        time.Duration  `yaml:"-"`
	Duration      time.Duration  `yaml:"duration"`
}

// AgentSLO is the agents search's tier: of the turns measured, at least
// MinSuccess succeeded, and the Quantile of their TTFT and TPOT is at most
// TTFT and TPOT (0: that bound is not held).
type AgentSLO struct {
	TTFT       time.Duration `yaml:"ttft"`
	TPOT       time.Duration `yaml:"tpot"`
	Quantile   float64       `yaml:"quantile"`    // default 0.9
	MinSuccess float64       `yaml:"min_success"` // default 0.99
}

// Defaults of the agents search (AgentsSpec).
const (
	DefaultAgentsStart      = 1
	DefaultMaxAgents        = 64
	DefaultAgentsQuantile   = 0.9
	DefaultAgentsMinSuccess = 0.99
)

// Sweep pass rules (SweepSpec.Pass).
const (
	SweepPassGoodput = "goodput"
	SweepPassSuccess = "success"
)

// DefaultWeights are the issue's: latency 0.4, throughput 0.3, memory 0.2,
// accuracy 0.1; efficiency 0 (scored and shown, not weighed, unless
// asked for).
var DefaultWeights = report.Weights{Latency: 0.4, Throughput: 0.3, Memory: 0.2, Accuracy: 0.1}

// References fix the normalisation of the score's components. Zero means
// "the best target of the cell" (for memory: of the run).
type References struct {
	Latency     time.Duration `yaml:"latency"`
	Throughput  float64       `yaml:"throughput"`   // output tokens per second
	MemoryBytes float64       `yaml:"memory_bytes"` // peak GPU memory
}

// RankingSpec configures the ranking.
type RankingSpec struct {
	// Latency is the latency figure scored: ttft, tpot or e2e, with p50,
	// p90 or p99 (default e2e_p50).
	Latency string `yaml:"latency"`
	// Resamples is the number of bootstrap resamples (default 1000).
	Resamples int `yaml:"resamples"`
	// Confidence is the level of every interval (default 0.95).
	Confidence float64 `yaml:"confidence"`
}

// RegressionSpec configures --baseline.
type RegressionSpec struct {
	// Threshold is the relative worsening of a gated figure that counts
	// as a regression, when it is also beyond noise (default 0.05).
	Threshold float64 `yaml:"threshold"`
	// Metrics are the gated figures, of FigureNames (default
	// DefaultGatedMetrics).
	Metrics []string `yaml:"metrics"`
}

// DefaultGatedMetrics are the figures the regression gate judges when
// bench.regression.metrics names none: the wait for the first token and
// for each next one, at the median and the tail, the whole request's tail,
// the throughput and the share of requests that succeeded. E2E p99 alone
// let a 45% slower decode pass: a p99 over a short cell rests on its few
// slowest requests, so its interval is wide, where the medians of TPOT and
// TTFT rest on every request.
var DefaultGatedMetrics = []string{"ttft_p50", "ttft_p99", "tpot_p50", "tpot_p99", "e2e_p99", "output_tokens_per_second", "success_ratio"}

// Defaults of the bench block.
const (
	DefaultWarmup              = 10 * time.Second
	DefaultDuration            = 60 * time.Second
	DefaultRepeats             = 3
	DefaultMaxInFlight         = 512
	DefaultPromptSetSize       = 1000
	DefaultMaxSamplesPerRepeat = 100000
	// DefaultMaxITLSamples bounds the inter-token gaps kept per repeat:
	// the recorder's bound, which bench merge holds a shard to.
	DefaultMaxITLSamples    = report.MaxITL
	DefaultStabilityWindows = 3
	DefaultStabilityTol     = 0.1
	DefaultStabilityMinReqs = 20
	// DefaultStabilityMaxDuration is the shortest default max_duration:
	// a cell of the modelled grid (bench/stability/README.md) needs up to
	// about 4 minutes at 2 req/s to be judged.
	DefaultStabilityMaxDuration = 5 * time.Minute
	DefaultResamples            = 1000
	DefaultConfidence           = 0.95
	DefaultThreshold            = 0.05
	DefaultLatencyMetric        = report.DefaultLatencyMetric
	DefaultGPUSampleInterval    = time.Second

	// DefaultMinSuccess is bench.min_success's default: one failure in a
	// thousand requests, the sweep's success rule too.
	DefaultMinSuccess = 0.999
	// DefaultSweepRefine is the sweep's bisection steps when refine is
	// not set.
	DefaultSweepRefine = 3
)

// Limits of the bench block, besides the exporter's (config.MaxTokens,
// config.MaxListItems, config.MaxNameBytes, config.MaxFileBytes, ...).
const (
	// MaxGPUHourUSD bounds a GPU's price per hour (bench.cost): far above
	// any rental, below what would make a typo's cost look real.
	MaxGPUHourUSD = 10000
	// MaxCostGPUs bounds bench.cost.gpus.
	MaxCostGPUs = 100000
	// MaxPromptSetSize bounds prompt_set_size.
	MaxPromptSetSize = 100000
	// MaxPromptSetTokens bounds the tokens of the prompt set, which is held
	// in memory for the whole run: prompt_set_size × the mean input length
	// of every shape × the targets run (some 6 bytes of text a token).
	MaxPromptSetTokens = 1 << 26
	// MaxResamples bounds ranking.resamples.
	MaxResamples = 100000
)

// LoadFile reads, parses and validates a bench configuration:
// LoadFileContext without a context.
func LoadFile(path string) (*Config, error) {
	return LoadFileContext(context.Background(), path)
}

// LoadFileContext reads, parses and validates a bench configuration. The
// file is read as the exporter's configuration is (config.ReadFile: at most
// config.MaxFileBytes, and the read ends when ctx does, a FIFO without a
// writer included), and so are the targets' bearer_token_files.
func LoadFileContext(ctx context.Context, path string) (*Config, error) {
	data, err := config.ReadFile(ctx, path)
	if err != nil {
		return nil, err
	}
	return parse(ctx, data, path)
}

// Parse parses and validates bench configuration bytes; file names the
// source in errors and anchors relative bearer_token_file paths.
//
// The targets section is validated by the exporter's own configuration
// loader (internal/config), so that a target means the same in both: the
// file is handed to it with every other top-level section blanked out line
// for line, which keeps its errors' line numbers true.
func Parse(data []byte, file string) (*Config, error) {
	return parse(context.Background(), data, file)
}

func parse(ctx context.Context, data []byte, file string) (*Config, error) {
	return parseWith(ctx, data, file, false)
}

// parseEmbedded parses and validates the configuration a report embeds
// (Environment.Config, EffectiveYAML's text) as Parse does, except that
// nothing it names is read: the merging machine need not hold the shards'
// bearer_token_files or traces, and their contents are not needed to
// merge. file names the source in errors.
func parseEmbedded(ctx context.Context, data []byte, file string) (*Config, error) {
	return parseWith(ctx, data, file, true)
}

// parseWith is parse; offline, it reads none of the files the
// configuration names (parseEmbedded).
func parseWith(ctx context.Context, data []byte, file string, offline bool) (*Config, error) {
	var c Config
	rootp, err := config.DecodeStrict(data, file, &c)
	if err != nil {
		return nil, err
	}
	if config.EmptyDocument(rootp) {
		return nil, &config.Error{File: file, Reason: "empty configuration: no targets and no bench block"}
	}
	root := *rootp
	targetsOnly, err := keepTopLevel(data, &root, "targets")
	if err != nil {
		return nil, &config.Error{File: file, Reason: err.Error()}
	}
	if offline {
		if targetsOnly, err = blankBearerTokenFiles(targetsOnly, &root); err != nil {
			return nil, &config.Error{File: file, Reason: err.Error()}
		}
	}
	if hasTopLevel(&root, "targets") {
		// Without a targets key the blanked file would be empty, which the
		// exporter's loader refuses; "at least one target" says it better.
		tc, err := config.ParseContext(ctx, targetsOnly, file)
		if err != nil {
			return nil, err
		}
		c.Targets = tc.Targets
	}
	sum := sha256.Sum256(data)
	c.File, c.SHA256 = file, hex.EncodeToString(sum[:])

	v := validator{ctx: ctx, file: file, root: &root, offline: offline}
	c.applyDefaults()
	c.validate(&v)
	if len(v.errs) > 0 {
		return nil, config.JoinErrors(v.errs)
	}
	return &c, nil
}

// hasTopLevel reports whether the document's mapping has the key.
func hasTopLevel(root *yaml.Node, key string) bool {
	doc := root
	if doc.Kind == yaml.DocumentNode && len(doc.Content) > 0 {
		doc = doc.Content[0]
	}
	if doc.Kind != yaml.MappingNode {
		return false
	}
	for i := 0; i+1 < len(doc.Content); i += 2 {
		if doc.Content[i].Value == key {
			return true
		}
	}
	return false
}

// blankBearerTokenFiles returns data with every target's
// bearer_token_file made empty, so that the exporter's loader
// validates the targets without reading their secrets. Line numbers stay
// true. The configuration EffectiveYAML writes has each on a line of its
// own; one that is not (a flow mapping, a multi-line value) is refused.
func blankBearerTokenFiles(data []byte, root *yaml.Node) ([]byte, error) {
	doc := root
	if doc.Kind == yaml.DocumentNode && len(doc.Content) > 0 {
		doc = doc.Content[0]
	}
	if doc.Kind != yaml.MappingNode {
		return data, nil
	}
	lines := strings.SplitAfter(string(data), "\n")
	for i := 0; i+1 < len(doc.Content); i += 2 {
		if doc.Content[i].Value != "targets" || doc.Content[i+1].Kind != yaml.SequenceNode {
			continue
		}
		for _, t := range doc.Content[i+1].Content {
			if t.Kind != yaml.MappingNode {
				continue
			}
			for j := 0; j+1 < len(t.Content); j += 2 {
				k, val := t.Content[j], t.Content[j+1]
				if k.Value != "bearer_token_file" {
					continue
				}
				if t.Style&yaml.FlowStyle != 0 || val.Line != k.Line || val.Kind != yaml.ScalarNode ||
					val.Style&(yaml.LiteralStyle|yaml.FoldedStyle) != 0 || k.Line < 1 || k.Line > len(lines) ||
					(j+2 < len(t.Content) && t.Content[j+2].Line == k.Line) {
					return nil, fmt.Errorf("line %d: bearer_token_file must be on a line of its own", k.Line)
				}
				// The key keeps its place (it may follow a list's "- "),
				// its value becomes none.
				line := lines[k.Line-1]
				if k.Column < 1 || k.Column > len(line) {
					return nil, fmt.Errorf("line %d: bearer_token_file must be on a line of its own", k.Line)
				}
				lines[k.Line-1] = line[:k.Column-1] + `bearer_token_file: ""` + "\n"
			}
		}
	}
	return []byte(strings.Join(lines, "")), nil
}

// keepTopLevel returns data with the lines of every top-level key other than
// keep replaced by empty lines.
func keepTopLevel(data []byte, root *yaml.Node, keep string) ([]byte, error) {
	doc := root
	if doc.Kind == yaml.DocumentNode && len(doc.Content) > 0 {
		doc = doc.Content[0]
	}
	if doc.Kind == 0 {
		return nil, nil
	}
	if doc.Kind != yaml.MappingNode {
		return nil, errors.New("the file must be a mapping with targets and bench")
	}
	lines := strings.SplitAfter(string(data), "\n")
	type span struct{ from, to int } // 1-based, inclusive
	var spans []span
	for i := 0; i+1 < len(doc.Content); i += 2 {
		k := doc.Content[i]
		if k.Value == keep {
			continue
		}
		to := len(lines)
		if i+2 < len(doc.Content) {
			to = doc.Content[i+2].Line - 1
		}
		if k.Line < 1 || to > len(lines) || (i+2 < len(doc.Content) && doc.Content[i+2].Line == k.Line) {
			return nil, errors.New("write the top-level keys on lines of their own (block style)")
		}
		spans = append(spans, span{k.Line, to})
	}
	for _, s := range spans {
		for l := s.from; l <= s.to; l++ {
			if strings.HasSuffix(lines[l-1], "\n") {
				lines[l-1] = "\n"
			} else {
				lines[l-1] = ""
			}
		}
	}
	return []byte(strings.Join(lines, "")), nil
}

func (c *Config) applyDefaults() {
	s := &c.Bench
	s.Matrix.applyDefaults(s.Sweep != nil)
	if s.WarmupSetting == nil {
		d := DefaultWarmup
		s.WarmupSetting = &d
	}
	s.Warmup = *s.WarmupSetting
	s.Duration = cmp.Or(s.Duration, DefaultDuration)
	s.Repeats = cmp.Or(s.Repeats, DefaultRepeats)
	s.MaxInFlight = cmp.Or(s.MaxInFlight, DefaultMaxInFlight)
	s.Stability.applyDefaults(s.Duration)
	if s.Sweep != nil {
		s.Sweep.applyDefaults(s)
	}
	if s.Agents != nil {
		s.Agents.applyDefaults(s)
	}
	s.PromptSetSize = cmp.Or(s.PromptSetSize, DefaultPromptSetSize)
	s.MaxSamplesPerRepeat = cmp.Or(s.MaxSamplesPerRepeat, DefaultMaxSamplesPerRepeat)
	if s.Weights == nil {
		w := DefaultWeights
		s.Weights = &w
	}
	s.Ranking.Latency = cmp.Or(s.Ranking.Latency, DefaultLatencyMetric)
	s.Ranking.Resamples = cmp.Or(s.Ranking.Resamples, DefaultResamples)
	s.Ranking.Confidence = cmp.Or(s.Ranking.Confidence, DefaultConfidence)
	s.Regression.Threshold = cmp.Or(s.Regression.Threshold, DefaultThreshold)
	if s.MinSuccessSetting == nil {
		m := DefaultMinSuccess
		s.MinSuccessSetting = &m
	}
	s.MinSuccess = *s.MinSuccessSetting
	if len(s.Regression.Metrics) == 0 {
		s.Regression.Metrics = slices.Clone(DefaultGatedMetrics)
	}
	for i := range s.KnownAnswers {
		s.KnownAnswers[i].MaxTokens = cmp.Or(s.KnownAnswers[i].MaxTokens, config.DefaultKnownAnswerMaxTokens)
	}
	s.GPUSampleInterval = cmp.Or(s.GPUSampleInterval, DefaultGPUSampleInterval)
	s.ColdStart.applyDefaults(c)
	s.Perplexity.applyDefaults()
}

// applyDefaults gives the matrix its arrival process and, when rates,
// concurrencies or a sweep (sweep) need one, a default shape, and names
// its shapes.
func (m *MatrixSpec) applyDefaults(sweep bool) {
	if m.Process == "" {
		m.Process = config.ProcessPoisson
	}
	// A default shape serves rates, concurrencies and the sweep; a matrix of
	// replays alone has none, and its report lists none.
	if len(m.Shapes) == 0 && (len(m.Rates)+len(m.Concurrencies) > 0 || sweep) {
		m.Shapes = []Shape{{
			InputTokens:  Length{config.Distribution{Dist: "fixed", Mean: config.DefaultInputTokens}},
			OutputTokens: Length{config.Distribution{Dist: "fixed", Mean: config.DefaultOutputTokens}},
		}}
	}
	for i := range m.Shapes {
		sh := &m.Shapes[i]
		if sh.InputTokens.Dist == "" {
			sh.InputTokens.Distribution = config.Distribution{Dist: "fixed", Mean: config.DefaultInputTokens}
		}
		if sh.OutputTokens.Dist == "" {
			sh.OutputTokens.Distribution = config.Distribution{Dist: "fixed", Mean: config.DefaultOutputTokens}
		}
		if sh.Name == "" {
			sh.Name = fmt.Sprintf("in%d-out%d", meanTokens(sh.InputTokens), meanTokens(sh.OutputTokens))
		}
	}
}

// applyDefaults fills the stability rule's defaults; its window and
// longest run follow the measured duration.
func (st *StabilitySpec) applyDefaults(duration time.Duration) {
	st.Windows = cmp.Or(st.Windows, DefaultStabilityWindows)
	if st.Window == 0 && st.Windows > 0 {
		st.Window = duration / time.Duration(st.Windows)
	}
	st.Tolerance = cmp.Or(st.Tolerance, DefaultStabilityTol)
	if st.MaxDuration == 0 {
		st.MaxDuration = max(3*duration, DefaultStabilityMaxDuration)
	}
	st.MinRequests = cmp.Or(st.MinRequests, DefaultStabilityMinReqs)
}

// applyDefaults fills the sweep's defaults; its pass rule, duration and
// warm-up follow the bench's (s).
func (sw *SweepSpec) applyDefaults(s *Spec) {
	sw.Start = cmp.Or(sw.Start, 1)
	sw.Factor = cmp.Or(sw.Factor, 2)
	sw.MaxRate = cmp.Or(sw.MaxRate, 1024)
	if sw.Refine == nil {
		// A pointer, not a zero check: refine: 0 asks for no bisection.
		n := DefaultSweepRefine
		sw.Refine = &n
	}
	sw.MinGoodput = cmp.Or(sw.MinGoodput, 0.95)
	sw.MinSuccess = cmp.Or(sw.MinSuccess, 0.999)
	if sw.Pass == "" {
		sw.Pass = SweepPassGoodput
		if s.SLO == (config.SLO{}) {
			sw.Pass = SweepPassSuccess
		}
	}
	sw.Duration = cmp.Or(sw.Duration, s.Duration)
	if sw.WarmupSetting == nil {
		d := s.Warmup
		sw.WarmupSetting = &d
	}
	sw.Warmup = *sw.WarmupSetting
}

func meanTokens(l Length) int {
	if l.Dist == "uniform" {
		return (l.Min + l.Max) / 2
	}
	return int(math.Round(l.Mean))
}

// latencyFigures are the figures a ranking may score.
var latencyFigures = map[string]bool{
	"ttft_p50": true, "ttft_p90": true, "ttft_p99": true,
	"tpot_p50": true, "tpot_p90": true, "tpot_p99": true,
	"e2e_p50": true, "e2e_p90": true, "e2e_p99": true,
}

var shapeNameRE = regexp.MustCompile(`^[a-zA-Z0-9_][a-zA-Z0-9_.:-]*$`)

func (c *Config) validate(v *validator) {
	c.validateTargets(v)
	shapes := c.validateMatrix(v)
	c.validateRun(v)
	c.validateStability(v)
	c.validateSweep(v)
	c.validateAgents(v)
	c.validateRequests(v)
	c.validateRanking(v)
	c.validateKnownAnswers(v)
	c.validateReplays(v, shapes)
	c.validateColdStart(v)
	c.validatePerplexity(v)
	c.validateCost(v)
	if c.Bench.GPUSampleInterval < 0 {
		v.add(path{"bench"}, "gpu_sample_interval", "must be positive")
	}
}

// validateTargets: the run's targets are configured ones.
func (c *Config) validateTargets(v *validator) {
	s := &c.Bench
	if len(c.Targets) == 0 {
		v.add(path{}, "targets", "at least one target is required")
	}
	known := map[string]bool{}
	for _, t := range c.Targets {
		known[t.Name] = true
	}
	for i, name := range s.Targets {
		if !known[name] {
			v.addPath(path{"bench", "targets", i}, fmt.Sprintf("%q is not a configured target", name))
		}
	}
}

// validateMatrix checks the matrix's loads and shapes, and returns the
// shapes' names (a replay may not take one).
func (c *Config) validateMatrix(v *validator) (shapes map[string]bool) {
	m := &c.Bench.Matrix
	mp := path{"bench", "matrix"}
	if len(m.Rates) == 0 && len(m.Concurrencies) == 0 && len(m.Replays) == 0 {
		v.add(mp, "rates", "the matrix needs at least one rate, concurrency or replay")
	}
	if m.Rate != 0 || m.Ramp != nil || len(m.Stages) > 0 {
		v.add(mp, "rate", "the matrix's rates set each cell's rate: rate, ramp and stages are not the matrix's")
	}
	for i, r := range m.Rates {
		a := m.Arrival
		a.Rate, a.Ramp, a.Stages = r, nil, nil
		a = a.WithDefaults()
		if !(r > 0) {
			v.addPath(append(mp.clone(), "rates", i), "must be a positive rate in requests per second")
		} else if err := a.Validate(); err != nil {
			v.addPath(append(mp.clone(), "rates", i), err.Error())
		}
	}
	for i, n := range m.Concurrencies {
		if n < 1 {
			v.addPath(append(mp.clone(), "concurrencies", i), "must be at least 1")
		}
	}
	shapes = map[string]bool{}
	for i := range m.Shapes {
		sh := &m.Shapes[i]
		p := append(mp.clone(), "shapes", i)
		switch {
		case len(sh.Name) > config.MaxNameBytes:
			v.add(p, "name", fmt.Sprintf("a name of %d bytes: at most %d (config.MaxNameBytes)", len(sh.Name), config.MaxNameBytes))
		case !shapeNameRE.MatchString(sh.Name):
			v.add(p, "name", fmt.Sprintf("%q must match %s", sh.Name, shapeNameRE))
		case shapes[sh.Name]:
			v.add(p, "name", fmt.Sprintf("%q is used by another shape", sh.Name))
		}
		shapes[sh.Name] = true
		for _, prob := range config.CheckLengths(&sh.InputTokens.Distribution, &sh.OutputTokens.Distribution) {
			v.addPath(append(p.clone(), prob.Path...), prob.Reason)
		}
		for _, prob := range config.CheckPrefixCache(sh.prefixPrompt(c.Bench.Seed)) {
			v.addPath(append(p.clone(), prob.Path...), prob.Reason)
		}
		c.validateShapeKinds(v, p, sh)
	}
	return shapes
}

// validateRun checks the run's durations, repeats and in-flight cap.
func (c *Config) validateRun(v *validator) {
	s := &c.Bench
	bp := path{"bench"}
	if s.Warmup < 0 {
		v.add(bp, "warmup", "must not be negative")
	}
	if s.Duration < 0 {
		v.add(bp, "duration", "must be positive")
	}
	if s.MaxWarmup < 0 || (s.MaxWarmup > 0 && s.MaxWarmup < s.Warmup) {
		v.add(bp, "max_warmup", "must not be below bench.warmup")
	}
	if s.Repeats < 1 {
		v.add(bp, "repeats", "must be at least 1")
	}
	if s.MaxInFlight < 1 {
		v.add(bp, "max_in_flight", "must be at least 1")
	}
}

// validateStability checks the stability rule's parameters.
func (c *Config) validateStability(v *validator) {
	s := &c.Bench
	st := &s.Stability
	sp := path{"bench", "stability"}
	if st.Windows < 1 {
		v.add(sp, "windows", "must be at least 1")
	}
	if st.Window <= 0 {
		v.add(sp, "window", "must be positive")
	}
	if !(st.Tolerance > 0) {
		v.add(sp, "tolerance", "must be a positive ratio")
	}
	if st.MaxDuration < s.Duration {
		v.add(sp, "max_duration", "must not be below bench.duration")
	}
	if st.MinRequests < 1 {
		v.add(sp, "min_requests", "must be at least 1")
	}
}

// validateSweep checks the rate sweep, when there is one.
func (c *Config) validateSweep(v *validator) {
	s := &c.Bench
	sw := s.Sweep
	if sw == nil {
		return
	}
	wp := path{"bench", "sweep"}
	if !(sw.Start > 0) {
		v.add(wp, "start", "must be a positive rate")
	}
	if !(sw.Factor > 1) {
		v.add(wp, "factor", "must be above 1")
	}
	if sw.MaxRate < sw.Start {
		v.add(wp, "max_rate", "must not be below start")
	}
	if *sw.Refine < 0 {
		v.add(wp, "refine", "must not be negative")
	}
	if !(sw.MinGoodput > 0 && sw.MinGoodput <= 1) {
		v.add(wp, "min_goodput", "must be a ratio in (0, 1]")
	}
	if sw.Duration < 0 || sw.Warmup < 0 {
		v.add(wp, "duration", "durations must not be negative")
	}
	if !(sw.MinSuccess > 0 && sw.MinSuccess <= 1) {
		v.add(wp, "min_success", "must be a ratio in (0, 1]")
	}
	switch {
	case sw.Pass != SweepPassGoodput && sw.Pass != SweepPassSuccess:
		v.add(wp, "pass", fmt.Sprintf("%q: goodput or success", sw.Pass))
	case sw.Pass == SweepPassGoodput && s.SLO == (config.SLO{}):
		v.add(wp, "pass", "pass: goodput needs bench.slo (or pass: success, which needs none)")
	}
}

// applyDefaults fills the agents search's defaults: the exporter's for a
// sessions workload's lengths and agent block, the bench's warm-up and
// duration.
func (a *AgentsSpec) applyDefaults(s *Spec) {
	fixed := func(l *Length, mean int) {
		if l.Dist == "" {
			l.Distribution = config.Distribution{Dist: "fixed", Mean: float64(mean)}
		}
	}
	fixed(&a.UserTokens, config.DefaultUserTokens)
	fixed(&a.OutputTokens, config.DefaultOutputTokens)
	a.MaxConversationTokens = cmp.Or(a.MaxConversationTokens, config.DefaultMaxConversationTokens)
	ag := &a.Agent
	if ag.ToolLatency == (config.ThinkTime{}) {
		ag.ToolLatency = config.ThinkTime{Dist: "fixed", Mean: config.DefaultToolLatency}
	}
	ag.ToolLatency.Dist = cmp.Or(ag.ToolLatency.Dist, "fixed")
	if ag.ToolResultTokens.Dist == "" {
		ag.ToolResultTokens = config.Distribution{Dist: "fixed", Mean: cmp.Or(ag.ToolResultTokens.Mean, config.DefaultToolResultTokens)}
	}
	ag.MaxTurns = cmp.Or(ag.MaxTurns, config.DefaultAgentMaxTurns)
	a.SLO.Quantile = cmp.Or(a.SLO.Quantile, DefaultAgentsQuantile)
	a.SLO.MinSuccess = cmp.Or(a.SLO.MinSuccess, DefaultAgentsMinSuccess)
	a.Start = cmp.Or(a.Start, DefaultAgentsStart)
	a.MaxAgents = cmp.Or(a.MaxAgents, DefaultMaxAgents)
	a.Duration = cmp.Or(a.Duration, s.Duration)
	if a.WarmupSetting == nil {
		d := s.Warmup
		a.WarmupSetting = &d
	}
	a.Warmup = *a.WarmupSetting
}

// validateAgents checks the agents search, when there is one: its tools
// against every target's flavor (an agent's turns are chat messages), its
// lengths as a request's, its agent block as the exporter checks a
// workload's, its tier and its counts.
func (c *Config) validateAgents(v *validator) {
	a := c.Bench.Agents
	if a == nil {
		return
	}
	ap := path{"bench", "agents"}
	c.validateAgentTools(v, ap)
	for _, prob := range config.CheckLengths(&a.UserTokens.Distribution, &a.OutputTokens.Distribution) {
		pp := slices.Clone(prob.Path)
		if len(pp) > 0 && pp[0] == "input_tokens" {
			pp[0] = "user_tokens"
		}
		v.addPath(append(ap.clone(), pp...), strings.ReplaceAll(prob.Reason, "input_tokens", "user_tokens"))
	}
	if n := a.MaxConversationTokens; n < 2 || n > config.MaxTokens {
		v.add(ap, "max_conversation_tokens", fmt.Sprintf("must be between 2 and %d (config.MaxTokens), got %d", config.MaxTokens, n))
	}
	validateAgentBlock(v, append(ap.clone(), "agent"), &a.Agent)
	sp := append(ap.clone(), "slo")
	if a.SLO.TTFT < 0 || a.SLO.TPOT < 0 {
		v.add(sp, "ttft", "bounds must not be negative")
	}
	if !(a.SLO.Quantile > 0 && a.SLO.Quantile < 1) {
		v.add(sp, "quantile", fmt.Sprintf("must be in (0, 1), got %v", a.SLO.Quantile))
	}
	if !(a.SLO.MinSuccess > 0 && a.SLO.MinSuccess <= 1) {
		v.add(sp, "min_success", fmt.Sprintf("must be a ratio in (0, 1], got %v", a.SLO.MinSuccess))
	}
	switch {
	case a.Start < 1:
		v.add(ap, "start", fmt.Sprintf("must be at least 1 agent, got %d", a.Start))
	case a.MaxAgents < a.Start || a.MaxAgents > config.MaxActiveSessions:
		v.add(ap, "max_agents", fmt.Sprintf("must be between start (%d) and %d (config.MaxActiveSessions), got %d", a.Start, config.MaxActiveSessions, a.MaxAgents))
	case int64(a.MaxAgents)*int64(a.MaxConversationTokens) > config.MaxSessionTokens:
		v.add(ap, "max_agents", fmt.Sprintf("%d agents of up to %d tokens is %d tokens held at once: at most %d (config.MaxSessionTokens)",
			a.MaxAgents, a.MaxConversationTokens, int64(a.MaxAgents)*int64(a.MaxConversationTokens), config.MaxSessionTokens))
	}
	if !(a.Duration > 0) || a.Warmup < 0 {
		v.add(ap, "duration", "must be positive, and warmup not negative")
	}
}

// validateAgentTools checks the agents' tools: required, and offered to
// every target the run sends to, whose flavor must carry tool calls and
// their results as chat messages.
func (c *Config) validateAgentTools(v *validator, ap path) {
	a := c.Bench.Agents
	if len(a.Tools) == 0 {
		v.add(ap, "tools", "is required: the functions the model may call")
		return
	}
	kinds := config.RequestKinds{Tools: a.Tools}
	seen := map[config.Flavor]bool{}
	for _, t := range c.RunTargets() {
		if seen[t.Flavor] {
			continue
		}
		seen[t.Flavor] = true
		if t.Flavor != config.FlavorOpenAIChat {
			v.add(ap, "tools", fmt.Sprintf("an agent needs flavor %s (its turns carry tool calls and their results as chat messages), target %q is %s",
				config.FlavorOpenAIChat, t.Name, t.Flavor))
			return
		}
		if v.offline {
			continue
		}
		for _, prob := range config.CheckKinds(v.ctx, &kinds, t.Flavor, filepath.Dir(v.file)) {
			v.addPath(append(ap.clone(), prob.Path...), fmt.Sprintf("%s (target %q)", prob.Reason, t.Name))
		}
	}
}

// validateAgentBlock checks an agent block at p as the exporter checks a
// workload's (config's validateAgent): the turn limit, the tool latency's
// distribution and bounds, the results' lengths.
func validateAgentBlock(v *validator, p path, ag *config.Agent) {
	if ag.MaxTurns < 1 || ag.MaxTurns > config.MaxSessionTurns {
		v.add(p, "max_turns", fmt.Sprintf("must be between 1 and %d (config.MaxSessionTurns), got %d", config.MaxSessionTurns, ag.MaxTurns))
	}
	lp := append(p.clone(), "tool_latency")
	d := &ag.ToolLatency
	switch {
	case !slices.Contains(config.ThinkTimeDists, d.Dist):
		v.add(lp, "dist", fmt.Sprintf("%q is not one of %v", d.Dist, config.ThinkTimeDists))
	case min(d.Mean, d.Stddev, d.Min, d.Max) < 0 || max(d.Mean, d.Stddev, d.Min, d.Max) > config.MaxThinkTime:
		v.add(lp, "mean", fmt.Sprintf("durations must be between 0 and %v (config.MaxThinkTime)", config.MaxThinkTime))
	case d.Max != 0 && d.Max < d.Min:
		v.add(lp, "max", fmt.Sprintf("%v must not be below min %v", d.Max, d.Min))
	case d.Dist == "uniform" && d.Max == 0:
		v.add(lp, "max", "uniform needs 0 <= min <= max, max set")
	case (d.Dist == "exponential" || d.Dist == "lognormal") && d.Mean <= 0:
		v.add(lp, "mean", "must be positive")
	case d.Dist == "lognormal" && d.Stddev <= 0:
		v.add(lp, "stddev", "must be positive")
	case (d.Dist == "exponential" || d.Dist == "lognormal") && d.Max == 0:
		d.Max = config.MaxThinkTime
	}
	// A result's length is checked as a request's input: its own output
	// is one token, never what limits it.
	r := &ag.ToolResultTokens
	if r.Max == 0 && (r.Dist == "normal" || r.Dist == "lognormal") {
		r.Max = config.MaxToolResultTokens
	}
	one := config.Distribution{Dist: "fixed", Mean: 1}
	for _, prob := range config.CheckLengths(r, &one) {
		pp := slices.Clone(prob.Path)
		if len(pp) > 0 && pp[0] == "input_tokens" {
			pp = pp[1:]
		}
		v.addPath(append(append(p.clone(), "tool_result_tokens"), pp...), strings.ReplaceAll(prob.Reason, "input_tokens", "tool_result_tokens"))
		return
	}
	if r.Dist == "uniform" && r.Max > config.MaxToolResultTokens || r.Dist != "uniform" && max(r.Max, r.Min, int(math.Ceil(r.Mean))) > config.MaxToolResultTokens {
		v.add(p, "tool_result_tokens", fmt.Sprintf("must be at most %d tokens (config.MaxToolResultTokens)", config.MaxToolResultTokens))
	}
}

// validateRequests checks what every request carries and what is kept of
// it: the SLO, the sampling, the prompt set, the samples per repeat.
func (c *Config) validateRequests(v *validator) {
	s := &c.Bench
	bp := path{"bench"}
	if s.SLO.TTFT < 0 || s.SLO.TPOT < 0 || s.SLO.E2E < 0 {
		v.add(bp, "slo", "thresholds must not be negative")
	}
	if s.Sampling.MinTokens < 0 {
		v.add(append(bp.clone(), "sampling"), "min_tokens", "must not be negative")
	} else if s.Sampling.MinTokens > config.MaxTokens {
		v.add(append(bp.clone(), "sampling"), "min_tokens", fmt.Sprintf("at most %d tokens (config.MaxTokens), got %d", config.MaxTokens, s.Sampling.MinTokens))
	}
	switch {
	case s.PromptSetSize < 1:
		v.add(bp, "prompt_set_size", "must be at least 1")
	case s.PromptSetSize > MaxPromptSetSize:
		v.add(bp, "prompt_set_size", fmt.Sprintf("at most %d (bench.MaxPromptSetSize), got %d", MaxPromptSetSize, s.PromptSetSize))
	default:
		c.validatePromptSetTokens(v)
	}
	if s.MaxSamplesPerRepeat < 100 {
		v.add(bp, "max_samples_per_repeat", "must be at least 100")
	}
}

// validateRanking checks the ranking's weights, references and rule, and
// the regression check against a baseline.
func (c *Config) validateRanking(v *validator) {
	s := &c.Bench
	bp := path{"bench"}
	w := s.Weights
	if !(w.Latency >= 0 && w.Throughput >= 0 && w.Memory >= 0 && w.Accuracy >= 0 && w.Efficiency >= 0) ||
		math.IsInf(w.Latency+w.Throughput+w.Memory+w.Accuracy+w.Efficiency, 0) {
		v.add(bp, "weights", "must be finite and not negative")
	} else if w.Latency+w.Throughput+w.Memory+w.Accuracy+w.Efficiency == 0 {
		v.add(bp, "weights", "at least one weight must be positive")
	}
	if s.References.Latency < 0 || s.References.Throughput < 0 || s.References.MemoryBytes < 0 {
		v.add(bp, "references", "must not be negative")
	}
	rp := path{"bench", "ranking"}
	if !latencyFigures[s.Ranking.Latency] {
		v.add(rp, "latency", fmt.Sprintf("%q is not one of ttft, tpot, e2e with _p50, _p90 or _p99", s.Ranking.Latency))
	}
	if s.Ranking.Resamples < 100 {
		v.add(rp, "resamples", "must be at least 100")
	} else if s.Ranking.Resamples > MaxResamples {
		v.add(rp, "resamples", fmt.Sprintf("at most %d (bench.MaxResamples), got %d", MaxResamples, s.Ranking.Resamples))
	}
	if !(s.Ranking.Confidence > 0.5 && s.Ranking.Confidence < 1) {
		v.add(rp, "confidence", "must be between 0.5 and 1")
	}
	if !(s.MinSuccess >= 0 && s.MinSuccess <= 1) {
		v.add(bp, "min_success", fmt.Sprintf("must be a ratio between 0 and 1, got %g", s.MinSuccess))
	}
	gp := path{"bench", "regression"}
	if !(s.Regression.Threshold > 0) {
		v.add(gp, "threshold", "must be a positive ratio")
	}
	for i, m := range s.Regression.Metrics {
		// A gated figure needs an interval: the figures of CellResult.CI.
		if figureIndex(m) < 0 {
			v.addPath(append(gp.clone(), "metrics", i), fmt.Sprintf("%q is not a figure with an interval: %s", m, strings.Join(FigureNames[:], ", ")))
		}
	}
}

// validateKnownAnswers checks the accuracy checks and compiles their
// patterns.
func (c *Config) validateKnownAnswers(v *validator) {
	s := &c.Bench
	for i := range s.KnownAnswers {
		ka := &s.KnownAnswers[i]
		p := path{"bench", "known_answers", i}
		if ka.Prompt == "" {
			v.add(p, "prompt", "is required")
		}
		re, err := regexp.Compile(ka.Expect)
		switch {
		case ka.Expect == "":
			v.add(p, "expect", "is required")
		case err != nil:
			v.add(p, "expect", err.Error())
		default:
			ka.Pattern = re
		}
		if ka.MaxTokens < 1 {
			v.add(p, "max_tokens", "must be at least 1")
		} else if ka.MaxTokens > config.MaxTokens {
			v.add(p, "max_tokens", fmt.Sprintf("at most %d tokens (config.MaxTokens), got %d", config.MaxTokens, ka.MaxTokens))
		}
	}
}

// validatePromptSetTokens bounds the prompt set held in memory: every run
// target gets PromptSetSize prompts of every shape, of the shape's mean
// length on average.
func (c *Config) validatePromptSetTokens(v *validator) {
	var perPrompt float64
	for _, sh := range c.Bench.Matrix.Shapes {
		d := sh.InputTokens.Distribution
		mean := d.Mean
		if d.Dist == "uniform" {
			mean = float64(d.Min+d.Max) / 2
		}
		if !(mean >= 0 && mean <= config.MaxTokens) {
			return // the shape's own error says it
		}
		perPrompt += mean
	}
	targets := max(len(c.RunTargets()), 1)
	if total := float64(c.Bench.PromptSetSize) * perPrompt * float64(targets); total > MaxPromptSetTokens {
		v.add(path{"bench"}, "prompt_set_size", fmt.Sprintf(
			"%d prompts × %.0f input tokens (the mean of each shape, summed) × %d targets is %.0f tokens held in memory: at most %d (bench.MaxPromptSetTokens); lower prompt_set_size",
			c.Bench.PromptSetSize, perPrompt, targets, total, MaxPromptSetTokens))
	}
}

// RunTargets returns the targets the run measures, in configuration order.
func (c *Config) RunTargets() []config.Target {
	if len(c.Bench.Targets) == 0 {
		return c.Targets
	}
	want := map[string]bool{}
	for _, n := range c.Bench.Targets {
		want[n] = true
	}
	var out []config.Target
	for _, t := range c.Targets {
		if want[t.Name] {
			out = append(out, t)
		}
	}
	return out
}

// EffectiveYAML is the configuration with its defaults applied, for the
// report. Bearer tokens are never read into it, and header values are
// hidden, since they may carry keys.
func (c *Config) EffectiveYAML() string {
	cp := *c
	cp.Targets = append([]config.Target(nil), c.Targets...)
	for i := range cp.Targets {
		if len(cp.Targets[i].Headers) > 0 {
			h := map[string]string{}
			for k := range cp.Targets[i].Headers {
				h[k] = "<hidden>"
			}
			cp.Targets[i].Headers = h
		}
	}
	b, err := yaml.Marshal(&cp)
	if err != nil {
		return "# cannot render: " + err.Error()
	}
	return string(b)
}

// path addresses a node: strings are mapping keys, ints sequence indexes.
type path []any

func (p path) clone() path { return append(path{}, p...) }

func (p path) String() string { return config.PathString(p) }

type validator struct {
	ctx  context.Context
	file string
	root *yaml.Node
	errs []error
	// offline: the files the configuration names are not looked at
	// (parseEmbedded).
	offline bool
}

func (v *validator) add(p path, field, reason string) {
	v.addPath(append(p.clone(), field), reason)
}

func (v *validator) addPath(full path, reason string) {
	v.errs = append(v.errs, &config.Error{File: v.file, Line: lineOf(v.root, full), Field: full.String(), Reason: reason})
}

// lineOf is the line of the deepest node of p present in the file.
func lineOf(root *yaml.Node, p path) int { return config.LineOf(root, p) }

// validateReplays applies the replays' defaults, resolves their paths
// against the configuration file's directory and checks them, as the
// exporter checks a workload's replay block.
func (c *Config) validateReplays(v *validator, shapes map[string]bool) {
	names := map[string]bool{}
	for i := range c.Bench.Matrix.Replays {
		r := &c.Bench.Matrix.Replays[i]
		p := path{"bench", "matrix", "replays", i}
		switch {
		case len(r.Name) > config.MaxNameBytes:
			v.add(p, "name", fmt.Sprintf("a name of %d bytes: at most %d (config.MaxNameBytes)", len(r.Name), config.MaxNameBytes))
		case !shapeNameRE.MatchString(r.Name):
			v.add(p, "name", fmt.Sprintf("%q must match %s", r.Name, shapeNameRE))
		case names[r.Name] || shapes[r.Name]:
			v.add(p, "name", fmt.Sprintf("%q is used by another replay or shape", r.Name))
		}
		names[r.Name] = true
		if r.Speed == 0 {
			r.Speed = 1
		}
		if r.Sample == 0 {
			r.Sample = 1
		}
		if r.OnMalformed == "" {
			r.OnMalformed = config.DefaultReplayMalformed
		}
		if r.Words == "" {
			r.Words = WordsPerRepeat
		}
		if r.Words != WordsPerRepeat && r.Words != WordsReuse {
			v.add(p, "words", fmt.Sprintf("%q: per_repeat or reuse", r.Words))
		}
		if r.BlockSize == 0 && r.Source == "mooncake" {
			r.BlockSize = config.DefaultReplayBlockSize
		}
		if _, err := replay.ParseFormat(r.Source); err != nil {
			v.add(p, "source", err.Error())
		}
		if _, err := replay.ParsePolicy(r.OnMalformed); err != nil {
			v.add(p, "on_malformed", err.Error())
		}
		if r.Path == "" {
			v.add(p, "path", "is required")
		} else {
			if !filepath.IsAbs(r.Path) {
				r.Path = filepath.Join(filepath.Dir(v.file), r.Path)
			}
			if _, err := os.Stat(r.Path); err != nil && !v.offline {
				v.add(p, "path", fmt.Sprintf("cannot read: %v", err))
			}
		}
		if !(r.Speed > 0) || math.IsInf(r.Speed, 0) {
			v.add(p, "speed", "must be a finite number > 0")
		}
		if r.Start < 0 || (r.End != 0 && r.End <= r.Start) {
			v.add(p, "end", "the window must have start >= 0 and end after start")
		}
		if !(r.Sample > 0 && r.Sample <= 1) {
			v.add(p, "sample", "must be in (0, 1]")
		}
		if r.BlockSize < 0 || (r.BlockSize != 0 && r.Source != "mooncake") {
			v.add(p, "block_size", "only applies to source mooncake, and must be positive")
		} else if r.BlockSize > config.MaxTokens {
			v.add(p, "block_size", fmt.Sprintf("at most %d tokens (config.MaxTokens), got %d", config.MaxTokens, r.BlockSize))
		}
		if !(r.MaxRate >= 0) || r.MaxRate > config.MaxRateLimit {
			v.add(p, "max_rate", fmt.Sprintf("must be in [0, %g] requests/s", float64(config.MaxRateLimit)))
		}
		if r.ForceOutputTokens && r.Source != "jsonl" {
			v.add(p, "force_output_tokens", "only applies to source jsonl")
		}
	}
}

// validateCost checks bench.cost: prices finite, not negative and at most
// MaxGPUHourUSD; a model map of named entries within the file's limits; a
// GPU count within MaxCostGPUs that has a price to be priced at.
func (c *Config) validateCost(v *validator) {
	cs := c.Bench.Cost
	if cs == nil {
		return
	}
	cp := path{"bench", "cost"}
	price := func(p path, field string, usd float64) {
		if !(usd >= 0 && usd <= MaxGPUHourUSD) {
			v.add(p, field, fmt.Sprintf("a price per GPU-hour in USD must be in [0, %d], got %v", MaxGPUHourUSD, usd))
		}
	}
	if cs.GPUHourUSD == nil && len(cs.GPUHourUSDByModel) == 0 {
		v.add(path{"bench"}, "cost", "gives no price: set gpu_hour_usd, gpu_hour_usd_by_model, or both")
	}
	if cs.GPUHourUSD != nil {
		price(cp, "gpu_hour_usd", *cs.GPUHourUSD)
	}
	if len(cs.GPUHourUSDByModel) > config.MaxListItems {
		v.add(cp, "gpu_hour_usd_by_model", fmt.Sprintf("at most %d models, got %d", config.MaxListItems, len(cs.GPUHourUSDByModel)))
	}
	for _, model := range slices.Sorted(maps.Keys(cs.GPUHourUSDByModel)) {
		mp := append(cp.clone(), "gpu_hour_usd_by_model")
		switch {
		case strings.TrimSpace(model) == "":
			v.add(mp, model, "a GPU model name (NVML's, as report.json's environment.gpus names it) must not be empty")
		case len(model) > config.MaxNameBytes:
			v.add(mp, model, fmt.Sprintf("a GPU model name is at most %d bytes", config.MaxNameBytes))
		default:
			price(mp, model, cs.GPUHourUSDByModel[model])
		}
	}
	switch {
	case cs.GPUs < 0 || cs.GPUs > MaxCostGPUs:
		v.add(cp, "gpus", fmt.Sprintf("must be in [0, %d], got %d", MaxCostGPUs, cs.GPUs))
	case cs.GPUs > 0 && cs.GPUHourUSD == nil:
		v.add(cp, "gpus", "prices GPUs this host does not read, whose model is unknown: set gpu_hour_usd")
	}
}

// validateShapeKinds checks a shape's request kinds against the flavor of
// every target it is sent to, and compiles its schemas (a schema file is
// relative to the configuration's file). An embedded configuration is
// never sent (bench merge and verify read it): its kinds are not checked.
func (c *Config) validateShapeKinds(v *validator, p path, sh *Shape) {
	if (!sh.RequestKinds.Any() && sh.ToolChoice == "") || v.offline {
		return
	}
	seen := map[config.Flavor]bool{}
	for _, t := range c.RunTargets() {
		if seen[t.Flavor] {
			continue
		}
		seen[t.Flavor] = true
		probs := config.CheckKinds(v.ctx, &sh.RequestKinds, t.Flavor, filepath.Dir(v.file))
		for _, prob := range probs {
			v.addPath(append(p.clone(), prob.Path...), fmt.Sprintf("%s (target %q)", prob.Reason, t.Name))
		}
		if len(probs) > 0 {
			return
		}
	}
}

// warmupBound is the longest a repeat's warm-up of warmup before duration
// measured may last: MaxWarmup when set, else warmup + duration.
func (s *Spec) warmupBound(warmup, duration time.Duration) time.Duration {
	if s.MaxWarmup > 0 {
		return max(s.MaxWarmup, warmup)
	}
	return warmup + duration
}
