package quality

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/infer-exporter/infer_exporter/internal/config"
	"github.com/infer-exporter/infer_exporter/probe/client"
)

// Monitor is the live perplexity gauge: for every target with a quality
// block it scores the reference text in the background, once at start and
// then every quality.interval, and exposes the latest score. A Prometheus
// scrape never waits for a score. It is a config.Applier and a
// prometheus.Collector.
type Monitor struct {
	logger *slog.Logger
	client Doer
	text   Text

	// minInterval bounds the interval of a Target built in code rather
	// than parsed (config.MinQualityInterval); tests lower it.
	minInterval time.Duration

	mu    sync.Mutex
	loops map[string]*loop // by target name

	pplDesc, tokensDesc, lastDesc, failDesc *prometheus.Desc
}

// MonitorOptions configure a Monitor.
type MonitorOptions struct {
	Logger *slog.Logger
	// Client sends the scoring requests; nil builds one that follows no
	// redirect and uses no proxy from the environment (a proxy would be
	// scored as the server).
	Client Doer
	// Text is scored; the zero Text means Reference().
	Text Text
}

// NewMonitor returns a monitor with no targets; Apply starts them.
func NewMonitor(opts MonitorOptions) *Monitor {
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	if opts.Client == nil {
		opts.Client = &http.Client{
			Transport:     &http.Transport{Proxy: nil, MaxIdleConnsPerHost: 1, IdleConnTimeout: 90 * time.Second},
			CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
		}
	}
	if opts.Text.SHA256 == "" {
		opts.Text = Reference()
	}
	labels := []string{"target", "model", "text"}
	return &Monitor{
		logger: opts.Logger, client: opts.Client, text: opts.Text, loops: map[string]*loop{},
		minInterval: config.MinQualityInterval,
		pplDesc: prometheus.NewDesc("infer_probe_perplexity",
			"Perplexity of the target's model over the reference text (text: its SHA-256 prefix), from its prompt log-probabilities; last successful score.", labels, nil),
		tokensDesc: prometheus.NewDesc("infer_probe_perplexity_tokens",
			"Tokens of the reference text scored by the last successful perplexity score: the text's tokens as the server counts them, less the first.", labels, nil),
		lastDesc: prometheus.NewDesc("infer_probe_perplexity_last_success_timestamp_seconds",
			"Unix time of the last successful perplexity score of the target.", labels, nil),
		failDesc: prometheus.NewDesc("infer_probe_perplexity_failures_total",
			"Perplexity scores that failed, by reason: unsupported, timeout, connection, http_status, bad_response, no_logprobs, incomplete.", []string{"target", "reason"}, nil),
	}
}

// settings is what a loop needs of a target; a change restarts the loop.
type settings struct {
	name, model, url, flavor, token, headers string
	interval, timeout                        time.Duration
}

// loop scores one target.
type loop struct {
	s      settings
	ct     *client.Target
	cancel context.CancelFunc
	done   chan struct{}

	mu       sync.Mutex
	last     *Score // the last successful score; nil before one
	lastAt   time.Time
	failures map[string]float64
}

