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
		{"metrics exporter none", "http://c:4318", env(envMetricsExporter, "none"), false},
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

func TestEndpointURL(t *testing.T) {
	for _, tc := range []struct {
		in, want string
		err      string
	}{
		{"http://collector:4318", "http://collector:4318/v1/metrics", ""},
		{"http://collector:4318/", "http://collector:4318/v1/metrics", ""},
		{"https://otlp.example/otlp/v1/metrics", "https://otlp.example/otlp/v1/metrics", ""},
		{"collector:4318", "", "want http:// or https://"},
		{"grpc://collector:4317", "", "want http:// or https://"},
		{"http://", "", "want http:// or https://"},
		{"http://user:secret@collector:4318", "", "credentials in the URL"},
	} {
		t.Run(tc.in, func(t *testing.T) {
			got, err := endpointURL(tc.in)
			switch {
			case tc.err != "" && (err == nil || !strings.Contains(err.Error(), tc.err)):
				t.Errorf("err %v, want one saying %q", err, tc.err)
			case tc.err == "" && (err != nil || got != tc.want):
				t.Errorf("got %q %v, want %q", got, err, tc.want)
			}
			if err != nil && strings.Contains(err.Error(), "secret") {
				t.Errorf("the error shows the password: %v", err)
			}
		})
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
