// Package config loads the exporter's YAML configuration: the targets it
// measures and the workloads it sends them. Parsing is strict: an unknown
// field, a wrong type or an invalid value is an error that names the file, the
// line and the reason, so that a typo is never silently ignored.
package config

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/url"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"time"

	yaml "go.yaml.in/yaml/v3"
)

// Config is the whole configuration file.
type Config struct {
	Targets   []Target   `yaml:"targets"`
	Workloads []Workload `yaml:"workloads"`
	// Modules are the one-shot probes of /probe, by name (modules.go).
	Modules map[string]Module `yaml:"modules"`
	// Probe guards /probe: its allow list and per-target ceilings.
	Probe ProbeSettings `yaml:"probe"`
}

// Target is one inference server endpoint.
type Target struct {
	Name   string `yaml:"name"`
	URL    string `yaml:"url"`
	Flavor Flavor `yaml:"flavor"`
	Model  string `yaml:"model"`
	// BearerTokenFile holds the API key. The key itself never appears in the
	// config, so it is never echoed by --config.check or logs.
	BearerTokenFile string            `yaml:"bearer_token_file"`
	Headers         map[string]string `yaml:"headers"`
	// Timeout bounds one request from send to last byte.
	Timeout time.Duration `yaml:"timeout"`
	// Metrics: reading the server's own /metrics (server.go).
	Metrics ServerMetrics `yaml:"metrics"`
	// Quality, when set, scores the target's perplexity over a fixed text
	// at a low interval (quality.go).
	Quality *Quality `yaml:"quality"`

	// BearerToken is read from BearerTokenFile at load time.
	BearerToken Secret `yaml:"-"`
}

// Root is the server root of the target: URL without a trailing "/" and
// without a trailing "/v1", for the endpoints that live outside the OpenAI
// API (/metrics, /tokenize, the native generation APIs, the info endpoints).
func (t *Target) Root() string { return RootURL(t.URL) }

// RootURL is Target.Root for a bare base URL: u without a trailing "/" and
// without a trailing "/v1".
func RootURL(u string) string {
	return strings.TrimSuffix(strings.TrimRight(u, "/"), "/v1")
}

// Secret is a string that prints as "<secret>", so that it cannot leak through
// a %v or a log attribute.
type Secret string

func (Secret) String() string { return "<secret>" }

// MarshalYAML hides the value.
func (Secret) MarshalYAML() (any, error) { return "<secret>", nil }

// MarshalJSON hides the value.
func (Secret) MarshalJSON() ([]byte, error) { return []byte(`"<secret>"`), nil }

// LogValue hides the value from log/slog, in every handler.
func (Secret) LogValue() slog.Value { return slog.StringValue("<secret>") }

// GoString hides the value from %#v.
func (Secret) GoString() string { return "<secret>" }

// Workload is a stream of requests sent to one target.
type Workload struct {
	Name   string `yaml:"name"`
	Target string `yaml:"target"`
	// Arrival is the open-loop arrival process and its rate ceiling.
	Arrival Arrival `yaml:"arrival"`
	// MaxInFlight caps concurrent requests. An arrival that finds the cap full
	// is dropped and counted, never delayed.
	MaxInFlight int      `yaml:"max_in_flight"`
	Prompt      Prompt   `yaml:"prompt"`
	Sampling    Sampling `yaml:"sampling"`
	SLO         SLO      `yaml:"slo"`
	// Duration of the workload; 0 runs until the exporter stops.
	Duration time.Duration `yaml:"duration"`
	// StallThreshold: a request in flight that has received nothing (no
	// token, or before its first, nothing since its scheduled instant) for
	// longer is counted as stalled; 0 takes DefaultStallThreshold.
	StallThreshold time.Duration `yaml:"stall_threshold"`
	// Checks are known-answer checks carried by some of the workload's
	// arrivals (checks.go).
	Checks []Check `yaml:"checks"`
	// Replay, when set, replays a trace in place of Arrival and Prompt
	// (replay.go).
	Replay *Replay `yaml:"replay"`
	// Sessions, when set, makes the workload multi-turn conversations
	// arriving by Arrival, in place of Prompt (sessions.go).
	Sessions *Sessions `yaml:"sessions"`
	// Kinds are the tools, response format and images every request
	// carries (kinds.go).
	Kinds RequestKinds `yaml:",inline"`
}

