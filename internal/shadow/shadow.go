// Package shadow is the exporter's capture mode: a transparent reverse proxy
// that sits in front of an inference server, forwards every request
// unchanged (streams stay streams), and writes a sampled fraction of the
// generation requests into a bounded, rotating JSONL store that replay
// reads (probe/replay, source jsonl). Optionally it redacts them first:
// message text becomes filler of the same token length.
//
// The primary path never waits for capture: sampling copies the request
// body as it streams through, and the sample is handed to a bounded queue
// without blocking; a single writer goroutine redacts, encodes and writes.
// A slow, stalled or failing store drops samples (counted in
// infer_shadow_samples_dropped_total), never requests.
package shadow

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/alecthomas/kingpin/v2"
	"github.com/prometheus/client_golang/prometheus"
)

// Config is the proxy's configuration, from the --shadow.* flags.
type Config struct {
	// ListenAddress is where clients connect (host:port).
	ListenAddress string
	// Upstream is the inference server's base URL (http or https).
	Upstream string
	// StoreDir is the capture store's directory. Required when Sample > 0.
	StoreDir string
	// Sample is the fraction of generation requests captured, 0..1.
	Sample float64
	// Redact replaces message text by filler of the same token length
	// before anything is written.
	Redact bool
	// MaxFileBytes and MaxFiles bound the store: it rotates to a new file
	// at MaxFileBytes and deletes the oldest beyond MaxFiles.
	MaxFileBytes int64
	MaxFiles     int
	// QueueLength and QueueBytes bound the samples waiting for the writer;
	// beyond either, new samples are dropped.
	QueueLength int
	QueueBytes  int64
	// MaxBodyBytes bounds one captured request body; a larger request is
	// forwarded whole but not captured.
	MaxBodyBytes int64
	// ShutdownTimeout bounds how long Serve waits for requests in flight
	// (streams) when it stops.
	ShutdownTimeout time.Duration
}

// Defaults.
const (
	DefaultSample          = 0.1
	DefaultMaxFileBytes    = 64 << 20
	DefaultMaxFiles        = 16
	DefaultQueueLength     = 4096
	DefaultQueueBytes      = 64 << 20
	DefaultMaxBodyBytes    = 16 << 20
	DefaultShutdownTimeout = 30 * time.Second
)

func (c Config) withDefaults() Config {
	c.MaxFileBytes = cmp.Or(c.MaxFileBytes, DefaultMaxFileBytes)
	c.MaxFiles = cmp.Or(c.MaxFiles, DefaultMaxFiles)
	c.QueueLength = cmp.Or(c.QueueLength, DefaultQueueLength)
	c.QueueBytes = cmp.Or(c.QueueBytes, DefaultQueueBytes)
	c.MaxBodyBytes = cmp.Or(c.MaxBodyBytes, DefaultMaxBodyBytes)
	c.ShutdownTimeout = cmp.Or(c.ShutdownTimeout, DefaultShutdownTimeout)
	return c
}

// validate checks c (after withDefaults); haveStore says a store was given.
func (c Config) validate(haveStore bool) error {
	u, err := url.Parse(c.Upstream)
	switch {
	case c.Upstream == "":
		return errors.New("shadow: --shadow.upstream is required")
	case err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "":
		return fmt.Errorf("shadow: upstream %q must be an absolute http or https URL", c.Upstream)
	case !(c.Sample >= 0 && c.Sample <= 1):
		return fmt.Errorf("shadow: sample %v must be in [0, 1]", c.Sample)
	case c.Sample > 0 && !haveStore:
		return errors.New("shadow: sampling needs a store (--shadow.store.dir)")
	case c.MaxFileBytes < 1 || c.MaxFiles < 1 || c.QueueLength < 1 || c.QueueBytes < 1 || c.MaxBodyBytes < 1:
		return errors.New("shadow: store and queue bounds must be positive")
	}
	return nil
}

// FlagAdder is what AddFlags registers flags on: a *kingpin.CmdClause or a
// *kingpin.Application.
type FlagAdder interface {
	Flag(name, help string) *kingpin.FlagClause
}

