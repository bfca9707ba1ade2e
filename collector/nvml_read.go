//go:build cgo && linux

package collector

import (
	"cmp"
	"slices"
	"time"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
)

// opt is a reading that may be absent: ok is false when NVML said the call is
// not supported or failed, and then the series is not exposed at all (a zero
// would be a false reading).
type opt struct {
	v  float64
	ok bool
}

// deviceSnapshot is one background reading of one GPU, in base units. It is
// never modified after it is published.
type deviceSnapshot struct {
	at   time.Time     // when the reading started
	took time.Duration // how long the reading took

	lost     bool   // NVML answered GPU_IS_LOST (or the handle could not be had)
	lostCall string // the call that found it lost
	lostErr  string

	utilization    opt // ratio of time a kernel ran
	memUtilization opt // ratio of time device memory was read or written

	memUsed, memFree, memTotal, memReserved opt // bytes

	power, powerLimit opt // watts
	energy            opt // joules since the driver loaded

	temperature opt // degrees Celsius

	smClock, memClock, smClockMax, memClockMax opt // hertz

	reasons   uint64 // clock-event reasons bitmask
	reasonsOK bool

	pcieTx, pcieRx opt // bytes per second, from the blocking call (GPUs without GPM)

	eccCorrected, eccUncorrected opt // volatile counts since the driver loaded

	pstate     opt // 0 (P0, fastest) to 15
	migEnabled opt // 1 when MIG mode is on

	processCount opt          // processes on the GPU, before truncation
	processes    []processMem // the largest users, at most maxProcesses
}

type processMem struct {
	pid   uint32
	name  string
	bytes uint64
	known bool // false when NVML cannot say how much memory (NVML_VALUE_NOT_AVAILABLE)
}

// gpmSnapshot is the GPM metrics of one window, indexed like gpmMetrics.
type gpmSnapshot struct {
	at     time.Time     // end of the window
	window time.Duration // length of the window
	values [len(gpmMetrics)]opt
}

type gpmMetric struct {
	id    nvml.GpmMetricId
	scale float64 // to base units
}

// The GPM metrics read each window. NVML returns the ratios as percentages
// (0..100) and PCIe traffic in MiB/s (nvml.h); scale converts to ratios 0..1
// and bytes per second.
const (
	gpmSMActive = iota
	gpmSMOccupancy
	gpmTensorActive
	gpmDRAMActive
	gpmPCIeTx
	gpmPCIeRx
)

var gpmMetrics = [...]gpmMetric{
	gpmSMActive:     {nvml.GPM_METRIC_SM_UTIL, 0.01},
	gpmSMOccupancy:  {nvml.GPM_METRIC_SM_OCCUPANCY, 0.01},
	gpmTensorActive: {nvml.GPM_METRIC_ANY_TENSOR_UTIL, 0.01},
	gpmDRAMActive:   {nvml.GPM_METRIC_DRAM_BW_UTIL, 0.01},
	gpmPCIeTx:       {nvml.GPM_METRIC_PCIE_TX_PER_SEC, 1 << 20},
	gpmPCIeRx:       {nvml.GPM_METRIC_PCIE_RX_PER_SEC, 1 << 20},
}

// clockEventReason is one bit of nvmlDeviceGetCurrentClocksEventReasons.
// go-nvml names some bits only by their deprecated "Throttle" names, so the
// table spells the bits out as nvml.h defines them.
type clockEventReason struct {
	bit  uint64
	name string
}

var clockEventReasons = []clockEventReason{
	{0x1, "gpu_idle"},
	{0x2, "applications_clocks_setting"},
	{0x4, "sw_power_cap"},
	{0x8, "hw_slowdown"},
	{0x10, "sync_boost"},
	{0x20, "sw_thermal_slowdown"},
	{0x40, "hw_thermal_slowdown"},
	{0x80, "hw_power_brake_slowdown"},
	{0x100, "display_clock_setting"},
	{0x200, "board_limit"},
	{0x400, "reliability"},
}

