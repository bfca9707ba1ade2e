package config

import (
	"context"
	"errors"
	"fmt"
	"math"
	"net/netip"
	urlpath "path"
	"regexp"
	"sort"
	"strings"
	"time"
)

// Module is a one-shot probe that GET /probe?module=NAME&target=URL runs
// against URL: Requests generations, Concurrency at a time, measured like the
// continuous probe's, then judged against SLO and KnownAnswers.
type Module struct {
	// Flavor is the API spoken; empty means the credential target's flavor,
	// else openai-chat.
	Flavor Flavor `yaml:"flavor"`
	// Model is sent as "model"; empty means the credential target's model,
	// else none (the server's default).
	Model string `yaml:"model"`
	// Target names a configured target whose bearer token, headers, model and
	// flavor the probe uses. Its credentials are sent only to that target's
	// own origin (scheme, host and port): a probe of any other URL with this
	// module is refused.
	Target string `yaml:"target"`
	// BearerTokenFile holds the module's own API key, sent to every target
	// this module probes (all of them behind probe.allow). Exclusive with
	// Target.
	BearerTokenFile string            `yaml:"bearer_token_file"`
	Headers         map[string]string `yaml:"headers"`

	// Requests is the number of generations per probe (default 1, at most
	// MaxModuleRequests); Concurrency how many are in flight at once
	// (default 1, at most Requests).
	Requests    int      `yaml:"requests"`
	Concurrency int      `yaml:"concurrency"`
	Prompt      Prompt   `yaml:"prompt"`
	Sampling    Sampling `yaml:"sampling"`
	// SLO: a probe succeeds only if every request met every threshold set.
	SLO SLO `yaml:"slo"`
	// Timeout caps the probe; the scrape's own timeout (minus
	// --timeout-offset) applies when it is shorter. 0: only the scrape's.
	Timeout time.Duration `yaml:"timeout"`
	// KnownAnswers are extra requests whose answers must match a pattern.
	KnownAnswers []KnownAnswer `yaml:"known_answers"`
	// Kind is generation (the default) or perplexity: score the
	// reference text's perplexity once (quality.go), instead of sending
	// generations.
	Kind string `yaml:"kind"`
	// MaxPerplexity (kind perplexity; 0: none) fails a probe whose
	// perplexity is above it.
	MaxPerplexity float64 `yaml:"max_perplexity"`
	// Kinds are the tools, response format and images every request
	// carries (kinds.go); a probe fails when an answer is not valid.
	Kinds RequestKinds `yaml:",inline"`

	// BearerToken is read from BearerTokenFile at load time.
	BearerToken Secret `yaml:"-"`
}

// KnownAnswer is a correctness check: the answer to Prompt must match Expect.
type KnownAnswer struct {
	Prompt string `yaml:"prompt"`
	// Expect is an RE2 regular expression (Go's regexp syntax) that the
	// generated answer text must match somewhere; anchor it to match all.
	Expect string `yaml:"expect"`
	// MaxTokens bounds the answer (default DefaultKnownAnswerMaxTokens).
	MaxTokens int `yaml:"max_tokens"`

	// Pattern is Expect, compiled at load time.
	Pattern *regexp.Regexp `yaml:"-"`
}

// checkKnownAnswer checks a known answer at p (a module's or a workload
// check's) and compiles its pattern.
func (v *validator) checkKnownAnswer(p path, ka *KnownAnswer) {
	if strings.TrimSpace(ka.Prompt) == "" {
		v.add(p, "prompt", "is required")
	}
	if ka.Expect == "" {
		v.add(p, "expect", "is required (a regular expression the answer must match)")
	} else if re, err := regexp.Compile(ka.Expect); err != nil {
		v.add(p, "expect", fmt.Sprintf("is not a valid regular expression: %v", err))
	} else {
		ka.Pattern = re
	}
	if ka.MaxTokens < 1 {
		v.add(p, "max_tokens", "must be at least 1")
	}
	v.checkTokens(p, "max_tokens", ka.MaxTokens)
}

// ProbeSettings guard /probe: which targets it may reach and how hard it may
// hit each of them.
type ProbeSettings struct {
	Allow ProbeAllow `yaml:"allow"`
	// MaxRequestsPerSecond is the ceiling on requests that /probe sends to
	// one target (scheme, host and port), summed over all probes and
	// modules.
	MaxRequestsPerSecond float64 `yaml:"max_requests_per_second"`
	// MaxConcurrentProbes is the ceiling on probes running at once against
	// one target; a probe over it fails at once, without sending.
	MaxConcurrentProbes int `yaml:"max_concurrent_probes"`
}

