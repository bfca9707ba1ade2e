package bench

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/infer-exporter/infer_exporter/internal/config"
	"github.com/infer-exporter/infer_exporter/probe/live"
	"github.com/infer-exporter/infer_exporter/probe/workload"
)

// serveLive serves, while the bench runs, the live infer_probe_* series
// of its repeats on addr at /metrics: the same series as the exporter's
// workloads (probe/live.Series), labelled by target, model and, as the
// workload, the cell's load and shape. A shard of a split run on
// Kubernetes is scraped through a PodMonitor, so the fleet sees the test
// live. It sets opts.Live and returns the function that stops the server.
func serveLive(ctx context.Context, addr string, opts *Options, logger *slog.Logger) (func(), error) {
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	metrics := live.NewMetrics(reg)
	var mu sync.Mutex
	series := map[string]*live.Series{}
	opts.Live = func(t *config.Target, cell string) (workload.Observer, workload.Monitor) {
		// The cell key is target/load/shape; the workload label is the
		// load and shape (bounded by the matrix).
		name := cell
		if _, rest, ok := strings.Cut(cell, "/"); ok {
			name = rest
		}
		mu.Lock()
		defer mu.Unlock()
		s, ok := series[t.Name+"\x00"+name]
		if !ok {
			s = metrics.Series(t.Name, t.Model, name, config.SLO{})
			series[t.Name+"\x00"+name] = s
		}
		return s, s
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, err
	}
	mux := http.NewServeMux()
	mux.Handle("/metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{Registry: reg, EnableOpenMetrics: true}))
	mux.HandleFunc("/-/healthy", func(w http.ResponseWriter, _ *http.Request) { fmt.Fprintln(w, "Healthy") })
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	go func() {
		if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			logger.Error("live metrics", "err", err)
		}
	}()
	logger.Info("live metrics", "address", ln.Addr().String())
	return func() {
		c, cancel := context.WithTimeout(context.WithoutCancel(ctx), 2*time.Second)
		defer cancel()
		_ = srv.Shutdown(c)
	}, nil
}
