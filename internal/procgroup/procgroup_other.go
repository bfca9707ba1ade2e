//go:build !unix

package procgroup

import "os/exec"

// Without process groups the command alone is stopped: what it started
// itself may outlive it.
func Set(*exec.Cmd) {}

func Terminate(cmd *exec.Cmd) { Kill(cmd) }

func Kill(cmd *exec.Cmd) {
	if cmd.Process != nil {
		_ = cmd.Process.Kill()
	}
}
