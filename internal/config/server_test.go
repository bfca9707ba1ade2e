package config

import (
	"strings"
	"testing"
	"time"
)

func TestServerMetricsDefaults(t *testing.T) {
	for _, tc := range []struct {
		name, yaml string
		want       ServerMetrics
		defaulted  bool
	}{
		{"defaults from the target URL", `url: http://127.0.0.1:8000`,
			ServerMetrics{URL: "http://127.0.0.1:8000/metrics", Interval: 15 * time.Second, Timeout: 5 * time.Second, Engine: "auto"}, true},
		{"a trailing /v1 is not the root", `url: http://127.0.0.1:8000/v1/`,
			ServerMetrics{URL: "http://127.0.0.1:8000/metrics", Interval: 15 * time.Second, Timeout: 5 * time.Second, Engine: "auto"}, true},
		{"explicit", "url: http://127.0.0.1:8000\n    metrics: {url: 'http://127.0.0.1:9000/v1/metrics', interval: 2s, engine: nim}",
			ServerMetrics{URL: "http://127.0.0.1:9000/v1/metrics", Interval: 2 * time.Second, Timeout: 2 * time.Second, Engine: "nim"}, false},
		{"off", "url: http://127.0.0.1:8000\n    metrics: {engine: none, timeout: 1s}",
			ServerMetrics{URL: "http://127.0.0.1:8000/metrics", Interval: 15 * time.Second, Timeout: time.Second, Engine: "none"}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, err := Parse([]byte("targets:\n  - name: a\n    model: m\n    "+tc.yaml+"\n"), "c.yml")
			if err != nil {
				t.Fatal(err)
			}
			got := c.Targets[0].Metrics
			if got.URLDefaulted() != tc.defaulted {
				t.Errorf("URLDefaulted = %v", got.URLDefaulted())
			}
			got.urlDefaulted = false
			if got != tc.want {
				t.Errorf("metrics = %+v, want %+v", got, tc.want)
			}
		})
	}
}

func TestServerMetricsErrors(t *testing.T) {
	for _, tc := range []struct{ yaml, want string }{
		{"metrics: {engine: vllm2}", `c.yml:5: targets[0].metrics.engine: "vllm2" is not one of auto, none, vllm, sglang, tgi, llamacpp, ollama, triton, trtllm-serve, nim`},
		{"metrics: {interval: 1s, timeout: 2s}", "c.yml:5: targets[0].metrics.timeout: 2s must not exceed the interval 1s"},
		{"metrics: {url: 'ftp://x/metrics'}", `c.yml:5: targets[0].metrics.url: "ftp://x/metrics" must be an absolute http or https URL`},
		{"metrics: {interval: -1s}", "c.yml:5: targets[0].metrics.interval: must be positive"},
		{"metrics: {scrape: 1s}", `targets[0].metrics.scrape: unknown field "scrape"; known here: engine, interval, timeout, url`},
	} {
		_, err := Parse([]byte("targets:\n  - name: a\n    model: m\n    url: http://127.0.0.1:1\n    "+tc.yaml+"\n"), "c.yml")
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: error %v, want %q", tc.yaml, err, tc.want)
		}
	}
}

func TestRootURL(t *testing.T) {
	for in, want := range map[string]string{
		"http://h:8000":         "http://h:8000",
		"http://h:8000/":        "http://h:8000",
		"http://h:8000/v1":      "http://h:8000",
		"http://h:8000/v1/":     "http://h:8000",
		"http://h:8000/v1//":    "http://h:8000",
		"http://h:8000/api/v1":  "http://h:8000/api",
		"http://h:8000/v1/v1":   "http://h:8000/v1",
		"http://h:8000/v10":     "http://h:8000/v10",
		"http://h:8000/openai/": "http://h:8000/openai",
	} {
		if got := RootURL(in); got != want {
			t.Errorf("RootURL(%q) = %q, want %q", in, got, want)
		}
		if got := (&Target{URL: in}).Root(); got != want {
			t.Errorf("Target{URL: %q}.Root() = %q, want %q", in, got, want)
		}
	}
}

// TestSchemeHint: a target URL written without its scheme is refused with
// the URL it likely meant; one with a scheme of its own gets no guess.
func TestSchemeHint(t *testing.T) {
	for raw, want := range map[string]string{
		"localhost:8000":       `; did you mean "http://localhost:8000"?`,
		"127.0.0.1:8000":       `; did you mean "http://127.0.0.1:8000"?`,
		"vllm.inference:8000/": `; did you mean "http://vllm.inference:8000/"?`,
		"ftp://x/metrics":      "",
		"":                     "",
	} {
		if got := SchemeHint(raw); got != want {
			t.Errorf("SchemeHint(%q) = %q, want %q", raw, got, want)
		}
	}
	_, err := Parse([]byte("targets: [{name: a, url: 'localhost:8000', model: m}]\n"), "c.yml")
	if err == nil || !strings.Contains(err.Error(), `"localhost:8000" must be an absolute http or https URL; did you mean "http://localhost:8000"?`) {
		t.Errorf("a target URL without its scheme: %v", err)
	}
}
