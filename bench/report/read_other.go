//go:build !unix

package report

import "os"

// openNoBlock opens path read-only; without O_NONBLOCK, the check before
// the open (OpenRegular) is what keeps a FIFO out.
func openNoBlock(path string) (*os.File, error) { return os.Open(path) }