// Prompt describes the synthetic prompts and their output lengths.
type Prompt struct {
	InputTokens  Distribution `yaml:"input_tokens"`
	OutputTokens Distribution `yaml:"output_tokens"`
	Seed         int64        `yaml:"seed"`
	// The prefix-cache share of each prompt (prefixcache.go): 0 leaves
	// every prompt unique.
	CacheHitRate float64 `yaml:"cache_hit_rate"`
	PrefixPool   int     `yaml:"prefix_pool"`
	BlockSize    int     `yaml:"block_size"`
}

// Distribution is a token-length distribution, clamped to [Min, Max].
type Distribution struct {
	Dist   string  `yaml:"dist"` // fixed | uniform | normal | lognormal
	Mean   float64 `yaml:"mean"`
	Stddev float64 `yaml:"stddev"`
	Min    int     `yaml:"min"`
	Max    int     `yaml:"max"`
}

// Sampling parameters sent with each request. Pointers distinguish "unset"
// (the server's default) from zero.
type Sampling struct {
	Temperature *float64 `yaml:"temperature"`
	TopP        *float64 `yaml:"top_p"`
	Seed        *int64   `yaml:"seed"`
	// IgnoreEOS and MinTokens are vLLM extensions that force the output length;
	// set them only for servers that accept them.
	IgnoreEOS bool `yaml:"ignore_eos"`
	MinTokens int  `yaml:"min_tokens"`
}

// SLO thresholds; zero means "no threshold". A request counts as goodput when
// it succeeded and met every threshold that is set.
type SLO struct {
	TTFT time.Duration `yaml:"ttft"`
	TPOT time.Duration `yaml:"tpot"`
	E2E  time.Duration `yaml:"e2e"`
}

// Defaults applied to fields left unset.
const (
	DefaultTimeout     = 5 * time.Minute
	DefaultMaxInFlight = 64
	// DefaultStallThreshold: real engines pause between tokens for
	// milliseconds to a few seconds (a preemption, a long prefill batched
	// beside the stream); half a minute of silence is a stall.
	DefaultStallThreshold = 30 * time.Second
	// MinStallThreshold keeps the stall scan (a quarter of the threshold)
	// from spinning.
	MinStallThreshold = 100 * time.Millisecond
	// A prompt and output shape close to a chat turn.
	DefaultInputTokens  = 256
	DefaultOutputTokens = 128
)

// Error is a configuration error with its place in the file.
type Error struct {
	File   string
	Line   int // 0 when the error is the file's as a whole
	Field  string
	Reason string
	// Err is the underlying error, if any: a read's (fs.ErrNotExist,
	// context.Canceled).
	Err error
}

// Unwrap returns Err.
func (e *Error) Unwrap() error { return e.Err }

func (e *Error) Error() string {
	var b strings.Builder
	b.WriteString(e.File)
	if e.Line > 0 {
		fmt.Fprintf(&b, ":%d", e.Line)
	}
	b.WriteString(": ")
	if e.Field != "" {
		b.WriteString(e.Field)
		b.WriteString(": ")
	}
	b.WriteString(e.Reason)
	return b.String()
}

// LoadFile reads, parses and validates a configuration file: LoadFileContext
// without a context, for callers that cannot be interrupted anyway.
func LoadFile(path string) (*Config, error) {
	return LoadFileContext(context.Background(), path)
}

var yamlLineError = regexp.MustCompile(`^\s*line (\d+): (.*)$`)

// Parse parses and validates configuration bytes; file names the source in
// errors, and relative bearer_token_file paths are resolved against its
// directory.
func Parse(data []byte, file string) (*Config, error) {
	return ParseContext(context.Background(), data, file)
}

