package otlp

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"net/url"
	"os"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
)

// The SDK reads most OTEL_* variables itself and, on a value it cannot
// use, either ignores it with a line on its global error handler (an
// unknown compression, a malformed header, a missing certificate) or takes
// it as given (a negative batch queue panics in makeslice, a queue of 10^8
// spans exhausts memory at start). So every variable docs/otlp.md says is
// honoured is read here first and refused at start, naming the variable
// and what it takes, as the export interval is (period): a pod with a bad
// value then fails its start with a reason instead of crash-looping on a
// goroutine dump or pushing nothing forever.

// The batch span processor's variables, and their bounds: a queue of at
// most 65,536 spans (a few KB each: some 100 MB at worst, where the SDK
// would take any int), and a batch no larger than the queue.
const (
	envBSPScheduleDelay = "OTEL_BSP_SCHEDULE_DELAY"
	envBSPExportTimeout = "OTEL_BSP_EXPORT_TIMEOUT"
	envBSPMaxQueue      = "OTEL_BSP_MAX_QUEUE_SIZE"
	envBSPMaxBatch      = "OTEL_BSP_MAX_EXPORT_BATCH_SIZE"

	maxSpanQueue = 1 << 16
)

// The switches, and the temporality preference of the metrics.
const (
	envTemporality = "OTEL_EXPORTER_OTLP_METRICS_TEMPORALITY_PREFERENCE"
	exporterPrefix = "OTEL_EXPORTER_OTLP_"
)

// maxPEMBytes bounds a certificate or key file: the SDK reads it whole, so
// a path to /dev/zero or a large file would be read without end.
const maxPEMBytes = 1 << 20

// checkEnv checks the variables of the signals that are pushed.
func checkEnv(opts *Options) error {
	getenv := opts.getenv
	if err := checkSwitches(getenv); err != nil {
		return err
	}
	// The general forms once; a bad value is an error even where a
	// per-signal form overrides it: it is still a mistake.
	errs := []error{checkExporterEnv(getenv, exporterPrefix)}
	if metricsEnabled(opts.Endpoint, getenv) {
		errs = append(errs, checkExporterEnv(getenv, exporterPrefix+signalMetrics.env+"_"))
		switch v := strings.TrimSpace(getenv(envTemporality)); strings.ToLower(v) {
		case "", "cumulative", "delta", "lowmemory":
		default:
			errs = append(errs, fmt.Errorf("%s=%q: want cumulative, delta or lowmemory", envTemporality, v))
		}
	}
	if !opts.NoTraces && tracesEnabled(opts.Endpoint, getenv) {
		_, err := batchOptions(getenv)
		errs = append(errs, checkExporterEnv(getenv, exporterPrefix+signalTraces.env+"_"), err)
	}
	return errors.Join(errs...)
}

// checkSwitches checks the variables that turn the push on and off.
func checkSwitches(getenv func(string) string) error {
	var errs []error
	if v := strings.TrimSpace(getenv(envSDKDisabled)); v != "" && !strings.EqualFold(v, "true") && !strings.EqualFold(v, "false") {
		errs = append(errs, fmt.Errorf("%s=%q: want true or false", envSDKDisabled, v))
	}
	for _, name := range []string{envMetricsExporter, envTracesExporter} {
		// Only OTLP can be pushed: "console" or "prometheus" would
		// otherwise be taken for otlp without a word.
		if v := strings.TrimSpace(getenv(name)); v != "" && !strings.EqualFold(v, "otlp") && !strings.EqualFold(v, "none") {
			errs = append(errs, fmt.Errorf("%s=%q: want otlp or none", name, v))
		}
	}
	return errors.Join(errs...)
}

// checkExporterEnv checks the variables of one prefix (OTEL_EXPORTER_OTLP_,
// or a signal's OTEL_EXPORTER_OTLP_METRICS_) that the OTLP exporters read
// themselves.
func checkExporterEnv(getenv func(string) string, prefix string) error {
	_, err := envMillis(getenv, prefix+"TIMEOUT", 10*time.Second)
	return errors.Join(
		checkHeaders(getenv, prefix+"HEADERS"),
		checkCompression(getenv, prefix+"COMPRESSION"),
		checkBool(getenv, prefix+"INSECURE"),
		checkCertPool(getenv, prefix+"CERTIFICATE"),
		checkClientCert(getenv, prefix+"CLIENT_CERTIFICATE", prefix+"CLIENT_KEY"),
		err,
	)
}

// envMillis reads a variable in milliseconds within the bounds of every
// period here (minPeriod..maxPeriod); def when it is unset.
func envMillis(getenv func(string) string, name string, def time.Duration) (time.Duration, error) {
	v := strings.TrimSpace(getenv(name))
	if v == "" {
		return def, nil
	}
	ms, err := strconv.ParseInt(v, 10, 64)
	if err != nil {
		return 0, fmt.Errorf("%s=%q: not a number of milliseconds", name, v)
	}
	if ms < minPeriod.Milliseconds() || ms > maxPeriod.Milliseconds() {
		return 0, fmt.Errorf("%s=%q: outside %d..%d ms", name, v, minPeriod.Milliseconds(), maxPeriod.Milliseconds())
	}
	return time.Duration(ms) * time.Millisecond, nil
}

