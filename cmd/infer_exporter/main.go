// Command infer_exporter measures LLM inference servers from the client side
// and exposes what it measured, with the server's and the GPU's own metrics,
// for Prometheus.
package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/signal"
	"runtime/debug"
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/alecthomas/kingpin/v2"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	versioncollector "github.com/prometheus/client_golang/prometheus/collectors/version"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/prometheus/common/promslog"
	promslogflag "github.com/prometheus/common/promslog/flag"
	"github.com/prometheus/common/version"
	"github.com/prometheus/exporter-toolkit/web"
	"github.com/prometheus/exporter-toolkit/web/kingpinflag"

	"github.com/infer-exporter/infer_exporter/bench"
	"github.com/infer-exporter/infer_exporter/collector"
	"github.com/infer-exporter/infer_exporter/internal/config"
	"github.com/infer-exporter/infer_exporter/internal/shadow"
	"github.com/infer-exporter/infer_exporter/internal/simulator"
	"github.com/infer-exporter/infer_exporter/probe/live"
	"github.com/infer-exporter/infer_exporter/probe/otlp"
	"github.com/infer-exporter/infer_exporter/probe/plan"
	"github.com/infer-exporter/infer_exporter/probe/replay"
)

const exporterName = "infer_exporter"

// DefaultListenAddress is the exporter's default port.
const DefaultListenAddress = ":9750"

// DefaultSimulatorAddress is `simulate`'s default: vLLM's port, so that the
// simulator and an exporter probing it start side by side with their
// defaults, as the README's first steps run them.
const DefaultSimulatorAddress = ":8000"

// DefaultShadowMetricsAddress is `shadow`'s metrics port: its own, so that
// the capture proxy runs beside an exporter on the same host with both
// defaults.
const DefaultShadowMetricsAddress = ":9752"

type flags struct {
	configFile      string
	configCheck     bool
	demo            bool
	metricsPath     string
	timeoutOffset   float64
	degradedLag     time.Duration
	degradedWindow  time.Duration
	drainTimeout    time.Duration
	transport       string
	otlpEndpoint    string
	otlpHistograms  string
	otlpProtocol    string
	otlpSampleRatio float64
	otlpRatioSet    bool
	traceparent     bool
	web             *web.FlagConfig
	log             *promslog.Config
	collectors      *collector.Settings
	sim             *simulator.Config
}

func main() {
	// Release builds set the version through -ldflags (Makefile,
	// Dockerfile); the others take it from their build information.
	stampVersion(debug.ReadBuildInfo())
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	// The first signal stops the work and lets it finish what it must (the
	// exporter's drain, the bench's report of its finished cells); a
	// second one ends the process at once, as Go's default handling does.
	go func() { <-ctx.Done(); stop() }()
	code := run(ctx, os.Args[1:])
	stop()
	os.Exit(code)
}

