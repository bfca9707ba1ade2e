package bench

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"time"

	"github.com/alecthomas/kingpin/v2"
	"github.com/prometheus/common/version"

	"github.com/infer-exporter/infer_exporter/bench/merge"
	"github.com/infer-exporter/infer_exporter/bench/render"
	"github.com/infer-exporter/infer_exporter/bench/report"
	"github.com/infer-exporter/infer_exporter/collector"
	"github.com/infer-exporter/infer_exporter/internal/config"
	"github.com/infer-exporter/infer_exporter/probe/otlp"
	"github.com/infer-exporter/infer_exporter/probe/workload"
)

// Exit codes of the bench command.
const (
	ExitOK = 0
	// ExitError: the configuration, a target, the baseline or an output
	// could not be used (a write error on --output.requests's file
	// included, after the report is written); or the run was interrupted.
	ExitError = 1
	// ExitUsage: the command line is incomplete. (A flag's value that
	// kingpin refuses, such as --output.requests.max=0, exits 2 from main.)
	ExitUsage = 2
	// ExitRegression: --baseline found a regression: a gated figure
	// whose whole interval is worse than the threshold.
	ExitRegression = 3
	// ExitNoSuccess: a cell measured no successful request (every request
	// failed, or none was sent): its figures measure nothing. The console
	// says first what its requests met.
	ExitNoSuccess = 4
	// ExitBelowSuccessFloor: a cell's success ratio (its successful
	// measured requests over those sent, report.SuccessRatio) is below
	// bench.min_success, though some succeeded: its target ranks below
	// every target without such a cell, and the console, report.md and
	// report.html name the cell, its outcomes and its first error.
	//
	// When several apply, the first of: ExitError, ExitNoSuccess,
	// ExitBelowSuccessFloor, ExitRegression, ExitInconclusive. A
	// regression measured on a server's successes alone says little while
	// its requests fail, so the failures come first.
	ExitBelowSuccessFloor = 5
	// ExitInconclusive: --baseline found no regression, but a gated
	// figure's interval reaches past the threshold (or it has none): the
	// run cannot tell a change of the threshold from noise there.
	ExitInconclusive = 6
)

// AddCommand registers `bench` on app, with its own flags (--config.file,
// --config.check, --output.dir, and the --collector.* flags, of which bench
// uses the NVML collector to sample the GPUs), and returns it with the
// function that runs it once app.Parse has chosen it.
func AddCommand(app *kingpin.Application) (*kingpin.CmdClause, func(ctx context.Context, logger *slog.Logger) int) {
	return addCommand(app, true, os.Stdout, os.Stderr)
}

type commandFlags struct {
	shard       string
	startAt     string
	shardSlack  time.Duration
	listen      string
	configFile  string
	configCheck bool
	outputDir   string
	baseline    string
	threshold   float64
	progress    string
	quick       quickFlags
	requests    string
	requestsMax int
	otlp        otlpFlags

	// outputDefault: outputDir is the quick start's default, not a flag's;
	// overwrite: --output.overwrite (outputdir.go).
	outputDefault, overwrite bool
}

// otlpFlags are the OTLP push's, as the exporter's serve command has them.
type otlpFlags struct {
	endpoint, protocol, histograms string
	ratio                          float64
	ratioSet                       bool
}

