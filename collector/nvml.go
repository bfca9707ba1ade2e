//go:build cgo && linux

package collector

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
)

// NVMLBuiltIn says whether this binary can read NVIDIA GPUs through NVML. It
// is true in cgo builds for Linux. go-nvml opens libnvidia-ml.so.1 only when
// the collector starts, so such a binary also runs on a host with no driver:
// the collector then reports itself unavailable.
const NVMLBuiltIn = true

// xidWaitTimeout bounds one blocking NVML event wait, and so how long Close
// waits for the XID watchers to notice they must stop.
const xidWaitTimeout = 500 * time.Millisecond

func newNVML(ctx context.Context, cfg nvmlConfig, logger *slog.Logger) (Collector, error) {
	return newNVMLCollector(ctx, nvml.New(), cfg, logger, nvmlOptions{})
}

// nvmlOptions are the seams tests use; the zero value is production.
type nvmlOptions struct {
	now      func() time.Time        // the clock; time.Now when nil
	procName func(pid uint32) string // a process's name; /proc/<pid>/comm when nil
	// manual starts no background goroutine: the test drives poll, gpmStep
	// and xidStep itself, so what it renders is deterministic.
	manual bool
}

// nvmlCollector reads every GPU in the background, one poller goroutine per
// GPU (plus a GPM sampler and an XID watcher where supported), into immutable
// snapshots swapped atomically. Update only renders the latest snapshots: a
// scrape never waits on NVML, whose calls take up to ~100 ms each.
type nvmlCollector struct {
	lib      nvml.Interface
	cfg      nvmlConfig
	logger   *slog.Logger
	now      func() time.Time
	procName func(pid uint32) string
	descs    *nvmlDescs

	driverVersion string
	cudaVersion   string
	gpus          []*gpu

	cancel    context.CancelFunc
	wg        sync.WaitGroup
	closeOnce sync.Once
	closeErr  error
}

// gpu is one device. Its identity fields are set before any goroutine starts
// and never change; the atomics hold the latest readings.
type gpu struct {
	index    int
	dev      nvml.Device // nil when the handle could not be obtained
	openErr  nvml.Return // why dev is nil
	uuid     string
	name     string
	pciBusID string
	labels   []string // gpu, uuid, name

	// reasonBits are the clock-event reasons rendered, one series each: the
	// ones the device says it supports, or all named ones when it won't say.
	reasons []clockEventReason

	snap atomic.Pointer[deviceSnapshot]

	// GPM: supported when the device supports GPM and two samples could be
	// allocated and the first one taken. gpmPrev/gpmCur/gpmPrevAt belong to
	// the GPM goroutine alone.
	gpmSupported bool
	gpmPrev      nvml.GpmSample
	gpmCur       nvml.GpmSample
	gpmPrevAt    time.Time
	gpm          atomic.Pointer[gpmSnapshot]

	// XID: xidSet is non-nil when XID events are watched on this device. The
	// counts map is copied on write by the watcher goroutine alone.
	xidSet nvml.EventSet
	xids   atomic.Pointer[map[uint64]uint64]
}

func newNVMLCollector(ctx context.Context, lib nvml.Interface, cfg nvmlConfig, logger *slog.Logger, opts nvmlOptions) (*nvmlCollector, error) {
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	c := &nvmlCollector{
		lib:      lib,
		cfg:      cfg,
		logger:   logger,
		now:      opts.now,
		procName: opts.procName,
		descs:    newNVMLDescs(),
	}
	if c.now == nil {
		c.now = time.Now
	}
	if c.procName == nil {
		c.procName = procComm
	}

	if ret := lib.Init(); ret != nvml.SUCCESS {
		switch ret {
		case nvml.ERROR_LIBRARY_NOT_FOUND:
			return nil, unavailable("NVML library (libnvidia-ml.so.1) not found: no NVIDIA driver on this host")
		case nvml.ERROR_DRIVER_NOT_LOADED:
			return nil, unavailable("NVIDIA driver not loaded")
		default:
			return nil, unavailable("NVML init failed: %s", ret.Error())
		}
	}
	count, ret := lib.DeviceGetCount()
	if ret != nvml.SUCCESS {
		_ = lib.Shutdown()
		return nil, unavailable("NVML could not count GPUs: %s", ret.Error())
	}
	if count == 0 {
		_ = lib.Shutdown()
		return nil, unavailable("NVML found no GPU")
	}
	if v, ret := lib.SystemGetDriverVersion(); ret == nvml.SUCCESS {
		c.driverVersion = v
	}
	if v, ret := lib.SystemGetCudaDriverVersion(); ret == nvml.SUCCESS {
		// NVML encodes CUDA 12.4 as 12040.
		c.cudaVersion = fmt.Sprintf("%d.%d", v/1000, v%1000/10)
	}

	for i := range count {
		c.gpus = append(c.gpus, c.openGPU(i))
	}

	// The first reading happens before New returns, so that the first scrape
	// already has values. All GPUs are read in parallel.
	var first sync.WaitGroup
	for _, g := range c.gpus {
		first.Go(func() { c.poll(g) })
	}
	first.Wait()

	ctx, c.cancel = context.WithCancel(ctx)
	if !opts.manual {
		for _, g := range c.gpus {
			c.goLoop(ctx, c.cfg.pollInterval, func() { c.poll(g) })
			if g.gpmSupported {
				c.goLoop(ctx, c.cfg.gpmInterval, func() { c.gpmStep(g) })
			}
			if g.xidSet != nil {
				c.wg.Go(func() { c.xidLoop(ctx, g) })
			}
		}
	}

	var gpmGPUs, xidGPUs int
	for _, g := range c.gpus {
		if g.gpmSupported {
			gpmGPUs++
		}
		if g.xidSet != nil {
			xidGPUs++
		}
	}
	logger.Info("NVML collector started", "gpus", len(c.gpus), "driver_version", c.driverVersion,
		"cuda_version", c.cudaVersion, "gpm_gpus", gpmGPUs, "xid_gpus", xidGPUs,
		"poll_interval", c.cfg.pollInterval, "gpm_interval", c.cfg.gpmInterval)
	return c, nil
}

