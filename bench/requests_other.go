//go:build !unix

package bench

import "os"

// createNoBlock creates or truncates path; without O_NONBLOCK, the check
// before the open (checkRequestsPath) is what keeps a FIFO out.
func createNoBlock(path string) (*os.File, error) { return os.Create(path) }
