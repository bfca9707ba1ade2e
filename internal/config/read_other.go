//go:build !linux

package config

import "context"

// readBounded reads name, at most limit bytes, until ctx ends (readWaiting:
// when ctx ends first, a goroutine blocked in the open or the read remains
// until the file gives data or its end).
func readBounded(ctx context.Context, name string, limit int64) ([]byte, error) {
	return readWaiting(ctx, name, limit)
}
