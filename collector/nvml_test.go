//go:build cgo && linux

package collector

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
	"github.com/alecthomas/kingpin/v2"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/prometheus/common/expfmt"
	"go.uber.org/goleak"
)

var updateGolden = flag.Bool("update", false, "rewrite the testdata/*.prom golden files from the current output")

const (
	mib = 1 << 20
	gib = 1 << 30
)

// fakeClock is a settable clock, so that ages and windows are exact.
type fakeClock struct {
	mu sync.Mutex
	t  time.Time
}

func newFakeClock() *fakeClock {
	return &fakeClock{t: time.Date(2026, 11, 20, 12, 0, 0, 0, time.UTC)}
}

func (c *fakeClock) now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *fakeClock) advance(d time.Duration) {
	c.mu.Lock()
	c.t = c.t.Add(d)
	c.mu.Unlock()
}

// h200 is a fully supported mocked H200. The values are chosen so that each
// unit conversion is visible in the golden file: 612345 mW is 612.345 W,
// 2048 KB/s is 2097152 B/s, GPM's 87.5 % is 0.875.
func h200(i int) *fakeGPU {
	total := uint64(143771) * mib
	reserved := uint64(567) * mib
	used := uint64(80) * gib
	return &fakeGPU{
		uuid:             fmt.Sprintf("GPU-00000000-0000-0000-0000-00000000000%d", i),
		name:             "NVIDIA H200",
		busID:            fmt.Sprintf("00000000:%02X:00.0", 0x19+i),
		util:             nvml.Utilization{Gpu: 97, Memory: 41},
		mem:              nvml.Memory_v2{Total: total, Reserved: reserved, Used: used, Free: total - reserved - used},
		powerMW:          612345,
		limitMW:          700000,
		energyMJ:         123456789,
		tempC:            54,
		smMHz:            1980,
		memMHz:           3201,
		smMaxMHz:         1980,
		memMaxMHz:        3201,
		reasons:          0x4,           // sw_power_cap
		supportedReasons: 0x1ff &^ 0x10, // all named up to display_clock_setting, but sync_boost
		pcieTxKBs:        2048,
		pcieRxKBs:        1024,
		eccCorrected:     3,
		eccUncorrected:   0,
		pstate:           nvml.PSTATE_0,
		migMode:          0,
		compute: []nvml.ProcessInfo{
			{Pid: 4242, UsedGpuMemory: 70 * gib},
			{Pid: 4343, UsedGpuMemory: 2 * gib},
			{Pid: 4444, UsedGpuMemory: valueNotAvailable},
		},
		graphics: []nvml.ProcessInfo{{Pid: 4242, UsedGpuMemory: 70 * gib}},
		gpm:      true,
		gpmValues: map[nvml.GpmMetricId]float64{
			nvml.GPM_METRIC_SM_UTIL:         87.5,
			nvml.GPM_METRIC_SM_OCCUPANCY:    43.25,
			nvml.GPM_METRIC_ANY_TENSOR_UTIL: 71,
			nvml.GPM_METRIC_DRAM_BW_UTIL:    12.5,
			nvml.GPM_METRIC_PCIE_TX_PER_SEC: 100, // MiB/s
			nvml.GPM_METRIC_PCIE_RX_PER_SEC: 50,
		},
		xidSupported: true,
	}
}

func fakeProcName(pid uint32) string {
	return map[uint32]string{4242: "python3", 4343: "vllm"}[pid]
}

func testConfig() nvmlConfig {
	return nvmlConfig{pollInterval: time.Second, gpmInterval: time.Second, maxProcesses: 16, xid: true}
}

// newManual builds a collector over lib that starts no goroutine.
func newManual(t testing.TB, lib *fakeLib, cfg nvmlConfig, clock *fakeClock) *nvmlCollector {
	t.Helper()
	c, err := newNVMLCollector(context.Background(), lib.iface(), cfg, nil,
		nvmlOptions{now: clock.now, procName: fakeProcName, manual: true})
	if err != nil {
		t.Fatalf("newNVMLCollector: %v", err)
	}
	t.Cleanup(func() { _ = c.Close() })
	return c
}

