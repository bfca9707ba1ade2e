package otlp

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	colmetrics "go.opentelemetry.io/proto/otlp/collector/metrics/v1"
	"google.golang.org/protobuf/proto"
)

func env(kv ...string) func(string) string {
	m := map[string]string{}
	for i := 0; i+1 < len(kv); i += 2 {
		m[kv[i]] = kv[i+1]
	}
	return func(k string) string { return m[k] }
}

func TestEnabled(t *testing.T) {
	for _, tc := range []struct {
		name     string
		endpoint string
		env      func(string) string
		want     bool
	}{
		{"nothing set: pull only", "", env(), false},
		{"flag", "http://c:4318", env(), true},
		{"base variable", "", env(envEndpoint, "http://c:4318"), true},
		{"metrics variable", "", env(envMetricsEndpoint, "http://c:4318/v1/metrics"), true},
		{"metrics exporter none: spans still", "http://c:4318", env(envMetricsExporter, "none"), true},
		{"traces exporter none: metrics still", "http://c:4318", env(envTracesExporter, "none"), true},
		{"both none", "http://c:4318", env(envMetricsExporter, "none", envTracesExporter, "none"), false},
		{"traces variable", "", env(envTracesEndpoint, "http://c:4318/v1/traces"), true},
		{"sdk disabled", "", env(envEndpoint, "http://c:4318", envSDKDisabled, "TRUE"), false},
		{"sdk disabled false", "", env(envEndpoint, "http://c:4318", envSDKDisabled, "false"), true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := Enabled(tc.endpoint, tc.env); got != tc.want {
				t.Errorf("Enabled = %v, want %v", got, tc.want)
			}
		})
	}
}

// TestEndpoint: the URL each signal goes to, resolved as the specification
// resolves the variables, so that the log names it; what no exporter could
// use is refused, naming where it came from and never the password.
func TestEndpoint(t *testing.T) {
	for _, tc := range []struct {
		name    string
		flag    string
		env     func(string) string
		proto   Protocol
		metrics string
		traces  string
		err     string
	}{
		{"base", "http://collector:4318", env(), HTTPProtobuf, "http://collector:4318/v1/metrics", "http://collector:4318/v1/traces", ""},
		{"base with slash", "http://collector:4318/", env(), HTTPProtobuf, "http://collector:4318/v1/metrics", "http://collector:4318/v1/traces", ""},
		{"metrics URL: traces beside it", "https://otlp.example/otlp/v1/metrics", env(), HTTPProtobuf, "https://otlp.example/otlp/v1/metrics", "https://otlp.example/otlp/v1/traces", ""},
		{"base with a path", "https://otlp.example/otlp", env(), HTTPProtobuf, "https://otlp.example/otlp/v1/metrics", "https://otlp.example/otlp/v1/traces", ""},
		{"grpc drops the path", "http://collector:4317/x", env(), GRPC, "http://collector:4317", "http://collector:4317", ""},
		{"flag wins", "http://a:4318", env(envEndpoint, "http://b:4318"), HTTPProtobuf, "http://a:4318/v1/metrics", "http://a:4318/v1/traces", ""},
		{"base variable", "", env(envEndpoint, "http://b:4318"), HTTPProtobuf, "http://b:4318/v1/metrics", "http://b:4318/v1/traces", ""},
		{"grpc base variable", "", env(envEndpoint, "http://otel-collector:4317"), GRPC, "http://otel-collector:4317", "http://otel-collector:4317", ""},
		{"signal variables are whole URLs", "", env(envEndpoint, "http://b:4318", envMetricsEndpoint, "http://m:9/push", envTracesEndpoint, "http://t:9/spans"), HTTPProtobuf, "http://m:9/push", "http://t:9/spans", ""},
		{"no scheme", "collector:4318", env(), HTTPProtobuf, "", "", "want http:// or https://"},
		{"grpc scheme", "grpc://collector:4317", env(), GRPC, "", "", "want http:// or https://"},
		{"no host", "http://", env(), HTTPProtobuf, "", "", "want http:// or https://"},
		{"credentials", "http://user:secret@collector:4318", env(), HTTPProtobuf, "", "", "credentials in the URL"},
		{"bad variable named", "", env(envEndpoint, "collector:4317"), GRPC, "", "", envEndpoint},
	} {
		t.Run(tc.name, func(t *testing.T) {
			opts := Options{Endpoint: tc.flag, Getenv: tc.env}
			for _, sig := range []struct {
				s    signal
				want string
			}{{signalMetrics, tc.metrics}, {signalTraces, tc.traces}} {
				got, err := resolveEndpoint(&opts, sig.s, tc.proto)
				switch {
				case tc.err != "" && (err == nil || !strings.Contains(err.Error(), tc.err)):
					t.Errorf("%s: err %v, want one saying %q", sig.s.env, err, tc.err)
				case tc.err == "" && (err != nil || got.url != sig.want):
					t.Errorf("%s: got %q %v, want %q", sig.s.env, got.url, err, sig.want)
				}
				if err != nil && strings.Contains(err.Error(), "secret") {
					t.Errorf("the error shows the password: %v", err)
				}
			}
		})
	}
}