// ParseContext is Parse whose reads of bearer_token_files end when ctx
// does.
func ParseContext(ctx context.Context, data []byte, file string) (*Config, error) {
	var c Config
	root, err := DecodeStrict(data, file, &c)
	if err != nil {
		return nil, err
	}
	if EmptyDocument(root) {
		return nil, &Error{File: file, Reason: "empty configuration: no targets, workloads or modules"}
	}
	v := validator{file: file, root: root}
	c.applyDefaults()
	c.validate(&v)
	c.compileKinds(ctx, filepath.Dir(file), &v)
	if len(v.errs) > 0 {
		return nil, JoinErrors(v.errs)
	}
	if err := c.readSecrets(ctx, filepath.Dir(file), &v); err != nil {
		return nil, err
	}
	return &c, nil
}

// EmptyDocument reports whether a document decoded by DecodeStrict holds
// nothing: an empty or comment-only file, a bare "---", a null or an empty
// mapping ({}).
func EmptyDocument(root *yaml.Node) bool {
	n := root
	if n == nil || n.Kind == 0 {
		return true
	}
	if n.Kind == yaml.DocumentNode {
		if len(n.Content) == 0 {
			return true
		}
		n = n.Content[0]
	}
	switch n.Kind {
	case yaml.ScalarNode:
		return n.Tag == "!!null"
	case yaml.MappingNode:
		return len(n.Content) == 0
	}
	return false
}

// DecodeStrict decodes YAML into v, refusing unknown fields, and returns the
// document's node tree for locating later validation errors. Errors name the
// file and line, at most MaxErrors of them. The project's other strict
// formats (the bench configuration) decode through it too, and so get its
// refusals: data over MaxFileBytes, a byte that YAML does not allow (a
// binary file), a string over MaxStringBytes, and a second YAML document.
// An empty document is not its concern (see EmptyDocument).
func DecodeStrict(data []byte, file string, v any) (*yaml.Node, error) {
	if len(data) > MaxFileBytes {
		return nil, &Error{File: file, Reason: fmt.Sprintf("file larger than %s (config.MaxFileBytes)", byteSize(MaxFileBytes))}
	}
	if err := checkBytes(data, file); err != nil {
		return nil, err
	}
	var root yaml.Node
	if err := yaml.Unmarshal(data, &root); err != nil {
		return nil, yamlError(file, err, data, nil)
	}
	if err := checkNodes(&root, file); err != nil {
		return nil, err
	}
	if errs := schemaErrors(&root, v, file); len(errs) > 0 {
		return nil, errors.Join(errs...) // capped at MaxErrors already
	}
	data = zeroDurations(data, &root, v)
	dec := yaml.NewDecoder(bytes.NewReader(data))
	dec.KnownFields(true)
	if err := dec.Decode(v); err != nil && !errors.Is(err, io.EOF) {
		return nil, yamlError(file, err, data, &root)
	}
	var next yaml.Node
	switch err := dec.Decode(&next); {
	case errors.Is(err, io.EOF):
	case err != nil:
		// After the first document comes something that does not parse.
		e := lineError(file, strings.TrimPrefix(err.Error(), "yaml: "), data, nil)
		e.Reason = "after the first YAML document: " + e.Reason + ": the configuration is one document"
		return nil, e
	case !EmptyDocument(&next):
		return nil, &Error{File: file, Line: next.Line, Reason: "a second YAML document (---): the configuration is one document"}
	}
	return &root, nil
}

// yamlError turns yaml.v3's "line N: reason" messages into Errors, one per
// problem (at most MaxErrors), so each carries the file name and a line.
// root is the document's node tree when it parsed (the error is the
// decoder's), else nil.
func yamlError(file string, err error, data []byte, root *yaml.Node) error {
	var te *yaml.TypeError
	if errors.As(err, &te) {
		errs := make([]error, 0, min(len(te.Errors), MaxErrors+1))
		for _, msg := range te.Errors[:min(len(te.Errors), MaxErrors)] {
			errs = append(errs, lineError(file, msg, data, root))
		}
		if n := len(te.Errors) - MaxErrors; n > 0 {
			errs = append(errs, moreErrors(n))
		}
		return errors.Join(errs...)
	}
	return lineError(file, strings.TrimPrefix(err.Error(), "yaml: "), data, root)
}

