package prober

import (
	"fmt"
	"net/netip"
	"net/url"
	"path"
	"strconv"
	"strings"

	"github.com/infer-exporter/infer_exporter/internal/config"
)

// Failure reasons of a probe: the values of probe_failed_due_to{reason}.
// The set is closed, so the label's cardinality is bounded.
const (
	// ReasonBadTarget: the target is not an absolute http(s) URL this
	// prober accepts (scheme, credentials, query, ambiguous host spelling).
	ReasonBadTarget = "bad_target"
	// ReasonNotAllowed: the allow list refused the target, its resolved
	// address, or the module's credentials for it.
	ReasonNotAllowed = "not_allowed"
	// ReasonConcurrencyCeiling: the target already had
	// probe.max_concurrent_probes probes running.
	ReasonConcurrencyCeiling = "concurrency_ceiling"
	// ReasonRateCeiling: the requests could not all be sent before the
	// deadline within probe.max_requests_per_second.
	ReasonRateCeiling = "rate_ceiling"
	// ReasonRequestFailed: a request did not succeed (HTTP error, timeout,
	// broken stream, disconnect).
	ReasonRequestFailed = "request_failed"
	// ReasonSLOMissed: every request succeeded but one missed an SLO
	// threshold of the module.
	ReasonSLOMissed = "slo_missed"
	// ReasonWrongAnswer: a known-answer check did not match.
	ReasonWrongAnswer = "wrong_answer"
	// ReasonInvalidAnswer: a structured answer or a tool call was not valid
	// (its JSON, its schema, its function: plan.Kinds.Check).
	ReasonInvalidAnswer = "invalid_answer"
	// ReasonPerplexityExceeded: a perplexity module's score was above its
	// max_perplexity.
	ReasonPerplexityExceeded = "perplexity_exceeded"
)

// Reasons lists every failure reason, in precedence order: a probe reports
// the first that applies.
var Reasons = []string{ReasonBadTarget, ReasonNotAllowed, ReasonConcurrencyCeiling, ReasonRateCeiling,
	ReasonRequestFailed, ReasonSLOMissed, ReasonWrongAnswer, ReasonPerplexityExceeded, ReasonInvalidAnswer}

// refusal is a target or address the prober will not reach, with the
// reason label and a sentence for the debug output.
type refusal struct {
	reason string
	msg    string
}

func (r *refusal) Error() string { return r.msg }

func refuse(reason, format string, args ...any) *refusal {
	return &refusal{reason: reason, msg: fmt.Sprintf(format, args...)}
}

// basis is why a target host passed the allow list; it decides which
// addresses the host may resolve to at connect time.
type basis int

const (
	// basisConfiguredAddr: an IP literal host:port of a configured target.
	// Only that very address may be connected to.
	basisConfiguredAddr basis = iota
	// basisCIDRAddr: an IP literal in probe.allow.cidrs; likewise.
	basisCIDRAddr
	// basisConfiguredName: a host name and port of a configured target.
	// The operator wrote it, so it may resolve to loopback, but never to
	// another special address.
	basisConfiguredName
	// basisPattern: a host name matching probe.allow.hosts. It may resolve
	// to no special address (loopback included), unless a CIDR names it.
	basisPattern
	// basisCIDR: a host name allowed by nothing but probe.allow.cidrs: it
	// must resolve into one of them.
	basisCIDR
)

// probeTarget is a target URL that parsed strictly.
type probeTarget struct {
	url    *url.URL // canonical: lower-case scheme and host, explicit port, no trailing dot
	scheme string
	// host is a lower-case host name without trailing dot, or an IP
	// address's text (unmapped, no brackets).
	host string
	addr netip.Addr // valid when host is an IP literal
	port uint16
	basis
}

// hostPort is host:port with IPv6 in brackets.
func (t *probeTarget) hostPort() string {
	return joinHostPort(t.host, t.port)
}

// origin is scheme://host:port: the unit of ceilings and of credential scope.
func (t *probeTarget) origin() string { return t.scheme + "://" + t.hostPort() }

func joinHostPort(host string, port uint16) string {
	if strings.Contains(host, ":") {
		return "[" + host + "]:" + strconv.Itoa(int(port))
	}
	return host + ":" + strconv.Itoa(int(port))
}

