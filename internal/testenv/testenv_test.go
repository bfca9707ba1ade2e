package testenv

import (
	"testing"
)

// fakeTB records what a helper did to its test instead of doing it.
type fakeTB struct {
	testing.TB
	name    string
	fatal   bool
	skipped bool
	msg     string
}

func (f *fakeTB) Helper()      {}
func (f *fakeTB) Name() string { return f.name }
func (f *fakeTB) Fatalf(format string, args ...any) {
	f.fatal, f.msg = true, format
	panic(f)
}
func (f *fakeTB) Skip(args ...any) {
	f.skipped = true
	panic(f)
}
func (f *fakeTB) Skipf(format string, args ...any) {
	f.skipped, f.msg = true, format
	panic(f)
}

// run calls fn with tb and recovers the panic that stands for
// runtime.Goexit in a real test.
func run(tb *fakeTB, fn func(testing.TB)) {
	defer func() {
		if r := recover(); r != nil && r != tb {
			panic(r)
		}
	}()
	fn(tb)
}

// TestTimingNeedsAccuracyName: a timing test not named ...Accuracy... fails
// whatever the flags, so it never runs in a shared step.
func TestTimingNeedsAccuracyName(t *testing.T) {
	for _, tc := range []struct {
		name      string
		wantFatal bool
	}{
		{"TestSweepFindsCapacity", true},
		{"TestSteadyStateThroughputAccuracy", false},
		{"TestAccuracyAzureReplay/sub", false},
	} {
		tb := &fakeTB{name: tc.name}
		run(tb, Timing)
		if tb.fatal != tc.wantFatal {
			t.Errorf("%s: fatal %v, want %v", tc.name, tb.fatal, tc.wantFatal)
		}
		if !tc.wantFatal && (testing.Short() || RaceEnabled) != tb.skipped {
			t.Errorf("%s: skipped %v with -short %v, race %v", tc.name, tb.skipped, testing.Short(), RaceEnabled)
		}
	}
}

func TestSlowSkipsUnderShort(t *testing.T) {
	tb := &fakeTB{name: "TestX"}
	run(tb, func(tb testing.TB) { Slow(tb, "real time") })
	if tb.skipped != testing.Short() || tb.fatal {
		t.Errorf("skipped %v under -short %v", tb.skipped, testing.Short())
	}
}
