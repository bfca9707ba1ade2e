package collector

import "time"

// Reading is one GPU reading that may be absent: OK is false when NVML said
// the call is not supported or it failed, and then its series is absent (a
// zero would be a false reading).
type Reading struct {
	Value float64
	OK    bool
}

// GPUSnapshot is the latest background reading of one GPU, in base units:
// what the NVML collector renders as infer_gpu_* and what Set.GPUs returns,
// so the series and a reader of the snapshot (bench) cannot disagree.
type GPUSnapshot struct {
	// Identity, read once when the collector started: the gpu, uuid and
	// name labels, and infer_gpu_info's.
	Index         int
	UUID          string
	Name          string
	PCIBusID      string
	DriverVersion string
	CUDAVersion   string

	// Polled is whether the GPU has been read yet (it always has once New
	// returned). Up is false when NVML reports the GPU lost; every reading
	// below is then absent.
	Polled bool
	Up     bool
	// At is when the reading started; PollDuration is how long it took.
	At           time.Time
	PollDuration time.Duration

	Utilization       Reading // ratio of time a kernel ran, 0..1
	MemoryUtilization Reading // ratio of time device memory was read or written, 0..1

	MemoryUsedBytes, MemoryFreeBytes, MemoryTotalBytes, MemoryReservedBytes Reading

	PowerWatts, PowerLimitWatts Reading
	EnergyJoules                Reading // since the driver loaded

	TemperatureCelsius Reading

	SMClockHertz, MemoryClockHertz       Reading
	SMClockMaxHertz, MemoryClockMaxHertz Reading

	// ClockEvents are the clock-event (throttle) reasons the GPU supports,
	// each active or not; nil when the reasons could not be read.
	ClockEvents []ClockEvent

	// PCIe traffic from NVML's blocking 20 ms counter, read only on GPUs
	// without GPM (GPM.PCIe* on the others).
	PCIeTxBytesPerSecond, PCIeRxBytesPerSecond Reading

	ECCCorrected, ECCUncorrected Reading // volatile counts since the driver loaded

	PerformanceState Reading // 0 (P0, fastest) to 15
	MIGEnabled       Reading // 1 when MIG mode is on, else 0

	// ProcessCount is the number of processes on the GPU before
	// truncation; Processes are the largest users of its memory, at most
	// --collector.nvml.max-processes.
	ProcessCount Reading
	Processes    []GPUProcess

	// XIDWatched is whether XID events are watched on this GPU; XIDErrors
	// counts the XID errors seen since the collector started, by XID.
	XIDWatched bool
	XIDErrors  map[uint64]uint64

	// GPM is the latest GPM window; nil on GPUs without GPM or before
	// the first window ends.
	GPM *GPMWindow

	// labels are the gpu, uuid and name label values, as the collector
	// keeps them; nil in a snapshot built elsewhere.
	labels []string
}

// ClockEvent is one clock-event reason: its name (the reason label) and
// whether it holds the clocks down now.
type ClockEvent struct {
	Reason string
	Active bool
}

// GPUProcess is one process with a context on the GPU. MemoryUsedBytes is
// absent when NVML cannot say how much memory it uses.
type GPUProcess struct {
	PID             uint32
	Name            string // from /proc/<pid>/comm; empty when unreadable
	MemoryUsedBytes Reading
}

// GPMWindow is what GPM measured over one window. The ratios are 0..1.
type GPMWindow struct {
	At     time.Time     // end of the window
	Window time.Duration // length of the window

	SMActive, SMOccupancy, TensorActive, DRAMBandwidthUtilization Reading
	PCIeTxBytesPerSecond, PCIeRxBytesPerSecond                    Reading
}

// gpuReader is a running collector that reads GPUs (the NVML collector).
type gpuReader interface {
	gpuSnapshots() []GPUSnapshot
}

// GPUs returns the latest reading of every GPU the running collectors read,
// the snapshots their infer_gpu_* series are rendered from, in GPU order.
// It makes no NVML call. It returns nil when no GPU collector runs (NVML
// disabled or unavailable: Status says why).
func (s *Set) GPUs() []GPUSnapshot {
	var out []GPUSnapshot
	for _, nc := range s.running {
		if r, ok := nc.c.(gpuReader); ok {
			out = append(out, r.gpuSnapshots()...)
		}
	}
	return out
}
