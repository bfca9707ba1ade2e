package collector

import (
	"math"
	"os"
	"path/filepath"
	"testing"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
)

// The fixtures are /metrics pages the exporter served on a real H200 (driver
// 580.159.04) while a bf16 matmul loop ran, and after it stopped; see
// testdata/h200/COMPARISON.md and run_device.sh. These tests pin what the
// collector must show on real hardware, so a change that breaks it there is
// caught here without a GPU.

func loadFixture(t *testing.T, name string) map[string]*dto.MetricFamily {
	t.Helper()
	f, err := os.Open(filepath.Join("testdata", "h200", name))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	p := expfmt.NewTextParser(model.UTF8Validation)
	mfs, err := p.TextToMetricFamilies(f)
	if err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	return mfs
}

// value returns the single sample of family name on GPU 0 matching the extra
// label pairs.
func value(t *testing.T, mfs map[string]*dto.MetricFamily, name string, kv ...string) float64 {
	t.Helper()
	mf, ok := mfs[name]
	if !ok {
		t.Fatalf("family %s missing", name)
	}
	want := map[string]string{}
	if name != "infer_exporter_collector_scrape_success" && name != "infer_exporter_collector_available" {
		want["gpu"] = "0"
	}
	for i := 0; i+1 < len(kv); i += 2 {
		want[kv[i]] = kv[i+1]
	}
	var found []float64
	for _, m := range mf.GetMetric() {
		match := 0
		for _, l := range m.GetLabel() {
			if v, ok := want[l.GetName()]; ok && v == l.GetValue() {
				match++
			}
		}
		if match != len(want) {
			continue
		}
		switch {
		case m.GetGauge() != nil:
			found = append(found, m.GetGauge().GetValue())
		case m.GetCounter() != nil:
			found = append(found, m.GetCounter().GetValue())
		}
	}
	if len(found) != 1 {
		t.Fatalf("%s%v: %d samples, want 1", name, want, len(found))
	}
	return found[0]
}

// gpuFamilies are the families a fully working H200 shows in both phases.
var gpuFamilies = []string{
	"infer_gpu_info", "infer_gpu_up", "infer_gpu_sample_age_seconds", "infer_gpu_poll_duration_seconds",
	"infer_gpu_utilization_ratio", "infer_gpu_memory_utilization_ratio",
	"infer_gpu_memory_used_bytes", "infer_gpu_memory_free_bytes", "infer_gpu_memory_total_bytes",
	"infer_gpu_memory_reserved_bytes", "infer_gpu_power_watts", "infer_gpu_power_limit_watts",
	"infer_gpu_energy_joules_total", "infer_gpu_temperature_celsius", "infer_gpu_clock_hertz",
	"infer_gpu_clock_max_hertz", "infer_gpu_clock_event_reason_active", "infer_gpu_pcie_bytes_per_second",
	"infer_gpu_ecc_errors_total", "infer_gpu_performance_state", "infer_gpu_mig_mode_enabled",
	"infer_gpu_processes", "infer_gpu_xid_events_watched",
	"infer_gpu_sm_active_ratio", "infer_gpu_sm_occupancy_ratio", "infer_gpu_tensor_active_ratio",
	"infer_gpu_dram_bandwidth_utilization_ratio", "infer_gpu_gpm_window_seconds", "infer_gpu_gpm_sample_age_seconds",
}

