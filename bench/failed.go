package bench

import (
	"context"
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"

	"github.com/infer-exporter/infer_exporter/bench/report"
)

// failedCells writes to w, first, each cell whose repeats measured no
// successful request, with what its requests met: their outcomes and HTTP
// statuses, and for a 404 from an OpenAI-compatible target the models its
// /v1/models lists (the usual cause: --model names a model the server does
// not serve). It returns how many cells failed so. A figure of such a cell
// measures nothing, so the run fails (ExitNoSuccess) rather than rank it.
func failedCells(ctx context.Context, w io.Writer, r *report.Report, cfg *Config) int {
	urls, models := map[string]string{}, map[string]string{}
	for _, t := range cfg.Targets {
		urls[t.Name], models[t.Name] = t.URL, t.Model
	}
	served := map[string]string{} // target -> what its /v1/models said
	n := 0
	for i := range r.Cells {
		c := &r.Cells[i]
		outcomes, statuses, successes := map[string]int{}, map[string]int{}, 0
		for j := range c.Repeats {
			s := &c.Repeats[j].Stats
			successes += s.Successes
			for k, v := range s.Outcomes {
				outcomes[k] += v
			}
			for k, v := range s.HTTPErrors {
				statuses[k] += v
			}
		}
		if successes > 0 || len(c.Repeats) == 0 {
			continue
		}
		n++
		fmt.Fprintf(w, "FAILED %s: no request succeeded (outcomes: %s", c.Key, counts(outcomes))
		if len(statuses) > 0 {
			fmt.Fprintf(w, "; HTTP statuses: %s", counts(statuses))
		}
		fmt.Fprintln(w, ")")
		if statuses["404"] == 0 {
			continue
		}
		said, ok := served[c.Target]
		if !ok {
			ids, url, err := servedModels(ctx, urls[c.Target])
			switch {
			case err != nil:
				said = fmt.Sprintf("the server answered 404, and %v", err)
			case slices.Contains(ids, models[c.Target]):
				said = fmt.Sprintf("the server answered 404, though %s lists model %q", url, models[c.Target])
			default:
				said = fmt.Sprintf("the server does not serve model %q; it serves: %s (%s)", models[c.Target], listFirst(ids, 10), url)
			}
			served[c.Target] = said
		}
		fmt.Fprintf(w, "  %s\n", said)
	}
	return n
}

// counts writes a count map as "k n, k n" in key order.
func counts(m map[string]int) string {
	var parts []string
	for _, k := range slices.Sorted(maps.Keys(m)) {
		if m[k] > 0 {
			parts = append(parts, fmt.Sprintf("%s %d", k, m[k]))
		}
	}
	if len(parts) == 0 {
		return "none"
	}
	return strings.Join(parts, ", ")
}
