//go:build !unix

package otlp

import "os"

// openNoBlock opens path read-only; without O_NONBLOCK, the check before
// the open (readPEM's Stat) is what keeps a FIFO out.
func openNoBlock(path string) (*os.File, error) { return os.Open(path) }