// openGPU reads a device's identity and sets up GPM and XID watching. A
// device whose handle or identity cannot be read is kept, marked lost, so
// that infer_gpu_up shows it.
func (c *nvmlCollector) openGPU(i int) *gpu {
	g := &gpu{index: i}
	defer func() { g.labels = []string{strconv.Itoa(i), g.uuid, g.name} }()
	dev, ret := c.lib.DeviceGetHandleByIndex(i)
	if ret != nvml.SUCCESS {
		// poll reports it lost, with this call as the reason.
		g.openErr = ret
		return g
	}
	g.dev = dev
	if v, ret := dev.GetUUID(); ret == nvml.SUCCESS {
		g.uuid = v
	}
	if v, ret := dev.GetName(); ret == nvml.SUCCESS {
		g.name = v
	}
	if p, ret := dev.GetPciInfo(); ret == nvml.SUCCESS {
		g.pciBusID = int8String(p.BusId[:])
	}

	supported, ret := dev.GetSupportedClocksEventReasons()
	for _, r := range clockEventReasons {
		if ret != nvml.SUCCESS || supported&r.bit != 0 {
			g.reasons = append(g.reasons, r)
		}
	}

	c.openGPM(g)
	if c.cfg.xid {
		c.openXID(g)
	}
	return g
}

func (c *nvmlCollector) openGPM(g *gpu) {
	support, ret := g.dev.GpmQueryDeviceSupport()
	if ret != nvml.SUCCESS || support.IsSupportedDevice == 0 {
		return
	}
	a, ret := c.lib.GpmSampleAlloc()
	if ret != nvml.SUCCESS {
		c.logger.Debug("GPM sample alloc failed", "gpu", g.index, "err", ret.Error())
		return
	}
	b, ret := c.lib.GpmSampleAlloc()
	if ret != nvml.SUCCESS {
		_ = a.Free()
		c.logger.Debug("GPM sample alloc failed", "gpu", g.index, "err", ret.Error())
		return
	}
	if ret := g.dev.GpmSampleGet(a); ret != nvml.SUCCESS {
		_, _ = a.Free(), b.Free()
		c.logger.Debug("GPM first sample failed", "gpu", g.index, "err", ret.Error())
		return
	}
	g.gpmSupported, g.gpmPrev, g.gpmCur, g.gpmPrevAt = true, a, b, c.now()
}

func (c *nvmlCollector) openXID(g *gpu) {
	set, ret := c.lib.EventSetCreate()
	if ret != nvml.SUCCESS {
		c.logger.Debug("NVML event set create failed; XID errors are not watched", "gpu", g.index, "err", ret.Error())
		return
	}
	if ret := g.dev.RegisterEvents(nvml.EventTypeXidCriticalError, set); ret != nvml.SUCCESS {
		_ = set.Free()
		c.logger.Debug("XID events not available; XID errors are not watched", "gpu", g.index, "err", ret.Error())
		return
	}
	g.xidSet = set
	g.xids.Store(&map[uint64]uint64{})
}

// goLoop runs step every interval until ctx ends.
func (c *nvmlCollector) goLoop(ctx context.Context, interval time.Duration, step func()) {
	c.wg.Add(1)
	go func() {
		defer c.wg.Done()
		t := time.NewTicker(interval)
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-t.C:
				step()
			}
		}
	}()
}

