//go:build unix

package bench

import (
	"os"
	"syscall"
)

// createNoBlock creates or truncates path for writing without waiting: a
// FIFO without a reader fails at once (ENXIO) instead of blocking the open,
// and one with a reader opens, to be refused by its mode. A regular file
// writes as usual.
func createNoBlock(path string) (*os.File, error) {
	return os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_TRUNC|syscall.O_NONBLOCK, 0o666)
}
