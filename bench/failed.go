package bench

import (
	"cmp"
	"context"
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"

	"github.com/infer-exporter/infer_exporter/bench/report"
	"github.com/infer-exporter/infer_exporter/internal/config"
	"github.com/infer-exporter/infer_exporter/probe/client"
)

// failedCells writes to w, first, each cell whose repeats measured no
// successful request, with what its requests met: their outcomes and HTTP
// statuses, the first error, whether it stopped early, and for a 404 from an OpenAI-compatible target the models its
// /v1/models lists (the usual cause: --model names a model the server does
// not serve), in the sentence the live exporter and /probe log
// (client.Models.NotServed). It returns how many cells failed so. A
// figure of such a cell measures nothing, so the run fails
// (ExitNoSuccess) rather than rank it.
func failedCells(ctx context.Context, w io.Writer, r *report.Report, cfg *Config) int {
	targets := map[string]*config.Target{}
	for i := range cfg.Targets {
		targets[cfg.Targets[i].Name] = &cfg.Targets[i]
	}
	served := map[string]string{} // target -> what its /v1/models said
	n := 0
	for i := range r.Cells {
		c := &r.Cells[i]
		outcomes, statuses, successes := map[string]int{}, map[string]int{}, 0
		var first, stopped string
		for j := range c.Repeats {
			s := &c.Repeats[j].Stats
			successes += s.Successes
			first = cmp.Or(first, c.Repeats[j].FirstError)
			stopped = cmp.Or(stopped, c.Repeats[j].StoppedEarly)
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
		if first != "" {
			fmt.Fprintf(w, "  first error: %s\n", first)
		}
		if stopped != "" {
			fmt.Fprintf(w, "  %s\n", stopped)
		}
		if statuses["404"] == 0 {
			continue
		}
		said, ok := served[c.Target]
		if !ok {
			said = notServed(ctx, targets[c.Target])
			served[c.Target] = said
		}
		fmt.Fprintf(w, "  %s\n", said)
	}
	return n
}

// notServed asks t's server for the models it serves, with t's
// credentials, and says why it answered 404.
func notServed(ctx context.Context, t *config.Target) string {
	if t == nil {
		return "the server answered 404 (not found)"
	}
	ct, err := client.TargetOf(t)
	if err != nil {
		return fmt.Sprintf("the server answered 404 (not found), and %v", err)
	}
	// A client of its own, whose connection is closed with the answer.
	cl := client.New(client.Options{MaxConnsPerHost: 1})
	defer cl.Close()
	return cl.Models(ctx, ct).NotServed(ct.Model)
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
