// Package memwatch samples the Go heap while a test runs, for the tests
// whose point is a memory bound: a hostile target or input must not grow
// the process past a bound, and a test of that must fail quickly, not by
// exhausting the machine, when the bound is broken.
package memwatch

import (
	"runtime"
	"runtime/metrics"
	"sync"
	"time"
)

// heapObjects is the bytes of heap objects, live and not yet swept: an
// upper bound on what the code under test holds, read without stopping
// the world.
const heapObjects = "/memory/classes/heap/objects:bytes"

// Watch samples the heap every millisecond from Start until Stop.
type Watch struct {
	base     uint64
	limit    uint64
	exceeded func()

	mu   sync.Mutex
	peak uint64
	over bool

	stop chan struct{}
	done chan struct{}
}

// Start collects garbage, takes the heap's size as the baseline, and
// samples it until Stop. When the heap grows more than limit bytes above
// the baseline, exceeded is called once (a test cancels its work there, so
// that broken code fails the test instead of the machine); nil means none.
func Start(limit uint64, exceeded func()) *Watch {
	runtime.GC()
	w := &Watch{limit: limit, exceeded: exceeded, stop: make(chan struct{}), done: make(chan struct{})}
	w.base = read()
	go w.run()
	return w
}

func read() uint64 {
	s := []metrics.Sample{{Name: heapObjects}}
	metrics.Read(s)
	return s[0].Value.Uint64()
}

func (w *Watch) run() {
	defer close(w.done)
	t := time.NewTicker(time.Millisecond)
	defer t.Stop()
	for {
		w.sample()
		select {
		case <-w.stop:
			return
		case <-t.C:
		}
	}
}

func (w *Watch) sample() {
	v := read()
	var added uint64
	if v > w.base {
		added = v - w.base
	}
	w.mu.Lock()
	w.peak = max(w.peak, added)
	fire := added > w.limit && !w.over
	if fire {
		w.over = true
	}
	w.mu.Unlock()
	if fire && w.exceeded != nil {
		w.exceeded()
	}
}

// Stop ends the sampling and returns the largest growth seen above the
// baseline, in bytes, and whether it passed the limit.
func (w *Watch) Stop() (peak uint64, exceeded bool) {
	close(w.stop)
	<-w.done
	w.sample()
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.peak, w.over
}