// ProbeAllow is the allow list of /probe targets. A target is allowed when
// any rule allows it; the address actually connected to is checked again at
// connect time (see package probe/prober).
type ProbeAllow struct {
	// Hosts are host name patterns (path.Match syntax, "*" matching any run
	// of characters, dots included: "*.svc.cluster.local"). They match names
	// only, never IP literals (list those in CIDRs), and a name they allow
	// may still not resolve to a loopback, link-local, multicast or
	// unspecified address.
	Hosts []string `yaml:"hosts"`
	// CIDRs are address ranges a target may resolve to (or be written as).
	// Special ranges (loopback, link-local, cloud metadata, multicast,
	// unspecified) are reachable only through a CIDR that lies inside them:
	// 0.0.0.0/0 does not open 169.254.169.254; 169.254.169.254/32 would.
	CIDRs []string `yaml:"cidrs"`
	// ConfiguredTargets allows the host and port of every configured target
	// (default true).
	ConfiguredTargets *bool `yaml:"configured_targets"`
}

// Defaults and bounds of modules and probe settings.
const (
	DefaultModuleRequests    = 1
	DefaultModuleConcurrency = 1
	// MaxModuleRequests bounds a module's requests, and with them the
	// per-request series of a /probe answer.
	MaxModuleRequests = 100
	// MaxKnownAnswers bounds a module's known-answer checks.
	MaxKnownAnswers = 20
	// MaxModuleTokens bounds a probe's total work: requests × the longest
	// prompt and answer one can draw, plus the known answers' max_tokens.
	// A probe builds each prompt as a sender takes it, but its senders can
	// hold Concurrency of them at once (some 12 bytes a prompt token, as
	// text and body) and every answer's token instants (24 bytes a token):
	// 4M tokens keep one scrape under about 100 MB, where 100 requests of
	// 1M-token prompts took 1.5 GB. A probe is a smoke test; a load test
	// is a workload.
	MaxModuleTokens = 1 << 22
	// A probe is a smoke test, not a load test: a short prompt and answer.
	DefaultModuleInputTokens    = 64
	DefaultModuleOutputTokens   = 32
	DefaultKnownAnswerMaxTokens = 32

	DefaultProbeMaxRequestsPerSecond = 2
	DefaultProbeMaxConcurrentProbes  = 2
	// maxProbeCeiling bounds both ceilings: above it they protect nothing.
	maxProbeCeiling = 1000
)

// AllowsConfiguredTargets reports whether configured targets are allowed
// (the default).
func (a ProbeAllow) AllowsConfiguredTargets() bool {
	return a.ConfiguredTargets == nil || *a.ConfiguredTargets
}

// Prefixes returns CIDRs parsed, masked, with IPv4-mapped prefixes unmapped.
// Entries that do not parse are skipped: a loaded configuration has none.
func (a ProbeAllow) Prefixes() []netip.Prefix {
	out := make([]netip.Prefix, 0, len(a.CIDRs))
	for _, s := range a.CIDRs {
		if p, err := parseCIDR(s); err == nil {
			out = append(out, p)
		}
	}
	return out
}

func parseCIDR(s string) (netip.Prefix, error) {
	p, err := netip.ParsePrefix(strings.TrimSpace(s))
	if err != nil {
		return netip.Prefix{}, err
	}
	if p.Addr().Zone() != "" {
		return netip.Prefix{}, errors.New("zones are not allowed")
	}
	if a := p.Addr(); a.Is4In6() && p.Bits() >= 96 {
		p = netip.PrefixFrom(a.Unmap(), p.Bits()-96)
	}
	return p.Masked(), nil
}

// Module returns the module with the given name.
func (c *Config) Module(name string) (*Module, bool) {
	m, ok := c.Modules[name]
	if !ok {
		return nil, false
	}
	return &m, true
}

