package prober

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/netip"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"time"
)

// Resolver looks up the addresses of a host name. *net.Resolver satisfies
// it; tests pass a fake so that names can resolve to any address without
// DNS.
type Resolver interface {
	LookupNetIP(ctx context.Context, network, host string) ([]netip.Addr, error)
}

// guard dials for one probe. It resolves the target's host itself, refuses
// every address the policy does not allow, and checks again, in the
// dialer's Control hook, the very address the socket is about to connect()
// to: no address reaches connect() without passing allowAddr, whatever the
// resolver answered or the transport asked for.
type guard struct {
	policy   *policy
	target   *probeTarget
	resolver Resolver
	logger   *slog.Logger
	// beforeConnect, when set, runs after the check passed, right before
	// connect(); tests count connects with it.
	beforeConnect func(address string) error
	// refused is set when an address was refused, so that the probe can
	// say not_allowed whatever error the transport wrapped around it.
	refused atomic.Bool
}

// dialTimeout bounds one connection attempt; the probe's deadline bounds
// them all.
const dialTimeout = 10 * time.Second

// DialContext has the signature of http.Transport.DialContext.
func (g *guard) DialContext(ctx context.Context, network, address string) (net.Conn, error) {
	host, portText, err := net.SplitHostPort(address)
	if err != nil {
		return nil, err
	}
	port, err := strconv.ParseUint(portText, 10, 16)
	if err != nil {
		return nil, fmt.Errorf("bad port in %q", address)
	}
	var addrs []netip.Addr
	if a, err := netip.ParseAddr(host); err == nil {
		addrs = []netip.Addr{a}
	} else {
		// No proxy and no redirect: the transport only ever dials the
		// probe's own host. Anything else is refused before DNS.
		if !strings.EqualFold(strings.TrimSuffix(host, "."), g.target.host) || uint16(port) != g.target.port {
			return nil, g.refuse(refuse(ReasonNotAllowed, "dial to %s is not the probe's target %s", address, g.target.hostPort()))
		}
		addrs, err = g.resolver.LookupNetIP(ctx, "ip", host)
		if err != nil {
			return nil, fmt.Errorf("resolving %s: %w", host, err)
		}
		if len(addrs) == 0 {
			return nil, fmt.Errorf("resolving %s: no addresses", host)
		}
	}
	dialer := &net.Dialer{
		Timeout:   dialTimeout,
		KeepAlive: 30 * time.Second,
		// Control runs after socket() and before connect(): the last
		// moment to refuse, on the literal address connect() gets.
		ControlContext: func(_ context.Context, _, address string, _ syscall.RawConn) error {
			ap, err := netip.ParseAddrPort(address)
			if err != nil {
				return g.refuse(refuse(ReasonNotAllowed, "connect to unparsable address %q refused", address))
			}
			if r := g.policy.allowAddr(g.target, ap.Addr()); r != nil {
				return g.refuse(r)
			}
			if ap.Port() != g.target.port {
				return g.refuse(refuse(ReasonNotAllowed, "connect to port %d is not the target's port %d", ap.Port(), g.target.port))
			}
			if g.beforeConnect != nil {
				return g.beforeConnect(address)
			}
			return nil
		},
	}
	var errs []error
	for _, a := range addrs {
		if r := g.policy.allowAddr(g.target, a); r != nil {
			errs = append(errs, g.refuse(r))
			continue
		}
		conn, err := dialer.DialContext(ctx, network, netip.AddrPortFrom(a.Unmap(), uint16(port)).String())
		if err == nil {
			return conn, nil
		}
		errs = append(errs, err)
		if ctx.Err() != nil {
			break
		}
	}
	return nil, errors.Join(errs...)
}

// refuse records and logs a refused address, and returns it as an error.
func (g *guard) refuse(r *refusal) error {
	g.refused.Store(true)
	g.logger.Error("Connection refused by the allow list", "reason", r.msg)
	return r
}

// newScoreTransport builds the transport of a perplexity probe's scoring
// request, which is not measured as a generation: net/http, as the
// continuous quality monitor's (quality.NewMonitor). Its connections die
// with the probe, it uses no proxy from the environment (a proxy would
// both be scored as the server and dodge the allow list), and it dials
// through the guard.
func newScoreTransport(g *guard) *http.Transport {
	return &http.Transport{
		Proxy:                  nil,
		DialContext:            g.DialContext,
		MaxIdleConnsPerHost:    1,
		IdleConnTimeout:        90 * time.Second,
		TLSHandshakeTimeout:    10 * time.Second,
		DisableCompression:     true,
		ForceAttemptHTTP2:      false,
		MaxResponseHeaderBytes: maxHeaderBytes,
	}
}
