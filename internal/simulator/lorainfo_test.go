package simulator

import (
	"fmt"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// TestLoRAInfoBounded: the LoRA gauge keeps at most maxLoRASeries label
// sets, forgetting the oldest, and the state set last is the series of the
// highest value even when the clock does not move.
func TestLoRAInfoBounded(t *testing.T) {
	frozen := time.Unix(1_700_000_000, 0)
	l := newLoRAInfo(2, func() time.Time { return frozen })
	reg := prometheus.NewRegistry()
	reg.MustRegister(l)
	for i := range 3 * maxLoRASeries {
		l.set(fmt.Sprint("a", i), "")
	}
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	if len(mfs) != 1 || len(mfs[0].Metric) != maxLoRASeries {
		t.Fatalf("%d families, %d series; want 1 family of %d series", len(mfs), len(mfs[0].Metric), maxLoRASeries)
	}
	best, running := 0.0, ""
	for _, m := range mfs[0].Metric {
		if v := m.GetGauge().GetValue(); v > best {
			best = v
			for _, lp := range m.Label {
				if lp.GetName() == "running_lora_adapters" {
					running = lp.GetValue()
				}
			}
		}
		for _, lp := range m.Label {
			if lp.GetName() == "running_lora_adapters" && lp.GetValue() == "a0" {
				t.Error("the oldest series is kept")
			}
		}
	}
	if want := fmt.Sprint("a", 3*maxLoRASeries-1); running != want {
		t.Errorf("the latest series runs %q, want %q", running, want)
	}
}