// AddFlags registers the --shadow.* flags on cmd and returns the Config they
// fill when the command line is parsed.
func AddFlags(cmd FlagAdder) *Config {
	c := &Config{}
	cmd.Flag("shadow.listen-address", "Address the proxy listens on, host:port; clients send their inference requests here.").Required().StringVar(&c.ListenAddress)
	cmd.Flag("shadow.upstream", "Base URL of the inference server every request is forwarded to, e.g. http://127.0.0.1:8000.").Required().StringVar(&c.Upstream)
	cmd.Flag("shadow.store.dir", "Directory of the rotating JSONL capture store (replay it with a workload's replay: {source: jsonl, path: DIR}).").Required().StringVar(&c.StoreDir)
	cmd.Flag("shadow.sample", "Fraction (0..1) of generation requests (POST to a path ending in "+strings.Join(capturedPaths, ", ")+") captured.").Default(fmt.Sprint(DefaultSample)).Float64Var(&c.Sample)
	// On by default: a capture proxy in front of production traffic must
	// not store users' prompts unless its operator says so.
	cmd.Flag("shadow.redact", "Replace message text with filler of the same token length before storing, so that no user content is kept (the default); --no-shadow.redact stores the prompts as they came.").Default("true").BoolVar(&c.Redact)
	cmd.Flag("shadow.store.max-file-bytes", "Size at which the store starts a new file, in bytes.").Default(fmt.Sprint(DefaultMaxFileBytes)).Int64Var(&c.MaxFileBytes)
	cmd.Flag("shadow.store.max-files", "Files the store keeps; the oldest beyond are deleted.").Default(fmt.Sprint(DefaultMaxFiles)).IntVar(&c.MaxFiles)
	cmd.Flag("shadow.queue.length", "Samples that may wait for the writer; more are dropped and counted.").Default(fmt.Sprint(DefaultQueueLength)).IntVar(&c.QueueLength)
	cmd.Flag("shadow.queue.max-bytes", "Bytes of samples that may wait for the writer; more are dropped and counted.").Default(fmt.Sprint(DefaultQueueBytes)).Int64Var(&c.QueueBytes)
	cmd.Flag("shadow.max-body-bytes", "Largest request body captured; larger requests are forwarded, not captured.").Default(fmt.Sprint(DefaultMaxBodyBytes)).Int64Var(&c.MaxBodyBytes)
	cmd.Flag("shadow.shutdown-timeout", "How long to wait for requests in flight when stopping.").Default(DefaultShutdownTimeout.String()).DurationVar(&c.ShutdownTimeout)
	return c
}

// Serve runs the proxy on cfg.ListenAddress until ctx is done, registering
// its metrics with reg (the caller serves them, on the exporter's own
// --web.listen-address). On stop it waits for requests in flight (at most
// ShutdownTimeout) and for queued samples to be written.
func Serve(ctx context.Context, cfg Config, reg prometheus.Registerer, logger *slog.Logger) error {
	cfg = cfg.withDefaults()
	var store Store
	if cfg.Sample > 0 {
		if cfg.StoreDir == "" {
			return errors.New("shadow: sampling needs a store (--shadow.store.dir)")
		}
		fs, err := OpenStore(cfg.StoreDir, cfg.MaxFileBytes, cfg.MaxFiles)
		if err != nil {
			return err
		}
		defer fs.Close()
		store = fs
	}
	p, err := New(cfg, store, reg, logger)
	if err != nil {
		return err
	}
	ln, err := net.Listen("tcp", cfg.ListenAddress)
	if err != nil {
		_ = p.Close(context.Background())
		return fmt.Errorf("shadow: %w", err)
	}
	srv := &http.Server{
		Handler:           p,
		ReadHeaderTimeout: 30 * time.Second,
		ErrorLog:          slog.NewLogLogger(logger.Handler(), slog.LevelDebug),
	}
	logger.Info("shadow proxy serving", "address", ln.Addr().String(), "upstream", cfg.Upstream,
		"sample", cfg.Sample, "redact", cfg.Redact, "store", cfg.StoreDir)
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(ln) }()
	var serveErr error
	select {
	case serveErr = <-errc:
	case <-ctx.Done():
	}
	sctx, cancel := context.WithTimeout(context.Background(), cfg.ShutdownTimeout)
	defer cancel()
	if err := srv.Shutdown(sctx); err != nil {
		_ = srv.Close()
	}
	if err := p.Close(sctx); err != nil {
		logger.Warn("shadow: stopping", "err", err)
	}
	if serveErr != nil && !errors.Is(serveErr, http.ErrServerClosed) {
		return fmt.Errorf("shadow: %w", serveErr)
	}
	return nil
}