// asPromCollector adapts a Collector for testutil and registries. It
// describes what the collector says it can render (the NVML collector lists
// every description), so that pedantic registries check the output against
// it; a collector that cannot say is described by one collection.
type asPromCollector struct{ c Collector }

func (a asPromCollector) Describe(ch chan<- *prometheus.Desc) {
	if d, ok := a.c.(interface{ Describe(chan<- *prometheus.Desc) }); ok {
		d.Describe(ch)
		return
	}
	prometheus.DescribeByCollect(a, ch)
}
func (a asPromCollector) Collect(ch chan<- prometheus.Metric) {
	if err := a.c.Update(context.Background(), ch); err != nil {
		panic(err)
	}
}

// render returns the collector's output in the text exposition format.
func render(t testing.TB, c Collector) string {
	t.Helper()
	reg := prometheus.NewPedanticRegistry()
	reg.MustRegister(asPromCollector{c})
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatalf("gather: %v", err)
	}
	var buf bytes.Buffer
	enc := expfmt.NewEncoder(&buf, expfmt.NewFormat(expfmt.TypeTextPlain))
	for _, mf := range mfs {
		if err := enc.Encode(mf); err != nil {
			t.Fatalf("encode: %v", err)
		}
	}
	return buf.String()
}

// compareGolden compares the collector's output with testdata/<name>.prom,
// rewriting it first under -update.
func compareGolden(t *testing.T, c Collector, name string) {
	t.Helper()
	path := filepath.Join("testdata", name+".prom")
	if *updateGolden {
		if err := os.WriteFile(path, []byte(render(t, c)), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	f, err := os.Open(path)
	if err != nil {
		t.Fatalf("%v (run the test with -update to create it)", err)
	}
	defer f.Close()
	if err := testutil.CollectAndCompare(asPromCollector{c}, f); err != nil {
		t.Errorf("output differs from %s (rerun with -update and review the diff if the change is intended):\n%v", path, err)
	}
}

func TestNVMLGolden(t *testing.T) {
	notSupported := func() *fakeGPU {
		f := h200(0)
		f.fail = map[string]nvml.Return{}
		for _, call := range []string{
			"GetMemoryInfo_v2", "GetPowerUsage", "GetTotalEnergyConsumption", "GetMaxClockInfo",
			"GetCurrentClocksEventReasons", "GetPcieThroughput", "GetTotalEccErrors",
			"GetPerformanceState", "GetMigMode", "GetComputeRunningProcesses", "GetGraphicsRunningProcesses",
		} {
			f.fail[call] = nvml.ERROR_NOT_SUPPORTED
		}
		f.gpm = false
		f.xidSupported = false
		return f
	}
	cases := []struct {
		name  string
		gpus  func() []*fakeGPU
		cfg   func(*nvmlConfig)
		steps func(t *testing.T, c *nvmlCollector, lib *fakeLib, clock *fakeClock)
	}{{
		// GPU 0 has GPM and XID events, GPU 1 neither (its PCIe rates come
		// from the blocking call). Three processes on GPU 0, two kept.
		name: "nvml_full",
		gpus: func() []*fakeGPU {
			g1 := h200(1)
			g1.gpm, g1.xidSupported = false, false
			g1.compute, g1.graphics = nil, nil
			g1.reasons = 0x1 // idle
			g1.pstate = nvml.PSTATE_8
			g1.migMode = 1
			return []*fakeGPU{h200(0), g1}
		},
		cfg: func(cfg *nvmlConfig) { cfg.maxProcesses = 2 },
		steps: func(t *testing.T, c *nvmlCollector, lib *fakeLib, clock *fakeClock) {
			clock.advance(1250 * time.Millisecond)
			c.gpmStep(c.gpus[0])
			for _, xid := range []uint64{79, 79, 13} {
				lib.sendXID(lib.gpus[0], xid)
				if err := c.xidStep(c.gpus[0], 0); err != nil {
					t.Fatal(err)
				}
			}
			// A wait with nothing queued times out and counts nothing.
			if err := c.xidStep(c.gpus[0], 0); err != nil {
				t.Fatal(err)
			}
			clock.advance(250 * time.Millisecond)
		},
	}, {
		// Every optional call answers NOT_SUPPORTED: those series are absent,
		// not zero; memory falls back to the v1 call (no reserved figure).
		name: "nvml_not_supported",
		gpus: func() []*fakeGPU { return []*fakeGPU{notSupported()} },
		steps: func(t *testing.T, c *nvmlCollector, lib *fakeLib, clock *fakeClock) {
			clock.advance(2 * time.Second)
		},
	}, {
		// GPU 1 is lost after the first reading; GPU 2 could not even be
		// opened. Both show infer_gpu_up 0 and nothing else but info and age.
		name: "nvml_lost",
		gpus: func() []*fakeGPU { return []*fakeGPU{h200(0), h200(1), h200(2)} },
		steps: func(t *testing.T, c *nvmlCollector, lib *fakeLib, clock *fakeClock) {
			clock.advance(time.Second)
			lib.gpus[1].setLost(true)
			c.poll(c.gpus[1])
			c.gpmStep(c.gpus[1]) // fails: the window is not published
			clock.advance(500 * time.Millisecond)
		},
	}}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			lib := newFakeLib(tc.gpus()...)
			if tc.name == "nvml_lost" {
				lib.handleRet = map[int]nvml.Return{2: nvml.ERROR_GPU_IS_LOST}
			}
			cfg := testConfig()
			if tc.cfg != nil {
				tc.cfg(&cfg)
			}
			clock := newFakeClock()
			c := newManual(t, lib, cfg, clock)
			tc.steps(t, c, lib, clock)
			compareGolden(t, c, tc.name)
		})
	}
}

