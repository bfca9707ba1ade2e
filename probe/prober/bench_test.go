package prober

import (
	"fmt"
	"net/netip"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/infer-exporter/infer_exporter/internal/config"
	"github.com/infer-exporter/infer_exporter/probe/observation"
)

func benchPolicy() *policy {
	return newPolicy(&config.Config{
		Targets: []config.Target{{Name: "a", URL: "http://127.0.0.1:8000"}},
		Probe: config.ProbeSettings{Allow: config.ProbeAllow{
			Hosts: []string{"*.svc.cluster.local", "gpu-*.example.com"},
			CIDRs: []string{"10.0.0.0/8", "192.168.0.0/16"},
		}},
	})
}

// BenchmarkPolicyCheck is the allow-list cost of one scrape: strict URL
// parse and host rules.
func BenchmarkPolicyCheck(b *testing.B) {
	pol := benchPolicy()
	b.ReportAllocs()
	for b.Loop() {
		if _, r := pol.check("http://vllm-0.inference.svc.cluster.local:8000/v1"); r != nil {
			b.Fatal(r)
		}
	}
}

// BenchmarkAllowAddr is the connect-time check of one address.
func BenchmarkAllowAddr(b *testing.B) {
	pol := benchPolicy()
	t, _ := pol.check("http://vllm-0.inference.svc.cluster.local:8000/v1")
	a := netip.MustParseAddr("10.1.2.3")
	b.ReportAllocs()
	for b.Loop() {
		if r := pol.allowAddr(t, a); r != nil {
			b.Fatal(r)
		}
	}
}

// BenchmarkResultCollect renders the largest probe: 100 requests of 32
// tokens and 20 checks.
func BenchmarkResultCollect(b *testing.B) {
	base := time.Now()
	res := &result{requests: make([]observation.Request, config.MaxModuleRequests), checks: make([]checkResult, config.MaxKnownAnswers)}
	for i := range res.requests {
		o := &res.requests[i]
		o.Scheduled, o.Sent = base, base
		for k := range 32 {
			o.TokenTimes = append(o.TokenTimes, base.Add(time.Duration(100+k*20)*time.Millisecond))
		}
		o.FirstToken, o.End = o.TokenTimes[0], o.TokenTimes[31]
		o.Outcome, o.HTTPStatus, o.OutputTokens = observation.Success, 200, 32
	}
	b.ReportAllocs()
	for b.Loop() {
		reg := prometheus.NewRegistry()
		reg.MustRegister(resultCollector{res})
		if _, err := reg.Gather(); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkHistoryHTML renders a full landing-page history.
func BenchmarkHistoryHTML(b *testing.B) {
	h := NewHistory(DefaultHistoryLimit)
	for i := range DefaultHistoryLimit {
		h.add(historyEntry{at: time.Now(), module: "chat", target: fmt.Sprintf("http://vllm-%d:8000", i), debug: "x"})
	}
	b.ReportAllocs()
	for b.Loop() {
		_ = h.HTML()
	}
}

// BenchmarkProbe is a whole /probe scrape of one 4-token request against
// the instant simulator, connection setup included: the exporter's own
// overhead per probe, beside the server's time.
func BenchmarkProbe(b *testing.B) {
	url, _, _ := startSim(b, instantSim())
	e := newEnv(b, loadConfig(b, `targets:
  - {name: sim, url: {{URL}}, model: sim-model}
modules:
  one:
    prompt: {input_tokens: {dist: fixed, mean: 16}, output_tokens: {dist: fixed, mean: 4}}
    sampling: {ignore_eos: true}
probe:
  max_requests_per_second: 1000
`, url), nil)
	e.h.opts.History = nil
	b.ReportAllocs()
	for b.Loop() {
		if _, body := e.scrape(b, "one", url, "10", false); len(body) == 0 {
			b.Fatal("empty answer")
		}
	}
}
