//go:build cgo && linux

package collector

import (
	"sync"
	"time"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
	"github.com/NVIDIA/go-nvml/pkg/nvml/mock"
)

// fakeGPU is one mocked GPU: the raw values NVML would return, in NVML's own
// units (mW, mJ, MHz, KB/s, percent), and per-call failures.
type fakeGPU struct {
	uuid, name, busID string

	util                         nvml.Utilization
	mem                          nvml.Memory_v2
	powerMW, limitMW             uint32
	energyMJ                     uint64
	tempC                        uint32
	smMHz, memMHz                uint32
	smMaxMHz, memMaxMHz          uint32
	reasons, supportedReasons    uint64
	pcieTxKBs, pcieRxKBs         uint32
	eccCorrected, eccUncorrected uint64
	pstate                       nvml.Pstates
	migMode                      int
	compute, graphics            []nvml.ProcessInfo
	gpm                          bool
	gpmValues                    map[nvml.GpmMetricId]float64
	xidSupported                 bool

	mu    sync.Mutex
	fail  map[string]nvml.Return // method name -> return code
	lost  bool
	calls map[string]int
}

// ret is what the method named call returns now, and counts the call.
func (f *fakeGPU) ret(call string) nvml.Return {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.calls == nil {
		f.calls = map[string]int{}
	}
	f.calls[call]++
	if f.lost {
		return nvml.ERROR_GPU_IS_LOST
	}
	if r, ok := f.fail[call]; ok {
		return r
	}
	return nvml.SUCCESS
}

func (f *fakeGPU) setLost(lost bool) {
	f.mu.Lock()
	f.lost = lost
	f.mu.Unlock()
}

func (f *fakeGPU) callCount(call string) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.calls[call]
}

func busID(s string) [32]int8 {
	var b [32]int8
	for i := range len(s) {
		b[i] = int8(s[i])
	}
	return b
}

// fakeLib is a mocked NVML library over fake GPUs. It tracks GPM samples and
// event sets so tests can check that Close frees them.
type fakeLib struct {
	gpus    []*fakeGPU
	initRet nvml.Return
	// handleRet fails DeviceGetHandleByIndex for the given indexes.
	handleRet map[int]nvml.Return

	mu          sync.Mutex
	sampleOwner map[*mock.GpmSample]*fakeGPU // which GPU a sample was last taken on
	allocated   int                          // GPM samples + event sets not yet freed
	shutdowns   int
	events      map[*fakeGPU]chan nvml.EventData
	setQueues   map[*mock.EventSet]func(chan nvml.EventData)
}

func newFakeLib(gpus ...*fakeGPU) *fakeLib {
	return &fakeLib{
		gpus:        gpus,
		sampleOwner: map[*mock.GpmSample]*fakeGPU{},
		events:      map[*fakeGPU]chan nvml.EventData{},
		setQueues:   map[*mock.EventSet]func(chan nvml.EventData){},
	}
}

// sendXID queues an XID event for the GPU; its watcher's next wait returns it.
func (l *fakeLib) sendXID(f *fakeGPU, xid uint64) {
	l.mu.Lock()
	ch := l.events[f]
	l.mu.Unlock()
	ch <- nvml.EventData{EventType: nvml.EventTypeXidCriticalError, EventData: xid}
}

func (l *fakeLib) outstanding() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.allocated
}

