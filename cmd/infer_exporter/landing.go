package main

import (
	"fmt"
	"html"
	"net/http"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/common/version"
	"github.com/prometheus/exporter-toolkit/web"

	"github.com/infer-exporter/infer_exporter/collector"
	"github.com/infer-exporter/infer_exporter/engine"
	"github.com/infer-exporter/infer_exporter/internal/shadow"
	"github.com/infer-exporter/infer_exporter/probe/live"
	"github.com/infer-exporter/infer_exporter/probe/prober"
	"github.com/infer-exporter/infer_exporter/probe/workload"
)

// landingPage serves the exporter-toolkit landing page, with the collectors'
// and workloads' state below the links.
// workloadLister lists the running configuration's workloads and their state.
type workloadLister interface {
	Workloads() []live.WorkloadStatus
}

// landingSources is what the landing page reads besides the workloads:
// their last minute, the live series (for the degraded flag) and the
// engine scraper's last readings of each target.
type landingSources struct {
	recent  *recentStats
	gather  prometheus.Gatherer
	servers interface{ Snapshots() []engine.Info }
	// degradedLag is --probe.degraded-lag, the bound a degraded
	// workload's figures are set against.
	degradedLag time.Duration
}

func landingPage(f *flags, cols *collector.Set, workloads workloadLister, history *prober.History, src landingSources) (http.Handler, error) {
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
		b.WriteString("</ul>")
		writeWorkloads(&b, workloads.Workloads(), src)
		writeTargets(&b, src)
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

// landingStyle colours a state: a person scanning the page sees at once
// which workload needs them.
const landingStyle = `<style>.ok{color:#1a7f37}.warn{color:#9a6700}.bad{color:#cf222e}
table.status td,table.status th{padding:2px 8px;text-align:left}</style>`

// writeWorkloads renders each workload's state as a person should read it,
// with its last minute.
func writeWorkloads(b *strings.Builder, ws []live.WorkloadStatus, src landingSources) {
	b.WriteString(landingStyle + "<h2>Workloads</h2>")
	if len(ws) == 0 {
		b.WriteString("<p>None (no configuration loaded yet, or it has no workloads).</p>")
		return
	}
	degraded := degradedWorkloads(src.gather)
	b.WriteString(`<table class="status"><tr><th>Workload</th><th>Target</th><th>State</th><th>Offered / achieved req/s</th><th>Success</th><th>SLO met</th><th>TTFT p50 / p99</th><th>TPOT p50 / p99</th><th>Last error</th></tr>`)
	for _, w := range ws {
		r := src.recent.summary(w.Name)
		if d := degraded[w.Name]; d != nil {
			d.bound = src.degradedLag
		}
		state, class := verdict(w.Status, degraded[w.Name], r)
		// A target URL holds no credentials (the config refuses them),
		// so it can be shown.
		fmt.Fprintf(b, `<tr class="workload" data-workload="%s"><td>%s</td><td>%s <code>%s</code> (%s, model %s)</td><td class="%s"><b>%s</b></td>`,
			html.EscapeString(w.Name), html.EscapeString(w.Name), html.EscapeString(w.Target), html.EscapeString(w.URL),
			html.EscapeString(w.Flavor), html.EscapeString(w.Model), class, html.EscapeString(state))
		if r.Span > 0 {
			fmt.Fprintf(b, "<td>%.2f / %.2f</td>", r.OfferedPerSecond, r.AchievedPerSecond)
		} else {
			b.WriteString("<td>&mdash;</td>")
		}
		if r.HasRatio {
			fmt.Fprintf(b, "<td>%.1f%% of %d</td>", 100*r.SuccessRatio, r.Ended)
		} else {
			b.WriteString("<td>&mdash;</td>")
		}
		writeSLOMet(b, r)
		writeQuantiles(b, r.TTFTp50, r.TTFTp99)
		writeQuantiles(b, r.TPOTp50, r.TPOTp99)
		writeLastError(b, w, r)
		b.WriteString("</tr>")
	}
	b.WriteString("</table><p><small>Rates, success, SLO met, TTFT and TPOT over the last minute of each workload's requests.</small></p>")
}

// writeSLOMet is the share of the requests that ended that met every
// threshold of the workload's SLO (its goodput), or says there is none.
func writeSLOMet(b *strings.Builder, r recentSummary) {
	switch {
	case !r.HasRatio:
		b.WriteString("<td>&mdash;</td>")
	case !r.HasSLO:
		b.WriteString("<td>no SLO</td>")
	default:
		fmt.Fprintf(b, "<td>%.1f%% of %d</td>", 100*float64(r.SLOMet)/float64(r.Ended), r.Ended)
	}
}

// writeQuantiles is a p50 / p99 cell, or a dash when nothing was measured,
// rounded to two or three digits of the p50: TTFT is tens of milliseconds
// and more, TPOT milliseconds or less a token.
func writeQuantiles(b *strings.Builder, p50, p99 time.Duration) {
	if p50 <= 0 {
		b.WriteString("<td>&mdash;</td>")
		return
	}
	round := time.Millisecond
	switch {
	case p50 < time.Millisecond:
		round = time.Microsecond
	case p50 < 10*time.Millisecond:
		round = 100 * time.Microsecond
	}
	fmt.Fprintf(b, "<td>%s / %s</td>", p50.Round(round), p99.Round(round))
}

// writeLastError is the last failure of the minute. A request refused for
// its model reads as the plain sentence the log says (what the server
// serves), not the server's raw 404 body.
func writeLastError(b *strings.Builder, w live.WorkloadStatus, r recentSummary) {
	switch {
	case r.LastError != "" && w.ModelNote != "":
		fmt.Fprintf(b, "<td>%s <small>(%s ago)</small></td>", html.EscapeString(w.ModelNote), time.Since(r.LastErrorAt).Round(time.Second))
	case r.LastError != "":
		fmt.Fprintf(b, "<td>%s <small>(%s ago)</small></td>", html.EscapeString(r.LastError), time.Since(r.LastErrorAt).Round(time.Second))
	default:
		b.WriteString("<td>none</td>")
	}
}

// verdict is the state a person should read: the runner's state, and for a
// running workload what its last minute and the degraded flag say. A
// workload that sends but whose requests fail is failing, not running.
func verdict(st workload.Status, degraded *degradedFigures, r recentSummary) (string, string) {
	if st.State != workload.StateRunning {
		label, class := st.State, "warn"
		switch st.State {
		case workload.StateFailed:
			class = "bad"
		case workload.StateFinished:
			class = "ok"
		}
		if st.Reason != "" {
			label += ": " + st.Reason
		}
		return label, class
	}
	switch {
	case r.Skipped > 0 && r.Ended == 0:
		return fmt.Sprintf("waiting for the target to be ready: %d arrivals skipped in the last minute, none sent", r.Skipped), "warn"
	case r.HasRatio && r.Failed > 0 && r.SuccessRatio < 0.5:
		return fmt.Sprintf("failing: %d of %d requests failed in the last minute (%.0f%% errors)", r.Failed, r.Ended, 100*(1-r.SuccessRatio)), "bad"
	case degraded != nil:
		// How late, and what to change: the flag alone leaves a person
		// to guess both.
		return fmt.Sprintf("degraded: the client is behind its schedule (schedule lag p99 %s, goroutine scheduling latency p99 %s over --probe.degraded-window, against a bound of %s, --probe.degraded-lag); its latencies are not to be trusted: %s",
			landingMillis(degraded.lagP99), landingMillis(degraded.schedP99), landingMillis(degraded.bound.Seconds()), degradedRemedy), "warn"
	case r.Failed > 0:
		return fmt.Sprintf("running, with errors: %d of %d requests failed in the last minute", r.Failed, r.Ended), "warn"
	}
	return "running", "ok"
}

// degradedRemedy is what to change when a workload's client is degraded.
const degradedRemedy = "lower the workload's rate (arrival.rate), run fewer workloads on this exporter or spread them over several, or give it more CPU (GOMAXPROCS, cores, a machine of its own)"

// degradedFigures are what /metrics says of a workload flagged degraded:
// its schedule lag p99 and the process's goroutine scheduling latency
// p99, in seconds; and the bound they are held to (--probe.degraded-lag).
type degradedFigures struct {
	lagP99, schedP99 float64
	bound            time.Duration
}

// landingMillis is seconds in milliseconds for the page.
func landingMillis(sec float64) string { return fmt.Sprintf("%.1f ms", 1000*sec) }

// degradedWorkloads reads infer_probe_measurement_degraded from the live
// series, with the figures behind it: the page says what /metrics says.
func degradedWorkloads(g prometheus.Gatherer) map[string]*degradedFigures {
	out := map[string]*degradedFigures{}
	if g == nil {
		return out
	}
	mfs, err := g.Gather()
	if err != nil {
		return out
	}
	lag := map[string]float64{}
	var sched float64
	for _, mf := range mfs {
		switch mf.GetName() {
		case "infer_exporter_scheduling_latency_p99_seconds":
			for _, m := range mf.GetMetric() {
				sched = m.GetGauge().GetValue()
			}
		case "infer_probe_schedule_lag_p99_seconds", "infer_probe_measurement_degraded":
			for _, m := range mf.GetMetric() {
				for _, l := range m.GetLabel() {
					switch {
					case l.GetName() != "workload":
					case mf.GetName() == "infer_probe_schedule_lag_p99_seconds":
						lag[l.GetValue()] = m.GetGauge().GetValue()
					case m.GetGauge().GetValue() == 1:
						out[l.GetValue()] = &degradedFigures{}
					}
				}
			}
		}
	}
	for w, f := range out {
		f.lagP99, f.schedP99 = lag[w], sched
	}
	return out
}

// writeTargets renders each target's engine metrics as the scraper last
// read them.
func writeTargets(b *strings.Builder, src landingSources) {
	if src.servers == nil {
		return
	}
	infos := src.servers.Snapshots()
	b.WriteString("<h2>Targets</h2>")
	if len(infos) == 0 {
		b.WriteString("<p>None.</p>")
		return
	}
	b.WriteString(`<table class="status"><tr><th>Target</th><th>Engine metrics</th><th>Engine</th><th>Last scrape</th></tr>`)
	for _, in := range infos {
		up, class := "down", "bad"
		if in.Up {
			up, class = "up", "ok"
		}
		last := "never"
		if !in.At.IsZero() {
			last = time.Since(in.At).Round(time.Second).String() + " ago"
		}
		fmt.Fprintf(b, `<tr class="target"><td>%s</td><td class="%s">%s</td><td>%s</td><td>%s</td></tr>`,
			html.EscapeString(in.Target), class, up, html.EscapeString(in.Engine), html.EscapeString(last))
	}
	b.WriteString("</table>")
}
