package config

import (
	"fmt"
	"math"
	"sort"
	"time"
)

// Quality is a target's perplexity probe (package probe/quality): every
// Interval the exporter asks the server for the log-probabilities of a
// fixed reference text's tokens and exposes the perplexity. A quantised or
// swapped model answers as fast as ever; its perplexity over the same text
// rises. The block's presence turns the probe on ("quality: {}" takes the
// defaults).
type Quality struct {
	// Interval between two scores (default DefaultQualityInterval, at
	// least MinQualityInterval: one prefill of a few hundred tokens each
	// time).
	Interval time.Duration `yaml:"interval"`
	// Timeout bounds one score, from send to the last byte of the answer
	// (default DefaultQualityTimeout, at most Interval).
	Timeout time.Duration `yaml:"timeout"`
}

// Bounds and defaults of the perplexity probe.
const (
	DefaultQualityInterval = 5 * time.Minute
	MinQualityInterval     = 30 * time.Second
	MaxQualityInterval     = 24 * time.Hour
	DefaultQualityTimeout  = time.Minute
	// MaxPerplexityThreshold bounds a module's max_perplexity: the
	// perplexity of a model that guesses uniformly over a 1M-token
	// vocabulary.
	MaxPerplexityThreshold = 1e6
)

// PerplexityCapable reports whether servers of flavor f can be scored, and
// why not when they cannot.
func PerplexityCapable(f Flavor) (bool, string) {
	if facts, ok := f.Facts(); ok {
		if facts.PerplexityDialect != "" {
			return true, ""
		}
		return false, facts.NoPerplexity
	}
	names := append([]string(nil), PerplexityFlavors...)
	sort.Strings(names)
	return false, fmt.Sprintf("only the %v APIs return prompt log-probabilities", names)
}

func (t *Target) applyQualityDefaults() {
	q := t.Quality
	if q == nil {
		return
	}
	if q.Interval == 0 {
		q.Interval = DefaultQualityInterval
	}
	if q.Timeout == 0 {
		q.Timeout = min(DefaultQualityTimeout, q.Interval)
	}
}

func (t *Target) validateQuality(v *validator, p path) {
	q := t.Quality
	if q == nil {
		return
	}
	p = append(p, "quality")
	if q.Interval < MinQualityInterval || q.Interval > MaxQualityInterval {
		v.add(p, "interval", fmt.Sprintf("must be between %v and %v, got %v", MinQualityInterval, MaxQualityInterval, q.Interval))
	}
	if q.Timeout <= 0 {
		v.add(p, "timeout", "must be positive")
	} else if q.Timeout > q.Interval {
		v.add(p, "timeout", fmt.Sprintf("%v must not exceed the interval %v", q.Timeout, q.Interval))
	}
	if ok, why := PerplexityCapable(t.Flavor); !ok {
		v.addPath(p, fmt.Sprintf("a %s target cannot be scored: %s", t.Flavor, why))
	}
}

// Module kinds.
const (
	// ModuleKindGeneration (the default, also "") sends generations and
	// judges their latency, SLO and known answers.
	ModuleKindGeneration = "generation"
	// ModuleKindPerplexity scores the quality package's reference text
	// once and judges its perplexity against MaxPerplexity.
	ModuleKindPerplexity = "perplexity"
)

// IsPerplexity reports whether m is a perplexity module.
func (m *Module) IsPerplexity() bool { return m.Kind == ModuleKindPerplexity }

// validateModuleKind checks a module's kind and the settings that go with
// it. A perplexity module sends one scoring request: the settings of
// generations (known answers, SLO, more than one request) would be silently
// ignored, so they are refused.
func (c *Config) validateModuleKind(v *validator, p path, m *Module) {
	switch m.Kind {
	case "", ModuleKindGeneration:
		if m.MaxPerplexity != 0 {
			v.add(p, "max_perplexity", "applies to modules of kind perplexity only")
		}
		return
	case ModuleKindPerplexity:
	default:
		v.add(p, "kind", fmt.Sprintf("%s is not %s or %s", quote(m.Kind), ModuleKindGeneration, ModuleKindPerplexity))
		return
	}
	if x := m.MaxPerplexity; math.IsNaN(x) || x < 0 || x > MaxPerplexityThreshold {
		v.add(p, "max_perplexity", fmt.Sprintf("must be between 0 (no threshold) and %g", float64(MaxPerplexityThreshold)))
	} else if x != 0 && x < 1 {
		v.add(p, "max_perplexity", fmt.Sprintf("%g is below 1, the lowest perplexity there is", x))
	}
	if len(m.KnownAnswers) > 0 {
		v.add(p, "known_answers", "a perplexity module sends no generations to check")
	}
	if m.SLO != (SLO{}) {
		v.add(p, "slo", "a perplexity module sends no generations to time")
	}
	if m.Requests > 1 {
		v.add(p, "requests", "a perplexity module scores the text once")
	}
	flavor := m.Flavor
	if flavor == "" && m.Target != "" {
		if t, ok := c.Target(m.Target); ok {
			flavor = t.Flavor
		}
	}
	if flavor == "" {
		flavor = FlavorOpenAIChat
	}
	if ok, why := PerplexityCapable(flavor); !ok && knownFlavor(flavor) {
		v.add(p, "kind", fmt.Sprintf("a %s module cannot be scored: %s", flavor, why))
	}
}