// maxTargetLen bounds the target parameter: a URL of an inference server is
// short, and a long one is logged and kept in the history.
const maxTargetLen = 2048

// parseTarget parses a target URL strictly. It accepts only absolute http
// and https URLs with a host, without credentials, query or fragment, and
// refuses host spellings that some resolvers read as an IP address while
// Go's parser does not (decimal 2852039166, octal 0251.0376.0251.0376, hex
// 0xa9fea9fe, short forms 127.1): glibc's getaddrinfo, behind Go's cgo
// resolver and most other tools, turns each into 169.254.169.254 or
// 127.0.0.1 without asking DNS.
func parseTarget(raw string) (*probeTarget, *refusal) {
	if len(raw) > maxTargetLen {
		return nil, refuse(ReasonBadTarget, "target is longer than %d bytes", maxTargetLen)
	}
	u, err := url.Parse(raw)
	if err != nil {
		return nil, refuse(ReasonBadTarget, "target is not a URL: %v", strings.TrimPrefix(err.Error(), "parse "))
	}
	scheme := strings.ToLower(u.Scheme)
	switch {
	case scheme != "http" && scheme != "https":
		if scheme == "" {
			return nil, refuse(ReasonBadTarget, "target must be an absolute http:// or https:// URL")
		}
		return nil, refuse(ReasonBadTarget, "scheme %q is refused: only http and https", scheme)
	case u.Opaque != "":
		return nil, refuse(ReasonBadTarget, "target must be an absolute http:// or https:// URL with a host")
	case u.User != nil:
		return nil, refuse(ReasonBadTarget, "target must not carry credentials: they belong in the module or target configuration")
	case u.RawQuery != "" || u.ForceQuery || u.Fragment != "" || u.RawFragment != "":
		return nil, refuse(ReasonBadTarget, "target must not carry a query or fragment: credentials and options belong in the configuration")
	}
	port := uint16(80)
	if scheme == "https" {
		port = 443
	}
	if p := u.Port(); p != "" {
		n, err := strconv.ParseUint(p, 10, 16)
		if err != nil || n == 0 {
			return nil, refuse(ReasonBadTarget, "port %q is not in 1..65535", p)
		}
		port = uint16(n)
	}
	host := u.Hostname()
	bracketed := strings.HasPrefix(u.Host, "[")
	if !bracketed {
		host = strings.TrimSuffix(host, ".")
	}
	t := &probeTarget{scheme: scheme, port: port}
	if a, err := netip.ParseAddr(host); err == nil {
		if a.Zone() != "" {
			return nil, refuse(ReasonBadTarget, "IPv6 zones are refused: %q", host)
		}
		t.addr = a.Unmap()
		t.host = t.addr.String()
	} else {
		if bracketed {
			return nil, refuse(ReasonBadTarget, "%q is not an IPv6 address", host)
		}
		host = strings.ToLower(host)
		if why := hostNameProblem(host); why != "" {
			return nil, refuse(ReasonBadTarget, "host %q is refused: %s", host, why)
		}
		t.host = host
	}
	canon := *u
	canon.Scheme = scheme
	canon.Host = t.hostPort()
	canon.User = nil
	t.url = &canon
	return t, nil
}

// hostNameProblem says why h is not an acceptable DNS host name, or "".
func hostNameProblem(h string) string {
	if h == "" {
		return "empty host"
	}
	if len(h) > 253 {
		return "longer than 253 characters"
	}
	labels := strings.Split(h, ".")
	for _, l := range labels {
		if l == "" || len(l) > 63 {
			return "a label is empty or longer than 63 characters"
		}
		for i := 0; i < len(l); i++ {
			c := l[i]
			if !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '-' || c == '_') {
				return "only letters, digits, '-', '_' and '.' are accepted (write IDNs in punycode)"
			}
		}
	}
	// As the WHATWG URL standard does: a host whose last label is a number
	// is an IPv4 address in some spelling, never a DNS name.
	if last := labels[len(labels)-1]; isNumericLabel(last) {
		return "it is an IPv4 address in a non-standard spelling (decimal, octal, hex or short form) that resolvers may read as any address; write it as a dotted quad"
	}
	return ""
}

