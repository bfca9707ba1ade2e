package main

import (
	"fmt"
	"html"
	"net/http"
	"strings"

	"github.com/prometheus/common/version"
	"github.com/prometheus/exporter-toolkit/web"

	"github.com/infer-exporter/infer_exporter/collector"
	"github.com/infer-exporter/infer_exporter/internal/shadow"
	"github.com/infer-exporter/infer_exporter/probe/live"
	"github.com/infer-exporter/infer_exporter/probe/prober"
)

// landingPage serves the exporter-toolkit landing page, with the collectors'
// and workloads' state below the links.
// workloadLister lists the running configuration's workloads and their state.
type workloadLister interface {
	Workloads() []live.WorkloadStatus
}

func landingPage(f *flags, cols *collector.Set, workloads workloadLister, history *prober.History) (http.Handler, error) {
	status := func() string {
		var b strings.Builder
		b.WriteString("<h2>Collectors</h2><p>" + html.EscapeString(buildNote()) + "</p><ul>")
		for _, s := range cols.Status() {
			state := "disabled"
			switch {
			case s.Enabled && s.Available:
				state = "enabled"
			case s.Enabled:
				state = "unavailable: " + s.Reason
			}
			fmt.Fprintf(&b, "<li>%s: %s</li>", html.EscapeString(s.Name), html.EscapeString(state))
		}
		b.WriteString("</ul><h2>Workloads</h2><ul>")
		ws := workloads.Workloads()
		for _, w := range ws {
			state := w.State
			if w.Reason != "" {
				state += ": " + w.Reason
			}
			// A target URL holds no credentials (the config refuses them),
			// so it can be shown.
			fmt.Fprintf(&b, "<li>%s &rarr; %s <code>%s</code> (%s, model %s): <b>%s</b></li>", html.EscapeString(w.Name),
				html.EscapeString(w.Target), html.EscapeString(w.URL), html.EscapeString(w.Flavor), html.EscapeString(w.Model), html.EscapeString(state))
		}
		if len(ws) == 0 {
			b.WriteString("<li>none (no configuration loaded yet, or it has no workloads)</li>")
		}
		b.WriteString("</ul>")
		b.WriteString(history.HTML()) // with its own heading
		return b.String()
	}
	cfg := func(extra string) web.LandingConfig {
		return web.LandingConfig{
			Name:        exporterName,
			Description: "Client-side latency and throughput of LLM inference servers, with server and GPU metrics.",
			Version:     version.Info(),
			ExtraHTML:   extra,
			// No /debug/pprof handlers are served, so no links to them.
			Profiling: "false",
			Links: []web.LandingLinks{
				{Address: f.metricsPath, Text: "Metrics"},
				{Address: "/-/healthy", Text: "Health"},
				{Address: "/-/ready", Text: "Readiness"},
				{Address: prober.LogsPath, Text: "Recent probes"},
			},
		}
	}
	if _, err := web.NewLandingPage(cfg("")); err != nil {
		return nil, err
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/" {
			http.NotFound(w, r)
			return
		}
		// exporter-toolkit renders a static page; building it on each load
		// (a small template) puts the current state inside it.
		page, err := web.NewLandingPage(cfg(status()))
		if err != nil {
			http.Error(w, err.Error(), http.StatusInternalServerError)
			return
		}
		page.ServeHTTP(w, r)
	}), nil
}

// buildNote says whether this binary can read GPUs: NVML needs cgo, and a
// CGO_ENABLED=0 build leaves the collector out.
func buildNote() string {
	if collector.NVMLBuiltIn {
		return "NVML GPU collector: built in."
	}
	return "NVML GPU collector: not built in (this binary was built without cgo)."
}

// shadowLanding is the shadow proxy's page on its metrics listener: what
// it forwards to, where it stores, and whether it keeps users' text.
func shadowLanding(w http.ResponseWriter, metricsPath string, c *shadow.Config) {
	redact := "on: message text is replaced by filler before it is stored"
	if !c.Redact {
		redact = "<b>off</b>: prompts are stored as they came (--no-shadow.redact)"
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	fmt.Fprintf(w, `<!DOCTYPE html>
<html><head><title>%[1]s shadow</title></head><body>
<h1>%[1]s shadow</h1>
<p>A capture proxy: requests to <code>%[2]s</code> go to <code>%[3]s</code> unchanged; a sample of generation requests is stored for replay.</p>
<ul>
<li>Store: <code>%[4]s</code></li>
<li>Sample: %[5]g of generation requests</li>
<li>Redaction: %[6]s</li>
</ul>
<p><a href="%[7]s">Metrics</a> &middot; <a href="/-/healthy">Health</a></p>
</body></html>
`, exporterName, html.EscapeString(c.ListenAddress), html.EscapeString(c.Upstream), html.EscapeString(c.StoreDir),
		c.Sample, redact, html.EscapeString(metricsPath))
}