// valueNotAvailable is NVML_VALUE_NOT_AVAILABLE as an unsigned long long.
const valueNotAvailable = ^uint64(0)

// reader classifies NVML return codes for one reading.
type reader struct {
	c *nvmlCollector
	g *gpu
	s *deviceSnapshot
}

// ok reports whether ret is SUCCESS. NOT_SUPPORTED is silent (the series is
// absent); GPU_IS_LOST marks the snapshot lost; anything else is logged at
// debug level (the series is absent for this reading).
func (r *reader) ok(call string, ret nvml.Return) bool {
	switch ret {
	case nvml.SUCCESS:
		return true
	case nvml.ERROR_NOT_SUPPORTED:
		return false
	case nvml.ERROR_GPU_IS_LOST:
		if !r.s.lost {
			r.s.lost, r.s.lostCall, r.s.lostErr = true, call, ret.Error()
		}
		return false
	default:
		r.c.logger.Debug("NVML call failed", "gpu", r.g.index, "call", call, "err", ret.Error())
		return false
	}
}

func (r *reader) u32(call string, v uint32, ret nvml.Return, scale float64) opt {
	if !r.ok(call, ret) {
		return opt{}
	}
	return opt{v: float64(v) * scale, ok: true}
}

func (r *reader) u64(call string, v uint64, ret nvml.Return, scale float64) opt {
	if !r.ok(call, ret) {
		return opt{}
	}
	return opt{v: float64(v) * scale, ok: true}
}

// read takes one full reading of g. On the H200 this costs up to ~150 ms,
// which is why it runs in the background.
func (c *nvmlCollector) read(g *gpu) *deviceSnapshot {
	s := &deviceSnapshot{at: c.now()}
	defer func() { s.took = c.now().Sub(s.at) }()
	if g.dev == nil {
		s.lost, s.lostCall, s.lostErr = true, "DeviceGetHandleByIndex", g.openErr.Error()
		return s
	}
	r := &reader{c: c, g: g, s: s}
	d := g.dev

	// The first call tells whether the GPU is reachable at all; a lost GPU
	// makes every later call fail too, so stop there.
	if u, ret := d.GetUtilizationRates(); r.ok("GetUtilizationRates", ret) {
		s.utilization = opt{v: float64(u.Gpu) / 100, ok: true}
		s.memUtilization = opt{v: float64(u.Memory) / 100, ok: true}
	}
	if s.lost {
		return s
	}

	switch m, ret := d.GetMemoryInfo_v2(); ret {
	case nvml.SUCCESS:
		s.memUsed = opt{float64(m.Used), true}
		s.memFree = opt{float64(m.Free), true}
		s.memTotal = opt{float64(m.Total), true}
		s.memReserved = opt{float64(m.Reserved), true}
	case nvml.ERROR_GPU_IS_LOST:
		r.ok("GetMemoryInfo_v2", ret)
	default:
		// Older drivers have no v2 (and so no reserved figure).
		if m, ret := d.GetMemoryInfo(); r.ok("GetMemoryInfo", ret) {
			s.memUsed = opt{float64(m.Used), true}
			s.memFree = opt{float64(m.Free), true}
			s.memTotal = opt{float64(m.Total), true}
		}
	}

	v, ret := d.GetPowerUsage()
	s.power = r.u32("GetPowerUsage", v, ret, 1e-3) // milliwatts
	v, ret = d.GetEnforcedPowerLimit()
	s.powerLimit = r.u32("GetEnforcedPowerLimit", v, ret, 1e-3) // milliwatts
	e, ret := d.GetTotalEnergyConsumption()
	s.energy = r.u64("GetTotalEnergyConsumption", e, ret, 1e-3) // millijoules

	v, ret = d.GetTemperature(nvml.TEMPERATURE_GPU)
	s.temperature = r.u32("GetTemperature", v, ret, 1)

	v, ret = d.GetClockInfo(nvml.CLOCK_SM)
	s.smClock = r.u32("GetClockInfo(SM)", v, ret, 1e6) // MHz
	v, ret = d.GetClockInfo(nvml.CLOCK_MEM)
	s.memClock = r.u32("GetClockInfo(MEM)", v, ret, 1e6)
	v, ret = d.GetMaxClockInfo(nvml.CLOCK_SM)
	s.smClockMax = r.u32("GetMaxClockInfo(SM)", v, ret, 1e6)
	v, ret = d.GetMaxClockInfo(nvml.CLOCK_MEM)
	s.memClockMax = r.u32("GetMaxClockInfo(MEM)", v, ret, 1e6)

	if bits, ret := d.GetCurrentClocksEventReasons(); r.ok("GetCurrentClocksEventReasons", ret) {
		s.reasons, s.reasonsOK = bits, true
	}

	// GetPcieThroughput blocks while it counts bytes for 20 ms (42 ms worst
	// seen on the H200); GPUs with GPM give the same rates from GPM instead.
	if !g.gpmSupported {
		v, ret = d.GetPcieThroughput(nvml.PCIE_UTIL_TX_BYTES)
		s.pcieTx = r.u32("GetPcieThroughput(TX)", v, ret, 1024) // KB/s
		v, ret = d.GetPcieThroughput(nvml.PCIE_UTIL_RX_BYTES)
		s.pcieRx = r.u32("GetPcieThroughput(RX)", v, ret, 1024)
	}

	e, ret = d.GetTotalEccErrors(nvml.MEMORY_ERROR_TYPE_CORRECTED, nvml.VOLATILE_ECC)
	s.eccCorrected = r.u64("GetTotalEccErrors(corrected)", e, ret, 1)
	e, ret = d.GetTotalEccErrors(nvml.MEMORY_ERROR_TYPE_UNCORRECTED, nvml.VOLATILE_ECC)
	s.eccUncorrected = r.u64("GetTotalEccErrors(uncorrected)", e, ret, 1)

	if p, ret := d.GetPerformanceState(); r.ok("GetPerformanceState", ret) && p != nvml.PSTATE_UNKNOWN {
		s.pstate = opt{float64(p), true}
	}
	if cur, _, ret := d.GetMigMode(); r.ok("GetMigMode", ret) {
		s.migEnabled = opt{boolFloat(cur == nvml.DEVICE_MIG_ENABLE), true}
	}

	c.readProcesses(r, d)
	return s
}

