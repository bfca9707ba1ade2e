// Package collector holds the exporter's host-side collectors (the NVML GPU
// collector first) and the framework that runs them: node_exporter's shape,
// one collector per file, each behind --collector.<name> / --no-collector.<name>,
// with per-collector scrape duration and success metrics.
//
// Unlike node_exporter there is no init()-time registration into a mutable
// map: the set of collectors is the static table returned by factories(), and
// every piece of state (flag values, running collectors) lives in a Settings
// or a Set value.
package collector

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"sort"
	"sync"
	"time"

	"github.com/alecthomas/kingpin/v2"
	"github.com/prometheus/client_golang/prometheus"
)

const namespace = "infer_exporter"

// Collector is what every collector implements. Update sends the collector's
// current metrics to ch. A collector with background work (pollers, event
// watchers) also implements io.Closer; the Set closes it on Close.
type Collector interface {
	Update(ctx context.Context, ch chan<- prometheus.Metric) error
}

// constructor builds a collector from flag values captured when its factory
// registered its flags. An error wrapping errUnavailable means "cannot run on
// this host" (no GPU, no driver): the exporter runs on without it. Any other
// error is a configuration error and stops New.
type constructor func(ctx context.Context, logger *slog.Logger) (Collector, error)

// factory describes one collector: its name (the flag suffix and the value of
// the "collector" label), whether it runs by default, and addFlags, which
// registers its own --collector.<name>.<flag> flags and returns the
// constructor that reads them after parsing.
type factory struct {
	name           string
	help           string
	defaultEnabled bool
	addFlags       func(app FlagAdder) constructor
}

// factories is the static table of every collector this package knows. It
// returns a fresh slice so nothing can mutate a shared one.
func factories() []factory {
	return []factory{
		nvmlFactory(),
	}
}

// errUnavailable marks a collector that cannot run on this host; match it
// with errors.Is.
var errUnavailable = errors.New("collector unavailable")

// unavailableError is the reason a collector cannot run. Its message is the
// bare reason, ready for the landing page.
type unavailableError struct{ reason string }

func (e *unavailableError) Error() string        { return e.reason }
func (e *unavailableError) Is(target error) bool { return target == errUnavailable }

// unavailable returns an error that matches errUnavailable and carries the
// reason an operator needs to read.
func unavailable(format string, args ...any) error {
	return &unavailableError{reason: fmt.Sprintf(format, args...)}
}

// Settings holds the parsed collector flags. Build it with AddFlags before
// the application parses its command line, then pass it to New.
type Settings struct {
	entries         []*settingsEntry
	disableDefaults *bool
}

type settingsEntry struct {
	factory  factory
	enabled  *bool
	explicit bool // set when the flag was given on the command line
	build    constructor
}

// FlagAdder is where collector flags are declared: the application, or the
// subcommand (serve, bench) that uses the collectors.
type FlagAdder interface {
	Flag(name, help string) *kingpin.FlagClause
}

// AddFlags registers --collector.<name> (with its --no- form) for every
// collector, each collector's own --collector.<name>.<flag> flags, and
// --collector.disable-defaults.
func AddFlags(app FlagAdder) *Settings {
	return addFlags(app, factories())
}

func addFlags(app FlagAdder, table []factory) *Settings {
	s := &Settings{
		disableDefaults: app.Flag("collector.disable-defaults",
			"Disable every collector not explicitly enabled with --collector.<name>.").Default("false").Bool(),
	}
	for _, f := range table {
		e := &settingsEntry{factory: f}
		state := "disabled"
		if f.defaultEnabled {
			state = "enabled"
		}
		e.enabled = app.Flag("collector."+f.name,
			fmt.Sprintf("Enable the %s collector: %s (default: %s).", f.name, f.help, state)).
			Default(fmt.Sprint(f.defaultEnabled)).
			Action(func(*kingpin.ParseContext) error { e.explicit = true; return nil }).
			Bool()
		e.build = f.addFlags(app)
		s.entries = append(s.entries, e)
	}
	return s
}

func (e *settingsEntry) isEnabled(disableDefaults bool) bool {
	if disableDefaults && !e.explicit {
		return false
	}
	return *e.enabled
}

// Status describes one collector for the landing page.
type Status struct {
	Name      string
	Enabled   bool   // selected by the flags
	Available bool   // enabled and started; false with Reason when it could not start
	Reason    string // why an enabled collector is unavailable; empty otherwise
}

// Set runs every enabled, available collector in parallel on each scrape. It
// implements prometheus.Collector. Close stops the collectors' background work.
type Set struct {
	logger    *slog.Logger
	ctx       context.Context
	cancel    context.CancelFunc
	running   []namedCollector
	statuses  []Status
	closeOnce sync.Once
	closeErr  error

	durationDesc  *prometheus.Desc
	successDesc   *prometheus.Desc
	availableDesc *prometheus.Desc
}

