package prober

import (
	"context"
	"errors"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/infer-exporter/infer_exporter/internal/simulator"
)

// ssrfResolver answers as a hostile or careless DNS would.
var ssrfResolver = fakeResolver{
	"rebind.test":           {netip.MustParseAddr("169.254.169.254")},
	"mapped.test":           {netip.MustParseAddr("::ffff:169.254.169.254")},
	"nat64.test":            {netip.MustParseAddr("64:ff9b::a9fe:a9fe")},
	"loop.test":             {netip.MustParseAddr("127.0.0.1")},
	"six.test":              {netip.MustParseAddr("::1")},
	"zero.test":             {netip.MustParseAddr("0.0.0.0")},
	"multi.test":            {netip.MustParseAddr("169.254.169.254"), netip.MustParseAddr("127.0.0.1")},
	"localhost":             {netip.MustParseAddr("127.0.0.1"), netip.MustParseAddr("::1")},
	"localhost.localdomain": {netip.MustParseAddr("127.0.0.1")},
	// What glibc's getaddrinfo makes of these spellings (getent ahosts
	// 2852039166 prints 169.254.169.254): a resolver may read them as
	// addresses even though Go's parser does not.
	"2852039166":          {netip.MustParseAddr("169.254.169.254")},
	"0251.0376.0251.0376": {netip.MustParseAddr("169.254.169.254")},
	"0xa9fea9fe":          {netip.MustParseAddr("169.254.169.254")},
	"127.1":               {netip.MustParseAddr("127.0.0.1")},
}

