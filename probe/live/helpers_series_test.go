package live

import (
	"github.com/infer-exporter/infer_exporter/probe/observation"
	"github.com/infer-exporter/infer_exporter/probe/workload"
)

// liveSeries is the runner's live metrics, in tests whose runner has them.
func liveSeries(r *workload.Runner) *Series { return r.Monitor.(*Series) }

// onResult adds fn to the runner's observers, for every request that ended
// or was dropped.
func onResult(r *workload.Runner, fn func(*observation.Request)) {
	r.Observer = workload.Observers{r.Observer, workload.Results(fn)}
}