// addCommand registers bench; withCollectors false leaves the GPU
// collectors out (tests).
func addCommand(app *kingpin.Application, withCollectors bool, stdout, stderr io.Writer) (*kingpin.CmdClause, func(context.Context, *slog.Logger) int) {
	var f commandFlags
	cmd := app.Command("bench", "Run a benchmark matrix (targets × loads × lengths, and replays) from --config.file and write JSON, CSV and HTML reports, with a ranking and, with --baseline, a regression gate.")
	// Subcommands: run (the default, so `bench --config.file=...` runs the
	// matrix), verify, merge, compare and export. Each declares only the
	// flags it reads, so that its --help lists those alone.
	mode := "run"
	runCmd := cmd.Command("run", "Run the matrix (the default bench command; `bench verify`, `bench merge`, `bench compare` and `bench export` are the others).").Default()
	runCmd.Flag("config.file", "Bench configuration file (YAML): targets, the matrix and its settings.").PlaceHolder("FILE").StringVar(&f.configFile)
	runCmd.Flag("config.check", "Validate --config.file, print the result and exit (no run).").BoolVar(&f.configCheck)
	var collectors *collector.Settings
	if withCollectors {
		collectors = collector.AddFlags(runCmd)
	}
	// Not Required(): --config.check needs none.
	runCmd.Flag("output.dir", "Directory for report.json, report.csv, report.html and report.md (created if missing; the quick start's default: bench-out, or bench-out-2, -3, ... beside it when it already holds a report). A directory given here that holds a report is refused, unless --output.overwrite.").PlaceHolder("DIR").StringVar(&f.outputDir)
	runCmd.Flag("output.overwrite", "Replace the report that --output.dir already holds (by default a run never overwrites one).").BoolVar(&f.overwrite)
	runCmd.Flag("output.requests", "Also write one JSON line per request (id as sent in X-Request-Id, cell, repeat, instants, TTFT, TPOT, E2E, tokens, outcome, HTTP status) to this file; gzip-compressed when it ends in .gz. A FIFO, socket or directory is refused; a write error fails the run (exit 1).").PlaceHolder("FILE").StringVar(&f.requests)
	// Not IntVar: kingpin parses an int through a float, so that 1.5 read
	// as 1 and 1e30 as whatever the conversion made of it.
	runCmd.Flag("output.requests.max", "At most this many request records, a whole number of at least 1; the rest are counted in report.json's request_records.left_out.").Default(fmt.Sprint(DefaultMaxRequestRecords)).SetValue(positiveInt{"output.requests.max", &f.requestsMax})
	runCmd.Flag("baseline", "A previous report.json: compare every cell with it; exit 3 when a gated figure regressed beyond the threshold and noise, 6 when one is inconclusive (its interval reaches past the threshold).").PlaceHolder("OLD.json").StringVar(&f.baseline)
	runCmd.Flag("baseline.threshold", "Relative worsening of a gated figure that counts as a regression (0: bench.regression.threshold, default 0.05).").Default("0").Float64Var(&f.threshold)
	runCmd.Flag("progress", "Progress on stderr: auto (a bar when stderr is a terminal, else a line per repeat as it ends), always (the bar) or never.").Default("auto").EnumVar(&f.progress, "auto", "always", "never")
	runCmd.Flag("shard", "Run shard i of N (0 <= i < N, as a Kubernetes Indexed Job's completion index): this process sends arrival n of the shared seeded schedule when n mod N = i; `bench merge` combines the shard reports.").PlaceHolder("i/N").StringVar(&f.shard)
	runCmd.Flag("shard.start-at", "The instant the first repeat starts, given alike to every shard (RFC 3339, or Unix seconds): each shard waits for it, and starts each later repeat at the previous one's agreed start plus its planned length (warm-up + duration, or a replay's window) plus --shard.slack, so that the shards' schedules share one clock. At most a day ahead or behind; the zero instant is refused.").PlaceHolder("TIME").StringVar(&f.startAt)
	runCmd.Flag("shard.slack", "With --shard.start-at: the time after each repeat's planned length for its requests to end before the next repeat's agreed start; a shard that overruns it starts that repeat late and logs it. At most 1h (bench.MaxShardSlack); each wait is logged.").Default(DefaultShardSlack.String()).DurationVar(&f.shardSlack)
	// The quick start: one cell from flags, without a configuration file.
	runCmd.Flag("target.url", "Quick start, without --config.file: the server's base URL (OpenAI chat API); one cell of --rate, --input-tokens, --output-tokens for --duration.").PlaceHolder("URL").StringVar(&f.quick.url)
	runCmd.Flag("model", "Quick start: the model to ask for (default: the one model the server's /v1/models lists).").StringVar(&f.quick.model)
	runCmd.Flag("rate", fmt.Sprintf("Quick start: requests/s, open loop, %s arrivals (evenly spaced, so that the rate printed reads as the one given; default 1).", quickProcess)).Float64Var(&f.quick.rate)
	runCmd.Flag("input-tokens", fmt.Sprintf("Quick start: prompt length in tokens (default %d).", config.DefaultInputTokens)).IntVar(&f.quick.inputTokens)
	runCmd.Flag("output-tokens", fmt.Sprintf("Quick start: output tokens asked, max_tokens (default %d).", config.DefaultOutputTokens)).IntVar(&f.quick.outputTokens)
	runCmd.Flag("duration", fmt.Sprintf("Quick start: measured time (default %s), after a warm-up of a quarter of it (at most %s).", DefaultDuration, DefaultWarmup)).DurationVar(&f.quick.duration)
	runCmd.Flag("otlp.endpoint", "Also push every repeat's requests as OTLP metrics and spans (GenAI semantic conventions), with infer_bench.cell and infer_bench.repeat, to this collector URL, e.g. http://collector:4318; OTEL_EXPORTER_OTLP_ENDPOINT does the same.").PlaceHolder("URL").StringVar(&f.otlp.endpoint)
	runCmd.Flag("otlp.protocol", "OTLP transport: grpc or http/protobuf. Default: OTEL_EXPORTER_OTLP_PROTOCOL, else http/protobuf.").PlaceHolder("http/protobuf").EnumVar(&f.otlp.protocol, string(otlp.GRPC), string(otlp.HTTPProtobuf))
	runCmd.Flag("otlp.traces.sample-ratio", "Share of requests whose client spans are pushed and whose traceparent says sampled; failed and stalled requests' spans are pushed whatever it is. Default: OTEL_TRACES_SAMPLER(_ARG), else 0.01.").PlaceHolder("0.01").IsSetByUser(&f.otlp.ratioSet).Float64Var(&f.otlp.ratio)
	runCmd.Flag("otlp.histograms", "OTLP histogram aggregation: exponential or explicit.").PlaceHolder("exponential").EnumVar(&f.otlp.histograms, string(otlp.Exponential), string(otlp.Explicit))
	runCmd.Flag("web.listen-address", "While the bench runs, serve its live infer_probe_* metrics on this address at /metrics (empty: none).").PlaceHolder("ADDRESS").StringVar(&f.listen)
	verifyCmd := cmd.Command("verify", "Hash again the inputs a report.json recorded (the exporter binary, the configuration, the traces) and say which match; exit 1 when one changed or is missing.")
	verifyFile := verifyCmd.Arg("report", "A report.json.").Required().String()
	verifyCmd.Action(func(*kingpin.ParseContext) error { mode = "verify"; return nil })
	mergeCmd := cmd.Command("merge", "Merge the report.json of every shard of a split run (--shard=i/N) into one report in --output.dir: the figures one process would give.")
	var mergeDir string
	var mergeOverwrite bool
	mergeCmd.Flag("output.dir", "Directory for the merged report.json, report.csv, report.html and report.md (created if missing; one that holds a report is refused, unless --output.overwrite).").PlaceHolder("DIR").StringVar(&mergeDir)
	mergeCmd.Flag("output.overwrite", "Replace the report that --output.dir already holds.").BoolVar(&mergeOverwrite)
	mergeFiles := mergeCmd.Arg("shards", "The shards' report.json files, all N of them.").Required().Strings()
	mergeCmd.Action(func(*kingpin.ParseContext) error { mode = "merge"; return nil })
	compare := addCompareCommand(cmd, func(m string) { mode = m }, stdout, stderr)
	export := addExportCommand(cmd, func(m string) { mode = m }, stdout, stderr)
	run := func(ctx context.Context, logger *slog.Logger) int {
		switch mode {
		case "verify":
			return verifyCommand(ctx, *verifyFile, stdout, stderr)
		case "merge":
			return mergeCommand(ctx, *mergeFiles, mergeDir, mergeOverwrite, stdout, stderr)
		case "compare":
			return compare(ctx)
		case "export":
			return export(ctx)
		}
		return runCommand(ctx, logger, f.configFile, collectors, &f, stdout, stderr)
	}
	return cmd, run
}

