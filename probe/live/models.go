package live

import (
	"context"
	"log/slog"

	"github.com/infer-exporter/infer_exporter/probe/client"
	"github.com/infer-exporter/infer_exporter/probe/observation"
	"github.com/infer-exporter/infer_exporter/probe/workload"
)

// modelObserver says in the log, once per target, that its server does not
// serve the configured model: at a workload's first request refused as
// not found (client.ModelRefused) it looks at the server's /v1/models and
// logs one WARN line naming the model and what the server serves, and then
// nothing more until a request of the target succeeds. The series count
// every refusal (infer_probe_http_errors_total); the log says why, once,
// rather than at each request of a workload that sends several a second.
type modelObserver struct {
	workload.EndObserver
	watch  *client.ModelWatch
	client *client.Client
	target *client.Target
	logger *slog.Logger
}

// Done implements workload.Observer.
func (m *modelObserver) Done(o *observation.Request) {
	if o.Outcome == observation.Success {
		m.watch.Served(m.target)
		return
	}
	if !client.ModelRefused(o) || !m.watch.Due(m.target) {
		return
	}
	// The look is a request of its own, off the request goroutine that
	// must not block; Due lets one look run per target at a time.
	status := o.HTTPStatus // o is not kept past the call
	go func() {
		said := m.client.Models(context.Background(), m.target).NotServed(m.target.Model)
		m.watch.Say(m.target, said)
		m.logger.Warn("Requests refused: "+said, "target", m.target.Name, "model", m.target.Model,
			"http_status", status)
	}()
}

// Dropped implements workload.Observer.
func (*modelObserver) Dropped(*observation.Request) {}
