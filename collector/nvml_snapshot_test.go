//go:build cgo && linux

package collector

import (
	"context"
	"log/slog"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
	"github.com/prometheus/client_golang/prometheus"
)

// seriesKey is name{label=value,...} with the labels sorted.
func seriesKey(name string, kv ...string) string {
	var ls []string
	for i := 0; i+1 < len(kv); i += 2 {
		ls = append(ls, kv[i]+"="+kv[i+1])
	}
	sort.Strings(ls)
	return name + "{" + strings.Join(ls, ",") + "}"
}

// gathered returns every sample c renders, by seriesKey.
func gathered(t *testing.T, c Collector) map[string]float64 {
	t.Helper()
	reg := prometheus.NewPedanticRegistry()
	reg.MustRegister(asPromCollector{c})
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]float64{}
	for _, mf := range mfs {
		for _, m := range mf.GetMetric() {
			var kv []string
			for _, l := range m.GetLabel() {
				kv = append(kv, l.GetName(), l.GetValue())
			}
			v := m.GetGauge().GetValue()
			if m.Counter != nil {
				v = m.GetCounter().GetValue()
			}
			out[seriesKey(mf.GetName(), kv...)] = v
		}
	}
	return out
}

// expectedSeries is what the documented schema says a snapshot renders,
// written out independently of render.
func expectedSeries(s GPUSnapshot, now time.Time) map[string]float64 {
	out := map[string]float64{}
	id := []string{"gpu", strconv.Itoa(s.Index), "uuid", s.UUID, "name", s.Name}
	put := func(name string, v float64, kv ...string) {
		out[seriesKey("infer_gpu_"+name, append(append([]string(nil), id...), kv...)...)] = v
	}
	opt := func(name string, r Reading, kv ...string) {
		if r.OK {
			put(name, r.Value, kv...)
		}
	}
	b := func(v bool) float64 {
		if v {
			return 1
		}
		return 0
	}
	put("info", 1, "driver_version", s.DriverVersion, "cuda_version", s.CUDAVersion, "pci_bus_id", s.PCIBusID)
	if !s.Polled {
		return out
	}
	put("up", b(s.Up))
	put("sample_age_seconds", max(0, now.Sub(s.At).Seconds()))
	put("poll_duration_seconds", s.PollDuration.Seconds())
	if !s.Up {
		return out
	}
	opt("utilization_ratio", s.Utilization)
	opt("memory_utilization_ratio", s.MemoryUtilization)
	opt("memory_used_bytes", s.MemoryUsedBytes)
	opt("memory_free_bytes", s.MemoryFreeBytes)
	opt("memory_total_bytes", s.MemoryTotalBytes)
	opt("memory_reserved_bytes", s.MemoryReservedBytes)
	opt("power_watts", s.PowerWatts)
	opt("power_limit_watts", s.PowerLimitWatts)
	opt("energy_joules_total", s.EnergyJoules)
	opt("temperature_celsius", s.TemperatureCelsius)
	opt("clock_hertz", s.SMClockHertz, "clock", "sm")
	opt("clock_hertz", s.MemoryClockHertz, "clock", "memory")
	opt("clock_max_hertz", s.SMClockMaxHertz, "clock", "sm")
	opt("clock_max_hertz", s.MemoryClockMaxHertz, "clock", "memory")
	for _, r := range s.ClockEvents {
		put("clock_event_reason_active", b(r.Active), "reason", r.Reason)
	}
	opt("pcie_bytes_per_second", s.PCIeTxBytesPerSecond, "direction", "tx")
	opt("pcie_bytes_per_second", s.PCIeRxBytesPerSecond, "direction", "rx")
	opt("ecc_errors_total", s.ECCCorrected, "type", "corrected")
	opt("ecc_errors_total", s.ECCUncorrected, "type", "uncorrected")
	opt("performance_state", s.PerformanceState)
	opt("mig_mode_enabled", s.MIGEnabled)
	opt("processes", s.ProcessCount)
	for _, p := range s.Processes {
		opt("process_memory_used_bytes", p.MemoryUsedBytes, "pid", strconv.FormatUint(uint64(p.PID), 10), "process", p.Name)
	}
	put("xid_events_watched", b(s.XIDWatched))
	for xid, n := range s.XIDErrors {
		put("xid_errors_total", float64(n), "xid", strconv.FormatUint(xid, 10))
	}
	if w := s.GPM; w != nil {
		put("gpm_window_seconds", w.Window.Seconds())
		put("gpm_sample_age_seconds", max(0, now.Sub(w.At).Seconds()))
		opt("sm_active_ratio", w.SMActive)
		opt("sm_occupancy_ratio", w.SMOccupancy)
		opt("tensor_active_ratio", w.TensorActive)
		opt("dram_bandwidth_utilization_ratio", w.DRAMBandwidthUtilization)
		opt("pcie_bytes_per_second", w.PCIeTxBytesPerSecond, "direction", "tx")
		opt("pcie_bytes_per_second", w.PCIeRxBytesPerSecond, "direction", "rx")
	}
	return out
}

