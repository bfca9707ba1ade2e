//go:build unix

package procgroup

import (
	"os/exec"
	"syscall"
)

// Set makes the command the leader of a process group of its
// own, so that stopping it stops what it started too (a server that forks
// its workers, a shell script).
func Set(cmd *exec.Cmd) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
}

// Terminate asks the command's process group to end (SIGTERM).
func Terminate(cmd *exec.Cmd) { signal(cmd, syscall.SIGTERM) }

// Kill ends the command's process group (SIGKILL).
func Kill(cmd *exec.Cmd) { signal(cmd, syscall.SIGKILL) }

func signal(cmd *exec.Cmd, sig syscall.Signal) {
	if cmd.Process == nil || cmd.Process.Pid <= 0 {
		return
	}
	// The group's id is the leader's pid; a group already gone answers
	// ESRCH, which is what was wanted.
	_ = syscall.Kill(-cmd.Process.Pid, sig)
}