// familyNames lists the metric families the collector renders.
func familyNames(t *testing.T, c Collector) map[string]bool {
	t.Helper()
	reg := prometheus.NewPedanticRegistry()
	reg.MustRegister(asPromCollector{c})
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	names := map[string]bool{}
	for _, mf := range mfs {
		names[mf.GetName()] = true
	}
	return names
}

// TestNVMLEveryMetric checks that a fully supported GPU with GPM and an XID
// renders every family the collector defines, so that no description is left
// without a test.
func TestNVMLEveryMetric(t *testing.T) {
	g0, g1 := h200(0), h200(1)
	g1.gpm = false // PCIe from the blocking call
	lib := newFakeLib(g0, g1)
	c := newManual(t, lib, testConfig(), newFakeClock())
	c.gpmStep(c.gpus[0])
	lib.sendXID(g0, 48)
	if err := c.xidStep(c.gpus[0], 0); err != nil {
		t.Fatal(err)
	}
	got := familyNames(t, c)
	all := newNVMLDescs().all()
	for _, d := range all {
		// Desc has no name accessor; its String() holds fqName: "...".
		s := d.String()
		i := strings.Index(s, `fqName: "`) + len(`fqName: "`)
		name := s[i : i+strings.Index(s[i:], `"`)]
		if !got[name] {
			t.Errorf("family %s not rendered", name)
		}
	}
	if len(all) != len(got) {
		t.Errorf("rendered %d families, described %d", len(got), len(all))
	}
}