// poll reads one GPU and publishes the snapshot, logging when the GPU is lost
// or comes back.
func (c *nvmlCollector) poll(g *gpu) {
	s := c.read(g)
	prev := g.snap.Swap(s)
	wasLost := prev != nil && prev.lost
	switch {
	case s.lost && !wasLost:
		c.logger.Warn("GPU lost: NVML cannot read it; its series are dropped until it answers again",
			"gpu", g.index, "uuid", g.uuid, "call", s.lostCall, "err", s.lostErr)
	case !s.lost && wasLost:
		c.logger.Info("GPU answers again", "gpu", g.index, "uuid", g.uuid)
	}
}

// gpmStep takes the next GPM sample and publishes the metrics of the window
// since the previous one. Windows follow each other with no gap.
func (c *nvmlCollector) gpmStep(g *gpu) {
	ret := g.dev.GpmSampleGet(g.gpmCur)
	at := c.now()
	if ret != nvml.SUCCESS {
		// Keep the previous sample: the next window spans the gap, and
		// infer_gpu_gpm_window_seconds says so.
		c.logger.Debug("GPM sample failed", "gpu", g.index, "err", ret.Error())
		return
	}
	mg := &nvml.GpmMetricsGetType{
		NumMetrics: uint32(len(gpmMetrics)),
		Sample1:    g.gpmPrev,
		Sample2:    g.gpmCur,
	}
	for i, m := range gpmMetrics {
		mg.Metrics[i].MetricId = uint32(m.id)
	}
	snap := &gpmSnapshot{at: at, window: at.Sub(g.gpmPrevAt)}
	if ret := c.lib.GpmMetricsGet(mg); ret == nvml.SUCCESS {
		for i, m := range gpmMetrics {
			if nvml.Return(mg.Metrics[i].NvmlReturn) == nvml.SUCCESS {
				snap.values[i] = opt{v: mg.Metrics[i].Value * m.scale, ok: true}
			}
		}
	} else {
		c.logger.Debug("GPM metrics get failed", "gpu", g.index, "err", ret.Error())
	}
	g.gpmPrev, g.gpmCur, g.gpmPrevAt = g.gpmCur, g.gpmPrev, at
	g.gpm.Store(snap)
}

// xidLoop waits for XID events until ctx ends. Each wait is bounded so the
// loop notices cancellation.
func (c *nvmlCollector) xidLoop(ctx context.Context, g *gpu) {
	for ctx.Err() == nil {
		if err := c.xidStep(g, xidWaitTimeout); err != nil {
			// A wait that fails at once would spin: back off for a poll
			// interval.
			c.logger.Debug("NVML event wait failed", "gpu", g.index, "err", err)
			select {
			case <-ctx.Done():
			case <-time.After(c.cfg.pollInterval):
			}
		}
	}
}

// xidStep waits once for an event and counts it if it is an XID error.
func (c *nvmlCollector) xidStep(g *gpu, timeout time.Duration) error {
	data, ret := g.xidSet.Wait(uint32(timeout.Milliseconds()))
	switch ret {
	case nvml.SUCCESS:
		if data.EventType&nvml.EventTypeXidCriticalError == 0 {
			return nil
		}
		old := *g.xids.Load()
		counts := make(map[uint64]uint64, len(old)+1)
		for k, v := range old {
			counts[k] = v
		}
		counts[data.EventData]++
		g.xids.Store(&counts)
		c.logger.Warn("GPU reported an XID error", "gpu", g.index, "uuid", g.uuid, "xid", data.EventData)
		return nil
	case nvml.ERROR_TIMEOUT:
		return nil
	default:
		return ret
	}
}

// Close stops the background goroutines, waits for them, frees NVML objects
// and shuts NVML down.
func (c *nvmlCollector) Close() error {
	c.closeOnce.Do(func() {
		c.cancel()
		c.wg.Wait()
		for _, g := range c.gpus {
			if g.xidSet != nil {
				_ = g.xidSet.Free()
			}
			if g.gpmSupported {
				_, _ = g.gpmPrev.Free(), g.gpmCur.Free()
			}
		}
		if ret := c.lib.Shutdown(); ret != nvml.SUCCESS {
			c.closeErr = fmt.Errorf("NVML shutdown: %w", ret)
		}
	})
	return c.closeErr
}

// procComm returns a process's name as the kernel records it, or "" when it
// cannot be read (the process ended, or lives in another PID namespace).
func procComm(pid uint32) string {
	b, err := os.ReadFile("/proc/" + strconv.FormatUint(uint64(pid), 10) + "/comm")
	if err != nil {
		return ""
	}
	return strings.TrimSpace(string(b))
}

// int8String converts a NUL-terminated C char array.
func int8String(cs []int8) string {
	b := make([]byte, 0, len(cs))
	for _, c := range cs {
		if c == 0 {
			break
		}
		b = append(b, byte(c))
	}
	return string(b)
}