func (l *fakeLib) iface() *mock.Interface {
	devices := make([]*mock.Device, len(l.gpus))
	for i, f := range l.gpus {
		devices[i] = l.device(f)
	}
	return &mock.Interface{
		InitFunc: func() nvml.Return { return l.initRet },
		ShutdownFunc: func() nvml.Return {
			l.mu.Lock()
			l.shutdowns++
			l.mu.Unlock()
			return nvml.SUCCESS
		},
		DeviceGetCountFunc: func() (int, nvml.Return) { return len(l.gpus), nvml.SUCCESS },
		DeviceGetHandleByIndexFunc: func(i int) (nvml.Device, nvml.Return) {
			if r, ok := l.handleRet[i]; ok {
				return nil, r
			}
			return devices[i], nvml.SUCCESS
		},
		SystemGetDriverVersionFunc:     func() (string, nvml.Return) { return "580.159.04", nvml.SUCCESS },
		SystemGetCudaDriverVersionFunc: func() (int, nvml.Return) { return 13000, nvml.SUCCESS },
		GpmSampleAllocFunc: func() (nvml.GpmSample, nvml.Return) {
			s := &mock.GpmSample{}
			s.FreeFunc = func() nvml.Return {
				l.mu.Lock()
				l.allocated--
				l.mu.Unlock()
				return nvml.SUCCESS
			}
			l.mu.Lock()
			l.allocated++
			l.mu.Unlock()
			return s, nvml.SUCCESS
		},
		GpmMetricsGetFunc: func(mg *nvml.GpmMetricsGetType) nvml.Return {
			l.mu.Lock()
			f1 := l.sampleOwner[mg.Sample1.(*mock.GpmSample)]
			f2 := l.sampleOwner[mg.Sample2.(*mock.GpmSample)]
			l.mu.Unlock()
			if f1 == nil || f1 != f2 {
				return nvml.ERROR_INVALID_ARGUMENT
			}
			for i := range mg.NumMetrics {
				m := &mg.Metrics[i]
				if v, ok := f2.gpmValues[nvml.GpmMetricId(m.MetricId)]; ok {
					m.Value, m.NvmlReturn = v, uint32(nvml.SUCCESS)
				} else {
					m.NvmlReturn = uint32(nvml.ERROR_NOT_SUPPORTED)
				}
			}
			return nvml.SUCCESS
		},
		EventSetCreateFunc: func() (nvml.EventSet, nvml.Return) {
			l.mu.Lock()
			l.allocated++
			l.mu.Unlock()
			// The set learns its GPU at RegisterEvents; Wait reads that GPU's
			// queue, or times out.
			var mu sync.Mutex
			var queue chan nvml.EventData
			set := &mock.EventSet{}
			set.FreeFunc = func() nvml.Return {
				l.mu.Lock()
				l.allocated--
				l.mu.Unlock()
				return nvml.SUCCESS
			}
			set.WaitFunc = func(timeoutMs uint32) (nvml.EventData, nvml.Return) {
				mu.Lock()
				q := queue
				mu.Unlock()
				// A queued event wins over an expired timeout, so that tests
				// that wait with timeout 0 are deterministic.
				select {
				case ev := <-q:
					return ev, nvml.SUCCESS
				default:
				}
				select {
				case ev := <-q:
					return ev, nvml.SUCCESS
				case <-time.After(time.Duration(timeoutMs) * time.Millisecond):
					return nvml.EventData{}, nvml.ERROR_TIMEOUT
				}
			}
			setQueue := func(q chan nvml.EventData) { mu.Lock(); queue = q; mu.Unlock() }
			l.mu.Lock()
			l.setQueues[set] = setQueue
			l.mu.Unlock()
			return set, nvml.SUCCESS
		},
	}
}

