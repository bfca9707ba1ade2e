package live

import (
	"errors"
	"fmt"
	"log/slog"

	"github.com/infer-exporter/infer_exporter/internal/config"
	"github.com/infer-exporter/infer_exporter/probe/sessions"
)

// agentReplayArrivals replays the recorded agent jobs of w's trace (replay
// source agent_sessions) through the sessions machinery: each job's turns
// are sessions' turns, measured in the session and agent series.
func agentReplayArrivals(w *config.Workload, opts Options, logger *slog.Logger) (arrivals, error) {
	r := w.Replay
	logger = logger.With("workload", w.Name)
	tr, err := config.ReadAgentTrace(r.Path, r.OnMalformed == "skip")
	if err != nil {
		return arrivals{}, fmt.Errorf("replay: %w", err)
	}
	if tr.SkippedSessions > 0 || tr.SkippedLines > 0 {
		logger.Warn("replay: recorded agent jobs skipped (every line of a job with a malformed line)", "path", r.Path,
			"jobs", tr.SkippedSessions, "lines", tr.SkippedLines, "first", errors.Join(tr.Errors...))
	}
	turns := 0
	for i := range tr.Sessions {
		turns += len(tr.Sessions[i].Turns)
	}
	logger.Info("replay: recorded agent jobs loaded", "path", r.Path, "jobs", len(tr.Sessions), "turns", turns, "speed", r.Speed)
	// A job has one turn in flight at most: with at most max_in_flight
	// jobs alive, no turn finds the in-flight cap full.
	sess, err := sessions.NewRecorded(sessions.RecordedOptions{
		Trace: tr, Speed: r.Speed, MaxActive: w.MaxInFlight, Duration: w.Duration, Logger: logger,
	})
	if err != nil {
		return arrivals{}, fmt.Errorf("replay: %w", err)
	}
	return sessionsArrivals(w, sess, opts), nil
}
