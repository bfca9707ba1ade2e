package bench

import (
	"fmt"
	"math/rand/v2"
	"sync"
	"time"

	"github.com/infer-exporter/infer_exporter/bench/report"
	"github.com/infer-exporter/infer_exporter/probe/replay"
)

// replayRecorder hears one replay repeat (replay.Recorder): every row's
// drift from its trace instant, in a uniform sample of at most max values,
// and the rows replayed. Its methods run on the request goroutines.
type replayRecorder struct {
	mu    sync.Mutex
	rng   *rand.Rand
	max   int
	drift []float64
	seen  int
	rows  int
}

var _ replay.Recorder = (*replayRecorder)(nil)

func newReplayRecorder(maxSamples int, seed uint64) *replayRecorder {
	return &replayRecorder{rng: rand.New(rand.NewPCG(seed, 0xd1f7)), max: max(1, maxSamples)}
}

// Replayed implements replay.Recorder.
func (r *replayRecorder) Replayed(float64) {
	r.mu.Lock()
	r.rows++
	r.mu.Unlock()
}

// Drift implements replay.Recorder.
func (r *replayRecorder) Drift(_ time.Time, d time.Duration) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.seen++
	switch {
	case len(r.drift) < r.max:
		r.drift = append(r.drift, d.Seconds())
	default:
		if j := r.rng.IntN(r.seen); j < r.max {
			r.drift[j] = d.Seconds()
		}
	}
}

// result fills what the recorder heard into res.
func (r *replayRecorder) result(res *report.ReplayResult) {
	r.mu.Lock()
	defer r.mu.Unlock()
	res.Replayed = r.rows
	res.Drift = summarize(append([]float64(nil), r.drift...))
	res.Degraded = res.Drift.Count > 0 && res.Drift.P99 > degradedLag.Seconds()
}

// replaySalt is the word salt a repeat gives its replay: its index under
// per_repeat (0, the first repeat's, is also the words of the exporter's
// replay of the same trace and seed), 0 under reuse.
func replaySalt(r *ReplaySpec, index int) uint64 {
	if r.Words == WordsReuse {
		return 0
	}
	return uint64(index)
}

// replayWords names what a repeat's prompts held.
func replayWords(r *ReplaySpec, src *replay.Source) string {
	if src.Bodies() {
		return "recorded"
	}
	if r.Words == WordsReuse {
		return WordsReuse
	}
	return WordsPerRepeat
}

// replayCut says where a looping replay was cut.
func replayCut(warmup, duration time.Duration) string {
	return fmt.Sprintf("a looping replay never ends: cut at the warm-up plus the duration (%s + %s)", warmup, duration)
}
