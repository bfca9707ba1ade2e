package workload

import "github.com/infer-exporter/infer_exporter/probe/observation"

// series is the runner's live metrics, in tests whose runner has them.
func (r *Runner) series() *Series { return r.Monitor.(*Series) }

// onResult adds fn to the runner's observers, for every request that ended
// or was dropped.
func (r *Runner) onResult(fn func(*observation.Request)) {
	r.Observer = Observers{r.Observer, Results(fn)}
}
