//go:build !unix

package bench

import "os"

// windowColumns is 0 where the terminal's width is not asked: the caller
// falls back to $COLUMNS or DefaultColumns.
func windowColumns(*os.File) int { return 0 }