// lineError is an Error of a yaml.v3 message. Where the message has no line
// (yaml.v3 leaves it out on line 1, and for some of the decoder's errors),
// errorLine finds it.
//
// A parser error (root nil) is put on the line it is on: yaml.v3 names the
// line where the enclosing collection began, or none when that is the
// first, so a key mis-indented on line 4 was reported on line 1.
func lineError(file, msg string, data []byte, root *yaml.Node) *Error {
	e := &Error{File: file, Reason: msg}
	if m := yamlLineError.FindStringSubmatch(msg); m != nil {
		n, _ := strconv.Atoi(m[1])
		e.Line, e.Reason = max(n, 1), m[2]
	} else {
		e.Line = errorLine(msg, data, root)
	}
	if root == nil {
		if l := parseErrorLine(data, e.Reason); l > 0 {
			e.Line = l
		}
	}
	return e
}

func (c *Config) applyDefaults() {
	c.applyModuleDefaults()
	c.applyCheckDefaults()
	for i := range c.Targets {
		t := &c.Targets[i]
		if t.Flavor == "" {
			t.Flavor = FlavorOpenAIChat
		}
		if t.Timeout == 0 {
			t.Timeout = DefaultTimeout
		}
		t.applyServerMetricsDefaults()
		t.applyQualityDefaults()
	}
	for i := range c.Workloads {
		w := &c.Workloads[i]
		if w.MaxInFlight == 0 {
			w.MaxInFlight = DefaultMaxInFlight
		}
		if w.StallThreshold == 0 {
			w.StallThreshold = DefaultStallThreshold
		}
		if w.Arrival.Process == "" {
			w.Arrival.Process = ProcessPoisson
		}
		w.Arrival = w.Arrival.WithDefaults()
		w.Prompt.applyDefaults(DefaultInputTokens, DefaultOutputTokens)
		w.applySessionDefaults()
	}
}

// applyDefaults gives a length left unset a fixed one of input or output
// tokens, and one set without its dist a fixed distribution.
func (p *Prompt) applyDefaults(input, output float64) {
	p.InputTokens.applyDefault(input)
	p.OutputTokens.applyDefault(output)
}

// applyDefault makes a distribution left unset a fixed one of mean, and
// one set without its dist a fixed distribution.
func (d *Distribution) applyDefault(mean float64) {
	if *d == (Distribution{}) {
		*d = Distribution{Dist: "fixed", Mean: mean}
	}
	if d.Dist == "" {
		d.Dist = "fixed"
	}
}

var nameRE = regexp.MustCompile(`^[a-zA-Z0-9_][a-zA-Z0-9_.:-]*$`)

// checkName checks the name of a target or workload (kind) at p: set,
// bounded, of nameRE's characters, and not in seen, the names of the
// others of its kind before it; it adds name to seen.
func (v *validator) checkName(p path, name, kind string, seen map[string]bool) {
	switch {
	case name == "":
		v.add(p, "name", "is required")
	case v.nameTooLong(p, "name", name):
	case !nameRE.MatchString(name):
		v.add(p, "name", fmt.Sprintf("%s must match %s", quote(name), nameRE))
	case seen[name]:
		v.add(p, "name", fmt.Sprintf("%s is used by another %s", quote(name), kind))
	}
	seen[name] = true
}

// checkFlavor checks that the flavor at p is a known one.
func (v *validator) checkFlavor(p path, f Flavor) {
	if !knownFlavor(f) {
		v.add(p, "flavor", fmt.Sprintf("%s is not one of %v", quote(string(f)), Flavors)+didYouMean(string(f), Flavors))
	}
}

