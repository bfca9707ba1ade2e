package config

import (
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"

	yaml "go.yaml.in/yaml/v3"
)

// Limits of a configuration. A configuration past any of them is refused
// with the limit's name, so that nothing --config.check accepts can exhaust
// the exporter's memory once it runs.
const (
	// MaxFileBytes bounds the configuration file (and the bench
	// configuration file): a larger one is refused without being read past
	// the limit. yaml.v3 takes some 100 bytes of memory per byte of a
	// pathological file (a flow list of one-digit numbers: 110 MB of RSS
	// for 1 MiB), so this bounds the memory of a load too.
	MaxFileBytes = 1 << 20
	// MaxNodes bounds the values of the file (YAML nodes: every scalar,
	// list and mapping): a file with more is refused before it is decoded.
	MaxNodes = 200_000
	// MaxErrors bounds the errors a load reports; the rest are counted in
	// one last line, "... and N more errors".
	MaxErrors = 100

	// MaxTokens bounds every token length: the mean, min, max and stddev of
	// every prompt length distribution, a known-answer check's max_tokens,
	// min_tokens, a mooncake block size, and the input plus output tokens
	// of one request.
	MaxTokens = 1 << 20

	// MaxListItems bounds every list and mapping of the file: targets,
	// workloads, modules, arrival stages, probe.allow hosts and cidrs, the
	// bench configuration's lists. Some are bounded lower: headers
	// (MaxHeaders), known-answer checks (MaxKnownAnswers), module requests
	// (MaxModuleRequests).
	MaxListItems = 1000
	// MaxHeaders bounds the headers of one target or module.
	MaxHeaders = 100

	// MaxNameBytes bounds the names of targets, workloads, modules (and of
	// the bench configuration's shapes and replays).
	MaxNameBytes = 200

	// MaxModelBytes bounds a model name (a target's or module's model):
	// longer than names, since a model may be a path on the server, and
	// the bound of the server's own label values (engine.MaxLabelBytes).
	MaxModelBytes = 256
	// MaxStringBytes bounds every other string of the file (URLs, models,
	// header names and values, paths, patterns), except prompts.
	MaxStringBytes = 8 << 10
	// MaxPromptBytes bounds the prompt of a known-answer check.
	MaxPromptBytes = 64 << 10
	// MaxSecretBytes bounds a bearer_token_file.
	MaxSecretBytes = 64 << 10
)

// byteSize renders a byte limit as the constants above are written: 4 MiB,
// 64 KiB.
func byteSize(n int64) string {
	switch {
	case n >= 1<<20 && n%(1<<20) == 0:
		return fmt.Sprintf("%d MiB", n>>20)
	case n >= 1<<10 && n%(1<<10) == 0:
		return fmt.Sprintf("%d KiB", n>>10)
	}
	return fmt.Sprintf("%d bytes", n)
}

// JoinErrors joins errs as errors.Join does, keeping the first MaxErrors and
// ending with one line "... and N more errors" when there are more. It
// returns nil for no errors.
func JoinErrors(errs []error) error {
	if len(errs) <= MaxErrors {
		return errors.Join(errs...)
	}
	kept := append(errs[:MaxErrors:MaxErrors], moreErrors(len(errs)-MaxErrors))
	return errors.Join(kept...)
}

func moreErrors(n int) error {
	if n == 1 {
		return errors.New("... and 1 more error")
	}
	return fmt.Errorf("... and %d more errors", n)
}

// quote is %q of a value from the file, shortened so that an error message
// stays readable whatever the file holds.
func quote(s string) string {
	const keep = 64
	if len(s) <= keep {
		return strconv.Quote(s)
	}
	cut := keep
	for cut > 0 && s[cut]&0xC0 == 0x80 { // do not split a UTF-8 sequence
		cut--
	}
	return strconv.Quote(s[:cut]) + fmt.Sprintf("... (%d bytes)", len(s))
}

// checkCount reports a list or mapping at p longer than max; name is the
// limit's constant.
func (v *validator) checkCount(p path, field string, n, max int, what, name string) {
	if n > max {
		v.add(p, field, fmt.Sprintf("at most %d %s (config.%s), got %d", max, what, name, n))
	}
}

// nameTooLong reports a name longer than MaxNameBytes at p.field and says
// whether it did.
func (v *validator) nameTooLong(p path, field, name string) bool {
	if len(name) > MaxNameBytes {
		v.add(p, field, fmt.Sprintf("a name of %d bytes: at most %d (config.MaxNameBytes)", len(name), MaxNameBytes))
		return true
	}
	return false
}