// mergeCommand merges shard reports. It ends when ctx does (SIGTERM):
// the reads stop at their next chunk, the merge between two repeats or
// two bootstrap resamples.
func mergeCommand(ctx context.Context, files []string, dir string, overwrite bool, stdout, stderr io.Writer) int {
	if dir == "" {
		fmt.Fprintln(stderr, "bench merge needs --output.dir")
		return ExitUsage
	}
	if _, err := outputDir(dir, false, overwrite); err != nil {
		fmt.Fprintln(stderr, "bench merge: --output.dir="+err.Error())
		return ExitUsage
	}
	if len(files) > merge.MaxShards {
		fmt.Fprintf(stderr, "bench merge: %d reports: at most %d shards\n", len(files), merge.MaxShards)
		return ExitUsage
	}
	shards, err := merge.Read(ctx, files)
	if err != nil {
		fmt.Fprintln(stderr, "bench merge:", err)
		return ExitError
	}
	rep, err := Merge(ctx, shards)
	if err != nil {
		fmt.Fprintln(stderr, "bench merge:", err)
		return ExitError
	}
	if err := WriteFiles(dir, rep); err != nil {
		fmt.Fprintln(stderr, "bench merge: writing the report:", err)
		return ExitError
	}
	writeSummary(stdout, rep, dir)
	return ExitOK
}

