//go:build unix

package bench

import (
	"os"

	"golang.org/x/sys/unix"
)

// windowColumns is the width the terminal f reports (TIOCGWINSZ); 0 when
// f is none or says nothing.
func windowColumns(f *os.File) int {
	if f == nil {
		return 0
	}
	ws, err := unix.IoctlGetWinsize(int(f.Fd()), unix.TIOCGWINSZ)
	if err != nil {
		return 0
	}
	return int(ws.Col)
}
