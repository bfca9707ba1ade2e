package live

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/infer-exporter/infer_exporter/internal/config"
	"github.com/infer-exporter/infer_exporter/internal/simulator/simulatortest"
	"github.com/infer-exporter/infer_exporter/probe/client"
	"github.com/infer-exporter/infer_exporter/probe/observation"
)

// notServedLine is the sentence the log says of a model the simulator
// (which serves sim-model) does not serve.
const notServedLine = `the server does not serve model \"wrong-model\"; it serves: sim-model`

// TestModelNotServedSaidOnce: two workloads of one target whose model the
// server does not serve: of their many refused requests the log says so
// once, naming the model and the models served.
func TestModelNotServedSaidOnce(t *testing.T) {
	url, _ := simulatortest.StartTest(t, simulatortest.InstantConfig())
	c, err := config.Parse(fmt.Appendf(nil, `targets:
  - {name: sim, url: %q, model: wrong-model}
workloads:
  - {name: a, target: sim, arrival: {process: constant, rate: 50}, prompt: {input_tokens: {dist: fixed, mean: 8}, output_tokens: {dist: fixed, mean: 4}}}
  - {name: b, target: sim, arrival: {process: constant, rate: 50}, prompt: {input_tokens: {dist: fixed, mean: 8}, output_tokens: {dist: fixed, mean: 4}}}
`, url), "wrong-model.yml")
	if err != nil {
		t.Fatal(err)
	}
	logs := &syncBuffer{}
	metrics := NewMetrics(prometheus.NewRegistry())
	m := NewManager(metrics, Options{}, slog.New(slog.NewTextHandler(logs, nil)))
	if err := m.Apply(context.Background(), c); err != nil {
		t.Fatal(err)
	}
	refused := func(w string) float64 {
		return testutil.ToFloat64(metrics.requests.WithLabelValues("sim", "wrong-model", w, string(observation.HTTP4xx)))
	}
	deadline := time.Now().Add(30 * time.Second)
	for (refused("a") < 20 || refused("b") < 20 || !strings.Contains(logs.String(), notServedLine)) && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond)
	}
	m.Stop()
	out := logs.String()
	if n := strings.Count(out, notServedLine); n != 1 || refused("a") < 20 || refused("b") < 20 {
		t.Fatalf("said %d times over %v and %v refused requests, want once:\n%s", n, refused("a"), refused("b"), out)
	}
	if !strings.Contains(out, "level=WARN") || !strings.Contains(out, "/v1/models") {
		t.Errorf("the line is not a warning naming where the list came from:\n%s", out)
	}
}

// TestModelObserverSaysAgainAfterSuccess: a workload's observer says the
// refusal once per story: many refusals, one line; a success ends the
// story, and the next refusals say it once more.
func TestModelObserverSaysAgainAfterSuccess(t *testing.T) {
	url, _ := simulatortest.StartTest(t, simulatortest.InstantConfig())
	cl := client.New(client.Options{})
	defer cl.Close()
	logs := &syncBuffer{}
	obs := &modelObserver{watch: &client.ModelWatch{}, client: cl, target: &client.Target{Name: "sim", BaseURL: url, Model: "wrong-model"},
		logger: slog.New(slog.NewTextHandler(logs, nil))}
	refusedReq := &observation.Request{Outcome: observation.HTTP4xx, HTTPStatus: 404}
	// waitSaid waits for the n-th line, then lets more refusals come.
	waitSaid := func(n int) {
		t.Helper()
		for range 30 {
			obs.Done(refusedReq)
		}
		deadline := time.Now().Add(20 * time.Second)
		for strings.Count(logs.String(), notServedLine) < n && time.Now().Before(deadline) {
			obs.Done(refusedReq)
			time.Sleep(5 * time.Millisecond)
		}
		for range 30 {
			obs.Done(refusedReq)
		}
	}
	for _, step := range []struct {
		name    string
		success bool
		want    int
	}{
		{"refused", false, 1},
		{"refused still", false, 1},
		{"refused after a success", true, 2},
	} {
		if step.success {
			obs.Done(&observation.Request{Outcome: observation.Success, HTTPStatus: 200})
		}
		waitSaid(step.want)
		if n := strings.Count(logs.String(), notServedLine); n != step.want {
			t.Fatalf("%s: said %d times, want %d:\n%s", step.name, n, step.want, logs.String())
		}
	}
}