// verifyCommand checks a report's audit chain; the hashing ends when ctx
// does (SIGTERM).
func verifyCommand(ctx context.Context, file string, stdout, stderr io.Writer) int {
	r, err := report.ReadJSONContext(ctx, file)
	if err != nil {
		fmt.Fprintln(stderr, "bench verify:", err)
		return ExitError
	}
	if len(r.Environment.Inputs) == 0 {
		fmt.Fprintf(stderr, "bench verify: %s records no inputs (a report from before the audit chain)\n", file)
		return ExitError
	}
	vs := merge.Verify(ctx, r)
	if err := ctx.Err(); err != nil {
		fmt.Fprintf(stderr, "bench verify: %s: interrupted: %v\n", file, err)
		return ExitError
	}
	if !merge.WriteVerification(stdout, vs) {
		fmt.Fprintf(stdout, "%s: an input changed or is missing\n", file)
		return ExitError
	}
	fmt.Fprintf(stdout, "%s: every input found matches\n", file)
	return ExitOK
}

func runCommand(ctx context.Context, logger *slog.Logger, configFile string, collectors *collector.Settings, f *commandFlags, stdout, stderr io.Writer) int {
	quick := f.quick.set()
	if code, ok := checkCommandFlags(configFile, quick, f, stderr); !ok {
		return code
	}
	startAt, code, ok := checkRunFlags(f, stderr)
	if !ok {
		return code
	}
	if !f.configCheck {
		// Before any request: a run whose report could not be written
		// where asked would be lost.
		dir, err := outputDir(f.outputDir, f.outputDefault, f.overwrite)
		if err != nil {
			fmt.Fprintln(stderr, "bench: --output.dir="+err.Error())
			return ExitUsage
		}
		if dir != f.outputDir {
			fmt.Fprintf(stderr, "bench: %s holds an earlier run's report, kept; this run writes %s\n", f.outputDir, dir)
			f.outputDir = dir
		}
	}
	var cfg *Config
	var err error
	if quick {
		cfg, err = loadQuick(ctx, &f.quick)
	} else {
		cfg, err = LoadFileContext(ctx, configFile)
	}
	if err != nil {
		if quick {
			fmt.Fprint(stderr, "bench: ")
		}
		fmt.Fprintln(stderr, err)
		return ExitError
	}
	if f.configCheck {
		// The traces too, against every target: a record of another API
		// would otherwise pass here and end the run at its cell.
		if _, err := readTraces(cfg.Bench.Matrix.Replays, cfg.RunTargets()); err != nil {
			fmt.Fprintln(stderr, "bench:", err)
			return ExitError
		}
		fmt.Fprintf(stdout, "%s: OK: %d %s, sha256 %s\n", configFile, len(cfg.Targets), plural(len(cfg.Targets), "target", "targets"), cfg.SHA256)
		return ExitOK
	}
	var base *report.Report
	if f.baseline != "" {
		// Read it first: a bad baseline should not cost a whole run.
		if base, err = report.ReadJSONContext(ctx, f.baseline); err != nil {
			fmt.Fprintln(stderr, "baseline:", err)
			return ExitError
		}
	}
	opts, stop, code, ok := runOptions(ctx, logger, cfg, collectors, f, startAt, stderr)
	if !ok {
		return code
	}
	defer stop()
	logger.Info("bench starting", "config", configFile, "sha256", cfg.SHA256, "output", f.outputDir)
	rep, err := Run(ctx, cfg, opts)
	if err != nil {
		fmt.Fprintln(stderr, "bench:", err)
		return ExitError
	}
	return runResult(ctx, rep, base, cfg, f, stdout, stderr)
}

