package replay

import (
	"fmt"
	"strings"

	"github.com/infer-exporter/infer_exporter/internal/config"
)

// OptionsOf turns a configured replay against a target into the trace's
// format and the source's Options: the one builder of a replay load, which
// the exporter's replay workloads (probe/live) and the bench's replay
// repeats both call. The target's flavor's facts (Options.Flavor) say
// whether its API takes the prompt as a chat message, whether it can be
// sent recorded OpenAI bodies (a jsonl trace), and for which API those
// must have been recorded. The caller adds what
// is its own: the Recorder, and the bench's WordSalt.
func OptionsOf(r *config.Replay, t *config.Target) (Format, Options, error) {
	format, err := ParseFormat(r.Source)
	if err != nil {
		return "", Options{}, err
	}
	policy, err := ParsePolicy(r.OnMalformed)
	if err != nil {
		return "", Options{}, err
	}
	facts, _ := t.Flavor.Facts()
	if format == FormatJSONL && !facts.OpenAIAPI() {
		return "", Options{}, fmt.Errorf("replaying recorded bodies needs an %s target, not %q",
			strings.Join(config.OpenAIFlavors(), " or "), t.Flavor)
	}
	return format, Options{
		Speed:             r.Speed,
		Start:             r.Start,
		End:               r.End,
		Loop:              r.Loop,
		Sample:            r.Sample,
		Seed:              r.Seed,
		MaxRate:           r.MaxRate,
		Flavor:            facts,
		BlockSize:         r.BlockSize,
		ForceOutputTokens: r.ForceOutputTokens,
		OnUnreplayable:    policy,
	}, nil
}
