//go:build cgo && linux

package collector

import (
	"context"
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

		utilization:    d("utilization_ratio", "Ratio of the driver's last sample period during which one or more kernels ran (NVML utilization.gpu). Says nothing about how many SMs were busy: see infer_gpu_sm_active_ratio."),
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

		processMemory: d("process_memory_used_bytes", "Device memory used by a process (the largest users, at most --collector.nvml.max-processes per GPU). process is the name in /proc/<pid>/comm, empty if unreadable.", "pid", "process"),
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
		c.render(g, now, ch)
	}
	return nil
}

func (c *nvmlCollector) render(g *gpu, now time.Time, ch chan<- prometheus.Metric) {
	d := c.descs
	labels := g.labels
	gauge := func(desc *prometheus.Desc, v float64, extra ...string) {
		ch <- prometheus.MustNewConstMetric(desc, prometheus.GaugeValue, v, withLabels(labels, extra)...)
	}
	counter := func(desc *prometheus.Desc, v float64, extra ...string) {
		ch <- prometheus.MustNewConstMetric(desc, prometheus.CounterValue, v, withLabels(labels, extra)...)
	}
	optGauge := func(desc *prometheus.Desc, o opt, extra ...string) {
		if o.ok {
			gauge(desc, o.v, extra...)
		}
	}

	gauge(d.info, 1, c.driverVersion, c.cudaVersion, g.pciBusID)
	s := g.snap.Load()
	if s == nil {
		return
	}
	gauge(d.up, boolFloat(!s.lost))
	gauge(d.sampleAge, age(now, s.at))
	gauge(d.pollDuration, s.took.Seconds())
	if s.lost {
		return
	}

	optGauge(d.utilization, s.utilization)
	optGauge(d.memUtilization, s.memUtilization)
	optGauge(d.memUsed, s.memUsed)
	optGauge(d.memFree, s.memFree)
	optGauge(d.memTotal, s.memTotal)
	optGauge(d.memReserved, s.memReserved)
	optGauge(d.power, s.power)
	optGauge(d.powerLimit, s.powerLimit)
	if s.energy.ok {
		counter(d.energy, s.energy.v)
	}
	optGauge(d.temperature, s.temperature)
	optGauge(d.clock, s.smClock, "sm")
	optGauge(d.clock, s.memClock, "memory")
	optGauge(d.clockMax, s.smClockMax, "sm")
	optGauge(d.clockMax, s.memClockMax, "memory")
	if s.reasonsOK {
		for _, r := range g.reasons {
			gauge(d.clockEventReason, boolFloat(s.reasons&r.bit != 0), r.name)
		}
	}
	optGauge(d.pcie, s.pcieTx, "tx")
	optGauge(d.pcie, s.pcieRx, "rx")
	if s.eccCorrected.ok {
		counter(d.ecc, s.eccCorrected.v, "corrected")
	}
	if s.eccUncorrected.ok {
		counter(d.ecc, s.eccUncorrected.v, "uncorrected")
	}
	optGauge(d.pstate, s.pstate)
	optGauge(d.migEnabled, s.migEnabled)

	optGauge(d.processes, s.processCount)
	for _, p := range s.processes {
		if p.known {
			gauge(d.processMemory, float64(p.bytes), strconv.FormatUint(uint64(p.pid), 10), p.name)
		}
	}

	gauge(d.xidWatched, boolFloat(g.xidSet != nil))
	if g.xidSet != nil {
		for xid, n := range *g.xids.Load() {
			counter(d.xidErrors, float64(n), strconv.FormatUint(xid, 10))
		}
	}

	if gs := g.gpm.Load(); gs != nil {
		gauge(d.gpmWindow, gs.window.Seconds())
		gauge(d.gpmSampleAge, age(now, gs.at))
		optGauge(d.smActive, gs.values[gpmSMActive])
		optGauge(d.smOccupancy, gs.values[gpmSMOccupancy])
		optGauge(d.tensorActive, gs.values[gpmTensorActive])
		optGauge(d.dramActive, gs.values[gpmDRAMActive])
		optGauge(d.pcie, gs.values[gpmPCIeTx], "tx")
		optGauge(d.pcie, gs.values[gpmPCIeRx], "rx")
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