// SchemeHint is "; did you mean "http://URL"?" for a URL written without
// its scheme (localhost:8000, 10.0.0.5:8000/v1), which url.Parse reads as
// a scheme of "localhost" or refuses; empty for anything else.
func SchemeHint(raw string) string {
	if raw == "" || strings.Contains(raw, "://") {
		return ""
	}
	if u, err := url.Parse("http://" + raw); err != nil || u.Host == "" || u.Hostname() == "" {
		return ""
	}
	return fmt.Sprintf("; did you mean %s?", quote("http://"+raw))
}

func (c *Config) validate(v *validator) {
	targets := map[string]bool{}
	for i := range c.Targets {
		t := &c.Targets[i]
		p := path{"targets", i}
		v.checkName(p, t.Name, "target", targets)
		if u, err := url.Parse(t.URL); t.URL == "" {
			v.add(p, "url", "is required")
		} else if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			v.add(p, "url", fmt.Sprintf("%s must be an absolute http or https URL%s", quote(t.URL), SchemeHint(t.URL)))
		} else if u.User != nil {
			v.add(p, "url", "must not hold credentials: use bearer_token_file")
		}
		v.checkFlavor(p, t.Flavor)
		if t.Model == "" {
			v.add(p, "model", "is required (the model name the server serves)")
		}
		v.checkModel(p, "model", t.Model)
		if t.Timeout < 0 {
			v.add(p, "timeout", "must be positive")
		}
		v.checkHeaders(p, t.Headers)
		t.validateServerMetrics(v, p)
		t.validateQuality(v, p)
	}
	workloads := map[string]bool{}
	for i := range c.Workloads {
		w := &c.Workloads[i]
		p := path{"workloads", i}
		v.checkName(p, w.Name, "workload", workloads)
		if w.Target == "" {
			v.add(p, "target", "is required")
		} else if !targets[w.Target] {
			v.add(p, "target", fmt.Sprintf("%s is not a configured target", quote(w.Target)))
		}
		if w.MaxInFlight < 0 {
			v.add(p, "max_in_flight", "must be positive")
		}
		if w.StallThreshold < MinStallThreshold {
			v.add(p, "stall_threshold", fmt.Sprintf("must be at least %v, got %v", MinStallThreshold, w.StallThreshold))
		}
		if w.Duration < 0 {
			v.add(p, "duration", "must not be negative")
		}
		if w.Replay != nil {
			validateReplay(v, p, w.Replay)
			if w.Replay.Source == ReplaySourceAgentSessions {
				c.validateAgentReplay(v, p, w)
			}
		} else {
			validateArrival(v, append(p[:len(p):len(p)], "arrival"), &w.Arrival)
			validateLengths(v, append(p[:len(p):len(p)], "prompt"), &w.Prompt)
			validatePrefixCache(v, append(p[:len(p):len(p)], "prompt"), &w.Prompt)
		}
		if w.Sessions != nil {
			validateSessions(v, p, w)
			if w.Prompt.CacheHitRate != 0 {
				v.add(append(p[:len(p):len(p)], "prompt"), "cache_hit_rate", "applies to a workload's own prompts, not to sessions")
			}
		}
		if w.Sampling.MinTokens < 0 {
			v.add(append(p[:len(p):len(p)], "sampling"), "min_tokens", "must not be negative")
		}
		v.checkTokens(append(p[:len(p):len(p)], "sampling"), "min_tokens", w.Sampling.MinTokens)
		if w.SLO.TTFT < 0 || w.SLO.TPOT < 0 || w.SLO.E2E < 0 {
			v.add(p, "slo", "thresholds must not be negative")
		}
	}
	c.validateModules(v)
	c.validateChecks(v)
}

// validateArrival reports the arrival block's own validation (Arrival.Validate)
// with the field's place in the file.
func validateArrival(v *validator, p path, a *Arrival) {
	err := a.Validate()
	var fe *FieldError
	switch {
	case errors.As(err, &fe):
		v.addPath(append(append(path{}, p...), parseFieldPath(fe.Field)...), fe.Reason)
	case err != nil:
		v.addPath(p, err.Error())
	}
}