// checkModel applies the form check of names to a model name, which has
// no pattern (a model is the server's: "Qwen/Qwen3-8B", "llama3:8b", a
// path): valid UTF-8, at most MaxModelBytes, and no control character. A
// CR, LF or NUL would otherwise pass to every label, span attribute and
// request body that names the model.
func (v *validator) checkModel(p path, field, model string) {
	switch {
	case len(model) > MaxModelBytes:
		v.add(p, field, fmt.Sprintf("a model name of %d bytes: at most %d (config.MaxModelBytes)", len(model), MaxModelBytes))
	case !utf8.ValidString(model):
		v.add(p, field, fmt.Sprintf("%s is not valid UTF-8", quote(model)))
	default:
		if i := strings.IndexFunc(model, unicode.IsControl); i >= 0 {
			v.add(p, field, fmt.Sprintf("model name has a control character (%q at byte %d): no CR, LF, NUL or other control characters", model[i], i))
		}
	}
}

// checkNodes applies the limits of the file's form, before it is decoded:
// at most MaxNodes values, MaxListItems entries in a list or mapping, and
// MaxStringBytes in a string (a prompt: MaxPromptBytes), mapping keys
// included. It walks the node tree only, never following aliases.
func checkNodes(root *yaml.Node, file string) error {
	var errs []error
	nodes, total := 0, 0
	add := func(n *yaml.Node, p path, reason string) {
		if total++; len(errs) < MaxErrors {
			errs = append(errs, &Error{File: file, Line: n.Line, Field: p.String(), Reason: reason})
		}
	}
	// p is one stack of path elements, each call appending its own in
	// place of its sibling's (add keeps p's text, never p): a copy per
	// level made a file nested 6,500 deep (within yaml.v3's 10,000)
	// allocate some 500 MB.
	var walk func(n *yaml.Node, p path, key string)
	walk = func(n *yaml.Node, p path, key string) {
		if nodes > MaxNodes {
			return
		}
		if nodes++; nodes > MaxNodes {
			add(n, p, fmt.Sprintf("more than %d values in the file (config.MaxNodes)", MaxNodes))
			return
		}
		switch n.Kind {
		case yaml.DocumentNode:
			for _, c := range n.Content {
				walk(c, p, key)
			}
		case yaml.SequenceNode:
			if len(n.Content) > MaxListItems {
				add(n, p, fmt.Sprintf("a list of %d items: at most %d (config.MaxListItems)", len(n.Content), MaxListItems))
				return
			}
			for i, c := range n.Content {
				walk(c, append(p, i), "")
			}
		case yaml.MappingNode:
			if len(n.Content)/2 > MaxListItems {
				add(n, p, fmt.Sprintf("a mapping of %d keys: at most %d (config.MaxListItems)", len(n.Content)/2, MaxListItems))
				return
			}
			for i := 0; i+1 < len(n.Content); i += 2 {
				k := n.Content[i]
				if len(k.Value) > MaxStringBytes {
					add(k, p, fmt.Sprintf("a key of %d bytes: at most %s (config.MaxStringBytes)", len(k.Value), byteSize(MaxStringBytes)))
					continue
				}
				walk(k, p, "")
				walk(n.Content[i+1], append(p, k.Value), k.Value)
			}
		case yaml.ScalarNode:
			limit, name := MaxStringBytes, "MaxStringBytes"
			if key == "prompt" {
				limit, name = MaxPromptBytes, "MaxPromptBytes"
			}
			if len(n.Value) > limit {
				add(n, p, fmt.Sprintf("a string of %d bytes: at most %s (config.%s)", len(n.Value), byteSize(int64(limit)), name))
			}
		}
	}
	walk(root, nil, "")
	if total > len(errs) {
		errs = append(errs, moreErrors(total-len(errs)))
	}
	return errors.Join(errs...)
}

// LengthProblem is a problem that CheckLengths found: Path is its place below
// the pair (mapping keys and sequence indexes, as LineOf takes them):
// {"input_tokens", "mean"}, or empty for the pair as a whole.
type LengthProblem struct {
	Path   []any
	Reason string
}

// CheckLengths validates in and out as the input and output token lengths
// of one request, named input_tokens and output_tokens in the file: every
// length is at least 1 and at most MaxTokens, and so are the input and
// output of one request together.
//
// A normal or lognormal length without max is unbounded: CheckLengths
// gives it one, so that the request stays within MaxTokens. The max is
// MaxTokens less the largest value of the other length; when neither has a
// largest value, MaxTokens is split between them (half each, unless a min
// or mean needs more). A distribution whose mean or min does not fit under
// the max it would get is a problem: set max.
//
// The bench configuration's shapes are checked by it too, so that a length
// means the same in both files.
func CheckLengths(in, out *Distribution) []LengthProblem {
	var probs []LengthProblem
	probs = append(probs, checkLength("input_tokens", in)...)
	probs = append(probs, checkLength("output_tokens", out)...)
	if len(probs) > 0 {
		return probs
	}
	inHi, inBounded := largest(in)
	outHi, outBounded := largest(out)
	inLo, outLo := least(in), least(out)
	switch {
	case inBounded && outBounded:
		if inHi+outHi > MaxTokens {
			probs = append(probs, LengthProblem{Reason: fmt.Sprintf("input_tokens up to %d plus output_tokens up to %d is %d tokens: a request holds at most %d (config.MaxTokens)",
				inHi, outHi, inHi+outHi, MaxTokens)})
		}
	case inBounded:
		probs = append(probs, clampUnbounded("output_tokens", out, outLo, MaxTokens-inHi, "input_tokens", inHi)...)
	case outBounded:
		probs = append(probs, clampUnbounded("input_tokens", in, inLo, MaxTokens-outHi, "output_tokens", outHi)...)
	default:
		if inLo+outLo > MaxTokens {
			probs = append(probs, LengthProblem{Reason: fmt.Sprintf("input_tokens of at least %d plus output_tokens of at least %d is %d tokens: a request holds at most %d (config.MaxTokens)",
				inLo, outLo, inLo+outLo, MaxTokens)})
			break
		}
		in.Max = min(max(MaxTokens/2, inLo), MaxTokens-outLo)
		out.Max = MaxTokens - in.Max
	}
	return probs
}

