package report

import (
	"encoding/json"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestNumJSON: a Num that is no number is written null (JSON has no NaN)
// and null reads back as NaN; a number is written in its shortest exact
// form and reads back equal; what is neither is refused.
func TestNumJSON(t *testing.T) {
	for _, tc := range []struct {
		v    Num
		json string
	}{
		{0, "0"}, {1.5, "1.5"}, {-0.25, "-0.25"}, {1e-7, "1e-07"}, {Num(1.0) / 3, "0.3333333333333333"},
		{NaN(), "null"}, {Num(math.Inf(1)), "null"}, {Num(math.Inf(-1)), "null"},
	} {
		b, err := json.Marshal(tc.v)
		if err != nil || string(b) != tc.json {
			t.Errorf("Marshal(%v) = %s, %v; want %s", float64(tc.v), b, err, tc.json)
			continue
		}
		var back Num
		if err := json.Unmarshal(b, &back); err != nil {
			t.Errorf("Unmarshal(%s): %v", b, err)
			continue
		}
		if tc.v.Valid() != back.Valid() || tc.v.Valid() && back != tc.v {
			t.Errorf("%s read back as %v, want %v", b, float64(back), float64(tc.v))
		}
	}
	for _, bad := range []string{`"1"`, `true`, `{}`, `[1]`} {
		var n Num
		if err := json.Unmarshal([]byte(bad), &n); err == nil {
			t.Errorf("Unmarshal(%s) = %v, want an error", bad, float64(n))
		}
	}
	// Inside a value, as a report holds them.
	var r Range
	if err := json.Unmarshal([]byte(`{"min": null, "mean": 2}`), &r); err != nil {
		t.Fatal(err)
	}
	if r.Min.Valid() || r.Mean != 2 || r.Max != 0 {
		t.Errorf("range %+v: want min NaN, mean 2, an absent max 0", r)
	}
}

// TestRankEntryRatiosAbsent: a leaderboard entry written before the
// success and goodput ratios reads them as NaN (written null again), not
// as 0, which would say that nothing succeeded; present ones read as
// written.
func TestRankEntryRatiosAbsent(t *testing.T) {
	for _, tc := range []struct {
		json             string
		success, goodput float64
	}{
		{`{"target": "a", "rank": 1}`, math.NaN(), math.NaN()},
		{`{"target": "a", "success_ratio": 0.5}`, 0.5, math.NaN()},
		{`{"target": "a", "success_ratio": 0, "goodput_ratio": null}`, 0, math.NaN()},
		{`{"target": "a", "success_ratio": 1, "goodput_ratio": 0.75}`, 1, 0.75},
	} {
		var e RankEntry
		if err := json.Unmarshal([]byte(tc.json), &e); err != nil {
			t.Fatalf("%s: %v", tc.json, err)
		}
		same := func(got Num, want float64) bool {
			return math.IsNaN(float64(got)) == math.IsNaN(want) && (math.IsNaN(want) || float64(got) == want)
		}
		if e.Target != "a" || !same(e.SuccessRatio, tc.success) || !same(e.GoodputRatio, tc.goodput) {
			t.Errorf("%s: %+v, want success %v, goodput %v", tc.json, e, tc.success, tc.goodput)
		}
	}
	var e RankEntry
	if err := json.Unmarshal([]byte(`{"rank": "first"}`), &e); err == nil {
		t.Error("an entry whose rank is a string was read")
	}
}

// TestDecodeRefuses: what is not a report of this schema is refused with
// a reason, and nothing is returned.
func TestDecodeRefuses(t *testing.T) {
	for _, tc := range []struct {
		name, json, want string
	}{
		{"another schema", `{"schema": "infer_exporter/bench/v0", "cells": []}`, `schema "infer_exporter/bench/v0"`},
		{"no schema", `{"cells": []}`, `schema ""`},
		{"not JSON", `schema: v1`, "invalid character"},
		{"cut short", `{"schema": "` + Schema + `", "cells": [{"key": "a"`, "not JSON"},
		{"a wrong type", `{"schema": "` + Schema + `", "cells": {"key": "a"}}`, "cannot unmarshal"},
		{"nested too deep", `{"schema": "` + Schema + `", "x": ` + strings.Repeat("[", 80) + strings.Repeat("]", 80) + `}`, "nested deeper than 64"},
		{"amplified", `{"schema": "` + Schema + `", "cells": [` + strings.Repeat("{},", 1<<20) + `{}]}`, "MaxReportDecodedBytes"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r, err := Decode([]byte(tc.json))
			if err == nil || r != nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("Decode = %v, %v; want no report and an error with %q", r, err, tc.want)
			}
		})
	}
	// The golden reports decode.
	for _, name := range []string{"report.json", "merged.json", "h200.json", "h200.input.json"} {
		if _, err := ReadJSON(filepath.Join("..", "testdata", "golden", name)); err != nil {
			t.Errorf("%s: %v", name, err)
		}
	}
}

// TestReadJSONNamesTheFile: a missing file, a directory and a file that
// is no report are refused with errors that name the path.
func TestReadJSONNamesTheFile(t *testing.T) {
	dir := t.TempDir()
	bad := filepath.Join(dir, "bad.json")
	if err := os.WriteFile(bad, []byte(`{"schema": "other"}`), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct{ path, want string }{
		{filepath.Join(dir, "absent.json"), "no such file"},
		{dir, "not a regular file"},
		{bad, `schema "other"`},
	} {
		if _, err := ReadJSON(tc.path); err == nil || !strings.Contains(err.Error(), tc.path) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("ReadJSON(%s): %v, want an error naming it with %q", tc.path, err, tc.want)
		}
	}
}