// moduleNames returns the module names sorted, so that errors come out in a
// stable order.
func (c *Config) moduleNames() []string {
	names := make([]string, 0, len(c.Modules))
	for n := range c.Modules {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}

func (c *Config) applyModuleDefaults() {
	if c.Probe.MaxRequestsPerSecond == 0 {
		c.Probe.MaxRequestsPerSecond = DefaultProbeMaxRequestsPerSecond
	}
	if c.Probe.MaxConcurrentProbes == 0 {
		c.Probe.MaxConcurrentProbes = DefaultProbeMaxConcurrentProbes
	}
	for name, m := range c.Modules {
		if m.Requests == 0 {
			m.Requests = DefaultModuleRequests
		}
		if m.Concurrency == 0 {
			m.Concurrency = DefaultModuleConcurrency
		}
		m.Prompt.applyDefaults(DefaultModuleInputTokens, DefaultModuleOutputTokens)
		for i := range m.KnownAnswers {
			if m.KnownAnswers[i].MaxTokens == 0 {
				m.KnownAnswers[i].MaxTokens = DefaultKnownAnswerMaxTokens
			}
		}
		c.Modules[name] = m
	}
}

func (c *Config) validateModules(v *validator) {
	c.validateProbeSettings(v)
	for _, name := range c.moduleNames() {
		m := c.Modules[name]
		p := path{"modules", name}
		if len(name) > MaxNameBytes {
			v.addPath(p, fmt.Sprintf("a module name of %d bytes: at most %d (config.MaxNameBytes)", len(name), MaxNameBytes))
		} else if !nameRE.MatchString(name) {
			v.addPath(p, fmt.Sprintf("module name %s must match %s", quote(name), nameRE))
		}
		v.checkModel(p, "model", m.Model)
		if m.Flavor != "" {
			v.checkFlavor(p, m.Flavor)
		}
		if m.Target != "" {
			if _, ok := c.Target(m.Target); !ok {
				v.add(p, "target", fmt.Sprintf("%s is not a configured target", quote(m.Target)))
			}
			if m.BearerTokenFile != "" {
				v.add(p, "bearer_token_file", "set either target (its credentials) or bearer_token_file, not both")
			}
		}
		v.checkHeaders(p, m.Headers)
		if m.Requests < 1 || m.Requests > MaxModuleRequests {
			v.add(p, "requests", fmt.Sprintf("must be between 1 and %d", MaxModuleRequests))
		}
		if m.Concurrency < 1 || m.Concurrency > max(m.Requests, 1) {
			v.add(p, "concurrency", "must be between 1 and requests")
		}
		if validateLengths(v, append(append(path{}, p...), "prompt"), &m.Prompt) {
			checkModuleWork(v, p, &m)
		}
		if m.Sampling.MinTokens < 0 {
			v.add(append(append(path{}, p...), "sampling"), "min_tokens", "must not be negative")
		}
		v.checkTokens(append(append(path{}, p...), "sampling"), "min_tokens", m.Sampling.MinTokens)
		if m.SLO.TTFT < 0 || m.SLO.TPOT < 0 || m.SLO.E2E < 0 {
			v.add(p, "slo", "thresholds must not be negative")
		}
		if m.Timeout < 0 {
			v.add(p, "timeout", "must not be negative")
		}
		c.validateModuleKind(v, p, &m)
		if len(m.KnownAnswers) > MaxKnownAnswers {
			v.add(p, "known_answers", fmt.Sprintf("at most %d checks", MaxKnownAnswers))
		}
		for i := range m.KnownAnswers {
			ka := &m.KnownAnswers[i]
			v.checkKnownAnswer(append(append(path{}, p...), "known_answers", i), ka)
		}
		c.Modules[name] = m
	}
}

// checkModuleWork refuses a module whose probe would ask for more than
// MaxModuleTokens tokens in all. Its lengths have passed validateLengths,
// so each has a largest value.
func checkModuleWork(v *validator, p path, m *Module) {
	in, _ := largest(&m.Prompt.InputTokens)
	out, _ := largest(&m.Prompt.OutputTokens)
	total := int64(m.Requests) * int64(in+out)
	for _, ka := range m.KnownAnswers {
		total += int64(max(ka.MaxTokens, 0))
	}
	if total > MaxModuleTokens {
		v.add(p, "requests", fmt.Sprintf("%d requests of up to %d input and %d output tokens (with the known answers) is %d tokens a probe: at most %d (config.MaxModuleTokens); lower requests or the prompt lengths, or use a workload for load",
			m.Requests, in, out, total, MaxModuleTokens))
	}
}

func (c *Config) validateProbeSettings(v *validator) {
	p := path{"probe"}
	if r := c.Probe.MaxRequestsPerSecond; math.IsNaN(r) || r <= 0 || r > maxProbeCeiling {
		v.add(p, "max_requests_per_second", fmt.Sprintf("must be in (0, %d]", maxProbeCeiling))
	}
	if n := c.Probe.MaxConcurrentProbes; n < 1 || n > maxProbeCeiling {
		v.add(p, "max_concurrent_probes", fmt.Sprintf("must be between 1 and %d", maxProbeCeiling))
	}
	ap := path{"probe", "allow"}
	for i, h := range c.Probe.Allow.Hosts {
		hp := append(append(path{}, ap...), "hosts", i)
		switch {
		case h == "":
			v.addPath(hp, "is empty")
		case h != strings.ToLower(h):
			v.addPath(hp, fmt.Sprintf("%s must be lower case", quote(h)))
		case strings.ContainsAny(h, ":/@?#% "):
			v.addPath(hp, fmt.Sprintf("%s is a host name pattern: no scheme, port, path or spaces", quote(h)))
		default:
			if _, err := urlpath.Match(h, "x"); err != nil {
				v.addPath(hp, fmt.Sprintf("%s is not a valid pattern: %v", quote(h), err))
			} else if _, err := netip.ParseAddr(h); err == nil {
				v.addPath(hp, fmt.Sprintf("%s is an IP address: list it in cidrs", quote(h)))
			}
		}
	}
	for i, s := range c.Probe.Allow.CIDRs {
		if _, err := parseCIDR(s); err != nil {
			v.addPath(append(append(path{}, ap...), "cidrs", i), fmt.Sprintf("%s is not a CIDR such as 10.0.0.0/8: %v", quote(s), err))
		}
	}
}

func (c *Config) readModuleSecrets(ctx context.Context, dir string, v *validator) {
	for _, name := range c.moduleNames() {
		m := c.Modules[name]
		v.readBearerToken(ctx, dir, path{"modules", name}, m.BearerTokenFile, &m.BearerToken)
		c.Modules[name] = m
	}
}