// clampUnbounded gives the unbounded d (named name) the max room, what the
// other length (other, up to otherHi) leaves of MaxTokens.
func clampUnbounded(name string, d *Distribution, lo, room int, other string, otherHi int) []LengthProblem {
	if lo > room {
		return []LengthProblem{{Path: []any{name, "max"}, Reason: fmt.Sprintf(
			"a %s without max is clamped at %d tokens, so that the request stays within %d (config.MaxTokens) with %s up to %d; its min or mean %d is above that: set max, or shorten %s",
			d.Dist, max(room, 0), MaxTokens, other, otherHi, lo, other)}}
	}
	d.Max = room
	return nil
}

// largest is the longest length d can draw, and whether it has one (an
// unbounded normal or lognormal has none). d has passed checkLength.
func largest(d *Distribution) (int, bool) {
	switch d.Dist {
	case "fixed":
		n := max(int(math.Round(d.Mean)), d.Min, 1)
		if d.Max > 0 {
			n = min(n, d.Max)
		}
		return n, true
	case "uniform":
		return d.Max, true
	}
	return d.Max, d.Max > 0
}

// least is the smallest max an unbounded d may be given: its min, and its
// mean.
func least(d *Distribution) int {
	return max(1, d.Min, int(math.Ceil(d.Mean)))
}

// checkLength validates one token-length distribution.
func checkLength(name string, d *Distribution) []LengthProblem {
	var probs []LengthProblem
	add := func(field, reason string) {
		probs = append(probs, LengthProblem{Path: []any{name, field}, Reason: reason})
	}
	tooLong := func(got string) string {
		return fmt.Sprintf("at most %d tokens (config.MaxTokens), got %s", MaxTokens, got)
	}
	for _, f := range []struct {
		field string
		x     float64
	}{{"mean", d.Mean}, {"stddev", d.Stddev}} {
		switch {
		case math.IsNaN(f.x) || math.IsInf(f.x, 0):
			add(f.field, fmt.Sprintf("must be a finite number, got %g", f.x))
		case f.x > MaxTokens:
			add(f.field, tooLong(fmt.Sprintf("%g", f.x)))
		case f.x < 0:
			add(f.field, fmt.Sprintf("must not be negative, got %g", f.x))
		}
	}
	for _, f := range []struct {
		field string
		n     int
	}{{"min", d.Min}, {"max", d.Max}} {
		switch {
		case f.n > MaxTokens:
			add(f.field, tooLong(strconv.Itoa(f.n)))
		case f.n < 0:
			add(f.field, fmt.Sprintf("must not be negative, got %d", f.n))
		}
	}
	if len(probs) > 0 {
		return probs
	}
	switch d.Dist {
	case "fixed":
		if d.Mean < 1 {
			add("mean", "must be at least 1")
		}
	case "uniform":
		if d.Min < 1 || d.Max < d.Min {
			add("min", "uniform needs 1 <= min <= max")
		}
	case "normal", "lognormal":
		if d.Mean < 1 {
			add("mean", "must be at least 1")
		}
		if d.Stddev <= 0 {
			add("stddev", "must be positive")
		}
		if d.Max != 0 && d.Max < d.Min {
			add("max", "must not be below min")
		}
	default:
		add("dist", fmt.Sprintf("%s is not one of fixed, uniform, normal, lognormal", quote(d.Dist))+didYouMean(d.Dist, []string{"fixed", "uniform", "normal", "lognormal"}))
	}
	return probs
}

// validateLengths checks a prompt's lengths at p (the prompt block).
func validateLengths(v *validator, p path, pr *Prompt) bool {
	probs := CheckLengths(&pr.InputTokens, &pr.OutputTokens)
	for _, prob := range probs {
		v.addPath(append(append(path{}, p...), prob.Path...), prob.Reason)
	}
	return len(probs) == 0
}

// checkTokens reports a token count above MaxTokens at p.field.
func (v *validator) checkTokens(p path, field string, n int) {
	if n > MaxTokens {
		v.add(p, field, fmt.Sprintf("at most %d tokens (config.MaxTokens), got %d", MaxTokens, n))
	}
}
