package collector

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/alecthomas/kingpin/v2"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	dto "github.com/prometheus/client_model/go"
	"go.uber.org/goleak"
)

// testCollector emits one gauge, or fails. enter, when set, is a barrier:
// Update signals it and waits for the other collectors before rendering, so a
// serial scrape would deadlock.
type testCollector struct {
	name  string
	fail  bool
	value *float64 // from a collector-specific flag
	enter *sync.WaitGroup
	// stop is closed by Close; the background goroutine exits on it.
	stop    chan struct{}
	stopped chan struct{}
}

func (c *testCollector) Update(ctx context.Context, ch chan<- prometheus.Metric) error {
	if c.enter != nil {
		c.enter.Done()
		waitOrFail(c.enter)
	}
	if c.fail {
		return errors.New("boom")
	}
	ch <- prometheus.MustNewConstMetric(
		prometheus.NewDesc("test_"+c.name+"_value", "A test value.", nil, nil),
		prometheus.GaugeValue, *c.value)
	return nil
}

func (c *testCollector) Close() error {
	if c.stop != nil {
		close(c.stop)
		<-c.stopped
	}
	return nil
}

// waitOrFail waits for wg; a serial scrape would never get there, and the
// long bound only turns that deadlock into a failure.
func waitOrFail(wg *sync.WaitGroup) {
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(30 * time.Second):
		panic("collectors did not run in parallel")
	}
}

// testTable builds a factory table of test collectors. enter, when not nil,
// makes the available collectors wait for each other inside Update.
func testTable(enter *sync.WaitGroup, background bool) []factory {
	mk := func(name string, def, fail, unavail bool) factory {
		return factory{
			name: name, help: "a test collector", defaultEnabled: def,
			addFlags: func(app FlagAdder) constructor {
				value := app.Flag("collector."+name+".value", "Value to export.").Default("1").Float64()
				return func(ctx context.Context, logger *slog.Logger) (Collector, error) {
					if unavail {
						return nil, unavailable("no such hardware")
					}
					c := &testCollector{name: name, fail: fail, value: value, enter: enter}
					if background {
						c.stop, c.stopped = make(chan struct{}), make(chan struct{})
						go func() {
							defer close(c.stopped)
							<-c.stop
						}()
					}
					return c, nil
				}
			},
		}
	}
	return []factory{
		mk("good", true, false, false),
		mk("failing", true, true, false),
		mk("absent", true, false, true),
		mk("optin", false, false, false),
	}
}

func parse(t *testing.T, table []factory, args ...string) *Settings {
	t.Helper()
	app := kingpin.New("test", "")
	s := addFlags(app, table)
	if _, err := app.Parse(args); err != nil {
		t.Fatalf("parse %v: %v", args, err)
	}
	return s
}

func TestFlagsSelectCollectors(t *testing.T) {
	cases := []struct {
		args []string
		want map[string]bool // name -> enabled
	}{
		{nil, map[string]bool{"good": true, "failing": true, "absent": true, "optin": false}},
		{[]string{"--no-collector.good"}, map[string]bool{"good": false, "failing": true, "absent": true, "optin": false}},
		{[]string{"--collector.optin"}, map[string]bool{"good": true, "failing": true, "absent": true, "optin": true}},
		{[]string{"--collector.disable-defaults", "--collector.optin", "--collector.failing"},
			map[string]bool{"good": false, "failing": true, "absent": false, "optin": true}},
		{[]string{"--collector.disable-defaults"}, map[string]bool{"good": false, "failing": false, "absent": false, "optin": false}},
	}
	for _, tc := range cases {
		t.Run(strings.Join(tc.args, " "), func(t *testing.T) {
			set, err := New(context.Background(), parse(t, testTable(nil, false), tc.args...), nil)
			if err != nil {
				t.Fatal(err)
			}
			defer set.Close()
			got := map[string]bool{}
			for _, st := range set.Status() {
				got[st.Name] = st.Enabled
				if st.Name == "absent" && st.Enabled && (st.Available || !strings.Contains(st.Reason, "no such hardware")) {
					t.Errorf("absent: %+v, want unavailable with its reason", st)
				}
				if st.Name == "good" && st.Enabled && !st.Available {
					t.Errorf("good: %+v, want available", st)
				}
			}
			for name, want := range tc.want {
				if got[name] != want {
					t.Errorf("%s enabled = %v, want %v", name, got[name], want)
				}
			}
		})
	}
}

