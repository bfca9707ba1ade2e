package config

import (
	"context"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// Applier starts what a configuration describes. It returns an error, and
// keeps what it runs, when the configuration cannot be applied.
type Applier interface {
	Apply(ctx context.Context, c *Config) error
}

// Appliers applies a configuration to several parts in order, stopping at
// the first that refuses it.
type Appliers []Applier

// Apply implements Applier.
func (a Appliers) Apply(ctx context.Context, c *Config) error {
	for _, ap := range a {
		if err := ap.Apply(ctx, c); err != nil {
			return err
		}
	}
	return nil
}

// Reloader loads a configuration file and hands it to an Applier, keeping the
// last good configuration when a reload fails.
type Reloader struct {
	load    func() (*Config, error)
	applier Applier
	logger  *slog.Logger

	mu      sync.Mutex // serialises reloads
	current atomic.Pointer[Config]

	success   prometheus.Gauge
	timestamp prometheus.Gauge
}

// NewReloader returns a reloader; load reads the configuration (LoadFile with
// the --config.file path, or the built-in demo configuration).
func NewReloader(load func() (*Config, error), applier Applier, reg prometheus.Registerer, logger *slog.Logger) *Reloader {
	r := &Reloader{
		load: load, applier: applier, logger: logger,
		success: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "infer_exporter_config_last_reload_successful",
			Help: "1 if the last configuration load or reload succeeded, else 0 (the previous configuration keeps running).",
		}),
		timestamp: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "infer_exporter_config_last_reload_success_timestamp_seconds",
			Help: "Unix time of the last successful configuration load.",
		}),
	}
	reg.MustRegister(r.success, r.timestamp)
	return r
}

// Reload loads and applies the configuration. On error the running
// configuration is left untouched.
func (r *Reloader) Reload(ctx context.Context) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	c, err := r.load()
	if err == nil {
		err = r.applier.Apply(ctx, c)
	}
	if err != nil {
		r.success.Set(0)
		if r.current.Load() == nil {
			r.logger.Error("configuration not loaded; no previous configuration is running", "err", err)
		} else {
			r.logger.Error("configuration not loaded; the previous one keeps running", "err", err)
		}
		return err
	}
	r.current.Store(c)
	r.success.Set(1)
	r.timestamp.Set(float64(time.Now().Unix()))
	r.logger.Info("configuration loaded", "targets", len(c.Targets), "workloads", len(c.Workloads))
	return nil
}

// Current returns the configuration in force, or nil before the first
// successful load.
// It never waits for a reload in progress, so /probe and /-/ready stay
// responsive while workloads calibrate.
func (r *Reloader) Current() *Config {
	return r.current.Load()
}