func isNumericLabel(l string) bool {
	if strings.HasPrefix(l, "0x") {
		for i := 2; i < len(l); i++ {
			c := l[i]
			if !(c >= '0' && c <= '9' || c >= 'a' && c <= 'f') {
				return false
			}
		}
		return true
	}
	for i := 0; i < len(l); i++ {
		if l[i] < '0' || l[i] > '9' {
			return false
		}
	}
	return true
}

// specialRange is a range of addresses that a host name may never reach by
// pattern, and that only a CIDR lying inside the range opens.
type specialRange struct {
	prefix netip.Prefix
	what   string
	// loopback ranges are reachable by configured target names.
	loopback bool
}

var specialRanges = func() []specialRange {
	r := func(p, what string, loopback bool) specialRange {
		return specialRange{prefix: netip.MustParsePrefix(p), what: what, loopback: loopback}
	}
	return []specialRange{
		r("127.0.0.0/8", "a loopback address", true),
		r("::1/128", "a loopback address", true),
		r("169.254.0.0/16", "a link-local address (cloud metadata services live here)", false),
		r("fe80::/10", "a link-local address", false),
		r("fd00:ec2::254/128", "a cloud metadata address (AWS IMDS over IPv6)", false),
		r("100.100.100.200/32", "a cloud metadata address (Alibaba Cloud)", false),
		r("0.0.0.0/8", "an unspecified (\"this network\") address", false),
		r("::/128", "the unspecified address", false),
		r("224.0.0.0/4", "a multicast address", false),
		r("ff00::/8", "a multicast address", false),
		r("255.255.255.255/32", "the broadcast address", false),
	}
}()

// Prefixes whose addresses embed an IPv4 address in their last 32 bits.
var (
	nat64Prefix      = netip.MustParsePrefix("64:ff9b::/96")
	ipv4CompatPrefix = netip.MustParsePrefix("::/96")
)

// special returns the special range a belongs to, looking through IPv4-mapped
// and embedded-IPv4 forms.
func special(a netip.Addr) (specialRange, bool) {
	a = a.Unmap()
	for _, r := range specialRanges {
		if r.prefix.Contains(a) {
			return r, true
		}
	}
	if a.Is6() && (nat64Prefix.Contains(a) || ipv4CompatPrefix.Contains(a)) {
		b := a.As16()
		if r, ok := special(netip.AddrFrom4([4]byte{b[12], b[13], b[14], b[15]})); ok {
			return r, true
		}
	}
	return specialRange{}, false
}

// policy is the allow list of one configuration, ready to check targets.
type policy struct {
	patterns []string
	prefixes []netip.Prefix
	// configured holds host:port of every configured target when
	// configured targets are allowed.
	configured map[string]bool
	// byOrigin maps scheme://host:port to the first configured target at
	// that origin, whose credentials a probe of that origin uses.
	byOrigin map[string]*config.Target
	// secrets are every credential of the configuration, scrubbed from
	// every log line and debug output.
	secrets []string
}

func newPolicy(c *config.Config) *policy {
	p := &policy{
		patterns:   c.Probe.Allow.Hosts,
		prefixes:   c.Probe.Allow.Prefixes(),
		configured: map[string]bool{},
		byOrigin:   map[string]*config.Target{},
	}
	for i := range c.Targets {
		ct := &c.Targets[i]
		if ct.BearerToken != "" {
			p.secrets = append(p.secrets, string(ct.BearerToken))
		}
		t, err := parseTarget(ct.URL)
		if err != nil {
			continue // the configuration's own checks reported it
		}
		if c.Probe.Allow.AllowsConfiguredTargets() {
			p.configured[t.hostPort()] = true
		}
		if _, ok := p.byOrigin[t.origin()]; !ok {
			p.byOrigin[t.origin()] = ct
		}
	}
	for _, m := range c.Modules {
		if m.BearerToken != "" {
			p.secrets = append(p.secrets, string(m.BearerToken))
		}
	}
	return p
}