type namedCollector struct {
	name string
	c    Collector
}

// New starts every enabled collector. A collector that cannot run on this host
// (no GPU, no driver) does not stop the exporter: New logs one line for it and
// reports it unavailable, in Status and as
// infer_exporter_collector_available{collector} 0 (with scrape_success 0).
// New fails only on a configuration error. ctx bounds the collectors'
// background work, as does Close.
func New(ctx context.Context, s *Settings, logger *slog.Logger) (*Set, error) {
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	bg, cancel := context.WithCancel(ctx)
	set := &Set{
		logger: logger,
		ctx:    bg,
		cancel: cancel,
		durationDesc: prometheus.NewDesc(
			prometheus.BuildFQName(namespace, "collector", "scrape_duration_seconds"),
			"How long the collector took to render its metrics on this scrape.",
			[]string{"collector"}, nil),
		successDesc: prometheus.NewDesc(
			prometheus.BuildFQName(namespace, "collector", "scrape_success"),
			"1 if the collector rendered its metrics on this scrape, 0 if it failed or is unavailable.",
			[]string{"collector"}, nil),
		availableDesc: prometheus.NewDesc(
			prometheus.BuildFQName(namespace, "collector", "available"),
			"1 if the enabled collector started, 0 if it cannot run on this host (the landing page says why).",
			[]string{"collector"}, nil),
	}
	disableDefaults := *s.disableDefaults
	for _, e := range s.entries {
		st := Status{Name: e.factory.name, Enabled: e.isEnabled(disableDefaults)}
		if st.Enabled {
			c, err := e.build(bg, logger.With("collector", e.factory.name))
			switch {
			case err == nil:
				st.Available = true
				set.running = append(set.running, namedCollector{name: e.factory.name, c: c})
			case errors.Is(err, errUnavailable):
				st.Reason = err.Error()
				logger.Warn("collector unavailable; the exporter runs on without it",
					"collector", e.factory.name, "reason", err)
			default:
				_ = set.Close()
				return nil, fmt.Errorf("collector %s: %w", e.factory.name, err)
			}
		}
		set.statuses = append(set.statuses, st)
	}
	sort.Slice(set.statuses, func(i, j int) bool { return set.statuses[i].Name < set.statuses[j].Name })
	return set, nil
}

// Status lists every known collector, sorted by name.
func (s *Set) Status() []Status {
	return append([]Status(nil), s.statuses...)
}

// Describe implements prometheus.Collector. It describes nothing, which makes
// the Set an unchecked collector: which series exist depends on the hardware
// found at run time (GPUs, processes, XIDs), so no fixed list of descriptions
// could be complete, and a partial one fails pedantic registries.
func (s *Set) Describe(chan<- *prometheus.Desc) {}

// Collect implements prometheus.Collector: every running collector updates in
// its own goroutine, so a slow or failing one delays or harms no other.
func (s *Set) Collect(ch chan<- prometheus.Metric) {
	for _, st := range s.statuses {
		if !st.Enabled {
			continue
		}
		ch <- prometheus.MustNewConstMetric(s.availableDesc, prometheus.GaugeValue, boolFloat(st.Available), st.Name)
		if !st.Available {
			ch <- prometheus.MustNewConstMetric(s.successDesc, prometheus.GaugeValue, 0, st.Name)
		}
	}
	var wg sync.WaitGroup
	for _, nc := range s.running {
		wg.Add(1)
		go func() {
			defer wg.Done()
			s.execute(nc, ch)
		}()
	}
	wg.Wait()
}

func (s *Set) execute(nc namedCollector, ch chan<- prometheus.Metric) {
	begin := time.Now()
	err := nc.c.Update(s.ctx, ch)
	took := time.Since(begin)
	success := 1.0
	if err != nil {
		success = 0
		s.logger.Error("collector failed", "collector", nc.name, "duration_seconds", took.Seconds(), "err", err)
	}
	ch <- prometheus.MustNewConstMetric(s.durationDesc, prometheus.GaugeValue, took.Seconds(), nc.name)
	ch <- prometheus.MustNewConstMetric(s.successDesc, prometheus.GaugeValue, success, nc.name)
}

// Close stops every collector's background work and waits for it. It is safe
// to call more than once.
func (s *Set) Close() error {
	s.closeOnce.Do(func() {
		s.cancel()
		var errs []error
		for _, nc := range s.running {
			if cl, ok := nc.c.(io.Closer); ok {
				if err := cl.Close(); err != nil {
					errs = append(errs, fmt.Errorf("collector %s: %w", nc.name, err))
				}
			}
		}
		s.closeErr = errors.Join(errs...)
	})
	return s.closeErr
}

func boolFloat(b bool) float64 {
	if b {
		return 1
	}
	return 0
}
