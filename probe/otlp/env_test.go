package otlp

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"
)

// TestNewRefusesVariablesOutOfRange: every OTEL_* variable docs/otlp.md
// says is honoured is checked at start, as the export interval is: a value
// the SDK would panic on (a queue of -1), run out of memory on (10^8
// spans), ignore (brotli) or fail every push with (a header value with CR,
// LF or NUL after decoding) is refused, naming the variable and what it
// takes. The header's value never appears in the error: it is a
// credential.
func TestNewRefusesVariablesOutOfRange(t *testing.T) {
	dir := t.TempDir()
	notPEM := filepath.Join(dir, "ca.pem")
	if err := os.WriteFile(notPEM, []byte("not a certificate"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name, key, value string
		say              string // in the error
	}{
		{"queue negative", envBSPMaxQueue, "-1", `OTEL_BSP_MAX_QUEUE_SIZE="-1": outside 1..65536 spans`},
		{"queue zero", envBSPMaxQueue, "0", `OTEL_BSP_MAX_QUEUE_SIZE="0": outside 1..65536 spans`},
		{"queue of 10^8 spans", envBSPMaxQueue, "100000000", `OTEL_BSP_MAX_QUEUE_SIZE="100000000": outside 1..65536 spans`},
		{"queue not a number", envBSPMaxQueue, "lots", `OTEL_BSP_MAX_QUEUE_SIZE="lots": not a whole number`},
		{"batch negative", envBSPMaxBatch, "-1", `OTEL_BSP_MAX_EXPORT_BATCH_SIZE="-1": outside 1..2048 spans`},
		{"batch above the queue", envBSPMaxBatch, "4096", `OTEL_BSP_MAX_EXPORT_BATCH_SIZE="4096": outside 1..2048 spans`},
		{"schedule delay negative", envBSPScheduleDelay, "-5", `OTEL_BSP_SCHEDULE_DELAY="-5": outside 100..3600000 ms`},
		{"bsp export timeout huge", envBSPExportTimeout, "99999999999", `OTEL_BSP_EXPORT_TIMEOUT="99999999999": outside 100..3600000 ms`},
		{"exporter timeout zero", "OTEL_EXPORTER_OTLP_TIMEOUT", "0", `OTEL_EXPORTER_OTLP_TIMEOUT="0": outside 100..3600000 ms`},
		{"traces timeout not a number", "OTEL_EXPORTER_OTLP_TRACES_TIMEOUT", "10s", `OTEL_EXPORTER_OTLP_TRACES_TIMEOUT="10s": not a number of milliseconds`},
		{"header with LF", "OTEL_EXPORTER_OTLP_HEADERS", "api-key=secret%0AX-Injected: 1", `OTEL_EXPORTER_OTLP_HEADERS: the value of api-key has a control character after decoding ('\n' at byte 6)`},
		{"header with CR", "OTEL_EXPORTER_OTLP_HEADERS", "a=b,api-key=sec%0Dret", `OTEL_EXPORTER_OTLP_HEADERS: the value of api-key has a control character after decoding ('\r' at byte 3)`},
		{"header with NUL", "OTEL_EXPORTER_OTLP_METRICS_HEADERS", "api-key=secret%00", `OTEL_EXPORTER_OTLP_METRICS_HEADERS: the value of api-key has a control character after decoding ('\x00' at byte 6)`},
		{"header without =", "OTEL_EXPORTER_OTLP_HEADERS", "a=b,api-key", `OTEL_EXPORTER_OTLP_HEADERS: entry 2 has no '='`},
		{"header name not a token", "OTEL_EXPORTER_OTLP_HEADERS", "api key=secret", `OTEL_EXPORTER_OTLP_HEADERS: header name "api key" is not an HTTP token`},
		{"header bad percent-encoding", "OTEL_EXPORTER_OTLP_HEADERS", "api-key=secret%zz", `OTEL_EXPORTER_OTLP_HEADERS: the value of api-key is not valid percent-encoding`},
		{"compression brotli", "OTEL_EXPORTER_OTLP_COMPRESSION", "brotli", `OTEL_EXPORTER_OTLP_COMPRESSION="brotli": unknown compression; want gzip or none`},
		{"traces compression brotli", "OTEL_EXPORTER_OTLP_TRACES_COMPRESSION", "brotli", `OTEL_EXPORTER_OTLP_TRACES_COMPRESSION="brotli": unknown compression`},
		{"insecure yes", "OTEL_EXPORTER_OTLP_INSECURE", "yes", `OTEL_EXPORTER_OTLP_INSECURE="yes": want true or false`},
		{"certificate missing", "OTEL_EXPORTER_OTLP_CERTIFICATE", filepath.Join(dir, "none.pem"), `OTEL_EXPORTER_OTLP_CERTIFICATE="` + filepath.Join(dir, "none.pem") + `"`},
		{"certificate not PEM", "OTEL_EXPORTER_OTLP_CERTIFICATE", notPEM, `no PEM certificate in it`},
		{"certificate a device", "OTEL_EXPORTER_OTLP_CERTIFICATE", os.DevNull, `not a regular file`},
		{"client certificate without key", "OTEL_EXPORTER_OTLP_CLIENT_CERTIFICATE", notPEM, `OTEL_EXPORTER_OTLP_CLIENT_CERTIFICATE is set without OTEL_EXPORTER_OTLP_CLIENT_KEY`},
		{"temporality", envTemporality, "sometimes", `OTEL_EXPORTER_OTLP_METRICS_TEMPORALITY_PREFERENCE="sometimes": want cumulative, delta or lowmemory`},
		{"sdk disabled yes", envSDKDisabled, "yes", `OTEL_SDK_DISABLED="yes": want true or false`},
		{"metrics exporter console", envMetricsExporter, "console", `OTEL_METRICS_EXPORTER="console": want otlp or none`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p, err := New(context.Background(), Options{Endpoint: "http://127.0.0.1:1", Getenv: env(tc.key, tc.value)})
			if err == nil {
				ctx, cancel := context.WithTimeout(context.Background(), time.Second)
				defer cancel()
				_ = p.Shutdown(ctx)
				t.Fatalf("%s=%q accepted", tc.key, tc.value)
			}
			if !strings.Contains(err.Error(), tc.say) {
				t.Fatalf("error %q, want it to say %q", err, tc.say)
			}
			if strings.Contains(err.Error(), "secret") {
				t.Fatalf("error %q shows a header's value", err)
			}
		})
	}
}

