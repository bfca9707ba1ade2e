package bench

import (
	"context"
	"errors"
	"fmt"
	"time"

	yaml "go.yaml.in/yaml/v3"

	"github.com/infer-exporter/infer_exporter/internal/config"
	"github.com/infer-exporter/infer_exporter/probe/client"
)

// The quick start: `bench --target.url=URL --rate=2 --duration=10s` runs
// one cell without a configuration file. The flags become a configuration
// (quickConfig), parsed and validated by the same code as a file's, so a
// quick start measures what the same file would, and its report embeds
// that configuration.

// quickFlags are the quick start's flags; zero is unset.
type quickFlags struct {
	url          string
	model        string
	rate         float64
	inputTokens  int
	outputTokens int
	duration     time.Duration
}

// set reports whether any quick-start flag was given.
func (q *quickFlags) set() bool {
	return q.url != "" || q.model != "" || q.rate != 0 || q.inputTokens != 0 || q.outputTokens != 0 || q.duration != 0
}

// quickFlagNames names the flags in errors.
const quickFlagNames = "--target.url, --model, --rate, --input-tokens, --output-tokens, --duration"

// DefaultQuickOutputDir is where a quick start writes its report without
// --output.dir.
const DefaultQuickOutputDir = "bench-out"

// quickTargetName is the quick start's target, in the report's cells.
const quickTargetName = "target"

// quickWarmup is the quick start's warm-up: a quarter of the duration, at
// most the bench's default (it lasts on until the pipeline is full).
func quickWarmup(d time.Duration) time.Duration {
	return min(DefaultWarmup, d/4)
}

// quickConfig is the configuration the flags say: one target (flavor
// openai-chat, the exporter's default), one open-loop rate of one shape,
// one repeat, no stability check (a short run would be extended to its
// bound). Unset flags take the bench's defaults. The arrivals are constant
// and the outputs their asked length (ignore_eos), so that what the quick
// start prints reads as its flags: a seeded Poisson window of 10 s at 2
// req/s sent 12 and read 1.30 req/s, and a model that ends early made an
// "out128" cell of 58-token answers.
// quickProcess is the quick start's arrival process, which --rate's help
// names.
const quickProcess = "constant"

func quickConfig(q *quickFlags) ([]byte, error) {
	if q.url == "" {
		return nil, errors.New("the quick start needs --target.url (or give a --config.file)")
	}
	rate, in, out, d := q.rate, q.inputTokens, q.outputTokens, q.duration
	if rate == 0 {
		rate = 1
	}
	if in == 0 {
		in = config.DefaultInputTokens
	}
	if out == 0 {
		out = config.DefaultOutputTokens
	}
	if d == 0 {
		d = DefaultDuration
	}
	type target struct {
		Name  string `yaml:"name"`
		URL   string `yaml:"url"`
		Model string `yaml:"model"`
	}
	type shape struct {
		InputTokens  int `yaml:"input_tokens"`
		OutputTokens int `yaml:"output_tokens"`
	}
	doc := struct {
		Targets []target `yaml:"targets"`
		Bench   struct {
			Matrix struct {
				Process string    `yaml:"process"`
				Rates   []float64 `yaml:"rates"`
				Shapes  []shape   `yaml:"shapes"`
			} `yaml:"matrix"`
			Sampling  map[string]bool `yaml:"sampling"`
			Warmup    string          `yaml:"warmup"`
			Duration  string          `yaml:"duration"`
			Repeats   int             `yaml:"repeats"`
			Stability map[string]bool `yaml:"stability"`
		} `yaml:"bench"`
	}{Targets: []target{{Name: quickTargetName, URL: q.url, Model: q.model}}}
	doc.Bench.Matrix.Process, doc.Bench.Matrix.Rates = quickProcess, []float64{rate}
	doc.Bench.Sampling = map[string]bool{"ignore_eos": true}
	doc.Bench.Matrix.Shapes = []shape{{in, out}}
	doc.Bench.Warmup, doc.Bench.Duration = quickWarmup(d).String(), d.String()
	doc.Bench.Repeats = 1
	doc.Bench.Stability = map[string]bool{"enabled": false}
	return yaml.Marshal(&doc)
}

// servedModel asks an OpenAI-compatible server's /v1/models for the one
// model it serves; a server that lists none or several needs --model.
func servedModel(ctx context.Context, base string) (string, error) {
	// A client of its own, whose connection is closed with the answer.
	cl := client.New(client.Options{MaxConnsPerHost: 1})
	defer cl.Close()
	m := cl.Models(ctx, &client.Target{BaseURL: base})
	if m.Err != nil {
		return "", fmt.Errorf("no --model, and %w", m.Err)
	}
	if len(m.IDs) != 1 || m.IDs[0] == "" {
		return "", fmt.Errorf("no --model, and %s lists %d models (%s): name one with --model", m.URL, len(m.IDs), client.ListModels(m.IDs, 5))
	}
	return m.IDs[0], nil
}

// loadQuick is the quick start's configuration, validated as a file's.
func loadQuick(ctx context.Context, q *quickFlags) (*Config, error) {
	if q.url != "" && q.model == "" {
		m, err := servedModel(ctx, q.url)
		if err != nil {
			return nil, err
		}
		q.model = m
	}
	data, err := quickConfig(q)
	if err != nil {
		return nil, err
	}
	cfg, err := parse(ctx, data, "(quick-start flags)")
	if err != nil {
		return nil, err
	}
	// No file: the audit chain has none to hash again; the configuration
	// is in the report (environment.config).
	cfg.File = ""
	return cfg, nil
}
