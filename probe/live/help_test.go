package live

import (
	"regexp"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/infer-exporter/infer_exporter/probe/workload"
)

// describing is a Registerer that keeps what is registered with it.
type describing struct{ cs []prometheus.Collector }

func (d *describing) Register(c prometheus.Collector) error { d.cs = append(d.cs, c); return nil }
func (d *describing) MustRegister(cs ...prometheus.Collector) {
	d.cs = append(d.cs, cs...)
}
func (d *describing) Unregister(prometheus.Collector) bool { return true }

// TestHelpIsShort: every infer_probe_* family, replay's included, has a help
// of one short sentence; the definitions are in docs/metrics.md.
func TestHelpIsShort(t *testing.T) {
	reg := &describing{}
	NewMetrics(reg)
	workload.NewSchedulingLatency(reg, time.Second)
	help := regexp.MustCompile(`fqName: "([^"]+)", help: "((?:[^"\\]|\\.)*)"`)
	ch := make(chan *prometheus.Desc, 256)
	n := 0
	for _, c := range reg.cs {
		c.Describe(ch)
	drain:
		for {
			select {
			case d := <-ch:
				m := help.FindStringSubmatch(d.String())
				if m == nil {
					t.Fatalf("cannot read %s", d)
				}
				n++
				if len(m[2]) == 0 || len(m[2]) > 150 {
					t.Errorf("%s: help of %d characters, want 1 to 150", m[1], len(m[2]))
				}
			default:
				break drain
			}
		}
	}
	if n < 20 {
		t.Errorf("only %d families described", n)
	}
}