func TestNVMLNotSupportedSeriesAbsent(t *testing.T) {
	f := h200(0)
	f.fail = map[string]nvml.Return{"GetPowerUsage": nvml.ERROR_NOT_SUPPORTED, "GetMemoryInfo_v2": nvml.ERROR_NOT_SUPPORTED}
	f.gpmValues = map[nvml.GpmMetricId]float64{nvml.GPM_METRIC_SM_UTIL: 50}
	lib := newFakeLib(f)
	c := newManual(t, lib, testConfig(), newFakeClock())
	c.gpmStep(c.gpus[0])
	got := familyNames(t, c)
	for name, want := range map[string]bool{
		"infer_gpu_power_watts":                      false,
		"infer_gpu_memory_reserved_bytes":            false, // only v2 has it
		"infer_gpu_memory_used_bytes":                true,  // from the v1 fallback
		"infer_gpu_power_limit_watts":                true,
		"infer_gpu_sm_active_ratio":                  true,
		"infer_gpu_tensor_active_ratio":              false, // per-metric NOT_SUPPORTED
		"infer_gpu_pcie_bytes_per_second":            false, // GPM device: no blocking call, GPM lacks it
		"infer_gpu_dram_bandwidth_utilization_ratio": false,
	} {
		if got[name] != want {
			t.Errorf("%s present = %v, want %v", name, got[name], want)
		}
	}
	if n := f.callCount("GetPcieThroughput"); n != 0 {
		t.Errorf("GetPcieThroughput called %d times on a GPM device; it blocks and GPM gives the rates", n)
	}
}

// TestNVMLLostGPURecovers checks the transition back: a GPU that answers
// again shows its series again.
func TestNVMLLostGPURecovers(t *testing.T) {
	f := h200(0)
	lib := newFakeLib(f)
	var logs bytes.Buffer
	c, err := newNVMLCollector(context.Background(), lib.iface(), testConfig(),
		slog.New(slog.NewTextHandler(&logs, nil)), nvmlOptions{now: newFakeClock().now, procName: fakeProcName, manual: true})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	up := func() float64 {
		return testutil.ToFloat64(filterCollector{c, "infer_gpu_up"})
	}
	if up() != 1 {
		t.Fatal("GPU not up at start")
	}
	f.setLost(true)
	c.poll(c.gpus[0])
	c.poll(c.gpus[0])
	if up() != 0 {
		t.Fatal("lost GPU still up")
	}
	if got := familyNames(t, c); got["infer_gpu_power_watts"] {
		t.Error("a lost GPU still shows its last power reading")
	}
	if n := strings.Count(logs.String(), "GPU lost"); n != 1 {
		t.Errorf("logged %d 'GPU lost' lines over two readings, want 1:\n%s", n, logs.String())
	}
	f.setLost(false)
	c.poll(c.gpus[0])
	if up() != 1 {
		t.Fatal("GPU did not come back")
	}
	if got := familyNames(t, c); !got["infer_gpu_power_watts"] {
		t.Error("recovered GPU has no power series")
	}
}

// filterCollector keeps one family, for testutil.ToFloat64.
type filterCollector struct {
	c    Collector
	name string
}

func (f filterCollector) Describe(ch chan<- *prometheus.Desc) { prometheus.DescribeByCollect(f, ch) }
func (f filterCollector) Collect(ch chan<- prometheus.Metric) {
	all := make(chan prometheus.Metric, 1024)
	_ = f.c.Update(context.Background(), all)
	close(all)
	for m := range all {
		if strings.Contains(m.Desc().String(), `fqName: "`+f.name+`"`) {
			ch <- m
		}
	}
}