// parseFieldPath splits "stages[2].duration" into {"stages", 2, "duration"}.
func parseFieldPath(f string) path {
	var p path
	for _, part := range strings.Split(f, ".") {
		name, idx, hasIdx := strings.Cut(part, "[")
		if name != "" {
			p = append(p, name)
		}
		if hasIdx {
			if n, err := strconv.Atoi(strings.TrimSuffix(idx, "]")); err == nil {
				p = append(p, n)
			}
		}
	}
	return p
}

func (c *Config) readSecrets(ctx context.Context, dir string, v *validator) error {
	for i := range c.Targets {
		t := &c.Targets[i]
		v.readBearerToken(ctx, dir, path{"targets", i}, t.BearerTokenFile, &t.BearerToken)
	}
	c.readModuleSecrets(ctx, dir, v)
	if len(v.errs) > 0 {
		return JoinErrors(v.errs)
	}
	return nil
}

// Target returns the target with the given name.
func (c *Config) Target(name string) (*Target, bool) {
	for i := range c.Targets {
		if c.Targets[i].Name == name {
			return &c.Targets[i], true
		}
	}
	return nil, false
}

// path addresses a node: strings are mapping keys, ints sequence indexes.
type path []any

func (p path) String() string {
	var b strings.Builder
	for _, e := range p {
		switch e := e.(type) {
		case int:
			fmt.Fprintf(&b, "[%d]", e)
		case string:
			if b.Len() > 0 {
				b.WriteByte('.')
			}
			b.WriteString(e)
		}
	}
	return b.String()
}

type validator struct {
	file string
	root *yaml.Node
	errs []error
	// paths are the errors' paths and reasons, for CheckKinds.
	paths []pathProblem
	// schemas are the schemas compiled so far, by their JSON text: one
	// schema file that every workload names, or one tool that each
	// declares, is compiled once (compileSchemaJSON).
	schemas map[string]compiledSchema
}

type pathProblem struct {
	path   path
	reason string
}

// add records an error at p.field, with the line of the deepest node of that
// path present in the file.
func (v *validator) add(p path, field, reason string) {
	v.addPath(append(append(path{}, p...), field), reason)
}

func (v *validator) addPath(full path, reason string) {
	v.errs = append(v.errs, &Error{File: v.file, Line: lineOf(v.root, full), Field: full.String(), Reason: reason})
	v.paths = append(v.paths, pathProblem{full, reason})
}

// lineOf is the line of the deepest node of p present in the document.
func lineOf(root *yaml.Node, p path) int {
	_, line := walk(root, p)
	return line
}

// walk follows p from the document root: the node at p (nil when the file
// does not hold it) and the line of the deepest node of p present (for a
// mapping's member, its key's line).
func walk(root *yaml.Node, p path) (*yaml.Node, int) {
	n := root
	if n != nil && n.Kind == yaml.DocumentNode && len(n.Content) > 0 {
		n = n.Content[0]
	}
	line := 0
	if n != nil {
		line = n.Line
	}
	for _, e := range p {
		if n == nil {
			break
		}
		var next *yaml.Node
		switch e := e.(type) {
		case string:
			if n.Kind == yaml.MappingNode {
				for i := 0; i+1 < len(n.Content); i += 2 {
					if n.Content[i].Value == e {
						line = n.Content[i].Line
						next = n.Content[i+1]
						break
					}
				}
			}
		case int:
			if n.Kind == yaml.SequenceNode && e < len(n.Content) {
				next = n.Content[e]
				line = next.Line
			}
		}
		n = next
	}
	return n, line
}

// LineOf is the line of the deepest node of p (mapping keys as strings,
// sequence indexes as ints) present in the parsed document root, for other
// strict YAML formats of this project (the bench configuration) that report
// errors the same way.
func LineOf(root *yaml.Node, p []any) int { return lineOf(root, path(p)) }

// PathString renders p as it appears in errors: "workloads[1].arrival.rate".
func PathString(p []any) string { return path(p).String() }
