//go:build unix

package otlp

import (
	"os"
	"syscall"
)

// openNoBlock opens path read-only without waiting: a FIFO opens at once
// (and is then refused as not a regular file) rather than waiting for a
// writer. A regular file reads as usual.
func openNoBlock(path string) (*os.File, error) {
	return os.OpenFile(path, os.O_RDONLY|syscall.O_NONBLOCK, 0)
}