func TestNVMLUnavailable(t *testing.T) {
	cases := []struct {
		name       string
		lib        func() *fakeLib
		wantReason string
	}{
		{"no library", func() *fakeLib { l := newFakeLib(h200(0)); l.initRet = nvml.ERROR_LIBRARY_NOT_FOUND; return l }, "libnvidia-ml.so.1"},
		{"driver not loaded", func() *fakeLib { l := newFakeLib(h200(0)); l.initRet = nvml.ERROR_DRIVER_NOT_LOADED; return l }, "driver not loaded"},
		{"no GPU", func() *fakeLib { return newFakeLib() }, "no GPU"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			lib := tc.lib()
			table := []factory{{
				name: "nvml", help: "test", defaultEnabled: true,
				addFlags: func(FlagAdder) constructor {
					return func(ctx context.Context, logger *slog.Logger) (Collector, error) {
						return newNVMLCollector(ctx, lib.iface(), testConfig(), logger, nvmlOptions{})
					}
				},
			}}
			app := kingpin.New("test", "")
			s := addFlags(app, table)
			if _, err := app.Parse(nil); err != nil {
				t.Fatal(err)
			}
			var logs bytes.Buffer
			set, err := New(context.Background(), s, slog.New(slog.NewTextHandler(&logs, nil)))
			if err != nil {
				t.Fatalf("New failed; an unavailable collector must not stop the exporter: %v", err)
			}
			defer set.Close()
			st := set.Status()
			if len(st) != 1 || !st[0].Enabled || st[0].Available || !strings.Contains(st[0].Reason, tc.wantReason) {
				t.Errorf("status = %+v, want enabled, unavailable, reason containing %q", st, tc.wantReason)
			}
			if lines := strings.Count(strings.TrimSpace(logs.String()), "\n") + 1; lines != 1 || !strings.Contains(logs.String(), tc.wantReason) {
				t.Errorf("want exactly one log line naming the reason, got:\n%s", logs.String())
			}
			want := `
# HELP infer_exporter_collector_available 1 if the enabled collector started, 0 if it cannot run on this host (the landing page says why).
# TYPE infer_exporter_collector_available gauge
infer_exporter_collector_available{collector="nvml"} 0
# HELP infer_exporter_collector_scrape_success 1 if the collector rendered its metrics on this scrape, 0 if it failed or is unavailable.
# TYPE infer_exporter_collector_scrape_success gauge
infer_exporter_collector_scrape_success{collector="nvml"} 0
`
			if err := testutil.CollectAndCompare(set, strings.NewReader(want)); err != nil {
				t.Error(err)
			}
		})
	}
}

// TestNVMLRealLibrary runs the production constructor. On a host without the
// NVIDIA driver (CI) it must report unavailable, not fail; on a GPU host it
// must start and stop cleanly.
func TestNVMLRealLibrary(t *testing.T) {
	c, err := newNVML(context.Background(), testConfig(), nil)
	if err != nil {
		if !errors.Is(err, errUnavailable) {
			t.Fatalf("error is not an unavailability: %v", err)
		}
		t.Logf("unavailable here, as expected without a driver: %v", err)
		return
	}
	if err := c.(interface{ Close() error }).Close(); err != nil {
		t.Fatal(err)
	}
}

func TestNVMLConfigErrors(t *testing.T) {
	for _, cfg := range []nvmlConfig{
		{pollInterval: 0, gpmInterval: time.Second, maxProcesses: 1},
		{pollInterval: time.Second, gpmInterval: -time.Second, maxProcesses: 1},
		{pollInterval: time.Second, gpmInterval: time.Second, maxProcesses: -1},
	} {
		_, err := newNVMLCollector(context.Background(), newFakeLib(h200(0)).iface(), cfg, nil, nvmlOptions{})
		if err == nil || errors.Is(err, errUnavailable) {
			t.Errorf("config %+v: err = %v, want a configuration error", cfg, err)
		}
	}
}

// TestNVMLUpdateCallsNoNVML checks the design's main promise: a scrape only
// renders snapshots and never waits on NVML.
func TestNVMLUpdateCallsNoNVML(t *testing.T) {
	f := h200(0)
	lib := newFakeLib(f)
	c := newManual(t, lib, testConfig(), newFakeClock())
	f.mu.Lock()
	before := fmt.Sprint(f.calls)
	f.mu.Unlock()
	for range 5 {
		render(t, c)
	}
	f.mu.Lock()
	after := fmt.Sprint(f.calls)
	f.mu.Unlock()
	if before != after {
		t.Errorf("Update called NVML:\nbefore %s\nafter  %s", before, after)
	}
}