// TestProtocol: the option, the per-signal variable, the general one, the
// default; an unknown value, or http/json which the Go SDK cannot send, is
// refused with the variable's name and the values it takes.
func TestProtocol(t *testing.T) {
	for _, tc := range []struct {
		name    string
		opt     Protocol
		env     func(string) string
		metrics Protocol
		traces  Protocol
		err     string
	}{
		{"default", "", env(), HTTPProtobuf, HTTPProtobuf, ""},
		{"grpc", "", env(envProtocol, "grpc"), GRPC, GRPC, ""},
		{"per signal", "", env(envProtocol, "grpc", "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL", "http/protobuf"), GRPC, HTTPProtobuf, ""},
		{"option wins", HTTPProtobuf, env(envProtocol, "grpc"), HTTPProtobuf, HTTPProtobuf, ""},
		{"bogus", "", env(envProtocol, "bogus"), "", "", `OTEL_EXPORTER_OTLP_PROTOCOL="bogus": unknown OTLP protocol; want "grpc" or "http/protobuf"`},
		{"json", "", env(envProtocol, "http/json"), "", "", "no OTLP/HTTP JSON exporter"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			opts := Options{Protocol: tc.opt, Getenv: tc.env}
			m, errM := protocol(&opts, signalMetrics)
			tr, errT := protocol(&opts, signalTraces)
			if tc.err != "" {
				if errM == nil || !strings.Contains(errM.Error(), tc.err) || errT == nil {
					t.Errorf("errors %v, %v; want %q", errM, errT, tc.err)
				}
				return
			}
			if errM != nil || errT != nil || m != tc.metrics || tr != tc.traces {
				t.Errorf("metrics %q %v, traces %q %v; want %q, %q", m, errM, tr, errT, tc.metrics, tc.traces)
			}
		})
	}
}

// TestNewRefusesBogusProtocol: New, as the exporter calls it at start,
// fails on an unknown protocol rather than pushing in another transport.
func TestNewRefusesBogusProtocol(t *testing.T) {
	_, err := New(context.Background(), Options{Endpoint: "http://127.0.0.1:4318", Getenv: env(envProtocol, "bogus")})
	if err == nil || !strings.Contains(err.Error(), "bogus") {
		t.Fatalf("New = %v, want a refusal naming the value", err)
	}
}

func TestPeriodAndHistograms(t *testing.T) {
	for _, tc := range []struct {
		name   string
		opt    time.Duration
		env    string
		want   time.Duration
		errSay string
	}{
		{"default", 0, "", defaultInterval, ""},
		{"variable in milliseconds", 0, "2000", 2 * time.Second, ""},
		{"option wins", 5 * time.Second, "2000", 5 * time.Second, ""},
		{"variable not a number", 0, "2s", 0, "not a number"},
		{"variable too small", 0, "5", 0, "outside"},
		{"variable negative", 0, "-1", 0, "outside"},
		{"variable too large", 0, "86400000", 0, "outside"},
		{"option too small", time.Millisecond, "", 0, "outside"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			opts := Options{Getenv: env(envInterval, tc.env)}
			got, err := period(&opts, tc.opt, envInterval, defaultInterval)
			switch {
			case tc.errSay != "" && (err == nil || !strings.Contains(err.Error(), tc.errSay)):
				t.Errorf("err %v, want one saying %q", err, tc.errSay)
			case tc.errSay == "" && (err != nil || got != tc.want):
				t.Errorf("got %v %v, want %v", got, err, tc.want)
			}
		})
	}
	for _, tc := range []struct {
		opt  Histograms
		env  string
		want Histograms
		bad  bool
	}{
		{"", "", Exponential, false},
		{"", "explicit_bucket_histogram", Explicit, false},
		{"", "base2_exponential_bucket_histogram", Exponential, false},
		{Exponential, "explicit_bucket_histogram", Exponential, false},
		{"", "linear", "", true},
		{"buckets", "", "", true},
	} {
		got, err := histograms(&Options{Histograms: tc.opt, Getenv: env(envHistograms, tc.env)})
		if (err != nil) != tc.bad || got != tc.want {
			t.Errorf("histograms(%q, %s=%q) = %q %v, want %q (error %v)", tc.opt, envHistograms, tc.env, got, err, tc.want, tc.bad)
		}
	}
}

