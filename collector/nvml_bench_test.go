//go:build cgo && linux

package collector

import (
	"context"
	"io"
	"log/slog"
	"testing"

	"github.com/alecthomas/kingpin/v2"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/common/expfmt"
)

// bench8GPUs builds a collector over 8 mocked H200s whose snapshots are all
// filled: every reading, a GPM window, two processes each, one XID each.
func bench8GPUs(b *testing.B) (*nvmlCollector, *fakeLib) {
	b.Helper()
	var gpus []*fakeGPU
	for i := range 8 {
		gpus = append(gpus, h200(i))
	}
	lib := newFakeLib(gpus...)
	c := newManual(b, lib, testConfig(), newFakeClock())
	for i, g := range c.gpus {
		c.gpmStep(g)
		lib.sendXID(gpus[i], 79)
		if err := c.xidStep(g, 0); err != nil {
			b.Fatal(err)
		}
	}
	return c, lib
}

// BenchmarkScrape8GPUs measures what a scrape costs the NVML collector with 8
// GPUs: rendering the latest snapshots (no NVML call happens in a scrape).
//
//	render: Update into a channel, the collector's own cost.
//	gather_encode: the whole /metrics path through the collector Set, a
//	registry Gather and the text encoding, as promhttp does it.
func BenchmarkScrape8GPUs(b *testing.B) {
	b.Run("render", func(b *testing.B) {
		c, _ := bench8GPUs(b)
		ch := make(chan prometheus.Metric, 4096)
		b.ReportAllocs()
		series := 0
		for b.Loop() {
			if err := c.Update(context.Background(), ch); err != nil {
				b.Fatal(err)
			}
			series = len(ch)
			for len(ch) > 0 {
				<-ch
			}
		}
		b.ReportMetric(float64(series), "series/op")
	})
	b.Run("gather_encode", func(b *testing.B) {
		c, _ := bench8GPUs(b)
		table := []factory{{name: "nvml", defaultEnabled: true, addFlags: func(FlagAdder) constructor {
			return func(context.Context, *slog.Logger) (Collector, error) { return c, nil }
		}}}
		app := kingpin.New("bench", "")
		s := addFlags(app, table)
		if _, err := app.Parse(nil); err != nil {
			b.Fatal(err)
		}
		set, err := New(context.Background(), s, nil)
		if err != nil {
			b.Fatal(err)
		}
		reg := prometheus.NewRegistry()
		reg.MustRegister(set)
		b.ReportAllocs()
		for b.Loop() {
			mfs, err := reg.Gather()
			if err != nil {
				b.Fatal(err)
			}
			enc := expfmt.NewEncoder(io.Discard, expfmt.NewFormat(expfmt.TypeTextPlain))
			for _, mf := range mfs {
				if err := enc.Encode(mf); err != nil {
					b.Fatal(err)
				}
			}
		}
	})
}