// TestNVMLBackgroundLoops runs the real pollers, GPM sampler and XID watcher
// with short intervals, waits until each has done its work, then checks that
// Close stops every goroutine and frees every NVML object.
func TestNVMLBackgroundLoops(t *testing.T) {
	defer goleak.VerifyNone(t)
	g0, g1 := h200(0), h200(1)
	lib := newFakeLib(g0, g1)
	cfg := nvmlConfig{pollInterval: time.Millisecond, gpmInterval: time.Millisecond, maxProcesses: 4, xid: true}
	c, err := newNVMLCollector(context.Background(), lib.iface(), cfg, nil, nvmlOptions{procName: fakeProcName})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close() // on failure too, so no goroutine outlives this test
	lib.sendXID(g1, 31)
	// Wait for the work, not for a time: the deadline only stops a hang.
	deadline := time.Now().Add(30 * time.Second)
	for {
		out := render(t, c)
		if g0.callCount("GetUtilizationRates") >= 3 && g1.callCount("GetUtilizationRates") >= 3 &&
			strings.Count(out, "infer_gpu_sm_active_ratio{") == 2 &&
			strings.Contains(out, `infer_gpu_xid_errors_total{gpu="1",name="NVIDIA H200",uuid="GPU-00000000-0000-0000-0000-000000000001",xid="31"} 1`) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("background work not done after 30 s; output:\n%s", out)
		}
		time.Sleep(time.Millisecond)
	}
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	if err := c.Close(); err != nil {
		t.Fatal("second Close:", err)
	}
	if n := lib.outstanding(); n != 0 {
		t.Errorf("%d GPM samples or event sets not freed", n)
	}
	if lib.shutdowns != 1 {
		t.Errorf("NVML shut down %d times, want 1", lib.shutdowns)
	}
}

func TestProcComm(t *testing.T) {
	self, err := os.ReadFile("/proc/self/comm")
	if err != nil {
		t.Skip("no /proc here")
	}
	if got, want := procComm(uint32(os.Getpid())), strings.TrimSpace(string(self)); got != want || got == "" {
		t.Errorf("procComm(self) = %q, want %q", got, want)
	}
	if got := procComm(1 << 30); got != "" {
		t.Errorf("procComm(no such pid) = %q, want empty", got)
	}
}

func TestNVMLProcessesBoundedAndDeduplicated(t *testing.T) {
	f := h200(0)
	f.compute = nil
	for pid := uint32(100); pid < 140; pid++ {
		f.compute = append(f.compute, nvml.ProcessInfo{Pid: pid, UsedGpuMemory: uint64(pid) * mib})
	}
	f.graphics = []nvml.ProcessInfo{{Pid: 139, UsedGpuMemory: 139 * mib}, {Pid: 5, UsedGpuMemory: 1 * gib}}
	cfg := testConfig()
	cfg.maxProcesses = 3
	c := newManual(t, newFakeLib(f), cfg, newFakeClock())
	s := c.gpus[0].snap.Load()
	if s.processCount.v != 41 {
		t.Errorf("process count = %v, want 41 (40 compute + 1 graphics-only, pid 139 counted once)", s.processCount.v)
	}
	var pids []uint32
	for _, p := range s.processes {
		pids = append(pids, p.pid)
	}
	if fmt.Sprint(pids) != "[5 139 138]" {
		t.Errorf("kept pids %v, want the 3 largest [5 139 138]", pids)
	}
}

// TestGoldenHelpIsShort: every infer_gpu_* and collector family's help is
// one short sentence (the definitions are in docs/metrics.md).
func TestGoldenHelpIsShort(t *testing.T) {
	for _, f := range []string{"testdata/nvml_full.prom", "testdata/nvml_lost.prom", "testdata/nvml_not_supported.prom"} {
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for _, line := range strings.Split(string(data), "\n") {
			if rest, ok := strings.CutPrefix(line, "# HELP "); ok {
				name, h, _ := strings.Cut(rest, " ")
				if len(h) == 0 || len(h) > 150 {
					t.Errorf("%s: %s: help of %d characters, want 1 to 150", f, name, len(h))
				}
			}
		}
	}
}
