//go:build !(cgo && linux)

package collector

import (
	"context"
	"log/slog"
)

// NVMLBuiltIn says whether this binary can read NVIDIA GPUs through NVML. It is
// false here: go-nvml needs cgo (and Linux), and this binary was built without.
// Print it in --version output and on the landing page.
const NVMLBuiltIn = false

func newNVML(context.Context, nvmlConfig, *slog.Logger) (Collector, error) {
	return nil, unavailable("this binary was built without cgo (CGO_ENABLED=0) or not for Linux, so it has no NVML support")
}
