package report

import "testing"

// TestDecodeFillsSuccessRatio: a report written before the success ratio
// was a figure (no success_ratio field) reads back with each repeat's
// successes over its requests and the cell's median of them; a ratio of 0
// without successes is left as it is, and no interval is made up.
func TestDecodeFillsSuccessRatio(t *testing.T) {
	r, err := Decode([]byte(`{"schema": "` + Schema + `", "cells": [
		{"key": "old", "summary": {"requests": 40, "successes": 38}, "ci": {}, "repeats": [
			{"stats": {"requests": 40, "successes": 40}}, {"stats": {"requests": 40, "successes": 38}}, {"stats": {"requests": 40, "successes": 30}}]},
		{"key": "failed", "summary": {"requests": 10, "successes": 0, "success_ratio": 0}, "ci": {}, "repeats": [
			{"stats": {"requests": 10, "successes": 0, "success_ratio": 0}}]}]}`))
	if err != nil {
		t.Fatal(err)
	}
	old := r.Cells[0]
	for i, want := range []float64{1, 0.95, 0.75} {
		if got := old.Repeats[i].Stats.SuccessRatio; got != want {
			t.Errorf("repeat %d: success ratio %v, want %v", i, got, want)
		}
	}
	if old.Summary.SuccessRatio != 0.95 {
		t.Errorf("summary: success ratio %v, want the median 0.95", old.Summary.SuccessRatio)
	}
	if _, ok := old.CI["success_ratio"]; ok {
		t.Error("an interval made up")
	}
	if f := r.Cells[1]; f.Summary.SuccessRatio != 0 || f.Repeats[0].Stats.SuccessRatio != 0 {
		t.Errorf("no success: %v, want 0", f.Summary.SuccessRatio)
	}
}
