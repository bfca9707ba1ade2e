package workload

import (
	"context"
	"encoding/binary"
	"os"
	"time"

	"golang.org/x/sys/unix"
)

// timerfdWaiter sleeps on a Linux timerfd read through the Go netpoller.
// The runtime's own timers are only as precise as epoll_wait's millisecond
// timeout when the process is idle, which would add up to 1 ms of schedule
// lag to every arrival; a timerfd becomes readable when the kernel's
// high-resolution timer expires, and epoll wakes on that at once. The
// goroutine parks like any network read, so no thread is held and no CPU
// is spent spinning.
type timerfdWaiter struct {
	fd  int
	f   *os.File
	buf [8]byte
}

func newWaiter() waiter {
	fd, err := unix.TimerfdCreate(unix.CLOCK_MONOTONIC, unix.TFD_NONBLOCK|unix.TFD_CLOEXEC)
	if err != nil {
		return newTimerWaiter()
	}
	// A non-blocking descriptor makes os.NewFile return a pollable file.
	return &timerfdWaiter{fd: fd, f: os.NewFile(uintptr(fd), "timerfd")}
}

func (w *timerfdWaiter) waitUntil(ctx context.Context, at time.Time) bool {
	d := time.Until(at)
	if d <= 0 {
		return ctx.Err() == nil
	}
	spec := unix.ItimerSpec{Value: unix.NsecToTimespec(int64(d))}
	if err := unix.TimerfdSettime(w.fd, 0, &spec, nil); err != nil {
		return fallbackWait(ctx, at)
	}
	stop := context.AfterFunc(ctx, func() { _ = w.f.SetReadDeadline(time.Unix(1, 0)) })
	for {
		n, err := w.f.Read(w.buf[:])
		if err == nil && n == 8 && binary.NativeEndian.Uint64(w.buf[:]) > 0 {
			if !stop() {
				// The cancellation fired after the timer: clear its
				// deadline so that it cannot cut a later wait short.
				_ = w.f.SetReadDeadline(time.Time{})
			}
			return true
		}
		if ctx.Err() != nil {
			// Disarm, and clear the deadline for the next wait.
			_ = unix.TimerfdSettime(w.fd, 0, &unix.ItimerSpec{}, nil)
			_ = w.f.SetReadDeadline(time.Time{})
			return false
		}
		if err != nil {
			stop()
			return fallbackWait(ctx, at)
		}
	}
}

func (w *timerfdWaiter) close() { _ = w.f.Close() }

func fallbackWait(ctx context.Context, at time.Time) bool {
	w := newTimerWaiter()
	defer w.close()
	return w.waitUntil(ctx, at)
}
