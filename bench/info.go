package bench

import (
	"context"
	"log/slog"
	"strconv"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/infer-exporter/infer_exporter/collector"
	"github.com/infer-exporter/infer_exporter/internal/config"
)

// TargetInfo is what the report records of a target: its configuration and
// what its info endpoints said.
type TargetInfo struct {
	Name            string `json:"name"`
	URL             string `json:"url"`
	Flavor          string `json:"flavor"`
	ConfiguredModel string `json:"configured_model"`
	EngineInfo
}

// EngineInfo is what a server says about itself. Empty fields are unknown.
type EngineInfo struct {
	Engine           string `json:"engine"`
	EngineVersion    string `json:"engine_version"`
	ServedModel      string `json:"served_model"`
	MaxContextLength int    `json:"max_context_length,omitempty"`
	// Up is whether the server's metrics (or, for Ollama, its info
	// endpoint) answered.
	Up bool `json:"up"`
}

// InfoSource reads the targets' engine, version and model.
type InfoSource interface {
	Info(ctx context.Context, targets []config.Target) map[string]EngineInfo
}

// ServerInfo reads engine info through the exporter's own server-metrics
// collector (collector.ServerMetrics: engine detection from metric names
// and info endpoints), so that the report and the exporter's
// infer_server_info agree. It waits for one scrape of every target, at most
// Wait (default: the longest metrics timeout plus 5 s).
type ServerInfo struct {
	Logger *slog.Logger
	Wait   time.Duration
}

// Info implements InfoSource.
func (s ServerInfo) Info(ctx context.Context, targets []config.Target) map[string]EngineInfo {
	out := map[string]EngineInfo{}
	sm := collector.NewServerMetrics(s.Logger)
	defer sm.Close()
	if err := sm.ApplyConfig(ctx, &config.Config{Targets: targets}); err != nil {
		return out
	}
	reg := prometheus.NewRegistry()
	if err := reg.Register(sm); err != nil {
		return out
	}
	wait := s.Wait
	if wait <= 0 {
		for _, t := range targets {
			wait = max(wait, t.Metrics.Timeout)
		}
		wait += 5 * time.Second
	}
	deadline := time.Now().Add(wait)
	want := 0
	for _, t := range targets {
		if t.Metrics.Engine != config.ServerEngineNone {
			want++
		}
	}
	for {
		out = map[string]EngineInfo{}
		mfs, _ := reg.Gather()
		for _, mf := range mfs {
			for _, m := range mf.GetMetric() {
				l := labelMap(m)
				e := out[l["target"]]
				switch mf.GetName() {
				case "infer_server_up":
					e.Up = m.GetGauge().GetValue() == 1
					if eng := l["engine"]; eng != "unknown" {
						e.Engine = eng
					}
				case "infer_server_info":
					e.Engine, e.EngineVersion, e.ServedModel = l["engine"], l["version"], l["model"]
					e.MaxContextLength, _ = strconv.Atoi(l["max_context_length"])
				default:
					continue
				}
				out[l["target"]] = e
			}
		}
		if len(out) >= want || time.Now().After(deadline) {
			return out
		}
		select {
		case <-ctx.Done():
			return out
		case <-time.After(50 * time.Millisecond):
		}
	}
}