// checkRunFlags checks the run's flags that need no configuration: the
// shards' clock and --output.requests' path; it returns --shard.start-at's
// instant, or false with the exit code.
func checkRunFlags(f *commandFlags, stderr io.Writer) (time.Time, int, bool) {
	// Checked under --config.check too: a manifest's command line is.
	var startAt time.Time
	if f.startAt != "" {
		var err error
		if startAt, err = ParseStartAt(f.startAt, time.Now()); err != nil {
			fmt.Fprintln(stderr, err)
			return time.Time{}, ExitUsage, false
		}
	}
	if err := CheckShardSlack(f.shardSlack); err != nil {
		fmt.Fprintln(stderr, err)
		return time.Time{}, ExitUsage, false
	}
	if f.requests != "" && !f.configCheck {
		// Before any request, and before a quick start asks the server
		// for its model: a FIFO would hang the run at its end.
		if err := checkRequestsPath(f.requests); err != nil {
			fmt.Fprintln(stderr, "bench:", err)
			return time.Time{}, ExitError, false
		}
	}
	return startAt, 0, true
}

// runOptions are the run's collaborators from the flags: its shard and
// clock, the live series, the OTLP push, the GPUs and the progress. stop
// ends what they started, in the reverse order; false with the exit code
// when one could not be had (what was started is stopped).
func runOptions(ctx context.Context, logger *slog.Logger, cfg *Config, collectors *collector.Settings, f *commandFlags, startAt time.Time, stderr io.Writer) (opts Options, stop func(), code int, ok bool) {
	var stops []func()
	stop = func() {
		for i := len(stops) - 1; i >= 0; i-- {
			stops[i]()
		}
	}
	opts = Options{Logger: logger, RequestsPath: f.requests, RequestsMax: f.requestsMax}
	if f.shard != "" {
		sh, err := ParseShard(f.shard)
		if err != nil {
			fmt.Fprintln(stderr, err)
			return opts, stop, ExitUsage, false
		}
		if sh.On() && (cfg.Bench.Sweep != nil || cfg.Bench.ColdStart != nil) {
			fmt.Fprintln(stderr, "--shard: a sweep or a cold-start step runs in one process: take them out of a split run's configuration")
			return opts, stop, ExitUsage, false
		}
		opts.Shard = sh
	}
	if !startAt.IsZero() {
		at := startAt
		if ago := time.Since(at); ago > 0 && logger != nil {
			logger.Warn("--shard.start-at has passed: the first repeat starts now, late, and the merged report's shard_start_offsets_seconds will show it", "start_at", at.UTC().Format(time.RFC3339Nano), "ago", ago.Round(time.Millisecond))
		}
		opts.StartAt, opts.ShardSlack = at, f.shardSlack
	}
	if f.listen != "" {
		stopLive, err := serveLive(ctx, f.listen, &opts, logger)
		if err != nil {
			fmt.Fprintln(stderr, "bench: --web.listen-address:", err)
			return opts, stop, ExitError, false
		}
		stops = append(stops, stopLive)
	}
	if otlp.Enabled(f.otlp.endpoint, os.Getenv) {
		stopOTLP, err := startOTLP(ctx, &f.otlp, &opts, logger)
		if err != nil {
			fmt.Fprintln(stderr, "bench: otlp:", err)
			stop()
			return opts, stop, ExitError, false
		}
		stops = append(stops, stopOTLP)
	}
	if collectors != nil {
		gpus, note, closeGPUs := gpuSource(ctx, collectors, logger)
		stops = append(stops, closeGPUs)
		opts.GPUs, opts.GPUNote = gpus, note
	} else {
		opts.GPUNote = "GPU collectors not configured"
	}
	setProgress(&opts, f.progress, stderr)
	return opts, stop, 0, true
}

