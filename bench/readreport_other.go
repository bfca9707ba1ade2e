//go:build !unix

package bench

import "os"

// openNoBlock opens path read-only; without O_NONBLOCK, the check before
// the open (openRegular) is what keeps a FIFO out.
func openNoBlock(path string) (*os.File, error) { return os.Open(path) }
