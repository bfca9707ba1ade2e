package otlp

import (
	"fmt"
	"net/url"
	"strings"
)

// Protocol is the OTLP transport.
type Protocol string

const (
	// HTTPProtobuf: OTLP/HTTP with protobuf bodies, the specification's
	// default, on a collector's port 4318.
	HTTPProtobuf Protocol = "http/protobuf"
	// GRPC: OTLP/gRPC, on a collector's port 4317 (what the OpenTelemetry
	// Operator's injection points OTEL_EXPORTER_OTLP_ENDPOINT at).
	GRPC Protocol = "grpc"
)

// signal is one kind of OTLP data: its name in the variables and its
// OTLP/HTTP path.
type signal struct {
	env  string // METRICS, TRACES
	path string // /v1/metrics, /v1/traces
}

var (
	signalMetrics = signal{"METRICS", "/v1/metrics"}
	signalTraces  = signal{"TRACES", "/v1/traces"}
)

const (
	envProtocol = "OTEL_EXPORTER_OTLP_PROTOCOL"
)

func (s signal) protocolEnv() string { return "OTEL_EXPORTER_OTLP_" + s.env + "_PROTOCOL" }
func (s signal) endpointEnv() string { return "OTEL_EXPORTER_OTLP_" + s.env + "_ENDPOINT" }

// protocol resolves a signal's transport: the option, else the signal's
// variable, else OTEL_EXPORTER_OTLP_PROTOCOL, else http/protobuf. A value
// that is neither grpc nor http/protobuf is refused, so that a typo never
// silently pushes in the other transport to a port that does not speak it.
func protocol(opts *Options, s signal) (Protocol, error) {
	v, from := string(opts.Protocol), "--otlp.protocol"
	if v == "" {
		for _, env := range []string{s.protocolEnv(), envProtocol} {
			if x := strings.TrimSpace(opts.getenv(env)); x != "" {
				v, from = x, env
				break
			}
		}
	}
	switch Protocol(v) {
	case "", HTTPProtobuf:
		return HTTPProtobuf, nil
	case GRPC:
		return GRPC, nil
	case "http/json":
		return "", fmt.Errorf("%s=%q: the OpenTelemetry Go SDK has no OTLP/HTTP JSON exporter; want %q or %q", from, v, GRPC, HTTPProtobuf)
	}
	return "", fmt.Errorf("%s=%q: unknown OTLP protocol; want %q or %q", from, v, GRPC, HTTPProtobuf)
}

// endpoint is where one signal goes: the URL handed to the exporter (and
// logged), and what said so.
type endpoint struct {
	url      string
	from     string // --otlp.endpoint or the variable's name
	protocol Protocol
}

// resolveEndpoint resolves a signal's endpoint as the specification does,
// so that the log can name the URL the push goes to rather than the
// variable: the option (a base URL, as OTEL_EXPORTER_OTLP_ENDPOINT), else
// the signal's variable (the signal's full URL), else
// OTEL_EXPORTER_OTLP_ENDPOINT (a base). Over OTLP/HTTP a base gets the
// signal's path (/v1/metrics, /v1/traces) appended; over gRPC the path is
// not used, and the scheme says whether TLS is (https) or not (http).
func resolveEndpoint(opts *Options, s signal, p Protocol) (endpoint, error) {
	raw, from, base := opts.Endpoint, "--otlp.endpoint", true
	if raw == "" {
		raw, from, base = strings.TrimSpace(opts.getenv(s.endpointEnv())), s.endpointEnv(), false
	}
	if raw == "" {
		raw, from, base = strings.TrimSpace(opts.getenv(envEndpoint)), envEndpoint, true
	}
	if raw == "" {
		return endpoint{}, fmt.Errorf("otlp %s: no endpoint (--otlp.endpoint, %s or %s)", strings.ToLower(s.env), s.endpointEnv(), envEndpoint)
	}
	u, err := checkURL(raw, from)
	if err != nil {
		return endpoint{}, err
	}
	switch {
	case p == GRPC:
		u.Path, u.RawPath = "", ""
	case !base:
		// The signal's own variable is its whole URL.
	case from == "--otlp.endpoint" && strings.HasSuffix(u.Path, signalMetrics.path):
		// A metrics URL given to the flag (what it took before traces):
		// the other signals' paths sit beside it.
		u.Path = strings.TrimSuffix(u.Path, signalMetrics.path) + s.path
	default:
		u.Path = strings.TrimSuffix(u.Path, "/") + s.path
	}
	return endpoint{url: u.String(), from: from, protocol: p}, nil
}

// checkURL refuses what no exporter could use, naming where it came from.
func checkURL(s, from string) (*url.URL, error) {
	u, err := url.Parse(s)
	if err != nil {
		return nil, fmt.Errorf("otlp endpoint (%s): %w", from, err)
	}
	if (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, fmt.Errorf("otlp endpoint %q (%s): want http:// or https:// and a host", u.Redacted(), from)
	}
	if u.User != nil {
		// Credentials belong in OTEL_EXPORTER_OTLP_HEADERS, which the log
		// never prints.
		return nil, fmt.Errorf("otlp endpoint %q (%s): credentials in the URL are not sent; use OTEL_EXPORTER_OTLP_HEADERS", u.Redacted(), from)
	}
	return u, nil
}