// Apply starts a loop for every target with a quality block, keeps those
// whose settings did not change, and stops the others. ctx bounds the
// loops, as Close does.
func (m *Monitor) Apply(ctx context.Context, c *config.Config) error {
	want := map[string]*loop{}
	for i := range c.Targets {
		t := &c.Targets[i]
		if t.Quality == nil {
			continue
		}
		ct, err := client.TargetOf(t)
		if err != nil {
			return fmt.Errorf("target %q: %w", t.Name, err)
		}
		flavor := ct.Flavor
		if _, err := DialectFor(flavor.Name()); err != nil {
			return fmt.Errorf("target %q: %w", t.Name, err)
		}
		s := settings{name: t.Name, model: t.Model, url: t.URL, flavor: flavor.Name(), token: string(t.BearerToken),
			headers: fmt.Sprint(t.Headers), interval: t.Quality.Interval, timeout: t.Quality.Timeout}
		if s.interval < m.minInterval {
			s.interval = m.minInterval // a Target built in code, not parsed
		}
		if s.timeout <= 0 || s.timeout > s.interval {
			s.timeout = min(config.DefaultQualityTimeout, s.interval)
		}
		want[t.Name] = &loop{s: s, ct: ct}
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	for name, l := range m.loops {
		if w, ok := want[name]; !ok || w.s != l.s {
			l.stop()
			delete(m.loops, name)
		}
	}
	for name, l := range want {
		if _, ok := m.loops[name]; ok {
			continue
		}
		l.start(ctx, m)
		m.loops[name] = l
	}
	return nil
}

// Close stops every loop and waits for them.
func (m *Monitor) Close() {
	m.mu.Lock()
	defer m.mu.Unlock()
	for name, l := range m.loops {
		l.stop()
		delete(m.loops, name)
	}
	if c, ok := m.client.(*http.Client); ok {
		c.CloseIdleConnections()
	}
}

func (l *loop) start(ctx context.Context, m *Monitor) {
	ctx, l.cancel = context.WithCancel(ctx)
	l.done = make(chan struct{})
	l.failures = map[string]float64{}
	logger := m.logger.With("target", l.s.name, "text", m.text.Label())
	go func() {
		defer close(l.done)
		tick := time.NewTicker(l.s.interval)
		defer tick.Stop()
		for {
			l.scoreOnce(ctx, m, logger)
			select {
			case <-ctx.Done():
				return
			case <-tick.C:
			}
		}
	}()
}

func (l *loop) stop() {
	l.cancel()
	<-l.done
}

// scoreOnce scores the text once and records the outcome. A score cut by
// the loop's own stop is not a failure of the target.
func (l *loop) scoreOnce(ctx context.Context, m *Monitor, logger *slog.Logger) {
	sctx, cancel := context.WithTimeout(ctx, l.s.timeout)
	defer cancel()
	sc, err := ScoreText(sctx, m.client, l.ct, m.text)
	if ctx.Err() != nil {
		return
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if err != nil {
		reason := ReasonConnection
		var e *Error
		if errors.As(err, &e) {
			reason = e.Reason
		}
		l.failures[reason]++
		logger.Warn("perplexity score failed", "reason", reason, "err", err)
		return
	}
	l.last, l.lastAt = &sc, time.Now()
	logger.Debug("perplexity scored", "perplexity", sc.Perplexity, "tokens", sc.Tokens, "dialect", sc.Dialect,
		"duration_seconds", sc.Duration.Seconds())
}

// Describe sends every descriptor.
func (m *Monitor) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{m.pplDesc, m.tokensDesc, m.lastDesc, m.failDesc} {
		ch <- d
	}
}

// Collect serves the latest score of every target, and its failures. A
// target that has not been scored yet has its failure counters only.
func (m *Monitor) Collect(ch chan<- prometheus.Metric) {
	m.mu.Lock()
	loops := make([]*loop, 0, len(m.loops))
	for _, l := range m.loops {
		loops = append(loops, l)
	}
	m.mu.Unlock()
	slices.SortFunc(loops, func(a, b *loop) int { return strings.Compare(a.s.name, b.s.name) })
	for _, l := range loops {
		l.mu.Lock()
		last, at := l.last, l.lastAt
		failures := make([]float64, len(Reasons))
		for i, r := range Reasons {
			failures[i] = l.failures[r]
		}
		l.mu.Unlock()
		for i, r := range Reasons {
			ch <- prometheus.MustNewConstMetric(m.failDesc, prometheus.CounterValue, failures[i], l.s.name, r)
		}
		if last == nil {
			continue
		}
		lv := []string{l.s.name, l.s.model, last.Text.Label()}
		ch <- prometheus.MustNewConstMetric(m.pplDesc, prometheus.GaugeValue, last.Perplexity, lv...)
		ch <- prometheus.MustNewConstMetric(m.tokensDesc, prometheus.GaugeValue, float64(last.Tokens), lv...)
		ch <- prometheus.MustNewConstMetric(m.lastDesc, prometheus.GaugeValue, float64(at.UnixNano())/1e9, lv...)
	}
}
