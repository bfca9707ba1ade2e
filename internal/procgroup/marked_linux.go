//go:build linux

package procgroup

import (
	"bytes"
	"errors"
	"io"
	"os"
	"strconv"
	"syscall"

	"golang.org/x/sys/unix"
)

// maxEnvironBytes bounds the read of one process's environment: the
// kernel's own bound on arguments and environment together is far below
// it (ARG_MAX, a quarter of the stack limit, typically 2 MiB).
const maxEnvironBytes = 8 << 20

// SignalMarked sends sig to every process of this user whose environment
// holds mark ("NAME=value"), this process excepted, and returns how many
// it signalled. It is how a cold start's stop finds the descendants that
// left the server's process group (setsid, a daemon's double fork): they
// keep the environment they were started with unless they clear it, in
// which case they are not found.
//
// Each process is first held through a pidfd, and signalled through it
// after its environment was read, so that a pid reused in between is
// never signalled. Without pidfds (Linux before 5.3) the pid is
// signalled, with that small race.
func SignalMarked(mark string, sig syscall.Signal) int {
	dir, err := os.Open("/proc")
	if err != nil {
		return 0
	}
	defer dir.Close()
	names, err := dir.Readdirnames(-1)
	if err != nil {
		return 0
	}
	want := []byte("\x00" + mark + "\x00")
	self := os.Getpid()
	n := 0
	for _, name := range names {
		pid, err := strconv.Atoi(name)
		if err != nil || pid <= 1 || pid == self {
			continue
		}
		fd, ferr := unix.PidfdOpen(pid, 0)
		if ferr != nil && !errors.Is(ferr, unix.ENOSYS) {
			continue // gone, or not ours to look at
		}
		if marked(pid, want) {
			if ferr == nil {
				err = unix.PidfdSendSignal(fd, sig, nil, 0)
			} else {
				err = syscall.Kill(pid, sig)
			}
			if err == nil {
				n++
			}
		}
		if ferr == nil {
			unix.Close(fd)
		}
	}
	return n
}

// marked reports whether the environment of pid holds want ("\0NAME=value\0").
// A zombie's reads as empty, another user's cannot be read: neither is.
func marked(pid int, want []byte) bool {
	f, err := os.Open("/proc/" + strconv.Itoa(pid) + "/environ")
	if err != nil {
		return false
	}
	defer f.Close()
	env, err := io.ReadAll(io.LimitReader(f, maxEnvironBytes))
	if err != nil || len(env) == 0 {
		return false
	}
	env = append([]byte{0}, env...)
	if env[len(env)-1] != 0 {
		env = append(env, 0)
	}
	return bytes.Contains(env, want)
}
