package config

import (
	"errors"
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	yaml "go.yaml.in/yaml/v3"
)

const modulesBase = `targets:
  - name: local
    url: http://127.0.0.1:8000
    model: m
modules:
  smoke:
    requests: 3
    concurrency: 2
    slo: {ttft: 500ms}
    timeout: 20s
    known_answers:
      - prompt: "What is 2+2?"
        expect: '\b4\b'
  minimal: {}
probe:
  allow:
    hosts: ["*.svc.cluster.local"]
    cidrs: ["10.0.0.0/8", "::ffff:192.168.0.0/112"]
`

func TestModulesGood(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "key"), []byte("sk-module-secret\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	y := modulesBase + `    configured_targets: false
  max_requests_per_second: 5
  max_concurrent_probes: 3
`
	y = strings.Replace(y, "  minimal: {}\n", "  minimal: {}\n  keyed:\n    bearer_token_file: key\n    model: other\n", 1)
	c, err := Parse([]byte(y), filepath.Join(dir, "c.yml"))
	if err != nil {
		t.Fatal(err)
	}
	smoke, ok := c.Module("smoke")
	if !ok {
		t.Fatal("module smoke missing")
	}
	if smoke.Requests != 3 || smoke.Concurrency != 2 || smoke.Timeout != 20*time.Second || smoke.SLO.TTFT != 500*time.Millisecond {
		t.Errorf("smoke = %+v", smoke)
	}
	if len(smoke.KnownAnswers) != 1 || smoke.KnownAnswers[0].Pattern == nil ||
		!smoke.KnownAnswers[0].Pattern.MatchString("it is 4.") || smoke.KnownAnswers[0].MaxTokens != DefaultKnownAnswerMaxTokens {
		t.Errorf("known answer = %+v", smoke.KnownAnswers)
	}
	minimal, _ := c.Module("minimal")
	if minimal.Requests != DefaultModuleRequests || minimal.Concurrency != DefaultModuleConcurrency ||
		minimal.Prompt.InputTokens != (Distribution{Dist: "fixed", Mean: DefaultModuleInputTokens}) ||
		minimal.Prompt.OutputTokens != (Distribution{Dist: "fixed", Mean: DefaultModuleOutputTokens}) {
		t.Errorf("defaults not applied: %+v", minimal)
	}
	keyed, _ := c.Module("keyed")
	if keyed.BearerToken != "sk-module-secret" {
		t.Errorf("module token not read")
	}
	if s := fmt.Sprintf("%v %+v", keyed.BearerToken, *keyed); strings.Contains(s, "sk-module") {
		t.Errorf("secret leaks through fmt: %s", s)
	}
	if out, err := yaml.Marshal(keyed); err != nil || strings.Contains(string(out), "sk-module") {
		t.Errorf("secret leaks through YAML: %s %v", out, err)
	}
	if c.Probe.Allow.AllowsConfiguredTargets() || c.Probe.MaxRequestsPerSecond != 5 || c.Probe.MaxConcurrentProbes != 3 {
		t.Errorf("probe settings = %+v", c.Probe)
	}
	want := []netip.Prefix{netip.MustParsePrefix("10.0.0.0/8"), netip.MustParsePrefix("192.168.0.0/16")}
	if got := c.Probe.Allow.Prefixes(); fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("prefixes = %v, want %v (IPv4-mapped prefixes are unmapped)", got, want)
	}
}

func TestProbeDefaults(t *testing.T) {
	c, err := Parse([]byte(base), "c.yml")
	if err != nil {
		t.Fatal(err)
	}
	if !c.Probe.Allow.AllowsConfiguredTargets() || c.Probe.MaxRequestsPerSecond != DefaultProbeMaxRequestsPerSecond ||
		c.Probe.MaxConcurrentProbes != DefaultProbeMaxConcurrentProbes || len(c.Modules) != 0 {
		t.Errorf("defaults = %+v, modules %v", c.Probe, c.Modules)
	}
}

func TestModuleErrors(t *testing.T) {
	for _, tc := range []struct {
		name string
		yaml string
		want string // "file:line: field: reason", or a part of it
	}{
		{"unknown field", strings.Replace(modulesBase, "    requests: 3\n", "    requests: 3\n    reqests: 3\n", 1), `c.yml:8: modules.smoke.reqests: unknown field "reqests"; did you mean requests?`},
		{"too many requests", strings.Replace(modulesBase, "requests: 3", "requests: 101", 1), "c.yml:7: modules.smoke.requests: must be between 1 and 100"},
		{"concurrency above requests", strings.Replace(modulesBase, "concurrency: 2", "concurrency: 4", 1), "c.yml:8: modules.smoke.concurrency: must be between 1 and requests"},
		{"bad flavor", strings.Replace(modulesBase, "requests: 3", "requests: 3\n    flavor: grpc", 1), `c.yml:8: modules.smoke.flavor: "grpc" is not one of`},
		{"unknown target", strings.Replace(modulesBase, "requests: 3", "requests: 3\n    target: nope", 1), `c.yml:8: modules.smoke.target: "nope" is not a configured target`},
		{"target and token file", strings.Replace(modulesBase, "requests: 3", "requests: 3\n    target: local\n    bearer_token_file: k", 1), "c.yml:9: modules.smoke.bearer_token_file: set either target"},
		{"authorization header", strings.Replace(modulesBase, "requests: 3", "requests: 3\n    headers: {authorization: x}", 1), "c.yml:8: modules.smoke.headers: must not set Authorization"},
		{"header value with CR LF", strings.Replace(modulesBase, "requests: 3", "requests: 3\n    headers:\n      X-A: \"v\\r\\nX-Injected: 1\"", 1), `c.yml:9: modules.smoke.headers.X-A: header value has a control character`},
		{"header name with a space", strings.Replace(modulesBase, "requests: 3", "requests: 3\n    headers:\n      \"X B\": v", 1), `c.yml:9: modules.smoke.headers.X B: header name "X B" is not an HTTP token`},
		{"a probe's total work", strings.Replace(modulesBase, "requests: 3\n    concurrency: 2", "requests: 100\n    concurrency: 100\n    prompt: {input_tokens: {mean: 1048544}}", 1),
			"c.yml:7: modules.smoke.requests: 100 requests of up to 1048544 input and 32 output tokens (with the known answers) is 104857632 tokens a probe: at most 4194304 (config.MaxModuleTokens)"},
		{"bad regexp", strings.Replace(modulesBase, `'\b4\b'`, `'(4'`, 1), "c.yml:13: modules.smoke.known_answers[0].expect: is not a valid regular expression"},
		{"empty prompt", strings.Replace(modulesBase, `"What is 2+2?"`, `""`, 1), "c.yml:12: modules.smoke.known_answers[0].prompt: is required"},
		{"negative timeout", strings.Replace(modulesBase, "timeout: 20s", "timeout: -1s", 1), "c.yml:10: modules.smoke.timeout: must not be negative"},
		{"negative slo", strings.Replace(modulesBase, "ttft: 500ms", "ttft: -1s", 1), "c.yml:9: modules.smoke.slo: thresholds must not be negative"},
		{"bad dist", strings.Replace(modulesBase, "  minimal: {}\n", "  minimal:\n    prompt: {input_tokens: {dist: zipf}}\n", 1), `c.yml:15: modules.minimal.prompt.input_tokens.dist: "zipf" is not one of`},
		{"bad module name", strings.Replace(modulesBase, "  minimal: {}", "  \"bad name\": {}", 1), `c.yml:14: modules.bad name: module name "bad name" must match`},
		{"bad cidr", strings.Replace(modulesBase, `"10.0.0.0/8"`, `"10.0.0.0/33"`, 1), `c.yml:18: probe.allow.cidrs[0]: "10.0.0.0/33" is not a CIDR`},
		{"upper-case host", strings.Replace(modulesBase, `"*.svc.cluster.local"`, `"*.SVC.local"`, 1), `c.yml:17: probe.allow.hosts[0]: "*.SVC.local" must be lower case`},
		{"host with port", strings.Replace(modulesBase, `"*.svc.cluster.local"`, `"a.local:80"`, 1), `c.yml:17: probe.allow.hosts[0]: "a.local:80" is a host name pattern`},
		{"IP as host", strings.Replace(modulesBase, `"*.svc.cluster.local"`, `"10.1.2.3"`, 1), `c.yml:17: probe.allow.hosts[0]: "10.1.2.3" is an IP address: list it in cidrs`},
		{"bad pattern", strings.Replace(modulesBase, `"*.svc.cluster.local"`, `"[a.local"`, 1), `c.yml:17: probe.allow.hosts[0]: "[a.local" is not a valid pattern`},
		{"zero rate", modulesBase + "  max_requests_per_second: -1\n", "c.yml:19: probe.max_requests_per_second: must be in (0, 1000]"},
		{"too many probes", modulesBase + "  max_concurrent_probes: 5000\n", "c.yml:19: probe.max_concurrent_probes: must be between 1 and 1000"},
		{"missing token file", strings.Replace(modulesBase, "requests: 3", "requests: 3\n    bearer_token_file: /nonexistent/key", 1), "c.yml:8: modules.smoke.bearer_token_file: cannot read"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Parse([]byte(tc.yaml), "c.yml")
			if err == nil {
				t.Fatal("no error")
			}
			if !strings.Contains(err.Error(), tc.want) {
				t.Errorf("error %q does not contain %q", err, tc.want)
			}
			var ce *Error
			if !errors.As(err, &ce) || ce.File != "c.yml" {
				t.Errorf("error %v is not a *Error naming the file", err)
			}
		})
	}
}