// TestSSRF sends every refused kind of target through the handler and
// asserts that each is refused with probe_success 0 and a debug line saying
// why, and that no socket connect() was made and nothing reached a server.
func TestSSRF(t *testing.T) {
	url, _, rec := startSim(t, instantSim())
	port := url[strings.LastIndexByte(url, ':')+1:]
	trap := &recorder{next: http.NotFoundHandler()} // a disallowed server on 127.0.0.1
	trapSrv := httptest.NewServer(trap)
	defer trapSrv.Close()
	redirect := func(to string) *httptest.Server {
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			http.Redirect(w, r, to, http.StatusTemporaryRedirect)
		}))
		t.Cleanup(srv.Close)
		return srv
	}
	toMetadata := redirect("http://169.254.169.254/latest/meta-data/")
	toTrap := redirect(trapSrv.URL + "/v1/chat/completions")

	base := `targets:
  - name: sim
    url: {{URL}}
    model: sim-model
    bearer_token_file: token
  - {name: r1, url: ` + toMetadata.URL + `, model: m}
  - {name: r2, url: ` + toTrap.URL + `, model: m}
modules:
  one:
    prompt: {output_tokens: {dist: fixed, mean: 2}}
probe:
  max_requests_per_second: 1000
  allow:
    hosts: ["*.test"]
`
	for _, policy := range []struct {
		name string
		yml  string
	}{
		{"configured targets and a host pattern", base},
		// Even the widest CIDRs open no special address.
		{"every address by CIDR", base + `    cidrs: ["0.0.0.0/0", "::/0"]` + "\n"},
	} {
		t.Run(policy.name, func(t *testing.T) {
			e := newEnv(t, loadConfig(t, policy.yml, url), ssrfResolver)
			simBefore := rec.count()
			for _, tc := range []struct {
				target string
				reason string
				why    string // in the debug output
			}{
				{"http://169.254.169.254/latest/meta-data/", ReasonNotAllowed, "169.254.169.254 is not allowed"},
				{"http://169.254.169.254:" + port + "/", ReasonNotAllowed, "a link-local address (cloud metadata services live here)"},
				{"http://[::ffff:169.254.169.254]/", ReasonNotAllowed, "address 169.254.169.254 is not allowed"},
				{"http://[::ffff:a9fe:a9fe]/", ReasonNotAllowed, "address 169.254.169.254 is not allowed"},
				{"http://[64:ff9b::a9fe:a9fe]/", ReasonNotAllowed, "address 64:ff9b::a9fe:a9fe is not allowed"},
				{"http://%31%36%39.254.169.254/", ReasonBadTarget, "invalid URL escape"},
				{"http://[fd00:ec2::254]/", ReasonNotAllowed, "address fd00:ec2::254 is not allowed"},
				{"http://2852039166/", ReasonBadTarget, "non-standard spelling"},
				{"http://0251.0376.0251.0376/", ReasonBadTarget, "non-standard spelling"},
				{"http://0xa9fea9fe/", ReasonBadTarget, "non-standard spelling"},
				{"http://0xA9.0xFE.0xA9.0xFE/", ReasonBadTarget, "non-standard spelling"},
				{"http://169.254.43518/", ReasonBadTarget, "non-standard spelling"},
				{"http://127.1:" + port + "/", ReasonBadTarget, "non-standard spelling"},
				{"http://0:" + port + "/", ReasonBadTarget, "non-standard spelling"},
				{"http://localhost:" + port + "/", ReasonNotAllowed, "localhost"},
				{"http://LOCALHOST:" + port + "/", ReasonNotAllowed, "localhost"},
				{"http://localhost.:" + port + "/", ReasonNotAllowed, "localhost"},
				{"http://localhost.localdomain:" + port + "/", ReasonNotAllowed, "localhost.localdomain"},
				{"http://[::1]:" + port + "/", ReasonNotAllowed, "::1"},
				{"http://0.0.0.0:" + port + "/", ReasonNotAllowed, "0.0.0.0"},
				{"http://127.0.0.2:" + port + "/", ReasonNotAllowed, "127.0.0.2"},
				{trapSrv.URL + "/", ReasonNotAllowed, "is not a configured target"},
				{"http://rebind.test/", ReasonNotAllowed, "rebind.test resolved to 169.254.169.254, a link-local address"},
				{"http://mapped.test/", ReasonNotAllowed, "mapped.test resolved to 169.254.169.254"},
				{"http://nat64.test/", ReasonNotAllowed, "nat64.test resolved to 64:ff9b::a9fe:a9fe, a link-local address"},
				{"http://loop.test:" + port + "/", ReasonNotAllowed, "loop.test resolved to 127.0.0.1, a loopback address"},
				{"http://six.test:" + port + "/", ReasonNotAllowed, "six.test resolved to ::1, a loopback address"},
				{"http://zero.test:" + port + "/", ReasonNotAllowed, "zero.test resolved to 0.0.0.0"},
				{"http://multi.test:" + port + "/", ReasonNotAllowed, "multi.test resolved to 169.254.169.254"},
				{"file:///etc/passwd", ReasonBadTarget, `scheme \"file\" is refused: only http and https`},
				{"gopher://127.0.0.1:" + port + "/_POST%20/v1/chat/completions", ReasonBadTarget, `scheme \"gopher\" is refused`},
				{"ftp://127.0.0.1/", ReasonBadTarget, `scheme \"ftp\" is refused`},
				{"javascript:alert(1)", ReasonBadTarget, `scheme \"javascript\" is refused`},
				{"//127.0.0.1:" + port + "/", ReasonBadTarget, "absolute http:// or https:// URL"},
				{"127.0.0.1:" + port, ReasonBadTarget, "not a URL"},
				{"http:127.0.0.1", ReasonBadTarget, "with a host"},
				{"http://user:hunter2@127.0.0.1:" + port + "/", ReasonBadTarget, "must not carry credentials"},
				{url + "/?api_key=hunter2", ReasonBadTarget, "must not carry a query"},
				{"http://[fe80::1%25eth0]:" + port + "/", ReasonBadTarget, "IPv6 zones are refused"},
				{"http://127.0.0.1:99999/", ReasonBadTarget, "is not in 1..65535"},
				{"http://exa_mple.test\u00e9/", ReasonBadTarget, "only letters, digits"},
			} {
				code, body := e.scrape(t, "one", tc.target, "5", true)
				if code != http.StatusOK {
					t.Errorf("%s: status %d %q", tc.target, code, body)
					continue
				}
				metricsPart := body[strings.Index(body, "Metrics that would have been returned:"):]
				if !strings.Contains(metricsPart, "probe_success 0") ||
					!strings.Contains(metricsPart, `probe_failed_due_to{reason="`+tc.reason+`"} 1`) {
					t.Errorf("%s: not refused as %s:\n%s", tc.target, tc.reason, body)
				}
				if !strings.Contains(body, tc.why) {
					t.Errorf("%s: debug output does not say %q:\n%s", tc.target, tc.why, body)
				}
				if strings.Contains(body, "hunter2") {
					t.Errorf("%s: a password from the target is echoed:\n%s", tc.target, body)
				}
			}
			if got := e.connects.list(); len(got) != 0 {
				t.Errorf("refused targets reached connect(): %v", got)
			}
			if rec.count() != simBefore || trap.count() != 0 {
				t.Errorf("refused targets reached a server: simulator %d, trap %d", rec.count()-simBefore, trap.count())
			}

			// A redirect is an answer, not a hop: the redirector is allowed
			// and connected to, the place it points to is not.
			for _, tc := range []struct {
				srv  *httptest.Server
				dest string
			}{
				{toMetadata, "http://169.254.169.254/latest/meta-data/"},
				{toTrap, trapSrv.URL + "/v1/chat/completions"},
			} {
				_, body := e.scrape(t, "one", tc.srv.URL, "5", true)
				if !strings.Contains(body, "probe_success 0") || !strings.Contains(body, "probe_http_status_code 307") ||
					!strings.Contains(body, `redirect to \"`+tc.dest+`\" not followed`) {
					t.Errorf("redirect to %s followed or not reported:\n%s", tc.dest, body)
				}
			}
			want := []string{strings.TrimPrefix(toMetadata.URL, "http://"), strings.TrimPrefix(toTrap.URL, "http://")}
			if got := e.connects.list(); strings.Join(got, " ") != strings.Join(want, " ") {
				t.Errorf("connects = %v, want only the redirectors %v", got, want)
			}
			if trap.count() != 0 {
				t.Errorf("the redirect's destination was reached")
			}

			// The suite can fail: the configured target is reached.
			_, body := e.scrape(t, "one", url, "5", false)
			if !strings.Contains(body, "probe_success 1") {
				t.Errorf("configured target refused:\n%s", body)
			}
			if got := e.connects.list(); len(got) != 3 || got[2] != strings.TrimPrefix(url, "http://") {
				t.Errorf("connects = %v, want the simulator last", got)
			}
		})
	}
}

