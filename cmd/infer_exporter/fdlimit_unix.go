//go:build unix

package main

import "syscall"

// raiseFileLimit lifts the soft open-file limit to the hard one, as
// Prometheus does at start: every stream in flight is a connection, one
// descriptor each, and a soft limit of 1,024 (a common default) would
// otherwise be what bounds the concurrent streams of a workload. It
// returns the limits now in force.
func raiseFileLimit() (soft, hard uint64, err error) {
	var lim syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &lim); err != nil {
		return 0, 0, err
	}
	if lim.Cur < lim.Max {
		want := lim
		want.Cur = want.Max
		if err := syscall.Setrlimit(syscall.RLIMIT_NOFILE, &want); err != nil {
			return uint64(lim.Cur), uint64(lim.Max), err
		}
		lim = want
	}
	return uint64(lim.Cur), uint64(lim.Max), nil
}
