package report

import "math"

// MaxFirstErrorBytes bounds RepeatResult.FirstError: the start of an error
// says what it was (an HTTP status and the server's own sentence), and a
// server's whole error page would fill every output that names it.
const MaxFirstErrorBytes = 200

// OutcomeDropped is the key of the arrivals the client never sent in
// Stats.Outcomes (observation.Dropped).
const OutcomeDropped = "dropped"

// SentRequests are the measured requests of s that were sent: those the
// client dropped (its in-flight cap, its rate ceiling fallen behind) met
// no server.
func SentRequests(s *Stats) int { return s.Requests - s.Outcomes[OutcomeDropped] }

// SuccessRatio is a cell's successful measured requests over its measured
// requests sent (SentRequests), pooled over its repeats (exact counts,
// where the summary's medians of each would not divide); NaN when none
// was sent. It judges the server: an arrival the client dropped is its
// own limit, which the cell's overloaded and degraded flags say.
func SuccessRatio(c *CellResult) float64 {
	var ok, sent int
	for i := range c.Repeats {
		ok += c.Repeats[i].Stats.Successes
		sent += SentRequests(&c.Repeats[i].Stats)
	}
	if sent == 0 {
		return math.NaN()
	}
	return float64(ok) / float64(sent)
}

// BelowMinSuccess says whether a cell falls below the success floor min:
// its success ratio is below it, or, with a floor above 0, it sent no
// measured request at all (nothing it says was served). A cell that ran no repeat
// (a shard's report of a cell it had none of) is not judged.
func BelowMinSuccess(c *CellResult, min float64) bool {
	if len(c.Repeats) == 0 {
		return false
	}
	r := SuccessRatio(c)
	if math.IsNaN(r) {
		return min > 0
	}
	return r < min
}

// FailingCell is a cell below the ranking's min_success as the console,
// report.md and report.html name it: its counts summed over its repeats,
// and what its requests met.
type FailingCell struct {
	Key string
	// Requests are the measured requests, Sent those sent
	// (SentRequests), Successes those that succeeded.
	Requests, Sent, Successes int
	// Ratio is SuccessRatio (NaN: nothing sent).
	Ratio float64
	// Outcomes and HTTPErrors are the measured requests' outcomes and
	// non-2xx statuses, summed over the repeats.
	Outcomes, HTTPErrors map[string]int
	// FirstError is the first repeat's that has one; StoppedEarly the
	// first repeat's that stopped early (RepeatResult).
	FirstError, StoppedEarly string
}

// FailingCells are r's cells below its ranking's min_success
// (CellResult.BelowMinSuccess), in the report's order.
func FailingCells(r *Report) []FailingCell {
	var out []FailingCell
	for i := range r.Cells {
		c := &r.Cells[i]
		if !c.BelowMinSuccess {
			continue
		}
		f := FailingCell{Key: c.Key, Ratio: SuccessRatio(c), Outcomes: map[string]int{}, HTTPErrors: map[string]int{}}
		for j := range c.Repeats {
			rr := &c.Repeats[j]
			f.Requests += rr.Stats.Requests
			f.Sent += SentRequests(&rr.Stats)
			f.Successes += rr.Stats.Successes
			for k, n := range rr.Stats.Outcomes {
				f.Outcomes[k] += n
			}
			for k, n := range rr.Stats.HTTPErrors {
				f.HTTPErrors[k] += n
			}
			if f.FirstError == "" {
				f.FirstError = rr.FirstError
			}
			if f.StoppedEarly == "" {
				f.StoppedEarly = rr.StoppedEarly
			}
		}
		out = append(out, f)
	}
	return out
}
