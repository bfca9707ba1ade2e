package main

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"slices"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/infer-exporter/infer_exporter/internal/config"
	"github.com/infer-exporter/infer_exporter/probe/otlp"
)

var (
	otlpRepeats  = 3
	otlpInterval = time.Second
)

// otlpScenario measures what the OTLP push adds to the client's CPU per
// streamed chunk: the bias scenario's load (200 req/s x 64 tokens, one
// core, no ground-truth capture) run in rounds of four, alternately, so
// that drift of the machine over the session falls on all: without the
// OTLP observer; with its metrics alone; with metrics and spans at the
// default head ratio (traceparent on every request, spans for the chosen
// ones); and with spans at ratio 1.0 (a span for every request). The push
// goes every -otlp.interval to a receiver in this process that reads each
// body and answers 200; its CPU is counted with the client's, so the
// figures are upper bounds.
func otlpScenario(d time.Duration) {
	url, stop := startSimulator(harnessSimulator())
	defer stop()
	recv := startDiscardReceiver()
	defer recv.close()
	measure(url, run{rate: 50, tokens: 64, duration: 2 * time.Second}) // warm the pool

	target := config.Target{Name: "sim", URL: url, Flavor: config.FlavorOpenAIChat, Model: "sim-model"}
	wl := config.Workload{Name: "harness"}
	arms := []struct {
		name  string
		spans bool
		ratio float64
	}{
		{"metrics", false, 0},
		{fmt.Sprintf("spans %g", otlp.DefaultSampleRatio), true, otlp.DefaultSampleRatio},
		{"spans 1.0", true, 1},
	}
	without := make([]time.Duration, 0, otlpRepeats)
	with := make([][]time.Duration, len(arms))
	pushes, failures, spans, spanExports := make([]float64, len(arms)), make([]float64, len(arms)), make([]float64, len(arms)), make([]float64, len(arms))
	sent := make([]int, len(arms))
	for range otlpRepeats {
		plain := measure(url, run{rate: 200, tokens: 64, duration: d})
		without = append(without, plain.cpu/time.Duration(max(plain.chunks, 1)))
		for i, arm := range arms {
			// A pusher per run, so that its reader and batcher run only
			// while it is measured; its last push, at Shutdown, falls
			// outside.
			reg := prometheus.NewRegistry()
			ratio := arm.ratio
			pusher, err := otlp.New(context.Background(), otlp.Options{
				Endpoint: recv.url, Interval: otlpInterval, Timeout: 5 * time.Second, Version: "loadharness", Registerer: reg,
				NoTraces: !arm.spans, SampleRatio: &ratio,
			})
			if err != nil {
				panic(err)
			}
			res := measure(url, run{rate: 200, tokens: 64, duration: d, observer: pusher.Workload(&target, &wl), tracer: pusher.Tracer()})
			with[i] = append(with[i], res.cpu/time.Duration(max(res.chunks, 1)))
			sent[i] += res.sent
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			_ = pusher.Shutdown(ctx)
			cancel()
			pushes[i] += counter(reg, "infer_exporter_otlp_exports_total")
			failures[i] += counter(reg, "infer_exporter_otlp_export_failures_total") + counter(reg, "infer_exporter_otlp_span_export_failures_total")
			spans[i] += counter(reg, "infer_exporter_otlp_spans_total")
			spanExports[i] += counter(reg, "infer_exporter_otlp_span_exports_total")
		}
	}
	fmt.Printf("## otlp: client CPU per streamed chunk without and with the OTLP push (every %s), 200 req/s x 64 tokens, one core\n\n", otlpInterval)
	header, rule := "| run | without |", "| --- | --- |"
	for _, arm := range arms {
		header += " " + arm.name + " |"
		rule += " --- |"
	}
	fmt.Println(header)
	fmt.Println(rule)
	row := func(label string, w time.Duration, pick func(int) time.Duration) {
		line := fmt.Sprintf("| %s | %s |", label, us(w))
		for i := range arms {
			line += " " + us(pick(i)) + " |"
		}
		fmt.Println(line)
	}
	for r := range without {
		row(fmt.Sprint(r+1), without[r], func(i int) time.Duration { return with[i][r] })
	}
	medians := make([]time.Duration, len(arms))
	for i := range arms {
		medians[i] = median(with[i])
	}
	mw := median(without)
	row("median", mw, func(i int) time.Duration { return medians[i] })
	fmt.Println()
	ratio := func(a, b time.Duration) string {
		return fmt.Sprintf("%.3f (%+.1f%%)", float64(a)/float64(b), 100*(float64(a)/float64(b)-1))
	}
	fmt.Printf("Medians: metrics / without %s; ", ratio(medians[0], mw))
	for i := 1; i < len(arms); i++ {
		fmt.Printf("%s / metrics %s, / without %s; ", arms[i].name, ratio(medians[i], medians[0]), ratio(medians[i], mw))
	}
	fmt.Println()
	for i, arm := range arms {
		fmt.Printf("%s: %d requests sent, metric pushes %.0f, span exports %.0f, spans %.0f, failed %.0f.\n", arm.name, sent[i], pushes[i], spanExports[i], spans[i], failures[i])
	}
	fmt.Printf("Received %d bodies (%d bytes).\n\n", recv.requests.Load(), recv.bytes.Load())
}

func median(ds []time.Duration) time.Duration {
	s := slices.Clone(ds)
	slices.Sort(s)
	return s[len(s)/2]
}

// counter reads one counter of reg.
func counter(reg *prometheus.Registry, name string) float64 {
	mfs, err := reg.Gather()
	if err != nil {
		panic(err)
	}
	for _, mf := range mfs {
		if mf.GetName() == name {
			v := 0.0
			for _, m := range mf.GetMetric() {
				v += m.GetCounter().GetValue()
			}
			return v
		}
	}
	return 0
}

// discardReceiver is an OTLP/HTTP endpoint that reads each push and
// answers an empty success.
type discardReceiver struct {
	url             string
	srv             *http.Server
	requests, bytes atomic.Int64
}

func startDiscardReceiver() *discardReceiver {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		panic(err)
	}
	r := &discardReceiver{url: "http://" + ln.Addr().String() + "/v1/metrics"}
	r.srv = &http.Server{ReadHeaderTimeout: 5 * time.Second, Handler: http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		n, _ := io.Copy(io.Discard, io.LimitReader(req.Body, 64<<20))
		r.requests.Add(1)
		r.bytes.Add(n)
		// An empty ExportMetricsServiceResponse: full success.
		w.Header().Set("Content-Type", "application/x-protobuf")
		w.WriteHeader(http.StatusOK)
	})}
	go func() { _ = r.srv.Serve(ln) }()
	return r
}

func (r *discardReceiver) close() { _ = r.srv.Close() }
