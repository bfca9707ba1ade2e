package live

import (
	"context"
	"runtime"
	"testing"
	"time"

	"github.com/infer-exporter/infer_exporter/internal/groundtruth"
)

// The one-stream accuracy tests state the client's timing against a floor
// measured in the same run: a bare reader of a line stream in this process
// (groundtruth.ReadFloor). On this 2-core machine even that floor reads an
// event up to 1.5-2.8 ms late now and then (p99 0.55-1.07 ms, max
// 0.64-2.84 ms in 10 runs of 256 events), and an ITL error, the difference
// of two such reads, up to twice that: a lone p99 bound of 2 ms failed a
// correct client in about 1 run of 3 here and in CI. So:
//
//   - on a machine of bigMachineCPUs or more the p99 bound is the absolute
//     oneStreamTolerance, as before;
//   - everywhere, the median adds at most floorAddedP50 to the floor's and
//     the p90 at most floorAddedP90: a client that read events a decode
//     step late or batched them moves most events by milliseconds, so it
//     fails these, while the machine's rare late wake-ups do not reach
//     them;
//   - everywhere, the p99 stays under half a decode step, which a client
//     that held back even one event in fifty by a step fails.
const (
	oneStreamTolerance = 2 * time.Millisecond
	bigMachineCPUs     = 8
	floorAddedP50      = 500 * time.Microsecond
	floorAddedP90      = time.Millisecond
	floorEvents        = 256
)

// readFloor is the bare reader's figures over floorEvents events one step
// apart: its read errors and the |difference| of consecutive ones (its ITL
// error).
type readFloor struct {
	step      time.Duration
	read, itl []time.Duration
}

func measureFloor(t *testing.T, step time.Duration) readFloor {
	t.Helper()
	errs, err := groundtruth.ReadFloor(context.Background(), floorEvents, step)
	if err != nil {
		t.Fatalf("read floor: %v", err)
	}
	f := readFloor{step: step, read: errs}
	for i := 1; i < len(errs); i++ {
		f.itl = append(f.itl, errs[i]-errs[i-1])
	}
	t.Logf("bare-read floor: %d events, read error p50 %v p90 %v p99 %v; ITL |error| p90 %v p99 %v",
		len(errs), quantile(errs, .5), quantile(errs, .9), quantile(errs, .99), absQuantile(f.itl, .9), absQuantile(f.itl, .99))
	return f
}

// checkRead bounds read errors (read instant − emit instant, TTFT or every
// token) against the floor's read errors; checkITL bounds ITL errors
// (client gap − server gap, taken absolute) against the floor's.
func (f readFloor) checkRead(t *testing.T, name string, errs []time.Duration) {
	t.Helper()
	f.check(t, name, errs, f.read, quantile)
}

func (f readFloor) checkITL(t *testing.T, name string, errs []time.Duration) {
	t.Helper()
	f.check(t, name, errs, f.itl, absQuantile)
}

func (f readFloor) check(t *testing.T, name string, errs, floor []time.Duration, q func([]time.Duration, float64) time.Duration) {
	t.Helper()
	if got, bound := q(errs, .5), q(floor, .5)+floorAddedP50; got > bound {
		t.Errorf("%s p50 %v > the floor's %v + %v", name, got, q(floor, .5), floorAddedP50)
	} else if got, bound := q(errs, .9), q(floor, .9)+floorAddedP90; got > bound {
		t.Errorf("%s p90 %v > the floor's %v + %v", name, got, q(floor, .9), floorAddedP90)
	}
	p99 := q(errs, .99)
	if runtime.NumCPU() >= bigMachineCPUs && p99 > oneStreamTolerance {
		t.Errorf("%s p99 %v > %v on %d CPUs", name, p99, oneStreamTolerance, runtime.NumCPU())
	}
	if p99 >= f.step/2 {
		t.Errorf("%s p99 %v >= half a decode step (%v)", name, p99, f.step/2)
	}
}