// runResult writes the run's report and says its result: the comparison
// with the baseline, the failed cells, and the exit code by their order
// (an interrupt, an output not written, a cell without a success, a cell
// below bench.min_success, a regression, an inconclusive gate).
func runResult(ctx context.Context, rep, base *report.Report, cfg *Config, f *commandFlags, stdout, stderr io.Writer) int {
	if base != nil {
		threshold := cfg.Bench.Regression.Threshold
		if f.threshold > 0 {
			threshold = f.threshold
		}
		rep.Baseline = Compare(base, rep, f.baseline, threshold, cfg.Bench.Regression.Metrics, cfg.Bench.Ranking.Confidence)
	}
	if err := WriteFiles(f.outputDir, rep); err != nil {
		fmt.Fprintln(stderr, "bench: writing the report:", err)
		return ExitError
	}
	failed := failedCells(ctx, stdout, rep, cfg)
	writeSummary(stdout, rep, f.outputDir)
	recordsFailed := requestRecordsFailed(stderr, rep.RequestRecords, f.outputDir)
	if rep.Interrupted {
		fmt.Fprintf(stderr, "bench: interrupted: the report in %s holds %s\n", f.outputDir, render.InterruptedHolds(rep))
		return ExitError
	}
	if rep.Baseline != nil {
		writeComparisonText(stdout, rep.Baseline)
	}
	// An output the run could not write fails it as an unusable output
	// does, before the verdicts on the figures, which the report keeps.
	if recordsFailed {
		return ExitError
	}
	// The failures first, each said at the end: a regression of a
	// server's successes says little while its requests fail.
	if failed > 0 {
		fmt.Fprintf(stderr, "bench: %d %s measured no successful request (above); the report in %s says what they met\n", failed, plural(failed, "cell", "cells"), f.outputDir)
	}
	below := belowFloor(stderr, rep, f.outputDir)
	switch {
	case failed > 0:
		return ExitNoSuccess
	case below > 0:
		return ExitBelowSuccessFloor
	case rep.Baseline != nil && len(rep.Baseline.Regressions) > 0:
		return ExitRegression
	}
	// Last: a gate that could not conclude is the weakest finding; a
	// failed cell says more.
	if rep.Baseline != nil && rep.Baseline.Verdict == report.VerdictInconclusive {
		return ExitInconclusive
	}
	return ExitOK
}

// belowFloor warns on stderr of the cells below bench.min_success
// (report.FailingCells), one line each with what its requests met, and
// returns how many there are.
func belowFloor(stderr io.Writer, rep *report.Report, dir string) int {
	cells := report.FailingCells(rep)
	if len(cells) == 0 {
		return 0
	}
	fmt.Fprintf(stderr, "bench: warning: %d %s below bench.min_success %g: %s ranked below every target without one; the report in %s names them\n",
		len(cells), plural(len(cells), "cell", "cells"), rep.Ranking.MinSuccess, plural(len(cells), "its target is", "their targets are"), dir)
	for i := range cells {
		fmt.Fprintf(stderr, "  %s\n", render.FailingCellLine(&cells[i]))
	}
	return len(cells)
}

