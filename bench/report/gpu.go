package report

import (
	"encoding/json"
	"math"
	"strconv"
)

// NaN is the missing Num.
func NaN() Num { return Num(math.NaN()) }

// Num is a float64 that is written to JSON as null when it is not a number
// (a figure that does not exist), since JSON has no NaN.
type Num float64

// Valid reports whether n is a number.
func (n Num) Valid() bool { return !math.IsNaN(float64(n)) && !math.IsInf(float64(n), 0) }

// MarshalJSON writes null for NaN and infinities.
func (n Num) MarshalJSON() ([]byte, error) {
	if !n.Valid() {
		return []byte("null"), nil
	}
	return strconv.AppendFloat(nil, float64(n), 'g', -1, 64), nil
}

// UnmarshalJSON reads null as NaN.
func (n *Num) UnmarshalJSON(b []byte) error {
	if string(b) == "null" {
		*n = NaN()
		return nil
	}
	var f float64
	if err := json.Unmarshal(b, &f); err != nil {
		return err
	}
	*n = Num(f)
	return nil
}

// GPUReport is what the NVML collector showed during the run.
type GPUReport struct {
	// Available is false when no GPU was read; Note says why.
	Available  bool        `json:"available"`
	Note       string      `json:"note,omitempty"`
	Devices    []GPUDevice `json:"devices,omitempty"`
	Samples    []GPUSample `json:"samples,omitempty"`
	Covariates []Covariate `json:"covariates,omitempty"`
	// SampleIntervalSeconds is the final sampling interval (it doubles when
	// the sample store is full).
	SampleIntervalSeconds float64 `json:"sample_interval_seconds,omitempty"`
	// PeakMemoryBytes is, per target, the highest total device memory used
	// (summed over GPUs) in any sample taken while that target was measured.
	PeakMemoryBytes map[string]float64 `json:"peak_memory_bytes,omitempty"`
}

// GPUDevice identifies one GPU.
type GPUDevice struct {
	GPU              string `json:"gpu"` // index, as the collector's gpu label
	UUID             string `json:"uuid"`
	Name             string `json:"name"`
	DriverVersion    string `json:"driver_version"`
	CUDAVersion      string `json:"cuda_version"`
	MemoryTotalBytes Num    `json:"memory_total_bytes"`
}

// GPUSample is one reading of one GPU; T is seconds since the run started.
type GPUSample struct {
	T                  float64 `json:"t"`
	GPU                string  `json:"gpu"`
	MemoryUsedBytes    Num     `json:"memory_used_bytes"`
	TemperatureCelsius Num     `json:"temperature_celsius"`
	PowerWatts         Num     `json:"power_watts"`
	// Round is the sampling round the sample belongs to (the sampler
	// thins its rounds); not written.
	Round int `json:"-"`
}

// Covariate summarises a GPU's temperature and power over the run: they
// change a GPU's speed (clocks throttle when hot or power-capped), so a
// comparison of two runs should show them.
type Covariate struct {
	GPU         string `json:"gpu"`
	Temperature Range  `json:"temperature_celsius"`
	Power       Range  `json:"power_watts"`
}

// Range is the minimum, mean and maximum of a series.
type Range struct {
	Min  Num `json:"min"`
	Mean Num `json:"mean"`
	Max  Num `json:"max"`
}
