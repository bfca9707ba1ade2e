package bench

import (
	"context"
	"log/slog"
	"os"
	"strings"
	"testing"

	"github.com/alecthomas/kingpin/v2"

	"github.com/infer-exporter/infer_exporter/collector"
)

// TestRealNVML runs where an NVIDIA GPU and its driver are (set
// BENCH_REAL_NVML=DIR): a short bench with the real NVML collector as its
// GPU source, whose report it writes into DIR. It checks that the GPUs'
// identity, memory, temperature and power were read and that the report
// has its heatmap.
func TestRealNVML(t *testing.T) {
	out := os.Getenv("BENCH_REAL_NVML")
	if out == "" {
		t.Skip("set BENCH_REAL_NVML=DIR on a machine with an NVIDIA GPU")
	}
	app := kingpin.New("t", "")
	settings := collector.AddFlags(app)
	if _, err := app.Parse(nil); err != nil {
		t.Fatal(err)
	}
	gpus, note, closeGPUs := gpuSource(context.Background(), settings, slog.New(slog.DiscardHandler))
	defer closeGPUs()
	if gpus == nil {
		t.Fatalf("no GPU source: %s", note)
	}
	rep := runSmall(t, gpus, false)
	if err := WriteFiles(out, rep); err != nil {
		t.Fatal(err)
	}
	g := rep.GPU
	if !g.Available || len(g.Devices) == 0 || len(g.Samples) == 0 {
		t.Fatalf("GPU report %+v", g)
	}
	d := g.Devices[0]
	t.Logf("GPU %s %q driver %s CUDA %s total %.0f B; %d samples; covariates %+v; peaks %v",
		d.GPU, d.Name, d.DriverVersion, d.CUDAVersion, float64(d.MemoryTotalBytes), len(g.Samples), g.Covariates, g.PeakMemoryBytes)
	if d.Name == "" || d.DriverVersion == "" || d.CUDAVersion == "" || !d.MemoryTotalBytes.Valid() {
		t.Errorf("device identity %+v", d)
	}
	for _, c := range g.Covariates {
		if !c.Temperature.Mean.Valid() || !c.Power.Mean.Valid() {
			t.Errorf("covariates %+v", c)
		}
	}
	if len(g.PeakMemoryBytes) != 2 {
		t.Errorf("peak memory per target %v", g.PeakMemoryBytes)
	}
	html, _ := os.ReadFile(out + "/" + HTMLFile)
	if !strings.Contains(string(html), `class="chart heatmap"`) {
		t.Error("no heatmap in the report")
	}
}
