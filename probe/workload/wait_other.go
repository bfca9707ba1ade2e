//go:build !linux

package workload

func newWaiter() waiter { return newTimerWaiter() }