// run is the whole program; it returns the exit code. Tests call it with
// their own context and arguments.
func run(ctx context.Context, args []string) int {
	app := kingpin.New(exporterName, "Measures LLM inference servers with controlled traffic and exposes client-side latency, server and GPU metrics for Prometheus.")
	var f flags
	f.log = &promslog.Config{}
	promslogflag.AddFlags(app, f.log)
	app.Version(version.Print(exporterName) + "\n" + buildNote())
	app.HelpFlag.Short('h')

	// Each subcommand declares the flags that apply to it, so that its
	// --help lists only those; --log.* and --version are the whole binary's.
	serveCmd := app.Command("serve", "Run the exporter (the default command; the others: simulate, shadow, bench; `infer_exporter help` lists them).").Default()
	serveCmd.Flag("config.file", "Configuration file (YAML): targets and workloads.").PlaceHolder("FILE").StringVar(&f.configFile)
	serveCmd.Flag("config.check", "Validate --config.file, print the result and exit.").BoolVar(&f.configCheck)
	serveCmd.Flag("demo", "Start the embedded simulator and probe it with a built-in workload.").BoolVar(&f.demo)
	serveCmd.Flag("web.telemetry-path", "Path under which to expose metrics.").Default("/metrics").StringVar(&f.metricsPath)
	serveCmd.Flag("timeout-offset", "Seconds subtracted from Prometheus' scrape timeout (X-Prometheus-Scrape-Timeout-Seconds) to give a /probe its deadline.").Default("0.5").Float64Var(&f.timeoutOffset)
	serveCmd.Flag("probe.degraded-lag", "Schedule lag p99, or goroutine scheduling latency p99, above which the measurement is flagged as degraded (the client is falling behind or CPU-saturated).").Default(plan.DefaultDegradedLag.String()).DurationVar(&f.degradedLag)
	serveCmd.Flag("probe.degraded-window", "Window over which the schedule lag p99 is computed.").Default("30s").DurationVar(&f.degradedWindow)
	serveCmd.Flag("workload.drain-timeout", "How long a workload that a reload changes or removes, or that a shutdown stops, lets its requests in flight finish before it cancels them (counted as outcome=\"cancelled\"). Unchanged workloads keep running through a reload.").Default(live.DefaultDrainTimeout.String()).DurationVar(&f.drainTimeout)
	serveCmd.Flag("probe.transport", "HTTP client of the workloads and of /probe: h1 (a minimal HTTP/1.1 client, one goroutine and some 17 KB a stream, for http and https targets; net/http for anything else) or net/http (for every target).").Default("h1").EnumVar(&f.transport, "h1", "net/http")
	serveCmd.Flag("otlp.endpoint", "Also push the probe's observations as OTLP metrics (GenAI semantic conventions) to this OTLP/HTTP URL, e.g. http://collector:4318; OTEL_EXPORTER_OTLP_ENDPOINT does the same. Pull on /metrics is unchanged.").PlaceHolder("URL").StringVar(&f.otlpEndpoint)
	serveCmd.Flag("otlp.protocol", "OTLP transport: grpc (a collector's :4317) or http/protobuf (:4318). Default: OTEL_EXPORTER_OTLP_PROTOCOL (and its per-signal forms), else http/protobuf.").PlaceHolder("http/protobuf").EnumVar(&f.otlpProtocol, string(otlp.GRPC), string(otlp.HTTPProtobuf))
	serveCmd.Flag("otlp.traces.sample-ratio", "Share of requests whose client spans are pushed and whose traceparent says sampled (0 to 1); failed and stalled requests' spans are pushed whatever it is. Default: OTEL_TRACES_SAMPLER(_ARG), else 0.01. OTEL_TRACES_EXPORTER=none pushes no spans.").PlaceHolder("0.01").IsSetByUser(&f.otlpRatioSet).Float64Var(&f.otlpSampleRatio)
	serveCmd.Flag("probe.traceparent", "Send a W3C traceparent with every request, spans pushed or not, so that a server that traces continues it and the latency histograms' exemplars name the trace. --no-probe.traceparent: none unless spans are pushed.").Default("true").BoolVar(&f.traceparent)
	serveCmd.Flag("otlp.histograms", "OTLP histogram aggregation: exponential or explicit (the conventions' buckets). Default: OTEL_EXPORTER_OTLP_METRICS_DEFAULT_HISTOGRAM_AGGREGATION, else exponential.").PlaceHolder("exponential").EnumVar(&f.otlpHistograms, string(otlp.Exponential), string(otlp.Explicit))
	f.web = kingpinflag.AddFlags(serveCmd, DefaultListenAddress)
	f.collectors = collector.AddFlags(serveCmd)

	simulateCmd := app.Command("simulate", "Serve the embedded inference simulator (an OpenAI-compatible server with a continuous-batching timing model) on --web.listen-address (default :8000).")
	simListen := simulateCmd.Flag("web.listen-address", "Address the simulator listens on (vLLM's port; the exporter's is 9750).").Default(DefaultSimulatorAddress).String()
	f.sim = simulator.AddFlags(simulateCmd)
	shadowCmd := app.Command("shadow", "Serve a transparent proxy in front of --shadow.upstream that captures a sample of requests for replay; its own metrics are on --web.listen-address.")
	shadowWeb := kingpinflag.AddFlags(shadowCmd, DefaultShadowMetricsAddress)
	shadowMetricsPath := shadowCmd.Flag("web.telemetry-path", "Path under which to expose metrics.").Default("/metrics").String()
	shadowCfg := shadow.AddFlags(shadowCmd)
	benchCmd, runBench := bench.AddCommand(app)

	cmd, err := app.Parse(helpOfDefaults(app.Model(), args))
	if err != nil {
		fmt.Fprintf(os.Stderr, "%s: %v\n", exporterName, err)
		return 2
	}
	logger := promslog.New(f.log)
	// Every stream in flight is a descriptor: the soft limit goes up to the
	// hard one, which then bounds a process's concurrent streams
	// (docs/benchmarks.md, "Concurrent streams").
	if soft, hard, err := raiseFileLimit(); err != nil {
		logger.Warn("could not raise the open-file limit", "soft", soft, "hard", hard, "err", err)
	} else {
		logger.Debug("open-file limit", "soft", soft, "hard", hard)
	}

	switch cmd {
	case simulateCmd.FullCommand():
		return runSimulator(ctx, *simListen, f.sim, logger)
	case shadowCmd.FullCommand():
		f.web, f.metricsPath = shadowWeb, *shadowMetricsPath
		return runShadow(ctx, &f, shadowCfg, logger)
	case benchCmd.FullCommand(), benchCmd.FullCommand() + " run", benchCmd.FullCommand() + " verify", benchCmd.FullCommand() + " merge",
		benchCmd.FullCommand() + " compare", benchCmd.FullCommand() + " export":
		return runBench(ctx, logger)
	case serveCmd.FullCommand():
		if f.configCheck {
			return checkConfig(ctx, f.configFile)
		}
		return serve(ctx, &f, logger)
	}
	return 2
}