// TestBatchOptions: values within range reach the batch processor as
// given; the batch's default follows a queue smaller than it.
func TestBatchOptions(t *testing.T) {
	for _, tc := range []struct {
		name string
		env  func(string) string
		want sdktrace.BatchSpanProcessorOptions
	}{
		{"defaults", env(), sdktrace.BatchSpanProcessorOptions{BatchTimeout: 5 * time.Second, ExportTimeout: 30 * time.Second, MaxQueueSize: 2048, MaxExportBatchSize: 512}},
		{"set", env(envBSPScheduleDelay, "500", envBSPExportTimeout, "1000", envBSPMaxQueue, "65536", envBSPMaxBatch, "65536"),
			sdktrace.BatchSpanProcessorOptions{BatchTimeout: 500 * time.Millisecond, ExportTimeout: time.Second, MaxQueueSize: 65536, MaxExportBatchSize: 65536}},
		{"small queue", env(envBSPMaxQueue, "100"), sdktrace.BatchSpanProcessorOptions{BatchTimeout: 5 * time.Second, ExportTimeout: 30 * time.Second, MaxQueueSize: 100, MaxExportBatchSize: 100}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			opts, err := batchOptions(tc.env)
			if err != nil {
				t.Fatal(err)
			}
			var got sdktrace.BatchSpanProcessorOptions
			for _, o := range opts {
				o(&got)
			}
			if got != tc.want {
				t.Fatalf("got %+v, want %+v", got, tc.want)
			}
		})
	}
}

// TestNewAcceptsGoodVariables: the values the specification allows start
// the push.
func TestNewAcceptsGoodVariables(t *testing.T) {
	p, err := New(context.Background(), Options{Endpoint: "http://127.0.0.1:1", Getenv: env(
		"OTEL_EXPORTER_OTLP_HEADERS", "api-key=a%20b%09c,x-tenant=t1",
		"OTEL_EXPORTER_OTLP_COMPRESSION", "gzip",
		"OTEL_EXPORTER_OTLP_TRACES_COMPRESSION", "none",
		"OTEL_EXPORTER_OTLP_INSECURE", "TRUE",
		"OTEL_EXPORTER_OTLP_TIMEOUT", "10000",
		envTemporality, "Delta",
		envBSPMaxQueue, "4096", envBSPMaxBatch, "1024",
		envSDKDisabled, "false", envMetricsExporter, "otlp",
	)})
	if err != nil {
		t.Fatal(err)
	}
	// Nothing listens: the last push fails, and the context bounds its
	// retries (the result is not the test's point).
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	if err := p.Shutdown(ctx); err != nil {
		t.Log(err)
	}
}

// TestNewRefusesBadResource: a resource value protobuf cannot marshal
// (invalid UTF-8 after percent-decoding) would fail every push; a control
// character is refused alike. The SDK reads these variables from the
// process's environment, so the test sets them there.
func TestNewRefusesBadResource(t *testing.T) {
	for _, tc := range []struct{ key, value string }{
		{"OTEL_RESOURCE_ATTRIBUTES", "team=%FF"},
		{"OTEL_SERVICE_NAME", "svc\nX"},
	} {
		t.Run(tc.key, func(t *testing.T) {
			t.Setenv(tc.key, tc.value)
			p, err := New(context.Background(), Options{Endpoint: "http://127.0.0.1:1", Getenv: env()})
			if err == nil {
				ctx, cancel := context.WithTimeout(context.Background(), time.Second)
				defer cancel()
				_ = p.Shutdown(ctx)
				t.Fatalf("%s=%q accepted", tc.key, tc.value)
			}
			if !strings.Contains(err.Error(), "not valid UTF-8 or has a control character") {
				t.Fatalf("error %q", err)
			}
		})
	}
}
