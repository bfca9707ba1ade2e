package collector

import (
	"context"
	"fmt"
	"log/slog"
	"time"
)

// nvmlConfig is the NVML collector's flag values. The flags exist in every
// build, also without cgo, so that a command line works with either binary.
type nvmlConfig struct {
	// pollInterval is how often each GPU is read in the background. Scrapes
	// never call NVML: they render the latest reading.
	pollInterval time.Duration
	// gpmInterval is the length of one GPM window: two GPM samples this far
	// apart give the SM active, occupancy, tensor and DRAM ratios.
	gpmInterval time.Duration
	// maxProcesses bounds the per-process memory series per GPU (the largest
	// users are kept).
	maxProcesses int
	// xid enables the XID event watcher.
	xid bool
}

func (c nvmlConfig) validate() error {
	if c.pollInterval <= 0 {
		return fmt.Errorf("--collector.nvml.poll-interval must be positive, got %s", c.pollInterval)
	}
	if c.gpmInterval <= 0 {
		return fmt.Errorf("--collector.nvml.gpm-interval must be positive, got %s", c.gpmInterval)
	}
	if c.maxProcesses < 0 {
		return fmt.Errorf("--collector.nvml.max-processes must not be negative, got %d", c.maxProcesses)
	}
	return nil
}

func nvmlFactory() factory {
	return factory{
		name:           "nvml",
		help:           "NVIDIA GPU metrics read through NVML",
		defaultEnabled: true,
		addFlags: func(app FlagAdder) constructor {
			poll := app.Flag("collector.nvml.poll-interval",
				"How often each GPU is read through NVML in the background; scrapes serve the latest reading.").
				Default("1s").Duration()
			gpm := app.Flag("collector.nvml.gpm-interval",
				"Length of the GPM window (two samples this far apart) behind the SM active, occupancy, tensor and DRAM ratios.").
				Default("1s").Duration()
			maxProcs := app.Flag("collector.nvml.max-processes",
				"Most per-process memory series per GPU; the processes using the most memory are kept.").
				Default("16").Int()
			xid := app.Flag("collector.nvml.xid",
				"Watch XID error events through an NVML event set.").
				Default("true").Bool()
			return func(ctx context.Context, logger *slog.Logger) (Collector, error) {
				cfg := nvmlConfig{pollInterval: *poll, gpmInterval: *gpm, maxProcesses: *maxProcs, xid: *xid}
				if err := cfg.validate(); err != nil {
					return nil, err
				}
				return newNVML(ctx, cfg, logger)
			}
		},
	}
}
