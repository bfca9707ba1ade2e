package prober

import (
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/infer-exporter/infer_exporter/internal/simulator"
	"github.com/infer-exporter/infer_exporter/probe/client"
)

// TestProbeMeasuresAsTheWorkloads: /probe sends through the transport the
// live workloads get for the same --probe.transport (client.Options.Wire),
// not one of its own, and its requests still pass the guard.
func TestProbeMeasuresAsTheWorkloads(t *testing.T) {
	url, _, rec := startSim(t, instantSim())
	for _, wire := range []string{"", client.WireH1, client.WireNetHTTP} {
		t.Run("wire="+wire, func(t *testing.T) {
			workload := client.New(client.Options{Wire: wire})
			defer workload.Close()
			want := workload.TransportName(&client.Target{BaseURL: url})
			e := newEnv(t, loadConfig(t, simConfig, url), nil)
			e.h.opts.Transport = wire
			before := rec.count()
			code, body := e.scrape(t, "chat", url, "10", true)
			if code != http.StatusOK {
				t.Fatalf("status %d: %s", code, body)
			}
			got := ""
			for line := range strings.Lines(body) {
				if strings.Contains(line, "msg=Client ") {
					_, got, _ = strings.Cut(strings.TrimSpace(line), " transport=")
				}
			}
			if got != want {
				t.Errorf("the probe sent through %q, the workloads through %q:\n%s", got, want, body)
			}
			if got := rec.count() - before; got != 3 {
				t.Errorf("the server saw %d requests, want 3", got)
			}
			if len(e.connects.list()) == 0 {
				t.Errorf("no connect went through the guard")
			}
		})
	}
}

// TestProbeConnectionsDieWithIt: when a probe ends, every connection it
// opened is closed, on h1 as on net/http: a probe leaves no idle
// connection to a target behind it.
func TestProbeConnectionsDieWithIt(t *testing.T) {
	sim, err := simulator.New(instantSim(), slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatalf("simulator: %v", err)
	}
	defer sim.Close()
	var (
		mu   sync.Mutex
		open = map[net.Conn]bool{}
		seen int
	)
	srv := httptest.NewUnstartedServer(sim.Handler())
	srv.Config.ConnState = func(c net.Conn, s http.ConnState) {
		mu.Lock()
		defer mu.Unlock()
		switch s {
		case http.StateNew:
			open[c] = true
			seen++
		case http.StateClosed, http.StateHijacked:
			delete(open, c)
		}
	}
	srv.Start()
	defer srv.Close()
	for _, wire := range []string{client.WireH1, client.WireNetHTTP} {
		t.Run("wire="+wire, func(t *testing.T) {
			e := newEnv(t, loadConfig(t, simConfig, srv.URL), nil)
			e.h.opts.Transport = wire
			if code, body := e.scrape(t, "chat", srv.URL, "10", false); code != http.StatusOK || !strings.Contains(body, "probe_success 1") {
				t.Fatalf("status %d: %s", code, body)
			}
			deadline := time.Now().Add(5 * time.Second)
			for {
				mu.Lock()
				n, s := len(open), seen
				mu.Unlock()
				if s == 0 {
					t.Fatal("the server saw no connection")
				}
				if n == 0 {
					break
				}
				if time.Now().After(deadline) {
					t.Fatalf("%d of the probe's connections still open after it ended", n)
				}
				time.Sleep(10 * time.Millisecond)
			}
		})
	}
}