// requestRecordsFailed says on stderr, when writing --output.requests
// failed, what the file holds; true when it failed.
func requestRecordsFailed(stderr io.Writer, rr *report.RequestRecords, dir string) bool {
	if rr == nil || rr.Error == "" {
		return false
	}
	fmt.Fprintf(stderr, "bench: --output.requests=%s: %s: %d %s written, %d dropped; the report in %s says so\n",
		rr.Path, rr.Error, rr.Written, plural(rr.Written, "record", "records"), rr.Dropped, dir)
	return true
}

// positiveInt is a flag's whole number of at least 1, parsed as an
// integer, so that 0, -1, 1.5, 1e30 or a number beyond the int's range is
// refused with the flag's name rather than turned into another number.
// Kingpin's error does not name the flag: the value's does.
type positiveInt struct {
	flag string
	v    *int
}

func (p positiveInt) Set(s string) error {
	n, err := strconv.ParseInt(s, 10, 0)
	switch {
	case errors.Is(err, strconv.ErrRange):
		return fmt.Errorf("--%s=%s: beyond %d", p.flag, s, math.MaxInt)
	case err != nil:
		return fmt.Errorf("--%s=%s: not a whole number", p.flag, s)
	case n < 1:
		return fmt.Errorf("--%s=%d: at least 1 (leave the flag out for the default, %d)", p.flag, n, DefaultMaxRequestRecords)
	}
	*p.v = int(n)
	return nil
}

func (p positiveInt) String() string { return strconv.Itoa(*p.v) }

// httpURL reports whether raw is an absolute http or https URL with a
// host, as a target's url must be.
func httpURL(raw string) bool {
	u, err := url.Parse(raw)
	return err == nil && (u.Scheme == "http" || u.Scheme == "https") && u.Host != ""
}

// checkCommandFlags checks that the flags name one configuration (a file,
// or the quick-start flags) and an output, defaulting the quick start's;
// false with the exit code when they do not.
func checkCommandFlags(configFile string, quick bool, f *commandFlags, stderr io.Writer) (int, bool) {
	switch {
	case configFile != "" && quick:
		fmt.Fprintf(stderr, "bench: --config.file and the quick-start flags (%s) exclude each other: put the target and the load in the file, or give no file\n", quickFlagNames)
		return ExitUsage, false
	case configFile == "" && !quick:
		fmt.Fprintf(stderr, "bench needs --config.file, or the quick-start flags (%s)\n", quickFlagNames)
		return ExitUsage, false
	case quick && f.quick.url == "":
		fmt.Fprintln(stderr, "bench: the quick start needs --target.url (or give a --config.file)")
		return ExitUsage, false
	case quick && !httpURL(f.quick.url):
		fmt.Fprintf(stderr, "bench: --target.url=%s: not an absolute http or https URL%s\n", f.quick.url, config.SchemeHint(f.quick.url))
		return ExitUsage, false
	case quick && f.configCheck:
		fmt.Fprintln(stderr, "bench: --config.check checks a --config.file")
		return ExitUsage, false
	case quick && f.outputDir == "":
		f.outputDir, f.outputDefault = DefaultQuickOutputDir, true
	case !f.configCheck && f.outputDir == "":
		fmt.Fprintln(stderr, "bench needs --output.dir")
		return ExitUsage, false
	}
	return 0, true
}

// setProgress shows the run's progress: a bar on a terminal; a plain line
// per repeat elsewhere (a CI log), unless --progress=never.
func setProgress(opts *Options, progress string, stderr io.Writer) {
	file, ok := stderr.(*os.File)
	terminal := ok && IsTerminal(file)
	if progress == "always" || (progress == "auto" && terminal) {
		opts.Progress = stderr
		// A terminal's line is cut to its width, lest a redraw scroll; a
		// file or a pipe (--progress=always) has no width to fit, unless
		// $COLUMNS gives one.
		if terminal || os.Getenv("COLUMNS") != "" {
			opts.ProgressColumns = terminalColumns(os.Getenv("COLUMNS"), file)
		}
	} else if progress == "auto" {
		opts.ProgressLines = stderr
	}
}

