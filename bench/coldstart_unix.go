//go:build unix

package bench

import (
	"os/exec"
	"syscall"
)

// setProcessGroup makes the command the leader of a process group of its
// own, so that stopping it stops what it started too (a server that forks
// its workers, a shell script).
func setProcessGroup(cmd *exec.Cmd) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
}

// terminateGroup asks the command's process group to end (SIGTERM).
func terminateGroup(cmd *exec.Cmd) { signalGroup(cmd, syscall.SIGTERM) }

// killGroup ends the command's process group (SIGKILL).
func killGroup(cmd *exec.Cmd) { signalGroup(cmd, syscall.SIGKILL) }

func signalGroup(cmd *exec.Cmd, sig syscall.Signal) {
	if cmd.Process == nil || cmd.Process.Pid <= 0 {
		return
	}
	// The group's id is the leader's pid; a group already gone answers
	// ESRCH, which is what was wanted.
	_ = syscall.Kill(-cmd.Process.Pid, sig)
}
