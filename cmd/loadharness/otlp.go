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
// core, no ground-truth capture) run in pairs, without and with the OTLP
// observer, alternately, so that drift of the machine over the session
// falls on both. The push goes every -otlp.interval to a receiver in this
// process that reads each body and answers 200; its CPU is counted with the
// client's, so the figure is an upper bound.
func otlpScenario(d time.Duration) {
	url, stop := startSimulator(harnessSimulator())
	defer stop()
	recv := startDiscardReceiver()
	defer recv.close()
	measure(url, run{rate: 50, tokens: 64, duration: 2 * time.Second}) // warm the pool

	target := config.Target{Name: "sim", URL: url, Flavor: config.FlavorOpenAIChat, Model: "sim-model"}
	wl := config.Workload{Name: "harness"}
	var without, with []time.Duration
	var pushes, failures float64
	for range otlpRepeats {
		plain := measure(url, run{rate: 200, tokens: 64, duration: d})
		without = append(without, plain.cpu/time.Duration(max(plain.chunks, 1)))

		// A pusher per run, so that its reader runs only while it is
		// measured; its last push, at Shutdown, falls outside.
		reg := prometheus.NewRegistry()
		pusher, err := otlp.New(context.Background(), otlp.Options{
			Endpoint: recv.url, Interval: otlpInterval, Timeout: 5 * time.Second, Version: "loadharness", Registerer: reg,
		})
		if err != nil {
			panic(err)
		}
		res := measure(url, run{rate: 200, tokens: 64, duration: d, observer: pusher.Workload(&target, &wl)})
		with = append(with, res.cpu/time.Duration(max(res.chunks, 1)))
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		_ = pusher.Shutdown(ctx)
		cancel()
		pushes += counter(reg, "infer_exporter_otlp_exports_total")
		failures += counter(reg, "infer_exporter_otlp_export_failures_total")
	}
	mw, mo := median(without), median(with)
	fmt.Printf("## otlp: client CPU per streamed chunk without and with the OTLP push (every %s), 200 req/s x 64 tokens, one core\n\n", otlpInterval)
	fmt.Println("| run | without | with |")
	fmt.Println("| --- | --- | --- |")
	for i := range without {
		fmt.Printf("| %d | %s | %s |\n", i+1, us(without[i]), us(with[i]))
	}
	fmt.Printf("| median | %s | %s |\n\n", us(mw), us(mo))
	fmt.Printf("With / without (medians): %.3f (%+.1f%%); pushes %.0f, failed %.0f, received %d (%d bytes).\n\n",
		float64(mo)/float64(mw), 100*(float64(mo)/float64(mw)-1), pushes, failures, recv.requests.Load(), recv.bytes.Load())
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