// envCount reads a whole number within lo..hi; def when it is unset.
func envCount(getenv func(string) string, name string, def, lo, hi int, unit string) (int, error) {
	v := strings.TrimSpace(getenv(name))
	if v == "" {
		return def, nil
	}
	n, err := strconv.Atoi(v)
	if err != nil {
		return 0, fmt.Errorf("%s=%q: not a whole number", name, v)
	}
	if n < lo || n > hi {
		return 0, fmt.Errorf("%s=%q: outside %d..%d %s", name, v, lo, hi, unit)
	}
	return n, nil
}

// batchOptions reads the batch span processor's variables, bounded, and
// hands them to the SDK explicitly.
func batchOptions(getenv func(string) string) ([]sdktrace.BatchSpanProcessorOption, error) {
	delay, err1 := envMillis(getenv, envBSPScheduleDelay, sdktrace.DefaultScheduleDelay*time.Millisecond)
	timeout, err2 := envMillis(getenv, envBSPExportTimeout, sdktrace.DefaultExportTimeout*time.Millisecond)
	queue, err3 := envCount(getenv, envBSPMaxQueue, sdktrace.DefaultMaxQueueSize, 1, maxSpanQueue, "spans")
	if err := errors.Join(err1, err2, err3); err != nil {
		return nil, err
	}
	// A batch larger than the queue could never fill: the SDK quietly
	// shrinks it; it is refused here, with the queue's size as its bound.
	batch, err := envCount(getenv, envBSPMaxBatch, min(sdktrace.DefaultMaxExportBatchSize, queue), 1, queue, "spans (at most the queue, "+envBSPMaxQueue+")")
	if err != nil {
		return nil, err
	}
	return []sdktrace.BatchSpanProcessorOption{
		sdktrace.WithBatchTimeout(delay), sdktrace.WithExportTimeout(timeout),
		sdktrace.WithMaxQueueSize(queue), sdktrace.WithMaxExportBatchSize(batch),
	}, nil
}

// checkHeaders checks a headers variable as the SDK decodes it (key=value
// pairs separated by commas, the values percent-decoded, then trimmed),
// which skips a malformed pair with a line on its error handler and sends
// a value with a CR, LF or NUL that every push then fails on. The values
// are credentials: an error names the header, never its value.
func checkHeaders(getenv func(string) string, name string) error {
	v := strings.TrimSpace(getenv(name))
	if v == "" {
		return nil
	}
	for i, pair := range strings.Split(v, ",") {
		if strings.TrimSpace(pair) == "" {
			continue
		}
		k, val, ok := strings.Cut(pair, "=")
		if !ok {
			return fmt.Errorf("%s: entry %d has no '=' (want name=value,...)", name, i+1)
		}
		k = strings.TrimSpace(k)
		if !headerToken(k) {
			return fmt.Errorf("%s: header name %q is not an HTTP token", name, k)
		}
		dec, err := url.PathUnescape(val)
		if err != nil {
			return fmt.Errorf("%s: the value of %s is not valid percent-encoding", name, k)
		}
		dec = strings.TrimSpace(dec)
		if j := strings.IndexFunc(dec, controlRune); j >= 0 {
			return fmt.Errorf("%s: the value of %s has a control character after decoding (%q at byte %d): no CR, LF, NUL or other control characters", name, k, dec[j], j)
		}
	}
	return nil
}

// controlRune: a control character other than horizontal tab, or DEL
// (RFC 9110, section 5.5: not allowed in a field value).
func controlRune(r rune) bool { return (r < ' ' && r != '\t') || r == 0x7f }

// headerToken says whether k is an HTTP field name (RFC 9110's token).
func headerToken(k string) bool {
	if k == "" {
		return false
	}
	for i := 0; i < len(k); i++ {
		c := k[i]
		if c <= ' ' || c >= 0x7f || strings.IndexByte(`"(),/:;<=>?@[\]{}`, c) >= 0 {
			return false
		}
	}
	return true
}

// checkCompression: the SDK takes any value but gzip for none.
func checkCompression(getenv func(string) string, name string) error {
	switch v := strings.TrimSpace(getenv(name)); v {
	case "", "gzip", "none":
		return nil
	default:
		return fmt.Errorf("%s=%q: unknown compression; want gzip or none", name, v)
	}
}

// checkBool: the SDK takes any value but true for false.
func checkBool(getenv func(string) string, name string) error {
	v := strings.TrimSpace(getenv(name))
	if v == "" || strings.EqualFold(v, "true") || strings.EqualFold(v, "false") {
		return nil
	}
	return fmt.Errorf("%s=%q: want true or false", name, v)
}