// TestNVMLSnapshotsMatchSeries: GPUs() and the rendered series say the same
// thing, series for series, for a GPU with GPM and XIDs, one without, and a
// lost one; and the snapshot holds NVML's readings in base units.
func TestNVMLSnapshotsMatchSeries(t *testing.T) {
	g0, g1, g2 := h200(0), h200(1), h200(2)
	g1.gpm, g1.xidSupported = false, false
	lib := newFakeLib(g0, g1, g2)
	clock := newFakeClock()
	c := newManual(t, lib, testConfig(), clock)
	clock.advance(1250 * time.Millisecond)
	c.gpmStep(c.gpus[0])
	for _, xid := range []uint64{79, 79, 13} {
		lib.sendXID(g0, xid)
		if err := c.xidStep(c.gpus[0], 0); err != nil {
			t.Fatal(err)
		}
	}
	g2.setLost(true)
	c.poll(c.gpus[2])
	clock.advance(250 * time.Millisecond)

	snaps := c.gpuSnapshots()
	if len(snaps) != 3 {
		t.Fatalf("%d snapshots, want 3", len(snaps))
	}
	want := map[string]float64{}
	for _, s := range snaps {
		for k, v := range expectedSeries(s, clock.now()) {
			want[k] = v
		}
	}
	got := gathered(t, c)
	for k, v := range want {
		if g, ok := got[k]; !ok || g != v {
			t.Errorf("%s = %v (present %v), snapshot says %v", k, g, ok, v)
		}
	}
	for k := range got {
		if _, ok := want[k]; !ok {
			t.Errorf("%s rendered but not in the snapshot", k)
		}
	}

	s0, s1, s2 := snaps[0], snaps[1], snaps[2]
	if s0.Index != 0 || s0.UUID != g0.uuid || s0.Name != "NVIDIA H200" || s0.PCIBusID != g0.busID || s0.DriverVersion == "" || s0.CUDAVersion == "" {
		t.Errorf("GPU 0 identity %+v", s0)
	}
	if !s0.Polled || !s0.Up || s0.MemoryTotalBytes != (Reading{float64(g0.mem.Total), true}) ||
		s0.MemoryUsedBytes != (Reading{float64(g0.mem.Used), true}) || s0.PowerWatts != (Reading{612.345, true}) ||
		s0.TemperatureCelsius != (Reading{54, true}) || s0.SMClockHertz != (Reading{1980e6, true}) ||
		s0.Utilization != (Reading{0.97, true}) || s0.EnergyJoules != (Reading{123456.789, true}) {
		t.Errorf("GPU 0 readings %+v", s0)
	}
	if s0.GPM == nil || s0.GPM.SMActive != (Reading{0.875, true}) || s0.XIDErrors[79] != 2 || s0.XIDErrors[13] != 1 || !s0.XIDWatched {
		t.Errorf("GPU 0 GPM %+v, XIDs %v", s0.GPM, s0.XIDErrors)
	}
	if s1.GPM != nil || s1.XIDWatched || !s1.PCIeTxBytesPerSecond.OK || s0.PCIeTxBytesPerSecond.OK {
		t.Errorf("GPU 1 without GPM/XID: GPM %+v, XID %v, PCIe %+v; GPU 0 PCIe %+v", s1.GPM, s1.XIDWatched, s1.PCIeTxBytesPerSecond, s0.PCIeTxBytesPerSecond)
	}
	if !s2.Polled || s2.Up || s2.MemoryUsedBytes.OK || s2.UUID != g2.uuid {
		t.Errorf("lost GPU 2 %+v", s2)
	}

	// A caller that changes its copy changes nothing the collector serves.
	s0.XIDErrors[79] = 1000
	s0.Processes[0].Name = "changed"
	if again := c.gpuSnapshots()[0]; again.XIDErrors[79] != 2 || again.Processes[0].Name == "changed" {
		t.Errorf("snapshot shares state with the collector: %v %+v", again.XIDErrors, again.Processes[0])
	}
}

// TestSetGPUs: the Set serves the NVML collector's snapshots, and none
// without it.
func TestSetGPUs(t *testing.T) {
	lib := newFakeLib(h200(0), h200(1))
	var c *nvmlCollector
	table := []factory{{
		name: "nvml", help: "fake NVML", defaultEnabled: true,
		addFlags: func(FlagAdder) constructor {
			return func(ctx context.Context, logger *slog.Logger) (Collector, error) {
				var err error
				c, err = newNVMLCollector(ctx, lib.iface(), testConfig(), logger, nvmlOptions{now: newFakeClock().now, procName: fakeProcName, manual: true})
				return c, err
			}
		},
	}}
	set, err := New(context.Background(), parse(t, table), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer set.Close()
	gpus := set.GPUs()
	if len(gpus) != 2 || gpus[0].Index != 0 || gpus[1].Index != 1 || !gpus[1].MemoryTotalBytes.OK {
		t.Fatalf("GPUs %+v", gpus)
	}

	off, err := New(context.Background(), parse(t, table, "--no-collector.nvml"), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer off.Close()
	if g := off.GPUs(); g != nil {
		t.Errorf("GPUs with the collector disabled: %+v", g)
	}
	lib2 := newFakeLib()
	lib2.initRet = nvml.ERROR_LIBRARY_NOT_FOUND
	lib = lib2
	absent, err := New(context.Background(), parse(t, table), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer absent.Close()
	if g := absent.GPUs(); g != nil {
		t.Errorf("GPUs with NVML unavailable: %+v", g)
	}
}
