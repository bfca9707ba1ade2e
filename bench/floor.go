package bench

import (
	"errors"
	"fmt"
	"math"
	"strings"
	"sync"

	"github.com/infer-exporter/infer_exporter/bench/report"
	"github.com/infer-exporter/infer_exporter/internal/config"
	"github.com/infer-exporter/infer_exporter/internal/textcut"
	"github.com/infer-exporter/infer_exporter/probe/client"
	"github.com/infer-exporter/infer_exporter/probe/observation"
	"github.com/infer-exporter/infer_exporter/probe/workload"
)

// The success floor (bench.min_success): latency and throughput are
// measured on successes alone, so a server that fails some requests
// quickly would rank first on them. Every cell is held to a success ratio
// instead; a target with a cell below it ranks below every target without
// one (rank), the outputs name the cell with what its requests met, and
// the run exits ExitBelowSuccessFloor.

// successInput marks rep's cells below min (CellResult.BelowMinSuccess),
// every cell of the report whatever the targets ranked, so that the
// ranking and the cells say the same; and returns, per target, whether a
// cell of it is below, and its success ratio (of the measured requests
// sent, as report.SuccessRatio's) and goodput ratio (of the measured
// requests, dropped ones included, as each cell's goodput_ratio), pooled
// over all its cells and repeats (NaN: none).
func successInput(rep *report.Report, targets []config.Target, min float64) (below []bool, success, goodput []float64) {
	idx := map[string]int{}
	for i, t := range targets {
		idx[t.Name] = i
	}
	below = make([]bool, len(targets))
	ok, sent, good, all := make([]int, len(targets)), make([]int, len(targets)), make([]int, len(targets)), make([]int, len(targets))
	for i := range rep.Cells {
		c := &rep.Cells[i]
		c.BelowMinSuccess = report.BelowMinSuccess(c, min)
		t, in := idx[c.Target]
		if !in {
			continue
		}
		below[t] = below[t] || c.BelowMinSuccess
		for j := range c.Repeats {
			s := &c.Repeats[j].Stats
			ok[t] += s.Successes
			sent[t] += report.SentRequests(s)
			good[t] += s.Goodput
			all[t] += s.Requests
		}
	}
	success, goodput = make([]float64, len(targets)), make([]float64, len(targets))
	for t := range targets {
		success[t], goodput[t] = math.NaN(), math.NaN()
		if sent[t] > 0 {
			success[t] = float64(ok[t]) / float64(sent[t])
		}
		if all[t] > 0 {
			goodput[t] = float64(good[t]) / float64(all[t])
		}
	}
	return below, success, goodput
}

// earlyStopAfter is how many completed requests, all refused with one 4xx
// status, stop a repeat: a refusal that every one of them met (a model
// not served, a wrong route, a refused credential) is the server's answer
// to the configuration, which no later request changes; eight leave a
// server that refuses a few requests among successes no chance to look so
// by luck (0.5^8 for one that refuses half of them).
const earlyStopAfter = 8

// stopsEarly says whether a 4xx status may stop a repeat: not 408
// (Request Timeout) or 429 (Too Many Requests), the answers of a server
// under load, which the bench measures rather than stops on.
func stopsEarly(status int) bool {
	return status >= 400 && status <= 499 && status != 408 && status != 429
}

// failWatch follows a repeat's requests, warm-up included, for what the
// outputs say of its failures: the first error (RepeatResult.FirstError),
// and whether its first earlyStopAfter completed requests all failed with
// one 4xx status, when it stops the repeat: it closes halt (which ends the
// schedule, stopSchedule) and calls drain (which stops the runner's
// sends). Its methods run on the request goroutines.
type failWatch struct {
	halt chan struct{}
	// drain is set before the runner runs.
	drain func()

	mu    sync.Mutex
	first string
	// seen counts the completed requests judged so far, status the 4xx
	// status every one of them met (0: not all alike, no stop).
	seen, status int
	note         string
}

var _ workload.Observer = (*failWatch)(nil)

func newFailWatch() *failWatch { return &failWatch{halt: make(chan struct{})} }

// Sent implements workload.Observer.
func (w *failWatch) Sent(*observation.Request) {}

// FirstToken implements workload.Observer.
func (w *failWatch) FirstToken(*observation.Request) {}

// Token implements workload.Observer.
func (w *failWatch) Token(*observation.Request) {}

// Dropped implements workload.Observer: a dropped arrival failed too, but
// was no answer of the server's.
func (w *failWatch) Dropped(o *observation.Request) {
	w.mu.Lock()
	w.noteFirst(o)
	w.mu.Unlock()
}

// Done implements workload.Observer.
func (w *failWatch) Done(o *observation.Request) {
	w.mu.Lock()
	w.noteFirst(o)
	if w.note != "" || w.seen >= earlyStopAfter {
		w.mu.Unlock()
		return
	}
	w.seen++
	switch {
	case o.Outcome != observation.HTTP4xx || !stopsEarly(o.HTTPStatus):
		w.seen = earlyStopAfter // decided: it runs on
		w.status = 0
	case w.seen == 1:
		w.status = o.HTTPStatus
	case o.HTTPStatus != w.status:
		w.seen, w.status = earlyStopAfter, 0
	}
	stop := w.seen == earlyStopAfter && w.status != 0
	if stop {
		w.note = fmt.Sprintf("stopped early: the first %d requests all failed with HTTP %d: %s", earlyStopAfter, w.status, bodyExcerpt(o))
		close(w.halt)
	}
	drain := w.drain
	w.mu.Unlock()
	if stop && drain != nil {
		drain()
	}
}

// noteFirst keeps the first failure's text; w.mu is held.
func (w *failWatch) noteFirst(o *observation.Request) {
	if w.first != "" || o.Outcome == observation.Success || o.Outcome == observation.Cancelled {
		return
	}
	w.first = failureText(o)
}

// result is the first failure's text and, when the repeat stopped early,
// why.
func (w *failWatch) result() (first, stopped string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.first, w.note
}

// failureText says what a failed request met, on one line of at most
// report.MaxFirstErrorBytes: its error (a non-2xx answer's says its status
// and the start of its body), after its outcome unless the error says it.
func failureText(o *observation.Request) string {
	var s string
	switch {
	case o.Err != nil && (o.Outcome == observation.HTTP4xx || o.Outcome == observation.HTTP5xx):
		s = o.Err.Error()
	case o.Err != nil:
		s = fmt.Sprintf("%s: %v", o.Outcome, o.Err)
	case o.Outcome == observation.Dropped && o.DropReason != "":
		s = fmt.Sprintf("%s: %s", o.Outcome, o.DropReason)
	case o.HTTPStatus != 0:
		s = fmt.Sprintf("%s: HTTP %d", o.Outcome, o.HTTPStatus)
	default:
		s = string(o.Outcome)
	}
	return oneLine(s, report.MaxFirstErrorBytes)
}

// bodyExcerpt is the start of a refused request's body, on one line (its
// error's text when the body is not at hand).
func bodyExcerpt(o *observation.Request) string {
	var he *client.HTTPError
	if errors.As(o.Err, &he) && strings.TrimSpace(he.Body) != "" {
		return oneLine(he.Body, report.MaxFirstErrorBytes)
	}
	if o.Err != nil {
		return oneLine(o.Err.Error(), report.MaxFirstErrorBytes)
	}
	return "(no body)"
}

// oneLine is s with its runs of white space (an error page's lines) made
// one space, cut to at most n bytes.
func oneLine(s string, n int) string {
	return textcut.Cut(strings.Join(strings.Fields(s), " "), n-len(textcut.Ellipsis))
}
