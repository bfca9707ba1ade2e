//go:build cgo && linux

package collector

import (
	"context"
	"maps"
	"strconv"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// nvmlDescs are the NVML collector's metric descriptions. Every series but
// the info metric carries the labels gpu (index), uuid and name.
type nvmlDescs struct {
	info, up, sampleAge, pollDuration               *prometheus.Desc
	utilization, memUtilization                     *prometheus.Desc
	memUsed, memFree, memTotal, memReserved         *prometheus.Desc
	power, powerLimit, energy                       *prometheus.Desc
	temperature, clock, clockMax, clockEventReason  *prometheus.Desc
	pcie, ecc, pstate, migEnabled                   *prometheus.Desc
	xidErrors, xidWatched                           *prometheus.Desc
	processMemory, processes                        *prometheus.Desc
	smActive, smOccupancy, tensorActive, dramActive *prometheus.Desc
	gpmWindow, gpmSampleAge                         *prometheus.Desc
}

func newNVMLDescs() *nvmlDescs {
	gpuLabels := []string{"gpu", "uuid", "name"}
	d := func(name, help string, extra ...string) *prometheus.Desc {
		return prometheus.NewDesc("infer_gpu_"+name, help, append(append([]string(nil), gpuLabels...), extra...), nil)
	}
	return &nvmlDescs{
		info:         d("info", "GPU identity: driver version, CUDA driver version and PCI bus id. Always 1.", "driver_version", "cuda_version", "pci_bus_id"),
		up:           d("up", "1 if the latest background reading reached the GPU, 0 if NVML reports it lost (its other series are then absent)."),
		sampleAge:    d("sample_age_seconds", "Age of the reading these GPU series come from: NVML is read in the background, never during a scrape."),
		pollDuration: d("poll_duration_seconds", "How long the latest background NVML reading of this GPU took."),

		utilization:    d("utilization_ratio", "Ratio of the last sample period during which any kernel ran (NVML utilization.gpu); not how many SMs were busy."),
		memUtilization: d("memory_utilization_ratio", "Ratio of the driver's last sample period during which device memory was read or written (NVML utilization.memory)."),

		memUsed:     d("memory_used_bytes", "Device memory allocated by processes and the driver, excluding reserved memory."),
		memFree:     d("memory_free_bytes", "Device memory free for allocation."),
		memTotal:    d("memory_total_bytes", "Device memory in total."),
		memReserved: d("memory_reserved_bytes", "Device memory the driver reserves for itself (NVML memory info v2)."),

		power:      d("power_watts", "Board power draw (NVML power usage; averaged over 1 s on Ampere and later except GA100)."),
		powerLimit: d("power_limit_watts", "Power limit the driver enforces."),
		energy:     d("energy_joules_total", "Energy the GPU consumed since the driver was loaded."),

		temperature:      d("temperature_celsius", "GPU core temperature."),
		clock:            d("clock_hertz", "Current clock frequency.", "clock"),
		clockMax:         d("clock_max_hertz", "Maximum clock frequency the GPU can run at.", "clock"),
		clockEventReason: d("clock_event_reason_active", "1 while this clock-event (throttle) reason holds the clocks down, else 0.", "reason"),

		pcie:       d("pcie_bytes_per_second", "PCIe traffic rate (tx: from the GPU, rx: to the GPU). From GPM over its window where supported, else from NVML's 20 ms byte counter.", "direction"),
		ecc:        d("ecc_errors_total", "Memory ECC errors since the driver was loaded (volatile counters).", "type"),
		pstate:     d("performance_state", "Performance state: 0 (P0, the fastest) to 15 (P15, the slowest)."),
		migEnabled: d("mig_mode_enabled", "1 if Multi-Instance GPU mode is on, else 0."),

		xidErrors:  d("xid_errors_total", "XID errors the driver reported since the exporter started, by XID.", "xid"),
		xidWatched: d("xid_events_watched", "1 if XID events are watched on this GPU (the driver allows an event set), else 0: then infer_gpu_xid_errors_total cannot appear."),

		processMemory: d("process_memory_used_bytes", "Device memory used by a process (the largest, at most --collector.nvml.max-processes per GPU), named as in /proc/<pid>/comm.", "pid", "process"),
		processes:     d("processes", "Processes with a compute or graphics context on the GPU, before the per-process series are truncated."),

		smActive:     d("sm_active_ratio", "Ratio of SMs that were busy over the latest GPM window (GPM SM utilisation): the \"SM utilisation\" NVML's plain utilisation cannot give."),
		smOccupancy:  d("sm_occupancy_ratio", "Ratio of resident warps to the theoretical maximum over the latest GPM window."),
		tensorActive: d("tensor_active_ratio", "Ratio of time the SMs ran any tensor-core operation over the latest GPM window."),
		dramActive:   d("dram_bandwidth_utilization_ratio", "Ratio of DRAM bandwidth used to its theoretical maximum over the latest GPM window."),
		gpmWindow:    d("gpm_window_seconds", "Length of the latest GPM window the GPM ratios cover."),
		gpmSampleAge: d("gpm_sample_age_seconds", "Time since the latest GPM window ended."),
	}
}

// all lists every description, for Describe and for tests.
func (d *nvmlDescs) all() []*prometheus.Desc {
	return []*prometheus.Desc{
		d.info, d.up, d.sampleAge, d.pollDuration, d.utilization, d.memUtilization,
		d.memUsed, d.memFree, d.memTotal, d.memReserved, d.power, d.powerLimit, d.energy,
		d.temperature, d.clock, d.clockMax, d.clockEventReason, d.pcie, d.ecc, d.pstate,
		d.migEnabled, d.xidErrors, d.xidWatched, d.processMemory, d.processes,
		d.smActive, d.smOccupancy, d.tensorActive, d.dramActive, d.gpmWindow, d.gpmSampleAge,
	}
}

// Describe sends every description the collector can render.
func (c *nvmlCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range c.descs.all() {
		ch <- d
	}
}

// Update renders the latest snapshots. It makes no NVML call.
func (c *nvmlCollector) Update(_ context.Context, ch chan<- prometheus.Metric) error {
	now := c.now()
	for _, g := range c.gpus {
		s := c.snapshot(g)
		c.render(&s, now, ch)
	}
	return nil
}

// gpuSnapshots implements gpuReader: the snapshots Update renders.
func (c *nvmlCollector) gpuSnapshots() []GPUSnapshot {
	out := make([]GPUSnapshot, len(c.gpus))
	for i, g := range c.gpus {
		out[i] = c.snapshot(g)
	}
	return out
}

func (o opt) reading() Reading { return Reading{Value: o.v, OK: o.ok} }

// snapshot assembles g's latest readings (device, GPM, XID) into the one
// value both Update and Set.GPUs serve.
func (c *nvmlCollector) snapshot(g *gpu) GPUSnapshot {
	out := GPUSnapshot{
		Index: g.index, UUID: g.uuid, Name: g.name, PCIBusID: g.pciBusID,
		DriverVersion: c.driverVersion, CUDAVersion: c.cudaVersion, labels: g.labels,
	}
	s := g.snap.Load()
	if s == nil {
		return out
	}
	out.Polled, out.Up, out.At, out.PollDuration = true, !s.lost, s.at, s.took
	if s.lost {
		return out
	}

	out.Utilization, out.MemoryUtilization = s.utilization.reading(), s.memUtilization.reading()
	out.MemoryUsedBytes, out.MemoryFreeBytes = s.memUsed.reading(), s.memFree.reading()
	out.MemoryTotalBytes, out.MemoryReservedBytes = s.memTotal.reading(), s.memReserved.reading()
	out.PowerWatts, out.PowerLimitWatts, out.EnergyJoules = s.power.reading(), s.powerLimit.reading(), s.energy.reading()
	out.TemperatureCelsius = s.temperature.reading()
	out.SMClockHertz, out.MemoryClockHertz = s.smClock.reading(), s.memClock.reading()
	out.SMClockMaxHertz, out.MemoryClockMaxHertz = s.smClockMax.reading(), s.memClockMax.reading()
	if s.reasonsOK {
		out.ClockEvents = make([]ClockEvent, len(g.reasons))
		for i, r := range g.reasons {
			out.ClockEvents[i] = ClockEvent{Reason: r.name, Active: s.reasons&r.bit != 0}
		}
	}
	out.PCIeTxBytesPerSecond, out.PCIeRxBytesPerSecond = s.pcieTx.reading(), s.pcieRx.reading()
	out.ECCCorrected, out.ECCUncorrected = s.eccCorrected.reading(), s.eccUncorrected.reading()
	out.PerformanceState, out.MIGEnabled = s.pstate.reading(), s.migEnabled.reading()

	out.ProcessCount = s.processCount.reading()
	if len(s.processes) > 0 {
		out.Processes = make([]GPUProcess, len(s.processes))
		for i, p := range s.processes {
			out.Processes[i] = GPUProcess{PID: p.pid, Name: p.name, MemoryUsedBytes: Reading{Value: float64(p.bytes), OK: p.known}}
		}
	}

	out.XIDWatched = g.xidSet != nil
	if out.XIDWatched {
		// The watcher never modifies a published map, but the caller
		// might: it gets its own copy.
		if xids := *g.xids.Load(); len(xids) > 0 {
			out.XIDErrors = maps.Clone(xids)
		}
	}

	if gs := g.gpm.Load(); gs != nil {
		out.GPM = &GPMWindow{
			At: gs.at, Window: gs.window,
			SMActive: gs.values[gpmSMActive].reading(), SMOccupancy: gs.values[gpmSMOccupancy].reading(),
			TensorActive: gs.values[gpmTensorActive].reading(), DRAMBandwidthUtilization: gs.values[gpmDRAMActive].reading(),
			PCIeTxBytesPerSecond: gs.values[gpmPCIeTx].reading(), PCIeRxBytesPerSecond: gs.values[gpmPCIeRx].reading(),
		}
	}
	return out
}

// render sends the series of one GPU snapshot.
func (c *nvmlCollector) render(s *GPUSnapshot, now time.Time, ch chan<- prometheus.Metric) {
	d := c.descs
	labels := s.labels
	if labels == nil {
		labels = []string{strconv.Itoa(s.Index), s.UUID, s.Name}
	}
	gauge := func(desc *prometheus.Desc, v float64, extra ...string) {
		ch <- prometheus.MustNewConstMetric(desc, prometheus.GaugeValue, v, withLabels(labels, extra)...)
	}
	counter := func(desc *prometheus.Desc, v float64, extra ...string) {
		ch <- prometheus.MustNewConstMetric(desc, prometheus.CounterValue, v, withLabels(labels, extra)...)
	}
	optGauge := func(desc *prometheus.Desc, r Reading, extra ...string) {
		if r.OK {
			gauge(desc, r.Value, extra...)
		}
	}
	optCounter := func(desc *prometheus.Desc, r Reading, extra ...string) {
		if r.OK {
			counter(desc, r.Value, extra...)
		}
	}

	gauge(d.info, 1, s.DriverVersion, s.CUDAVersion, s.PCIBusID)
	if !s.Polled {
		return
	}
	gauge(d.up, boolFloat(s.Up))
	gauge(d.sampleAge, age(now, s.At))
	gauge(d.pollDuration, s.PollDuration.Seconds())
	if !s.Up {
		return
	}

	optGauge(d.utilization, s.Utilization)
	optGauge(d.memUtilization, s.MemoryUtilization)
	optGauge(d.memUsed, s.MemoryUsedBytes)
	optGauge(d.memFree, s.MemoryFreeBytes)
	optGauge(d.memTotal, s.MemoryTotalBytes)
	optGauge(d.memReserved, s.MemoryReservedBytes)
	optGauge(d.power, s.PowerWatts)
	optGauge(d.powerLimit, s.PowerLimitWatts)
	optCounter(d.energy, s.EnergyJoules)
	optGauge(d.temperature, s.TemperatureCelsius)
	optGauge(d.clock, s.SMClockHertz, "sm")
	optGauge(d.clock, s.MemoryClockHertz, "memory")
	optGauge(d.clockMax, s.SMClockMaxHertz, "sm")
	optGauge(d.clockMax, s.MemoryClockMaxHertz, "memory")
	for _, r := range s.ClockEvents {
		gauge(d.clockEventReason, boolFloat(r.Active), r.Reason)
	}
	optGauge(d.pcie, s.PCIeTxBytesPerSecond, "tx")
	optGauge(d.pcie, s.PCIeRxBytesPerSecond, "rx")
	optCounter(d.ecc, s.ECCCorrected, "corrected")
	optCounter(d.ecc, s.ECCUncorrected, "uncorrected")
	optGauge(d.pstate, s.PerformanceState)
	optGauge(d.migEnabled, s.MIGEnabled)

	optGauge(d.processes, s.ProcessCount)
	for _, p := range s.Processes {
		optGauge(d.processMemory, p.MemoryUsedBytes, strconv.FormatUint(uint64(p.PID), 10), p.Name)
	}

	gauge(d.xidWatched, boolFloat(s.XIDWatched))
	for xid, n := range s.XIDErrors {
		counter(d.xidErrors, float64(n), strconv.FormatUint(xid, 10))
	}

	if w := s.GPM; w != nil {
		gauge(d.gpmWindow, w.Window.Seconds())
		gauge(d.gpmSampleAge, age(now, w.At))
		optGauge(d.smActive, w.SMActive)
		optGauge(d.smOccupancy, w.SMOccupancy)
		optGauge(d.tensorActive, w.TensorActive)
		optGauge(d.dramActive, w.DRAMBandwidthUtilization)
		optGauge(d.pcie, w.PCIeTxBytesPerSecond, "tx")
		optGauge(d.pcie, w.PCIeRxBytesPerSecond, "rx")
	}
}

// withLabels returns the GPU labels followed by extra, in a fresh slice.
func withLabels(labels, extra []string) []string {
	if len(extra) == 0 {
		return labels
	}
	out := make([]string, 0, len(labels)+len(extra))
	return append(append(out, labels...), extra...)
}

// age is how old a reading taken at t is at now. A reading published after
// the scrape took its clock would come out a few microseconds negative;
// it is fresh, so it reads 0.
func age(now, t time.Time) float64 {
	return max(0, now.Sub(t).Seconds())
}
