package config

import (
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"time"
)

// ServerMetrics says how the exporter reads a target's own /metrics and
// normalises it into infer_server_* (collector/server.go).
type ServerMetrics struct {
	// URL of the engine's Prometheus metrics. Default: the target URL's
	// root (without a trailing /v1) + "/metrics". When left to its default,
	// the collector may also try the engine's documented path (NIM's
	// /v1/metrics) once the default answers 404.
	URL string `yaml:"url"`
	// Interval between scrapes (default 15s); Timeout bounds one scrape,
	// info endpoints included (default 5s, at most Interval).
	Interval time.Duration `yaml:"interval"`
	Timeout  time.Duration `yaml:"timeout"`
	// Engine is auto (detect from the metric names, then the info
	// endpoints), none (do not scrape), or one of ServerEngines.
	Engine string `yaml:"engine"`

	urlDefaulted bool
}

// URLDefaulted reports whether URL was left out of the file and derived from
// the target's URL.
func (m ServerMetrics) URLDefaulted() bool { return m.urlDefaulted }

// Server metrics defaults and engine names.
const (
	DefaultServerMetricsInterval = 15 * time.Second
	DefaultServerMetricsTimeout  = 5 * time.Second
	ServerEngineAuto             = "auto"
	ServerEngineNone             = "none"
)

// ServerEngines are the engines whose metrics the collector maps. The
// collector's mapping table has one entry per name (a test checks it).
var ServerEngines = []string{"vllm", "sglang", "tgi", "llamacpp", "ollama", "triton", "trtllm-serve", "nim"}

// applyServerMetricsDefaults fills a target's metrics settings.
func (t *Target) applyServerMetricsDefaults() {
	m := &t.Metrics
	if m.Engine == "" {
		m.Engine = ServerEngineAuto
	}
	if m.Interval == 0 {
		m.Interval = DefaultServerMetricsInterval
	}
	if m.Timeout == 0 {
		m.Timeout = min(DefaultServerMetricsTimeout, m.Interval)
	}
	if m.URL == "" && t.URL != "" {
		m.URL = t.Root() + "/metrics"
		m.urlDefaulted = true
	}
}

func (t *Target) validateServerMetrics(v *validator, p path) {
	m := &t.Metrics
	p = append(p, "metrics")
	known := m.Engine == ServerEngineAuto || m.Engine == ServerEngineNone
	for _, e := range ServerEngines {
		known = known || m.Engine == e
	}
	if !known {
		v.add(p, "engine", fmt.Sprintf("%s is not one of auto, none, %s", quote(m.Engine), strings.Join(ServerEngines, ", "))+didYouMean(m.Engine, append([]string{"auto", "none"}, ServerEngines...)))
	}
	if m.Interval < 0 {
		v.add(p, "interval", "must be positive")
	}
	if m.Timeout < 0 {
		v.add(p, "timeout", "must be positive")
	} else if m.Interval > 0 && m.Timeout > m.Interval {
		v.add(p, "timeout", fmt.Sprintf("%v must not exceed the interval %v", m.Timeout, m.Interval))
	}
	if !m.urlDefaulted {
		if u, err := url.Parse(m.URL); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			v.add(p, "url", fmt.Sprintf("%s must be an absolute http or https URL", quote(m.URL)))
		} else if u.User != nil {
			v.add(p, "url", "must not hold credentials")
		}
	}
}

// SetTargetHeaders puts a target's configured headers and bearer token on a
// request to it: a "Host" header sets the request's host (a virtual host
// behind a shared address), the token goes as "Authorization: Bearer". Only
// call it for a request to the target's own host: both may be credentials.
func SetTargetHeaders(req *http.Request, headers map[string]string, bearerToken string) {
	for k, v := range headers {
		if strings.EqualFold(k, "Host") {
			req.Host = v
			continue
		}
		req.Header.Set(k, v)
	}
	if bearerToken != "" {
		req.Header.Set("Authorization", "Bearer "+bearerToken)
	}
}