// helpOfDefaults makes --help show the flags of the command that runs when
// none is named, as node_exporter's --help shows its flags: `infer_exporter
// --help` is `serve --help`, `bench --help` is `bench run --help`. Without
// it, kingpin shows the parent's flags alone (--log.* and --version), and
// the flags an operator looks for are one command away. args are returned
// unchanged when they ask for no help.
func helpOfDefaults(app *kingpin.ApplicationModel, args []string) []string {
	help := slices.ContainsFunc(args, func(a string) bool { return a == "--help" || a == "-h" })
	if !help {
		return args
	}
	cmds, last := app.Commands, -1
	for i, a := range args {
		if strings.HasPrefix(a, "-") {
			continue
		}
		for _, c := range cmds {
			if c.Name == a {
				cmds, last = c.Commands, i
				break
			}
		}
	}
	var defaults []string
	for {
		i := slices.IndexFunc(cmds, func(c *kingpin.CmdModel) bool { return c.Default })
		if i < 0 {
			break
		}
		defaults = append(defaults, cmds[i].Name)
		cmds = cmds[i].Commands
	}
	if len(defaults) == 0 {
		return args
	}
	out := append(append([]string{}, args[:last+1]...), defaults...)
	return append(out, args[last+1:]...)
}

func checkConfig(ctx context.Context, file string) int {
	if file == "" {
		fmt.Fprintln(os.Stderr, "--config.check needs --config.file")
		return 2
	}
	c, err := config.LoadFileContext(ctx, file)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	// The traces too, as each replay workload reads them when it starts:
	// a malformed line or a recorded body of another API than its
	// target's would otherwise pass here and stop the exporter at start.
	for i := range c.Workloads {
		w := &c.Workloads[i]
		if w.Replay == nil || w.Replay.Source == config.ReplaySourceAgentSessions {
			// Recorded agent jobs are read and checked by the load itself.
			continue
		}
		t, _ := c.Target(w.Target)
		if _, _, _, err := replay.Open(w.Replay, t, nil); err != nil {
			fmt.Fprintf(os.Stderr, "%s: workloads[%d] %q: replay: %v\n", file, i, w.Name, err)
			return 1
		}
	}
	fmt.Printf("%s: OK: %s, %s\n", file, counted(len(c.Targets), "target"), counted(len(c.Workloads), "workload"))
	return 0
}

func runSimulator(ctx context.Context, addr string, cfg *simulator.Config, logger *slog.Logger) int {
	if err := simulator.Serve(ctx, addr, *cfg, logger); err != nil {
		logger.Error("simulator failed", "err", err)
		return 1
	}
	return 0
}

// runShadow serves the capture proxy, with the exporter's own metrics
// (proxy counters, Go and process metrics) on --web.listen-address.
func runShadow(ctx context.Context, f *flags, cfg *shadow.Config, logger *slog.Logger) int {
	reg := newRegistry()
	mux := http.NewServeMux()
	mux.Handle(f.metricsPath, promhttp.HandlerFor(reg, promhttp.HandlerOpts{Registry: reg}))
	mux.HandleFunc("/-/healthy", func(w http.ResponseWriter, _ *http.Request) { fmt.Fprintln(w, "Healthy") })
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/" {
			http.NotFound(w, r)
			return
		}
		shadowLanding(w, f.metricsPath, cfg)
	})
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	go func() {
		if err := web.ListenAndServe(srv, f.web, logger); err != nil && !errors.Is(err, http.ErrServerClosed) {
			logger.Error("metrics server", "err", err)
		}
	}()
	defer srv.Close()
	if err := shadow.Serve(ctx, *cfg, reg, logger); err != nil {
		logger.Error("shadow proxy failed", "err", err)
		return 1
	}
	return 0
}

// newRegistry holds the metrics every mode of the binary exposes.
func newRegistry() *prometheus.Registry {
	reg := prometheus.NewRegistry()
	reg.MustRegister(
		versioncollector.NewCollector(exporterName),
		collectors.NewGoCollector(),
		collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}),
	)
	return reg
}

// startDemoSimulator serves the embedded simulator on a loopback port and
// returns a function that stops it.
func startDemoSimulator(logger *slog.Logger) (func(), string, error) {
	sim, err := simulator.New(simulator.DefaultConfig(), logger.With("component", "simulator"))
	if err != nil {
		return nil, "", err
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		sim.Close()
		return nil, "", err
	}
	srv := &http.Server{Handler: sim.Handler(), ReadHeaderTimeout: 10 * time.Second}
	go func() {
		if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			logger.Error("demo simulator stopped", "err", err)
		}
	}()
	url := "http://" + ln.Addr().String()
	logger.Info("demo: embedded simulator serving", "url", url)
	return func() {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		_ = srv.Shutdown(ctx)
		sim.Close()
	}, url, nil
}

// counted is n and a noun, plural unless n is 1: "1 target", "2 workloads".
func counted(n int, noun string) string {
	if n == 1 {
		return "1 " + noun
	}
	return fmt.Sprintf("%d %ss", n, noun)
}
