package bench

import (
	"context"
	"log/slog"
	"time"

	"github.com/infer-exporter/infer_exporter/bench/report"
	"github.com/infer-exporter/infer_exporter/engine"
	"github.com/infer-exporter/infer_exporter/internal/config"
)

// InfoSource reads the targets' engine, version and model.
type InfoSource interface {
	Info(ctx context.Context, targets []config.Target) map[string]report.EngineInfo
}

// ServerInfo reads engine info through the exporter's own engine scraper
// (engine.Scraper: engine detection from metric names and info endpoints),
// from the same snapshots its infer_server_info renders, so that the report
// and the exporter agree. It waits for one scrape of every target, at most
// Wait (default: the longest metrics timeout plus 5 s).
type ServerInfo struct {
	Logger *slog.Logger
	Wait   time.Duration
}

// Info implements InfoSource.
func (s ServerInfo) Info(ctx context.Context, targets []config.Target) map[string]report.EngineInfo {
	sc := engine.NewScraper(s.Logger)
	defer sc.Close()
	if err := sc.ApplyConfig(ctx, &config.Config{Targets: targets}); err != nil {
		return map[string]report.EngineInfo{}
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
		out := engineInfos(sc.Snapshots())
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

// engineInfos is what the scrape snapshots say of each target, by name.
func engineInfos(snaps []engine.Info) map[string]report.EngineInfo {
	out := make(map[string]report.EngineInfo, len(snaps))
	for _, i := range snaps {
		e := report.EngineInfo{Up: i.Up}
		if i.Engine != engine.Unknown {
			e.Engine = i.Engine
		}
		if i.HasInfo {
			e.Engine, e.EngineVersion, e.ServedModel, e.MaxContextLength = i.Engine, i.Version, i.ServedModel, i.MaxContextLength
		}
		out[i.Target] = e
	}
	return out
}
