//go:build unix

package main

import (
	"syscall"
	"testing"
)

// TestRaiseFileLimit: the soft limit ends at the hard one.
func TestRaiseFileLimit(t *testing.T) {
	soft, hard, err := raiseFileLimit()
	if err != nil {
		t.Fatal(err)
	}
	var lim syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &lim); err != nil {
		t.Fatal(err)
	}
	if soft != hard || uint64(lim.Cur) != hard || uint64(lim.Max) != hard {
		t.Fatalf("limits after: returned %d/%d, in force %d/%d", soft, hard, lim.Cur, lim.Max)
	}
}
