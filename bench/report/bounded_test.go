package report

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestReportReadsBounded (issue 23): a report path that is a device, a
// FIFO or a file over MaxReportBytes is refused at once, as is a small
// file whose decoding would hold far more than its size.
func TestReportReadsBounded(t *testing.T) {
	dir := t.TempDir()
	fifo := filepath.Join(dir, "fifo")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	big := filepath.Join(dir, "big.json")
	if err := os.WriteFile(big, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Truncate(big, MaxReportBytes+1); err != nil { // sparse: nothing written
		t.Fatal(err)
	}
	// 3 MiB of empty cells would decode into some 1.5 GB of CellResults.
	amplified := filepath.Join(dir, "amplified.json")
	if err := os.WriteFile(amplified, []byte(`{"cells":[`+strings.Repeat("{},", 1<<20)+`{}]}`), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct{ path, want string }{
		{"/dev/zero", "not a regular file"}, {"/dev/urandom", "not a regular file"}, {fifo, "not a regular file"},
		{big, "larger than"}, {amplified, "MaxReportDecodedBytes"},
	} {
		start := time.Now()
		_, err := ReadJSONContext(context.Background(), tc.path)
		if err == nil || !strings.Contains(err.Error(), tc.want) || !strings.Contains(err.Error(), tc.path) {
			t.Errorf("%s: error %v, want one naming the file with %q", tc.path, err, tc.want)
		}
		t.Logf("%s: refused in %v", tc.path, time.Since(start))
	}
}

// TestStableOldReportRead: a report written before the stable flag was
// left out said "stable": true of a cell none of whose repeats was checked
// (false of each such repeat); read back (bench merge, --baseline), the
// flag is dropped, so that what is written again leaves it out.
func TestStableOldReportRead(t *testing.T) {
	old := `{"schema": "` + Schema + `", "cells": [{"key": "a/rate=1/s", "stable": false, "stability": "unstable",
		"repeats": [{"index": 0, "stability": {"checked": false, "stable": false}}, {"index": 1, "stability": {"checked": true, "state": "unstable", "stable": false}}]},
		{"key": "a/rate=2/s", "stable": true, "repeats": [{"index": 0, "stability": {"checked": false, "stable": false}}]}]}`
	r, err := Decode([]byte(old))
	if err != nil {
		t.Fatal(err)
	}
	checked, off := &r.Cells[0], &r.Cells[1]
	if checked.Stable == nil || *checked.Stable || checked.Repeats[0].Stability.Stable != nil ||
		checked.Repeats[1].Stability.Stable == nil || *checked.Repeats[1].Stability.Stable {
		t.Errorf("a checked cell read back: stable %v, repeats' %v and %v", checked.Stable, checked.Repeats[0].Stability.Stable, checked.Repeats[1].Stability.Stable)
	}
	if off.Stable != nil || off.Repeats[0].Stability.Stable != nil {
		t.Errorf("a cell not checked read back: stable %v, its repeat's %v: want absent", off.Stable, off.Repeats[0].Stability.Stable)
	}
	if got := ColumnNamed("stable").CSV(off); got != NotChecked {
		t.Errorf("CSV %q, want %q", got, NotChecked)
	}
}
