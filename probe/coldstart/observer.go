package coldstart

import (
	"github.com/infer-exporter/infer_exporter/internal/config"
	"github.com/infer-exporter/infer_exporter/probe/observation"
	"github.com/infer-exporter/infer_exporter/probe/workload"
)

// Observer is a workload.Observer that tells the tracker of one target's
// requests as they end: a success's first token, and the failures that say
// the server is down (no connection, a 5xx).
type Observer struct {
	workload.EndObserver
	tracker *Tracker
	target  string
}

// Observer returns the observer of target's workloads.
func (t *Tracker) Observer(target string) *Observer {
	return &Observer{tracker: t, target: target}
}

// Done implements workload.Observer.
func (o *Observer) Done(r *observation.Request) {
	switch r.Outcome {
	case observation.Success:
		at := r.FirstToken
		if at.IsZero() {
			at = r.End // a success without content: its end is its first served byte
		}
		o.tracker.served(o.target, r.Scheduled, at)
	case observation.Disconnected, observation.HTTP5xx:
		o.tracker.failed(o.target)
	}
}

// Dropped implements workload.Observer: a request never sent says nothing
// of the server.
func (o *Observer) Dropped(*observation.Request) {}

// Observe wraps a live.Options.Observe hook (nil: none) so that every
// workload's requests also reach the tracker, through the observer of the
// workload's target, beside what next returns. An observer of next's that
// hears stall scans (Stalls) still does.
func (t *Tracker) Observe(next func(*config.Target, *config.Workload) workload.Observer) func(*config.Target, *config.Workload) workload.Observer {
	return workload.ObserveBeside(next, func(tg *config.Target, _ *config.Workload) workload.Observer {
		return t.Observer(tg.Name)
	})
}
