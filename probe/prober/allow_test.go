package prober

import (
	"net/netip"
	"strings"
	"testing"

	"github.com/infer-exporter/infer_exporter/internal/config"
)

func TestParseTarget(t *testing.T) {
	for _, tc := range []struct {
		raw    string
		url    string // canonical, when accepted
		origin string
		refuse string // part of the refusal
	}{
		{raw: "http://127.0.0.1:8000", url: "http://127.0.0.1:8000", origin: "http://127.0.0.1:8000"},
		{raw: "HTTP://VLLM.Example.COM./v1", url: "http://vllm.example.com:80/v1", origin: "http://vllm.example.com:80"},
		{raw: "https://api.example.com", url: "https://api.example.com:443", origin: "https://api.example.com:443"},
		{raw: "http://[::ffff:10.1.2.3]:9000/", url: "http://10.1.2.3:9000/", origin: "http://10.1.2.3:9000"},
		{raw: "http://[2001:db8::1]:8000", url: "http://[2001:db8::1]:8000", origin: "http://[2001:db8::1]:8000"},
		{raw: "http://my_svc.ns.svc:8000", url: "http://my_svc.ns.svc:8000", origin: "http://my_svc.ns.svc:8000"},
		{raw: "http://127.0.0.1.:8000", url: "http://127.0.0.1:8000", origin: "http://127.0.0.1:8000"},
		{raw: "", refuse: "absolute http:// or https://"},
		{raw: "vllm:8000", refuse: `scheme "vllm" is refused`},
		{raw: "http://", refuse: "empty host"},
		{raw: "http://:8000/", refuse: "empty host"},
		{raw: "http://a..b/", refuse: "label is empty"},
		{raw: "http://" + strings.Repeat("a", 64) + ".test/", refuse: "longer than 63"},
		{raw: "http://host/#frag", refuse: "query or fragment"},
		{raw: "http://host/?", refuse: "query or fragment"},
		{raw: "http://host:0/", refuse: "not in 1..65535"},
		{raw: "http://[::1%25lo]/", refuse: "zones"},
		{raw: "http://[not-v6]/", refuse: "not a URL"},
		{raw: "http://x.0x1f/", refuse: "non-standard spelling"},
		{raw: "http://" + strings.Repeat("a", maxTargetLen), refuse: "longer than"},
	} {
		got, r := parseTarget(tc.raw)
		switch {
		case tc.refuse != "":
			if r == nil || !strings.Contains(r.msg, tc.refuse) {
				t.Errorf("parseTarget(%q) = %v, %v; want refusal %q", tc.raw, got, r, tc.refuse)
			}
		case r != nil:
			t.Errorf("parseTarget(%q) refused: %v", tc.raw, r)
		case got.url.String() != tc.url || got.origin() != tc.origin:
			t.Errorf("parseTarget(%q) = %s (%s), want %s (%s)", tc.raw, got.url, got.origin(), tc.url, tc.origin)
		}
	}
}