// readPEM reads a certificate or key file named by a variable: a regular
// file of at most maxPEMBytes.
//
// The file's type is looked at before it is opened: opening a FIFO for
// reading waits for a writer in the open itself, a wait no context or
// signal ends, so a variable naming one hung the start, SIGTERM included.
// It is looked at again once open (openNoBlock: a FIFO put in its place
// between the two opens at once and is refused here), so that what is read
// is what was checked. A device (/dev/zero) or a socket is refused alike.
func readPEM(name, path string) ([]byte, error) {
	fi, err := os.Stat(path)
	if err != nil {
		return nil, fmt.Errorf("%s=%q: %w", name, path, err)
	}
	if err := pemFileMode(name, path, fi); err != nil {
		return nil, err
	}
	f, err := openNoBlock(path)
	if err != nil {
		return nil, fmt.Errorf("%s=%q: %w", name, path, err)
	}
	defer f.Close()
	if fi, err = f.Stat(); err != nil {
		return nil, fmt.Errorf("%s=%q: %w", name, path, err)
	}
	if err := pemFileMode(name, path, fi); err != nil {
		return nil, err
	}
	b, err := io.ReadAll(io.LimitReader(f, maxPEMBytes+1))
	if err != nil {
		return nil, fmt.Errorf("%s=%q: %w", name, path, err)
	}
	// The size is checked on what was read, not on the Stat: a file that
	// grew since is refused all the same.
	if len(b) > maxPEMBytes {
		return nil, fmt.Errorf("%s=%q: larger than %d bytes", name, path, maxPEMBytes)
	}
	return b, nil
}

// pemFileMode refuses what is not a regular file of at most maxPEMBytes,
// naming the variable, the path and what it is instead.
func pemFileMode(name, path string, fi os.FileInfo) error {
	mode := fi.Mode()
	if mode.IsRegular() {
		if fi.Size() > maxPEMBytes {
			return fmt.Errorf("%s=%q: %d bytes: larger than %d bytes", name, path, fi.Size(), maxPEMBytes)
		}
		return nil
	}
	what := "a " + mode.Type().String()
	switch {
	case mode&os.ModeNamedPipe != 0:
		what = "a FIFO (named pipe)"
	case mode&os.ModeCharDevice != 0:
		what = "a character device"
	case mode&os.ModeDevice != 0:
		what = "a block device"
	case mode&os.ModeSocket != 0:
		what = "a socket"
	case mode.IsDir():
		what = "a directory"
	}
	return fmt.Errorf("%s=%q: not a regular file (%s): a certificate or key is read from a regular file", name, path, what)
}

// checkCertPool: the SDK ignores a CA file it cannot read or parse, and
// the push then fails on every TLS handshake.
func checkCertPool(getenv func(string) string, name string) error {
	path := strings.TrimSpace(getenv(name))
	if path == "" {
		return nil
	}
	b, err := readPEM(name, path)
	if err != nil {
		return err
	}
	if !x509.NewCertPool().AppendCertsFromPEM(b) {
		return fmt.Errorf("%s=%q: no PEM certificate in it", name, path)
	}
	return nil
}

// checkClientCert: the SDK ignores a client certificate without its key
// (or the reverse), or a pair it cannot parse.
func checkClientCert(getenv func(string) string, certName, keyName string) error {
	cert, key := strings.TrimSpace(getenv(certName)), strings.TrimSpace(getenv(keyName))
	switch {
	case cert == "" && key == "":
		return nil
	case cert == "":
		return fmt.Errorf("%s is set without %s", keyName, certName)
	case key == "":
		return fmt.Errorf("%s is set without %s", certName, keyName)
	}
	cb, err := readPEM(certName, cert)
	if err != nil {
		return err
	}
	kb, err := readPEM(keyName, key)
	if err != nil {
		return err
	}
	if _, err := tls.X509KeyPair(cb, kb); err != nil {
		return fmt.Errorf("%s and %s: %w", certName, keyName, err)
	}
	return nil
}

// checkResource refuses a resource whose string values (from
// OTEL_SERVICE_NAME and OTEL_RESOURCE_ATTRIBUTES, percent-decoded) are not
// valid UTF-8, which protobuf cannot marshal: every push would fail.
func checkResource(res *resource.Resource) error {
	for _, kv := range res.Attributes() {
		if kv.Value.Type() != attribute.STRING {
			continue
		}
		if s := kv.Value.AsString(); !utf8.ValidString(s) || strings.IndexFunc(s, controlRune) >= 0 {
			return fmt.Errorf("OTEL_RESOURCE_ATTRIBUTES or OTEL_SERVICE_NAME: the value of %s is not valid UTF-8 or has a control character", kv.Key)
		}
	}
	return nil
}