// flipResolver answers 127.0.0.1 the first time and 169.254.169.254 after:
// DNS rebinding.
type flipResolver struct{ calls atomic.Int32 }

func (f *flipResolver) LookupNetIP(context.Context, string, string) ([]netip.Addr, error) {
	if f.calls.Add(1) == 1 {
		return []netip.Addr{netip.MustParseAddr("127.0.0.1")}, nil
	}
	return []netip.Addr{netip.MustParseAddr("169.254.169.254")}, nil
}

// TestDNSRebinding: a name allowed by CIDR resolves to an allowed address
// for the first connection and to the metadata address for the second.
// The check at connect time refuses the second.
func TestDNSRebinding(t *testing.T) {
	url, sim, rec := startSim(t, instantSim())
	// Both requests hold their connection, so the second one dials.
	if err := sim.SetFaults(simulator.Faults{StallBeforeFirstToken: 300 * time.Millisecond}); err != nil {
		t.Fatal(err)
	}
	port := url[strings.LastIndexByte(url, ':')+1:]
	cfg := loadConfig(t, `modules:
  two:
    requests: 2
    concurrency: 2
    prompt: {output_tokens: {dist: fixed, mean: 2}}
probe:
  max_requests_per_second: 1000
  allow:
    configured_targets: false
    cidrs: ["127.0.0.1/32"]
`, url)
	res := &flipResolver{}
	e := newEnv(t, cfg, res)
	_, body := e.scrape(t, "two", "http://flip.example:"+port+"/", "10", true)
	if !strings.Contains(body, `probe_failed_due_to{reason="not_allowed"} 1`) ||
		!strings.Contains(body, `probe_requests{outcome="success"} 1`) ||
		!strings.Contains(body, "flip.example resolved to 169.254.169.254") {
		t.Errorf("rebound address not refused:\n%s", body)
	}
	if res.calls.Load() != 2 {
		t.Errorf("resolver called %d times, want one per connection", res.calls.Load())
	}
	if got := e.connects.list(); len(got) != 1 || got[0] != "127.0.0.1:"+port {
		t.Errorf("connects = %v, want only the first, allowed address", got)
	}
	if rec.count() != 1 {
		t.Errorf("server saw %d requests, want 1", rec.count())
	}
}

