// Package testenv says what a test needs of the machine it runs on, so that
// each step of `make` runs the tests it can trust there:
//
//   - `make quick` and `make test-race` (go test -short): every test that
//     needs neither a pinned tool nor a quiet machine;
//   - `make test-slow`: what -short leaves out, less the two steps below: the
//     suites that run a pinned tool (promtool, jsonnet, kubeconform, ...) and
//     the tests that run a bench or a replay in real time against the
//     simulator but whose verdict does not depend on the machine's speed;
//   - `make test-timing`: the tests whose verdict does depend on wall-clock
//     timing (Timing), named ...Accuracy..., alone and without the race
//     detector;
//   - `make test-e2e`: the end-to-end tests, named ...EndToEnd....
//
// A test skipped here says why and which step runs it.
package testenv

import (
	"bytes"
	"strings"
	"sync"
	"testing"
)

// Slow skips tb under -short: it runs in real time for several seconds, or
// starts a pinned tool, so `make quick` leaves it to `make test-slow`. Its
// verdict must not depend on the machine's speed: a test whose does calls
// Timing instead.
func Slow(tb testing.TB, why string) {
	tb.Helper()
	if testing.Short() {
		tb.Skipf("%s: skipped under -short; make test-slow runs it", why)
	}
}

// Timing marks a test whose verdict depends on wall-clock timing (latencies
// or rates compared with the simulator's ground truth, a schedule kept to
// the millisecond). Such a test must be named ...Accuracy... (make
// test-timing selects it by that name and runs it alone, -p 1); it skips
// under -short and under the race detector, which slows the client several
// times over. A misnamed test fails here, so that it cannot run, and flake,
// in the steps that share the CPU.
func Timing(tb testing.TB) {
	tb.Helper()
	if !strings.Contains(tb.Name(), "Accuracy") {
		tb.Fatalf("%s depends on wall-clock timing: name it ...Accuracy... so that only make test-timing runs it", tb.Name())
	}
	if testing.Short() {
		tb.Skip("a timing-accuracy test: skipped under -short; make test-timing runs it")
	}
	if RaceEnabled {
		tb.Skip("a timing-accuracy test: skipped under the race detector; make test-timing runs it")
	}
}

// Buffer collects what a child process or a logger writes while the test
// reads it: a bytes.Buffer behind a mutex.
type Buffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *Buffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *Buffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}
