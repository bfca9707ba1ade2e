package bench

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"

	"github.com/alecthomas/kingpin/v2"

	"github.com/infer-exporter/infer_exporter/collector"
)

// Exit codes of the bench command.
const (
	ExitOK = 0
	// ExitError: the configuration, a target, the baseline or an output
	// could not be used; or the run was interrupted.
	ExitError = 1
	// ExitUsage: the command line is incomplete.
	ExitUsage = 2
	// ExitRegression: --baseline found a regression.
	ExitRegression = 3
)

// AddCommand registers `bench` on app, with its own flags (--config.file,
// --config.check, --output.dir, and the --collector.* flags, of which bench
// uses the NVML collector to sample the GPUs), and returns it with the
// function that runs it once app.Parse has chosen it.
func AddCommand(app *kingpin.Application) (*kingpin.CmdClause, func(ctx context.Context, logger *slog.Logger) int) {
	return addCommand(app, true, os.Stdout, os.Stderr)
}

type commandFlags struct {
	configFile  string
	configCheck bool
	outputDir   string
	baseline    string
	threshold   float64
	progress    string
}

// addCommand registers bench; withCollectors false leaves the GPU
// collectors out (tests).
func addCommand(app *kingpin.Application, withCollectors bool, stdout, stderr io.Writer) (*kingpin.CmdClause, func(context.Context, *slog.Logger) int) {
	var f commandFlags
	cmd := app.Command("bench", "Run a benchmark matrix (targets × loads × lengths, and replays) from --config.file and write JSON, CSV and HTML reports, with a ranking and, with --baseline, a regression gate.")
	cmd.Flag("config.file", "Bench configuration file (YAML): targets, the matrix and its settings.").PlaceHolder("FILE").StringVar(&f.configFile)
	cmd.Flag("config.check", "Validate --config.file, print the result and exit (no run).").BoolVar(&f.configCheck)
	var collectors *collector.Settings
	if withCollectors {
		collectors = collector.AddFlags(cmd)
	}
	// Not Required(): --config.check needs none.
	cmd.Flag("output.dir", "Directory for report.json, report.csv and report.html (created if missing).").PlaceHolder("DIR").StringVar(&f.outputDir)
	cmd.Flag("baseline", "A previous report.json: compare every cell with it and exit 3 when a gated figure regressed beyond the threshold and noise.").PlaceHolder("OLD.json").StringVar(&f.baseline)
	cmd.Flag("baseline.threshold", "Relative growth of a gated figure that counts as a regression (0: bench.regression.threshold, default 0.05).").Default("0").Float64Var(&f.threshold)
	cmd.Flag("progress", "Progress bar on stderr: auto (when stderr is a terminal), always or never.").Default("auto").EnumVar(&f.progress, "auto", "always", "never")
	run := func(ctx context.Context, logger *slog.Logger) int {
		return runCommand(ctx, logger, f.configFile, collectors, &f, stdout, stderr)
	}
	return cmd, run
}

func runCommand(ctx context.Context, logger *slog.Logger, configFile string, collectors *collector.Settings, f *commandFlags, stdout, stderr io.Writer) int {
	if configFile == "" {
		fmt.Fprintln(stderr, "bench needs --config.file")
		return ExitUsage
	}
	if !f.configCheck && f.outputDir == "" {
		fmt.Fprintln(stderr, "bench needs --output.dir")
		return ExitUsage
	}
	cfg, err := LoadFileContext(ctx, configFile)
	if err != nil {
		fmt.Fprintln(stderr, err)
		return ExitError
	}
	if f.configCheck {
		fmt.Fprintf(stdout, "%s: OK: %d targets, sha256 %s\n", configFile, len(cfg.Targets), cfg.SHA256)
		return ExitOK
	}
	var base *Report
	if f.baseline != "" {
		// Read it first: a bad baseline should not cost a whole run.
		if base, err = ReadJSON(f.baseline); err != nil {
			fmt.Fprintln(stderr, "baseline:", err)
			return ExitError
		}
	}
	opts := Options{Logger: logger}
	if collectors != nil {
		gpus, note, closeGPUs := gpuSource(ctx, collectors, logger)
		defer closeGPUs()
		opts.GPUs, opts.GPUNote = gpus, note
	} else {
		opts.GPUNote = "GPU collectors not configured"
	}
	if file, ok := stderr.(*os.File); f.progress == "always" || (f.progress == "auto" && ok && IsTerminal(file)) {
		opts.Progress = stderr
	}
	logger.Info("bench starting", "config", configFile, "sha256", cfg.SHA256, "output", f.outputDir)
	rep, err := Run(ctx, cfg, opts)
	if err != nil {
		fmt.Fprintln(stderr, "bench:", err)
		return ExitError
	}
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
	writeSummary(stdout, rep, f.outputDir)
	if rep.Baseline != nil {
		rep.Baseline.WriteText(stdout)
		if len(rep.Baseline.Regressions) > 0 {
			return ExitRegression
		}
	}
	return ExitOK
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

// writeSummary prints the leaderboard and where the reports are.
func writeSummary(w io.Writer, r *Report, dir string) {
	fmt.Fprintf(w, "leaderboard (%s, %d resamples, %.0f%% intervals):\n", r.Ranking.LatencyFigure, r.Ranking.Resamples, r.Ranking.Confidence*100)
	for _, e := range r.Ranking.Entries {
		tie := " "
		if e.Tied {
			tie = "="
		}
		fmt.Fprintf(w, "  %s%d  %-24s score %.4f [%.4f, %.4f]  rank %d-%d\n", tie, e.Rank, e.Target, e.Score, e.ScoreCI.Lo, e.ScoreCI.Hi, e.RankLo, e.RankHi)
	}
	for _, c := range r.Cells {
		if !c.Stable || c.Degraded {
			fmt.Fprintf(w, "note: cell %s: stable %v, client degraded %v\n", c.Key, c.Stable, c.Degraded)
		}
		if c.Summary.Draining {
			fmt.Fprintf(w, "note: cell %s: %s\n", c.Key, c.Summary.DrainingNote)
		}
		if c.Summary.Overloaded {
			fmt.Fprintf(w, "note: cell %s: %s\n", c.Key, c.Summary.OverloadNote)
		}
	}
	for _, name := range []string{JSONFile, CSVFile, HTMLFile} {
		fmt.Fprintf(w, "wrote %s\n", filepath.Join(dir, name))
	}
}
