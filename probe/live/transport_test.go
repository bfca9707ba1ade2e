package live

import (
	"context"
	"log/slog"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/infer-exporter/infer_exporter/internal/config"
	"github.com/infer-exporter/infer_exporter/probe/client"
)

// TestClientInfoSaysTransport: infer_probe_client_info names each
// workload's transport, by --probe.transport (Options.Transport).
func TestClientInfoSaysTransport(t *testing.T) {
	c, err := config.Parse([]byte(`
targets:
  - {name: t, url: "http://127.0.0.1:1", model: m}
workloads:
  - name: w
    target: t
    arrival: {process: constant, rate: 1}
`), filepath.Join(t.TempDir(), "c.yml"))
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct{ transport, want string }{
		{"", client.WireH1}, // the default
		{client.WireH1, client.WireH1},
		{client.WireNetHTTP, client.WireNetHTTP},
	} {
		reg := prometheus.NewRegistry()
		_, clients, err := Build(context.Background(), c, NewMetrics(reg), Options{DegradedLag: time.Second, Transport: tc.transport}, slog.New(slog.DiscardHandler))
		for _, cl := range clients {
			cl.Close()
		}
		if err != nil {
			t.Fatal(err)
		}
		want := `
# HELP infer_probe_client_info 1; transport: the HTTP client that sends the workload's requests, h1 (the minimal HTTP/1.1 client) or net/http.
# TYPE infer_probe_client_info gauge
infer_probe_client_info{model="m",target="t",transport="` + tc.want + `",workload="w"} 1
`
		if err := testutil.GatherAndCompare(reg, strings.NewReader(want), "infer_probe_client_info"); err != nil {
			t.Errorf("transport %q: %v", tc.transport, err)
		}
	}
}