func TestPolicy(t *testing.T) {
	cfg := &config.Config{
		Targets: []config.Target{
			{Name: "a", URL: "http://127.0.0.1:8000"},
			{Name: "b", URL: "http://localhost:9000/v1"},
			{Name: "c", URL: "https://vllm.internal"},
		},
		Probe: config.ProbeSettings{Allow: config.ProbeAllow{
			Hosts: []string{"*.svc.cluster.local", "gpu-?.example.com"},
			CIDRs: []string{"10.0.0.0/8", "169.254.169.254/32", "fd00::/8"},
		}},
	}
	pol := newPolicy(cfg)
	a := netip.MustParseAddr
	for _, tc := range []struct {
		target string
		basis  basis
		refuse string
		// addresses the target's host may and may not connect to
		ok, no []string
	}{
		{target: "http://127.0.0.1:8000", basis: basisConfiguredAddr, ok: []string{"127.0.0.1", "::ffff:127.0.0.1"}, no: []string{"127.0.0.2", "10.0.0.1"}},
		{target: "http://127.0.0.1:8001", refuse: "loopback address, reachable only through a probe.allow.cidrs entry inside 127.0.0.0/8"},
		{target: "http://localhost:9000", basis: basisConfiguredName, ok: []string{"127.0.0.1", "::1", "192.168.1.1"}, no: []string{"169.254.1.1", "0.0.0.0", "224.0.0.1", "fe80::1"}},
		{target: "https://vllm.internal", basis: basisConfiguredName, ok: []string{"172.16.0.5"}},
		{target: "http://vllm.internal", basis: basisCIDR, ok: []string{"10.9.9.9"}, no: []string{"172.16.0.5"}}, // port 80 is not configured
		{target: "http://a.b.svc.cluster.local:8000", basis: basisPattern, ok: []string{"10.1.1.1", "192.168.0.1", "fd12::1"}, no: []string{"127.0.0.1", "::1", "169.254.1.1", "::ffff:169.254.1.1", "64:ff9b::7f00:1", "100.100.100.200", "255.255.255.255"}},
		{target: "http://gpu-3.example.com", basis: basisPattern},
		{target: "http://gpu-10.example.com", basis: basisCIDR, no: []string{"8.8.8.8"}},
		{target: "http://10.2.3.4:8000", basis: basisCIDRAddr, ok: []string{"10.2.3.4"}, no: []string{"10.2.3.5"}},
		// An explicit metadata CIDR opens exactly it.
		{target: "http://169.254.169.254/", basis: basisCIDRAddr, ok: []string{"169.254.169.254"}},
		{target: "http://169.254.169.253/", refuse: "link-local"},
		{target: "http://8.8.8.8/", refuse: "in no probe.allow.cidrs entry"},
	} {
		pt, r := pol.check(tc.target)
		if tc.refuse != "" {
			if r == nil || !strings.Contains(r.msg, tc.refuse) || r.reason != ReasonNotAllowed {
				t.Errorf("%s: allowed or wrong refusal %v; want %q", tc.target, r, tc.refuse)
			}
			continue
		}
		if r != nil {
			t.Errorf("%s: refused: %v", tc.target, r)
			continue
		}
		if pt.basis != tc.basis {
			t.Errorf("%s: basis %v, want %v", tc.target, pt.basis, tc.basis)
		}
		for _, s := range tc.ok {
			if r := pol.allowAddr(pt, a(s)); r != nil {
				t.Errorf("%s: address %s refused: %v", tc.target, s, r)
			}
		}
		for _, s := range tc.no {
			if pol.allowAddr(pt, a(s)) == nil {
				t.Errorf("%s: address %s allowed", tc.target, s)
			}
		}
	}
}

func TestPolicyWithoutConfiguredTargets(t *testing.T) {
	off := false
	pol := newPolicy(&config.Config{
		Targets: []config.Target{{Name: "a", URL: "http://127.0.0.1:8000", BearerToken: "k"}},
		Probe:   config.ProbeSettings{Allow: config.ProbeAllow{ConfiguredTargets: &off}},
	})
	if _, r := pol.check("http://127.0.0.1:8000"); r == nil {
		t.Error("configured target allowed with configured_targets: false")
	}
	// Its credentials still belong to its origin, and are scrubbed.
	if pol.byOrigin["http://127.0.0.1:8000"] == nil || len(pol.secrets) != 1 {
		t.Errorf("policy = %+v", pol)
	}
}

func TestSpecialEmbedded(t *testing.T) {
	for _, s := range []string{"169.254.169.254", "::ffff:169.254.169.254", "64:ff9b::a9fe:a9fe", "::a9fe:a9fe", "::7f00:1", "::", "0.1.2.3"} {
		if _, ok := special(netip.MustParseAddr(s)); !ok {
			t.Errorf("%s not special", s)
		}
	}
	for _, s := range []string{"10.0.0.1", "64:ff9b::a01:101", "2001:db8::1", "fd00::1", "100.64.0.1"} {
		if sr, ok := special(netip.MustParseAddr(s)); ok {
			t.Errorf("%s special: %s", s, sr.what)
		}
	}
}

func TestDisplayTarget(t *testing.T) {
	for raw, want := range map[string]string{
		"http://user:pw@host:80/v1?key=k#f":    "http://<credentials removed>@host:80/v1?<query removed>#<fragment removed>",
		"http://host/":                         "http://host/",
		"file:///etc/passwd":                   "file:///etc/passwd",
		"%zz://u:p@h":                          "<credentials removed>@h",
		"http://h/" + strings.Repeat("a", 300): "http://h/" + strings.Repeat("a", 247) + "…",
	} {
		if got := displayTarget(raw); got != want {
			t.Errorf("displayTarget(%q) = %q, want %q", raw, got, want)
		}
	}
}
