//go:build !unix

package bench

import "os/exec"

// Without process groups the command alone is stopped: what it started
// itself may outlive it.
func setProcessGroup(*exec.Cmd) {}

func terminateGroup(cmd *exec.Cmd) { killGroup(cmd) }

func killGroup(cmd *exec.Cmd) {
	if cmd.Process != nil {
		_ = cmd.Process.Kill()
	}
}