// check parses raw and decides whether its host may be probed, and on what
// basis. It does no DNS lookup: names are resolved at connect time, where
// allowAddr checks each address actually connected to.
func (p *policy) check(raw string) (*probeTarget, *refusal) {
	t, r := parseTarget(raw)
	if r != nil {
		return nil, r
	}
	if p.configured[t.hostPort()] {
		t.basis = basisConfiguredName
		if t.addr.IsValid() {
			t.basis = basisConfiguredAddr
		}
		return t, nil
	}
	if t.addr.IsValid() {
		if err := p.inCIDRs(t.addr); err != nil {
			return nil, refuse(ReasonNotAllowed, "address %s is not allowed: %s, and %s is not a configured target",
				t.host, err.msg, t.hostPort())
		}
		t.basis = basisCIDRAddr
		return t, nil
	}
	for _, pat := range p.patterns {
		if ok, _ := path.Match(pat, t.host); ok {
			t.basis = basisPattern
			return t, nil
		}
	}
	if len(p.prefixes) > 0 {
		t.basis = basisCIDR
		return t, nil
	}
	return nil, refuse(ReasonNotAllowed, "host %s matches no probe.allow.hosts pattern and %s is not a configured target",
		t.host, t.hostPort())
}

// inCIDRs reports whether a lies in an allowed CIDR. An address of a special
// range needs a CIDR inside that range: 0.0.0.0/0 opens no metadata
// address.
func (p *policy) inCIDRs(a netip.Addr) *refusal {
	a = a.Unmap()
	sr, isSpecial := special(a)
	for _, pfx := range p.prefixes {
		if !pfx.Contains(a) {
			continue
		}
		if !isSpecial || (pfx.Bits() >= sr.prefix.Bits() && sr.prefix.Contains(pfx.Addr())) {
			return nil
		}
	}
	if isSpecial {
		return refuse(ReasonNotAllowed, "it is %s, reachable only through a probe.allow.cidrs entry inside %s", sr.what, sr.prefix)
	}
	return refuse(ReasonNotAllowed, "it is in no probe.allow.cidrs entry")
}

// allowAddr decides whether the prober may connect to a for target t. It runs
// on every address about to be connected to, after DNS, so that what a name
// resolves to (and re-resolves to, in a rebinding attack) is what is checked.
func (p *policy) allowAddr(t *probeTarget, a netip.Addr) *refusal {
	a = a.Unmap()
	if t.addr.IsValid() {
		if a == t.addr {
			return nil
		}
		return refuse(ReasonNotAllowed, "%s is not the target's address %s", a, t.addr)
	}
	cidrErr := p.inCIDRs(a)
	if cidrErr == nil {
		return nil
	}
	switch t.basis {
	case basisConfiguredName:
		if sr, ok := special(a); ok && !sr.loopback {
			return refuse(ReasonNotAllowed, "%s resolved to %s, %s", t.host, a, sr.what)
		}
		return nil
	case basisPattern:
		if sr, ok := special(a); ok {
			return refuse(ReasonNotAllowed, "%s resolved to %s, %s, which host patterns never reach (list it in probe.allow.cidrs to allow it)",
				t.host, a, sr.what)
		}
		return nil
	default:
		return refuse(ReasonNotAllowed, "%s resolved to %s: %s", t.host, a, cidrErr.msg)
	}
}

// displayTarget is raw as it may be shown in logs, debug output and the
// landing page: without userinfo, query or fragment (a password or key may
// hide there), and bounded.
func displayTarget(raw string) string {
	if u, err := url.Parse(raw); err == nil {
		c := *u
		hadUser := c.User != nil
		hadQuery := c.RawQuery != "" || c.ForceQuery
		hadFragment := c.Fragment != ""
		c.User, c.RawQuery, c.ForceQuery, c.Fragment, c.RawFragment = nil, "", false, "", ""
		raw = c.String()
		if hadUser {
			raw = strings.Replace(raw, "//", "//<credentials removed>@", 1)
		}
		if hadQuery {
			raw += "?<query removed>"
		}
		if hadFragment {
			raw += "#<fragment removed>"
		}
	} else if i := strings.LastIndexByte(raw, '@'); i >= 0 {
		raw = "<credentials removed>" + raw[i:]
	}
	const maxShown = 256
	if len(raw) > maxShown {
		raw = raw[:maxShown] + "…"
	}
	return raw
}