func TestCollectorSpecificFlag(t *testing.T) {
	set, err := New(context.Background(), parse(t, testTable(nil, false), "--collector.good.value=42.5"), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer set.Close()
	if got := gatherValue(t, set, "test_good_value"); got != 42.5 {
		t.Errorf("test_good_value = %v, want 42.5", got)
	}
}

// TestScrapeParallelWithFailure runs two available collectors that can only
// finish if they are in Update at the same time; one of them fails. The
// failing one reports success 0 and the others are unaffected.
func TestScrapeParallelWithFailure(t *testing.T) {
	var enter sync.WaitGroup
	set, err := New(context.Background(), parse(t, testTable(&enter, false)), slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	defer set.Close()
	enter.Add(2) // good and failing
	reg := prometheus.NewPedanticRegistry()
	reg.MustRegister(set)
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]float64{
		`infer_exporter_collector_scrape_success{collector="good"}`:    1,
		`infer_exporter_collector_scrape_success{collector="failing"}`: 0,
		`infer_exporter_collector_scrape_success{collector="absent"}`:  0,
		`infer_exporter_collector_available{collector="good"}`:         1,
		`infer_exporter_collector_available{collector="failing"}`:      1,
		`infer_exporter_collector_available{collector="absent"}`:       0,
		`test_good_value`: 1,
	}
	got := flatten(mfs)
	for k, v := range want {
		if g, ok := got[k]; !ok || g != v {
			t.Errorf("%s = %v (present %v), want %v", k, g, ok, v)
		}
	}
	for _, name := range []string{"good", "failing"} {
		k := `infer_exporter_collector_scrape_duration_seconds{collector="` + name + `"}`
		if d, ok := got[k]; !ok || d < 0 {
			t.Errorf("%s = %v (present %v), want a non-negative duration", k, d, ok)
		}
	}
	if _, ok := got[`infer_exporter_collector_scrape_duration_seconds{collector="absent"}`]; ok {
		t.Error("an unavailable collector has a scrape duration, but nothing ran")
	}
	for k := range got {
		if strings.Contains(k, "optin") {
			t.Errorf("disabled collector exposes %s", k)
		}
	}
}

func TestUnavailableLogsOneLine(t *testing.T) {
	var logs bytes.Buffer
	set, err := New(context.Background(), parse(t, testTable(nil, false)), slog.New(slog.NewTextHandler(&logs, nil)))
	if err != nil {
		t.Fatal(err)
	}
	defer set.Close()
	for range 3 {
		testutil.CollectAndCount(set)
	}
	out := logs.String()
	if n := strings.Count(out, "collector unavailable"); n != 1 || !strings.Contains(out, "no such hardware") {
		t.Errorf("want one 'collector unavailable' line naming the reason, got:\n%s", out)
	}
}

func TestConfigErrorStopsNew(t *testing.T) {
	table := []factory{{
		name: "bad", defaultEnabled: true,
		addFlags: func(FlagAdder) constructor {
			return func(context.Context, *slog.Logger) (Collector, error) {
				return nil, errors.New("--collector.bad.x must be positive")
			}
		},
	}}
	if _, err := New(context.Background(), parse(t, table), nil); err == nil || !strings.Contains(err.Error(), "must be positive") {
		t.Errorf("err = %v, want the configuration error", err)
	}
}

func TestCloseStopsBackgroundWork(t *testing.T) {
	defer goleak.VerifyNone(t)
	set, err := New(context.Background(), parse(t, testTable(nil, true), "--collector.optin"), nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := set.Close(); err != nil {
		t.Fatal(err)
	}
	if err := set.Close(); err != nil {
		t.Fatal("second Close:", err)
	}
}

// TestRealTable checks the production table: nvml is on by default, can be
// turned off, and in a build without NVML it reports why.
func TestRealTable(t *testing.T) {
	app := kingpin.New("test", "")
	s := AddFlags(app)
	if _, err := app.Parse([]string{"--no-collector.nvml", "--collector.nvml.poll-interval=250ms"}); err != nil {
		t.Fatal(err)
	}
	set, err := New(context.Background(), s, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer set.Close()
	st := set.Status()
	if len(st) != 1 || st[0].Name != "nvml" || st[0].Enabled {
		t.Errorf("status = %+v, want nvml disabled", st)
	}

	app = kingpin.New("test", "")
	s = AddFlags(app)
	if _, err := app.Parse(nil); err != nil {
		t.Fatal(err)
	}
	set, err = New(context.Background(), s, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer set.Close()
	st = set.Status()
	if !st[0].Enabled {
		t.Fatalf("nvml not enabled by default: %+v", st)
	}
	if !NVMLBuiltIn && (st[0].Available || !strings.Contains(st[0].Reason, "cgo")) {
		t.Errorf("binary without NVML: status %+v, want unavailable, reason naming cgo", st[0])
	}
}

func flatten(mfs []*dto.MetricFamily) map[string]float64 {
	out := map[string]float64{}
	for _, mf := range mfs {
		for _, m := range mf.GetMetric() {
			key := mf.GetName()
			if len(m.GetLabel()) > 0 {
				var parts []string
				for _, l := range m.GetLabel() {
					parts = append(parts, l.GetName()+`="`+l.GetValue()+`"`)
				}
				key += "{" + strings.Join(parts, ",") + "}"
			}
			switch {
			case m.GetGauge() != nil:
				out[key] = m.GetGauge().GetValue()
			case m.GetCounter() != nil:
				out[key] = m.GetCounter().GetValue()
			}
		}
	}
	return out
}

func gatherValue(t *testing.T, c prometheus.Collector, key string) float64 {
	t.Helper()
	reg := prometheus.NewPedanticRegistry()
	reg.MustRegister(c)
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	v, ok := flatten(mfs)[key]
	if !ok {
		t.Fatalf("%s not gathered", key)
	}
	return v
}
