package main

import (
	"fmt"
	"html"
	"net/http"
	"strings"

	"github.com/prometheus/common/version"
	"github.com/prometheus/exporter-toolkit/web"

	"github.com/infer-exporter/infer_exporter/collector"
	"github.com/infer-exporter/infer_exporter/internal/config"
	"github.com/infer-exporter/infer_exporter/probe/prober"
)

// landingPage serves the exporter-toolkit landing page, with the collectors'
// and workloads' state below the links.
func landingPage(f *flags, cols *collector.Set, reloader *config.Reloader, history *prober.History) (http.Handler, error) {
	status := func() string {
		var b strings.Builder
		b.WriteString("<h2>Collectors</h2><ul>")
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
		if c := reloader.Current(); c != nil {
			for _, w := range c.Workloads {
				t, _ := c.Target(w.Target)
				// A target URL holds no credentials (the config refuses them),
				// so it can be shown.
				fmt.Fprintf(&b, "<li>%s &rarr; %s <code>%s</code> (%s, model %s)</li>", html.EscapeString(w.Name),
					html.EscapeString(t.Name), html.EscapeString(t.URL), html.EscapeString(string(t.Flavor)), html.EscapeString(t.Model))
			}
		}
		b.WriteString("</ul><h2>Recent probes</h2>")
		b.WriteString(history.HTML())
		return b.String()
	}
	page, err := web.NewLandingPage(web.LandingConfig{
		Name:        exporterName,
		Description: "Client-side latency and throughput of LLM inference servers, with server and GPU metrics. " + buildNote(),
		Version:     version.Info(),
		Links: []web.LandingLinks{
			{Address: f.metricsPath, Text: "Metrics"},
			{Address: "/-/healthy", Text: "Health"},
			{Address: "/-/ready", Text: "Readiness"},
			{Address: prober.LogsPath, Text: "Recent probes"},
		},
	})
	if err != nil {
		return nil, err
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/" {
			http.NotFound(w, r)
			return
		}
		// The landing page is static; the state is appended after it so that
		// it is current on every load.
		page.ServeHTTP(w, r)
		fmt.Fprint(w, status())
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
