package config

import (
	"context"
	"errors"
	"os"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// readBounded reads name, at most limit bytes, until ctx ends.
//
// A regular file is read at once. Anything else (a FIFO, a terminal, a
// device) is opened non-blocking, so that the open of a FIFO does not wait
// for a writer, and read through the runtime's poller, whose read deadline
// ctx sets when it ends. A FIFO is first waited on until it has data or a
// writer that came and went, as a blocking read would (a non-blocking read
// with no writer yet reads an empty file at once); that wait ends with ctx
// too. Nothing is left running when it returns.
func readBounded(ctx context.Context, name string, limit int64) ([]byte, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	f, err := os.OpenFile(name, os.O_RDONLY|syscall.O_NONBLOCK, 0)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return nil, err
	}
	if fi.Mode().IsRegular() {
		if fi.Size() > limit {
			return nil, errTooLarge
		}
		return readAtMost(f, limit)
	}
	stop := context.AfterFunc(ctx, func() { _ = f.SetReadDeadline(time.Now()) })
	defer stop()
	if fi.Mode()&os.ModeNamedPipe != 0 {
		if err := waitReadable(f); err != nil {
			return nil, ctxErr(ctx, err)
		}
	}
	data, err := readAtMost(f, limit)
	if err != nil {
		return nil, ctxErr(ctx, err)
	}
	return data, nil
}

// waitReadable waits until the FIFO f has data, or had a writer that has
// gone, or its read deadline passes.
func waitReadable(f *os.File) error {
	rc, err := f.SyscallConn()
	if err != nil {
		return err
	}
	var perr error
	err = rc.Read(func(fd uintptr) bool {
		fds := []unix.PollFd{{Fd: int32(fd), Events: unix.POLLIN}}
		n, err := unix.Poll(fds, 0)
		if err == unix.EINTR {
			return false
		}
		if err != nil {
			perr = err
			return true
		}
		// POLLIN: data; POLLHUP: a writer came and left. Neither: no
		// writer yet, so wait for the poller to report one.
		return n > 0
	})
	if err != nil {
		return err
	}
	return perr
}

// ctxErr is ctx's error when the read stopped because ctx ended.
func ctxErr(ctx context.Context, err error) error {
	if ctx.Err() != nil && (errors.Is(err, os.ErrDeadlineExceeded) || errors.Is(err, os.ErrClosed)) {
		return ctx.Err()
	}
	return err
}