func TestH200Fixtures(t *testing.T) {
	load := loadFixture(t, "metrics_under_load.prom")
	idle := loadFixture(t, "metrics_idle.prom")

	for phase, mfs := range map[string]map[string]*dto.MetricFamily{"load": load, "idle": idle} {
		t.Run(phase, func(t *testing.T) {
			for _, name := range gpuFamilies {
				if _, ok := mfs[name]; !ok {
					t.Errorf("family %s missing", name)
				}
			}
			if v := value(t, mfs, "infer_exporter_collector_scrape_success", "collector", "nvml"); v != 1 {
				t.Errorf("nvml scrape_success = %v", v)
			}
			if v := value(t, mfs, "infer_gpu_up"); v != 1 {
				t.Errorf("infer_gpu_up = %v", v)
			}
			// Ratios are ratios, not percentages.
			for _, name := range []string{"infer_gpu_utilization_ratio", "infer_gpu_memory_utilization_ratio",
				"infer_gpu_sm_active_ratio", "infer_gpu_sm_occupancy_ratio", "infer_gpu_tensor_active_ratio",
				"infer_gpu_dram_bandwidth_utilization_ratio"} {
				if v := value(t, mfs, name); v < 0 || v > 1 || math.IsNaN(v) {
					t.Errorf("%s = %v, outside 0..1", name, v)
				}
			}
			// NVML memory info v2 accounts for every byte.
			used := value(t, mfs, "infer_gpu_memory_used_bytes")
			free := value(t, mfs, "infer_gpu_memory_free_bytes")
			reserved := value(t, mfs, "infer_gpu_memory_reserved_bytes")
			total := value(t, mfs, "infer_gpu_memory_total_bytes")
			if used+free+reserved != total {
				t.Errorf("used %v + free %v + reserved %v != total %v", used, free, reserved, total)
			}
			// Watts and hertz, not milliwatts and megahertz.
			if p := value(t, mfs, "infer_gpu_power_watts"); p < 20 || p > value(t, mfs, "infer_gpu_power_limit_watts")*1.1 {
				t.Errorf("power %v W implausible", p)
			}
			if c := value(t, mfs, "infer_gpu_clock_max_hertz", "clock", "sm"); c < 1e9 || c > 3e9 {
				t.Errorf("max SM clock %v Hz implausible", c)
			}
			// The snapshot a scrape serves is recent: the run polled every 200 ms.
			if a := value(t, mfs, "infer_gpu_sample_age_seconds"); a < 0 || a > 1 {
				t.Errorf("sample age %v s", a)
			}
			if w := value(t, mfs, "infer_gpu_gpm_window_seconds"); w < 0.9 || w > 1.5 {
				t.Errorf("GPM window %v s, the run asked for 1 s", w)
			}
		})
	}

	// Under an 8192^3 bf16 matmul loop nearly every SM runs tensor-core work;
	// idle, nothing does. The bounds are wide on purpose: they separate busy
	// from idle, which is what a percentage-vs-ratio or wrong-metric-id bug
	// would break, and leave room for the driver's own sampling.
	if v := value(t, load, "infer_gpu_sm_active_ratio"); v < 0.8 {
		t.Errorf("SM active under load = %v, want > 0.8", v)
	}
	if v := value(t, load, "infer_gpu_tensor_active_ratio"); v < 0.5 {
		t.Errorf("tensor active under load = %v, want > 0.5", v)
	}
	if v := value(t, load, "infer_gpu_utilization_ratio"); v < 0.9 {
		t.Errorf("utilization under load = %v, want > 0.9", v)
	}
	for _, name := range []string{"infer_gpu_sm_active_ratio", "infer_gpu_tensor_active_ratio", "infer_gpu_utilization_ratio"} {
		if v := value(t, idle, name); v > 0.05 {
			t.Errorf("%s idle = %v, want < 0.05", name, v)
		}
	}
	if value(t, load, "infer_gpu_power_watts") <= value(t, idle, "infer_gpu_power_watts") {
		t.Error("power under load not above idle power")
	}
	// The idle page was taken after the load one: energy only grows.
	if value(t, idle, "infer_gpu_energy_joules_total") <= value(t, load, "infer_gpu_energy_joules_total") {
		t.Error("energy counter did not grow between the load and the idle page")
	}
	// The load's own footprint shows under its pid, and it is the largest
	// process on the GPU.
	procs := load["infer_gpu_process_memory_used_bytes"]
	if procs == nil || len(procs.GetMetric()) == 0 {
		t.Fatal("no per-process memory under load")
	}
	var largest float64
	var name string
	for _, m := range procs.GetMetric() {
		if v := m.GetGauge().GetValue(); v > largest {
			largest = v
			for _, l := range m.GetLabel() {
				if l.GetName() == "process" {
					name = l.GetValue()
				}
			}
		}
	}
	if largest < 4<<30 || largest > value(t, load, "infer_gpu_memory_used_bytes") {
		t.Errorf("largest process uses %v bytes; the load holds over 4 GiB and cannot exceed memory used", largest)
	}
	if name == "" {
		t.Error("the load's process name is empty")
	}
}