// readProcesses lists the compute and graphics processes on the GPU and keeps
// the largest users, so the series count stays bounded.
func (c *nvmlCollector) readProcesses(r *reader, d nvml.Device) {
	compute, cret := d.GetComputeRunningProcesses()
	cok := r.ok("GetComputeRunningProcesses", cret)
	graphics, gret := d.GetGraphicsRunningProcesses()
	gok := r.ok("GetGraphicsRunningProcesses", gret)
	if !cok && !gok {
		return
	}
	// A process can be in both lists (a CUDA and a graphics context); NVML
	// then reports its memory in each, so take the larger, not the sum.
	byPID := make(map[uint32]processMem, len(compute)+len(graphics))
	for _, p := range append(compute, graphics...) {
		pm := processMem{pid: p.Pid, bytes: p.UsedGpuMemory, known: p.UsedGpuMemory != valueNotAvailable}
		if !pm.known {
			pm.bytes = 0
		}
		if old, seen := byPID[p.Pid]; seen && (old.bytes > pm.bytes || (old.known && !pm.known)) {
			continue
		}
		byPID[p.Pid] = pm
	}
	procs := make([]processMem, 0, len(byPID))
	for _, p := range byPID {
		procs = append(procs, p)
	}
	slices.SortFunc(procs, func(a, b processMem) int {
		if c := cmp.Compare(b.bytes, a.bytes); c != 0 {
			return c
		}
		return cmp.Compare(a.pid, b.pid)
	})
	r.s.processCount = opt{float64(len(procs)), true}
	if len(procs) > c.cfg.maxProcesses {
		procs = procs[:c.cfg.maxProcesses]
	}
	for i := range procs {
		procs[i].name = c.procName(procs[i].pid)
	}
	r.s.processes = procs
}