// TestNumericSpellings checks both paths a numeric host could take: Go's
// parsers do not read these spellings as addresses (so parseTarget must
// refuse them as names), and if one reached a resolver that reads them as
// glibc does, the connect-time check refuses the address it yields.
func TestNumericSpellings(t *testing.T) {
	spellings := []string{"2852039166", "0251.0376.0251.0376", "0xa9fea9fe", "127.1"}
	for _, s := range spellings {
		if ip := net.ParseIP(s); ip != nil {
			t.Errorf("net.ParseIP(%q) = %v: Go reads it as an address", s, ip)
		}
		if a, err := netip.ParseAddr(s); err == nil {
			t.Errorf("netip.ParseAddr(%q) = %v", s, a)
		}
		if _, r := parseTarget("http://" + s + "/"); r == nil || r.reason != ReasonBadTarget {
			t.Errorf("parseTarget accepted %q", s)
		}
	}
	// The resolver path, with the parse gate bypassed: a policy that admits
	// every name by pattern, and targets built by hand.
	pol := &policy{patterns: []string{"*"}}
	for _, s := range spellings {
		c := &connects{}
		g := &guard{policy: pol, target: &probeTarget{host: s, port: 80, basis: basisPattern},
			resolver: ssrfResolver, logger: slog.New(slog.DiscardHandler), beforeConnect: c.before}
		conn, err := g.DialContext(context.Background(), "tcp", s+":80")
		if conn != nil {
			conn.Close()
		}
		var r *refusal
		if !errors.As(err, &r) || r.reason != ReasonNotAllowed || !g.refused.Load() {
			t.Errorf("%s: dial not refused by the allow list: %v", s, err)
		}
		if len(c.list()) != 0 {
			t.Errorf("%s: connect() reached: %v", s, c.list())
		}
	}
}

// TestGuardDialsOnlyItsTarget: the transport has no proxy and follows no
// redirect, but should anything ask the guard for another host, it refuses
// before DNS.
func TestGuardDialsOnlyItsTarget(t *testing.T) {
	pol := &policy{patterns: []string{"*.test"}}
	c := &connects{}
	g := &guard{policy: pol, target: &probeTarget{host: "loop.test", port: 8000, basis: basisPattern},
		resolver: ssrfResolver, logger: slog.New(slog.DiscardHandler), beforeConnect: c.before}
	for _, addr := range []string{"other.test:8000", "loop.test:8001", "169.254.169.254:80", "[::1]:8000"} {
		if _, err := g.DialContext(context.Background(), "tcp", addr); err == nil {
			t.Errorf("dial %s allowed", addr)
		}
	}
	if len(c.list()) != 0 {
		t.Errorf("connect() reached: %v", c.list())
	}
}