func (l *fakeLib) device(f *fakeGPU) *mock.Device {
	return &mock.Device{
		GetUUIDFunc: func() (string, nvml.Return) { return f.uuid, f.ret("GetUUID") },
		GetNameFunc: func() (string, nvml.Return) { return f.name, f.ret("GetName") },
		GetPciInfoFunc: func() (nvml.PciInfo, nvml.Return) {
			return nvml.PciInfo{BusId: busID(f.busID)}, f.ret("GetPciInfo")
		},
		GetSupportedClocksEventReasonsFunc: func() (uint64, nvml.Return) {
			return f.supportedReasons, f.ret("GetSupportedClocksEventReasons")
		},
		GetUtilizationRatesFunc: func() (nvml.Utilization, nvml.Return) {
			return f.util, f.ret("GetUtilizationRates")
		},
		GetMemoryInfo_v2Func: func() (nvml.Memory_v2, nvml.Return) { return f.mem, f.ret("GetMemoryInfo_v2") },
		GetMemoryInfoFunc: func() (nvml.Memory, nvml.Return) {
			return nvml.Memory{Total: f.mem.Total, Free: f.mem.Free, Used: f.mem.Used}, f.ret("GetMemoryInfo")
		},
		GetPowerUsageFunc:         func() (uint32, nvml.Return) { return f.powerMW, f.ret("GetPowerUsage") },
		GetEnforcedPowerLimitFunc: func() (uint32, nvml.Return) { return f.limitMW, f.ret("GetEnforcedPowerLimit") },
		GetTotalEnergyConsumptionFunc: func() (uint64, nvml.Return) {
			return f.energyMJ, f.ret("GetTotalEnergyConsumption")
		},
		GetTemperatureFunc: func(s nvml.TemperatureSensors) (uint32, nvml.Return) {
			if s != nvml.TEMPERATURE_GPU {
				return 0, nvml.ERROR_INVALID_ARGUMENT
			}
			return f.tempC, f.ret("GetTemperature")
		},
		GetClockInfoFunc: func(t nvml.ClockType) (uint32, nvml.Return) {
			switch t {
			case nvml.CLOCK_SM:
				return f.smMHz, f.ret("GetClockInfo")
			case nvml.CLOCK_MEM:
				return f.memMHz, f.ret("GetClockInfo")
			}
			return 0, nvml.ERROR_INVALID_ARGUMENT
		},
		GetMaxClockInfoFunc: func(t nvml.ClockType) (uint32, nvml.Return) {
			switch t {
			case nvml.CLOCK_SM:
				return f.smMaxMHz, f.ret("GetMaxClockInfo")
			case nvml.CLOCK_MEM:
				return f.memMaxMHz, f.ret("GetMaxClockInfo")
			}
			return 0, nvml.ERROR_INVALID_ARGUMENT
		},
		GetCurrentClocksEventReasonsFunc: func() (uint64, nvml.Return) {
			return f.reasons, f.ret("GetCurrentClocksEventReasons")
		},
		GetPcieThroughputFunc: func(c nvml.PcieUtilCounter) (uint32, nvml.Return) {
			switch c {
			case nvml.PCIE_UTIL_TX_BYTES:
				return f.pcieTxKBs, f.ret("GetPcieThroughput")
			case nvml.PCIE_UTIL_RX_BYTES:
				return f.pcieRxKBs, f.ret("GetPcieThroughput")
			}
			return 0, nvml.ERROR_INVALID_ARGUMENT
		},
		GetTotalEccErrorsFunc: func(t nvml.MemoryErrorType, c nvml.EccCounterType) (uint64, nvml.Return) {
			if c != nvml.VOLATILE_ECC {
				return 0, nvml.ERROR_INVALID_ARGUMENT
			}
			if t == nvml.MEMORY_ERROR_TYPE_CORRECTED {
				return f.eccCorrected, f.ret("GetTotalEccErrors")
			}
			return f.eccUncorrected, f.ret("GetTotalEccErrors")
		},
		GetPerformanceStateFunc: func() (nvml.Pstates, nvml.Return) { return f.pstate, f.ret("GetPerformanceState") },
		GetMigModeFunc: func() (int, int, nvml.Return) {
			return f.migMode, f.migMode, f.ret("GetMigMode")
		},
		GetComputeRunningProcessesFunc: func() ([]nvml.ProcessInfo, nvml.Return) {
			return append([]nvml.ProcessInfo(nil), f.compute...), f.ret("GetComputeRunningProcesses")
		},
		GetGraphicsRunningProcessesFunc: func() ([]nvml.ProcessInfo, nvml.Return) {
			return append([]nvml.ProcessInfo(nil), f.graphics...), f.ret("GetGraphicsRunningProcesses")
		},
		GpmQueryDeviceSupportFunc: func() (nvml.GpmSupport, nvml.Return) {
			return nvml.GpmSupport{IsSupportedDevice: uint32(boolFloat(f.gpm))}, f.ret("GpmQueryDeviceSupport")
		},
		GpmSampleGetFunc: func(s nvml.GpmSample) nvml.Return {
			r := f.ret("GpmSampleGet")
			if r == nvml.SUCCESS {
				l.mu.Lock()
				l.sampleOwner[s.(*mock.GpmSample)] = f
				l.mu.Unlock()
			}
			return r
		},
		RegisterEventsFunc: func(types uint64, set nvml.EventSet) nvml.Return {
			if !f.xidSupported {
				return nvml.ERROR_NOT_SUPPORTED
			}
			if types != nvml.EventTypeXidCriticalError {
				return nvml.ERROR_INVALID_ARGUMENT
			}
			q := make(chan nvml.EventData, 16)
			l.mu.Lock()
			l.events[f] = q
			bind := l.setQueues[set.(*mock.EventSet)]
			l.mu.Unlock()
			bind(q)
			return f.ret("RegisterEvents")
		},
	}
}