// gpuSource starts the NVML collector for sampling; when it cannot run here
// it returns no source and the reason.
func gpuSource(ctx context.Context, s *collector.Settings, logger *slog.Logger) (GPUReader, string, func()) {
	set, err := collector.New(ctx, s, logger)
	if err != nil {
		return nil, "GPU collectors: " + err.Error(), func() {}
	}
	for _, st := range set.Status() {
		if st.Name != "nvml" {
			continue
		}
		if !st.Available {
			reason := st.Reason
			if !st.Enabled {
				reason = "the nvml collector is disabled"
			}
			set.Close()
			return nil, reason, func() {}
		}
		return set, "", func() { set.Close() }
	}
	set.Close()
	return nil, "no nvml collector in this build", func() {}
}

// writeSummary prints each cell's result block, the leaderboard and where
// the reports are.
func writeSummary(w io.Writer, r *report.Report, dir string) {
	render.WriteResultBlocks(w, r)
	render.WriteSweeps(w, r)
	render.WriteAgents(w, r)
	if len(r.Ranking.Entries) == 0 {
		// A heading over nothing reads as a bug: say why there is no
		// ranking (every cell failed, or the run stopped before one ended).
		why := "no target has a cell that measured a request"
		if r.Ranking.Note != "" {
			why = r.Ranking.Note
		}
		fmt.Fprintf(w, "leaderboard: none (%s)\n", why)
	} else {
		fmt.Fprintf(w, "leaderboard (%s, %d resamples, %.0f%% intervals):\n", r.Ranking.LatencyFigure, r.Ranking.Resamples, r.Ranking.Confidence*100)
	}
	for _, e := range r.Ranking.Entries {
		tie := " "
		if e.Tied {
			tie = "="
		}
		floor := ""
		if e.BelowMinSuccess {
			floor = fmt.Sprintf("  BELOW min_success %g", r.Ranking.MinSuccess)
		}
		fmt.Fprintf(w, "  %s%d  %-24s score %.4f [%.4f, %.4f]  rank %d-%d  success %s  goodput %s%s\n", tie, e.Rank, e.Target, e.Score, e.ScoreCI.Lo, e.ScoreCI.Hi, e.RankLo, e.RankHi,
			render.ConsoleRatio(e.SuccessRatio), render.ConsoleRatio(e.GoodputRatio), floor)
	}
	names := []string{JSONFile, CSVFile, HTMLFile, render.MarkdownFile}
	if r.ColdStart != nil {
		fmt.Fprintln(w, coldStartSummary(r.ColdStart))
		names = append(names, ColdStartCSVFile)
	}
	for _, name := range names {
		fmt.Fprintf(w, "wrote %s\n", filepath.Join(dir, name))
	}
}

// startOTLP starts the push of every repeat's requests (Options.OTLP) and
// returns what pushes the last of them and stops.
func startOTLP(ctx context.Context, f *otlpFlags, opts *Options, logger *slog.Logger) (func(), error) {
	o := otlp.Options{Endpoint: f.endpoint, Protocol: otlp.Protocol(f.protocol), Histograms: otlp.Histograms(f.histograms),
		Version: version.Version, Logger: logger.With("component", "otlp")}
	if f.ratioSet {
		o.SampleRatio = &f.ratio
	}
	pusher, err := otlp.New(ctx, o)
	if err != nil {
		return nil, err
	}
	tracer := pusher.Tracer()
	opts.OTLP = func(t *config.Target, cell string, repeat int, slo config.SLO, sampling config.Sampling) (workload.Observer, workload.Tracer) {
		// The cell is the workload, as the live series name it; a
		// repeat's points stay apart from the others' (a matrix's cells
		// and repeats are bounded by its file).
		w := config.Workload{Name: cell, SLO: slo, Sampling: sampling}
		return pusher.WorkloadWith(t, &w, otlp.AttrBenchCell.String(cell), otlp.AttrBenchRepeat.Int(repeat)), tracer
	}
	return func() {
		// The last push: the bench ends here, and the collector has no
		// later one to wait for.
		shutdownCtx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := pusher.Shutdown(shutdownCtx); err != nil {
			logger.Warn("OTLP: the last push failed", "err", err)
		}
	}, nil
}