// TestPushFailureCountedNeverBlocks: while a push hangs on a collector
// that does not answer, the observer records on; the failed push is
// counted, and the next one, answered, carries everything recorded with
// the conventions' names.
func TestPushFailureCountedNeverBlocks(t *testing.T) {
	entered := make(chan struct{}, 4)
	release := make(chan struct{})
	var fail atomic.Bool
	fail.Store(true)
	var last atomic.Pointer[colmetrics.ExportMetricsServiceRequest]
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		if fail.Load() {
			entered <- struct{}{}
			<-release
			// 400 is not retried: the push fails at once.
			http.Error(w, "refused", http.StatusBadRequest)
			return
		}
		var req colmetrics.ExportMetricsServiceRequest
		if err := proto.Unmarshal(body, &req); err != nil {
			t.Errorf("push body: %v", err)
		}
		last.Store(&req)
		w.Header().Set("Content-Type", "application/x-protobuf")
	}))
	defer srv.Close()
	defer func() {
		select {
		case <-release:
		default:
			close(release)
		}
	}()

	reg := prometheus.NewRegistry()
	p, err := New(context.Background(), Options{Endpoint: srv.URL, Interval: time.Hour, Timeout: 20 * time.Second,
		Registerer: reg, Getenv: env()})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Shutdown(context.Background())
	o := p.Workload(&testTarget, &testWorkload)

	flushed := make(chan error, 1)
	go func() { flushed <- p.ForceFlush(context.Background()) }()
	<-entered
	// The push is held by the collector: measurement goes on.
	recorded := make(chan struct{})
	go func() {
		for range 100 {
			for _, r := range requests {
				play(o, r)
			}
		}
		close(recorded)
	}()
	select {
	case <-recorded:
	case <-time.After(10 * time.Second):
		t.Fatal("recording blocked while a push was held")
	}
	close(release)
	if err := <-flushed; err != nil {
		t.Errorf("ForceFlush: %v (a failure is counted, not returned)", err)
	}
	if f, n := counterValue(t, reg, "infer_exporter_otlp_export_failures_total"), counterValue(t, reg, "infer_exporter_otlp_exports_total"); f != 1 || n != 1 {
		t.Errorf("failures %v of %v pushes, want 1 of 1", f, n)
	}

	fail.Store(false)
	if err := p.ForceFlush(context.Background()); err != nil {
		t.Fatal(err)
	}
	if f, n := counterValue(t, reg, "infer_exporter_otlp_export_failures_total"), counterValue(t, reg, "infer_exporter_otlp_exports_total"); f != 1 || n != 2 {
		t.Errorf("failures %v of %v pushes, want 1 of 2", f, n)
	}
	req := last.Load()
	if req == nil {
		t.Fatal("the collector received nothing")
	}
	got := map[string]uint64{}
	for _, rm := range req.GetResourceMetrics() {
		for _, sm := range rm.GetScopeMetrics() {
			for _, m := range sm.GetMetrics() {
				for _, dp := range m.GetExponentialHistogram().GetDataPoints() {
					got[m.GetName()] += dp.GetCount()
				}
			}
		}
	}
	// 100 rounds of the requests: 5 first chunks and 8 sent requests each.
	if got[NameTimeToFirstChunk] != 500 || got[NameOperationDuration] != 800 {
		t.Errorf("pushed counts %v, want %s 500 and %s 800", got, NameTimeToFirstChunk, NameOperationDuration)
	}
}

// counterValue reads a registered counter.
func counterValue(t *testing.T, reg *prometheus.Registry, name string) float64 {
	t.Helper()
	n, _ := prom(t, reg, name, nil)
	return float64(n)
}
