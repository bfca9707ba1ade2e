package plan

import (
	"testing"
	"time"

	"github.com/infer-exporter/infer_exporter/internal/config"
)

// TestArrivalSeedPerWorkload: two workloads of one rate and one prompt
// seed get arrival streams of their own (not in lockstep), and one
// workload gets the same stream on every start.
func TestArrivalSeedPerWorkload(t *testing.T) {
	c := config.Arrival{Process: config.ProcessPoisson, Rate: 10, MaxRate: 100}
	offsets := func(seed int64) []time.Duration {
		ol, err := Open(c, seed, DefaultDegradedLag)
		if err != nil {
			t.Fatal(err)
		}
		var out []time.Duration
		for range 20 {
			d, ok := ol.Schedule.Next()
			if !ok {
				t.Fatal("the schedule ended")
			}
			out = append(out, d)
		}
		return out
	}
	a, b := offsets(ArrivalSeed(1, "chat-a")), offsets(ArrivalSeed(1, "chat-b"))
	same := 0
	for i := range a {
		if d := a[i] - b[i]; d > -20*time.Millisecond && d < 20*time.Millisecond {
			same++
		}
	}
	if same > 5 {
		t.Errorf("%d of %d arrivals of two workloads within 20 ms of each other: in lockstep", same, len(a))
	}
	if again := offsets(ArrivalSeed(1, "chat-a")); again[19] != a[19] || again[0] != a[0] {
		t.Errorf("one workload's stream changed between starts: %v then %v", a[:3], again[:3])
	}
	if ArrivalSeed(1, "chat-a") == ArrivalSeed(2, "chat-a") {
		t.Error("the prompt seed does not change the stream")
	}
}
