package bench

import (
	"cmp"
	"context"
	"fmt"
	"hash/fnv"
	"io"
	"log/slog"
	"maps"
	"math"
	"runtime"
	"slices"
	"strings"
	"time"

	"github.com/prometheus/common/version"

	"github.com/infer-exporter/infer_exporter/bench/merge"
	"github.com/infer-exporter/infer_exporter/bench/render"
	"github.com/infer-exporter/infer_exporter/bench/report"
	"github.com/infer-exporter/infer_exporter/internal/config"
	"github.com/infer-exporter/infer_exporter/internal/textcut"
	"github.com/infer-exporter/infer_exporter/probe/client"
	"github.com/infer-exporter/infer_exporter/probe/observation"
	"github.com/infer-exporter/infer_exporter/probe/plan"
	"github.com/infer-exporter/infer_exporter/probe/replay"
	"github.com/infer-exporter/infer_exporter/probe/workload"
)

// Options are a run's collaborators.
type Options struct {
	Logger *slog.Logger
	// GPUs is where the GPUs are read (the NVML collector's snapshots,
	// behind its infer_gpu_*); nil means no GPU sampling, and GPUNote says
	// why.
	GPUs    GPUReader
	GPUNote string
	// Info reads the targets' engine, version and model; nil: ServerInfo.
	Info InfoSource
	// Progress, when set, receives a progress bar (give it a terminal);
	// else ProgressLines, when set, a plain line per repeat as it ends.
	Progress      io.Writer
	ProgressLines io.Writer
	// ProgressColumns is the bar's width in characters, its terminal's
	// (0: no bound): a redrawn line wider than the terminal wraps, and
	// the redraw then scrolls instead of replacing it.
	ProgressColumns int
	// Shard, when On, runs this process's share of a split run.
	Shard Shard
	// Live, when set, gets every repeat's requests as they happen, and the
	// repeat's state (the live infer_probe_* series of a shard on
	// --web.listen-address).
	Live func(target *config.Target, cell string) (workload.Observer, workload.Monitor)
	// OTLP, when set, gives every repeat an observer that pushes its
	// requests as OTLP metrics and spans (probe/otlp, --otlp.endpoint),
	// with the cell and the repeat as attributes, and the head sampler of
	// its requests' trace contexts (nil: no traceparent is sent).
	OTLP func(target *config.Target, cell string, repeat int, slo config.SLO, sampling config.Sampling) (workload.Observer, workload.Tracer)
	// RequestsPath, when set, is where every request's record goes, one
	// JSON line each (gzip-compressed when it ends in .gz), at most
	// RequestsMax of them (0: DefaultMaxRequestRecords; less is refused).
	// A path that is not a regular file or a character device (a FIFO) is
	// refused before anything is sent; a write error is in the report's
	// request_records.
	RequestsPath string
	RequestsMax  int
	// StartAt, when set, is the instant the run's first repeat starts,
	// given alike to every shard (--shard.start-at); each later repeat
	// starts at an instant every shard derives from it, its predecessor's
	// planned length plus ShardSlack later (shardClock; the command's
	// default is DefaultShardSlack).
	StartAt    time.Time
	ShardSlack time.Duration
}

// degradedLag is the schedule lag p99 above which a repeat is flagged
// degraded, as the exporter's --probe.degraded-lag default.
const degradedLag = plan.DefaultDegradedLag

type run struct {
	cfg      *Config
	spec     *Spec
	opts     Options
	logger   *slog.Logger
	prompts  *PromptSet
	traces   map[string]*replay.Trace
	sched    *workload.SchedulingLatency
	start    time.Time
	progress *progress
	requests *requestLog // nil without Options.RequestsPath
	// starter starts each repeat: at once, or, with Options.StartAt, at
	// the instant every shard agreed on (shardClock).
	starter starter
	times   *repeatTimes
}

// group is one column of the matrix: a load and a shape, or a replay.
type group struct {
	name   string // the shape's or the replay's name
	load   report.Load
	shape  *Shape
	replay *ReplaySpec
}

// Run runs the whole matrix, the sweep and the known-answer checks, and
// returns the report. It returns an error only when the run cannot proceed
// (a target that cannot be built, ctx cancelled); failed requests are
// measured and reported, not errors.
//
// Cells run interleaved: for each shape and load, repeat 1 of every target,
// then repeat 2 of every target, and so on, so that a slow drift of the
// machine touches every target alike.
func Run(ctx context.Context, cfg *Config, opts Options) (*report.Report, error) {
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	spec := &cfg.Bench
	b := &run{cfg: cfg, spec: spec, opts: opts, logger: opts.Logger, start: time.Now().UTC(), starter: startNow{}}
	b.times = &repeatTimes{start: b.start}
	if !opts.StartAt.IsZero() {
		// Here too, not only at the flag: every caller's slack is held
		// to the bound.
		if err := CheckShardSlack(opts.ShardSlack); err != nil {
			return nil, err
		}
		b.starter = newShardClock(opts.StartAt, opts.ShardSlack)
	}
	if opts.RequestsPath != "" {
		l, err := openRequestLog(opts.RequestsPath, cmp.Or(opts.RequestsMax, DefaultMaxRequestRecords), opts.Logger)
		if err != nil {
			return nil, err
		}
		b.requests = l
		defer l.Close() // the normal end closes it first, to report its counts
	}
	targets := cfg.RunTargets()
	cts, err := clientTargets(targets)
	if err != nil {
		return nil, err
	}
	rep, stopServer, err := b.prepare(ctx, targets, cts)
	defer stopServer() // a server the cold-start step started, even when prepare failed after it
	if err != nil {
		return nil, err
	}

	var gpu *gpuSampler
	gctx, stopGPU := context.WithCancel(ctx)
	defer stopGPU()
	gpuDone := make(chan struct{})
	if opts.GPUs != nil {
		gpu = newGPUSampler(opts.GPUs, b.start, spec.GPUSampleInterval)
		go func() { defer close(gpuDone); gpu.run(gctx) }()
	} else {
		close(gpuDone)
	}
	// The process's goroutine scheduling latency, as the exporter watches
	// it: a CPU-saturated client reads its events late.
	b.sched = workload.NewSchedulingLatency(nil, max(spec.Warmup+spec.Duration, 5*time.Second))
	schedDone := make(chan struct{})
	go func() { defer close(schedDone); b.sched.Run(gctx) }()
	defer func() { stopGPU(); <-schedDone }()

	b.accuracy(ctx, targets, cts, rep)

	groups := matrixGroups(spec)
	rp := b.runPlan(groups, len(targets))
	b.progress = newProgress(opts.Progress, opts.ProgressLines, rp.planned(), rp.slack)
	if b.progress != nil {
		b.progress.columns = opts.ProgressColumns
	}
	defer b.progress.close()
	// The plan first: a run that may take longer than planned says so, and
	// by how much, before its first repeat.
	if line := rp.line(); line != "" {
		b.progress.say(line)
		rp.log(b.logger)
	}
	// An interrupt ends the bar's line at once: what the repeat and the
	// run then log of it starts on a line of its own.
	defer context.AfterFunc(ctx, b.progress.close)()

	acc, interrupted, err := b.runMatrix(ctx, targets, cts, groups)
	if err != nil {
		return nil, err
	}

	reps, rankGroups, err := b.cells(ctx, targets, groups, acc, interrupted, rep)
	if err != nil {
		return nil, err
	}

	if !interrupted {
		if err := b.searches(ctx, targets, cts, rep); err != nil {
			return nil, err
		}
	}

	stopGPU()
	<-gpuDone
	gpuReport(gpu, b.times.spans, opts.GPUNote, rep)
	fillEfficiency(gpu, rep, b.times, spec.Cost)
	rep.Timeline = b.times.spans

	rep.Ranking = b.ranking(targets, groups, rankGroups, reps, rep)
	rep.Environment.Finished = time.Now().UTC()
	closeRequests(b.requests, opts.RequestsPath, rep)
	return rep, nil
}

// searches run after the matrix: the rate sweep, then the agents search;
// an interrupt in the sweep leaves the agents search out.
func (b *run) searches(ctx context.Context, targets []config.Target, cts []*client.Target, rep *report.Report) error {
	spec := b.spec
	if spec.Sweep != nil {
		sw := &sweeper{spec: spec.Sweep, shapes: spec.Matrix.Shapes, progress: b.progress, repeat: b.repeat}
		if err := sw.run(ctx, targets, cts, rep); err != nil {
			return err
		}
	}
	if spec.Agents != nil && !rep.Interrupted {
		as := &agentSearcher{spec: spec.Agents, seed: spec.Seed, sampling: spec.Sampling, progress: b.progress, logger: b.logger, saturation: b.sched}
		return as.run(ctx, targets, cts, rep)
	}
	return nil
}

// prepare readies the run before its first measured request: the
// cold-start step, the prompt set, the traces, and the report with its
// environment. The cold-start step comes first: the server it starts (and,
// by default, leaves running until the run ends, when stopServer stops it)
// is the one the prompt calibration, the engine info and the matrix then
// meet.
func (b *run) prepare(ctx context.Context, targets []config.Target, cts []*client.Target) (rep *report.Report, stopServer func(), err error) {
	stopServer = func() {}
	// The traces first: a file's refusal should cost no server start.
	if b.traces, err = readTraces(b.spec.Matrix.Replays, targets); err != nil {
		return nil, stopServer, err
	}
	var coldStart *report.ColdStartReport
	if b.spec.ColdStart != nil {
		cs, stop, err := (&coldStarter{spec: b.spec.ColdStart, logger: b.logger}).run(ctx, targets, cts)
		if err != nil {
			return nil, stopServer, err
		}
		coldStart, stopServer = cs, stop
	}
	if b.prompts, err = promptSet(ctx, b.spec, targets); err != nil {
		return nil, stopServer, err
	}
	info := b.opts.Info
	if info == nil {
		info = ServerInfo{Logger: b.logger}
	}
	env := environment(ctx, b.cfg, b.start, b.prompts, b.traces, info, targets)
	return &report.Report{Schema: report.Schema, Environment: env, ColdStart: coldStart}, stopServer, nil
}

// accuracy runs the known-answer checks and scores the perplexity of
// every target, when the configuration asks for them.
func (b *run) accuracy(ctx context.Context, targets []config.Target, cts []*client.Target, rep *report.Report) {
	if len(b.spec.KnownAnswers) > 0 {
		for i := range targets {
			rep.Accuracy = append(rep.Accuracy, knownAnswers(ctx, b.spec, &targets[i], cts[i]))
		}
	}
	if b.spec.Perplexity != nil {
		rep.Perplexity = perplexity(ctx, b.spec.Perplexity, b.logger, targets, cts)
	}
}

// clientTargets are the run's targets as the client reaches them.
func clientTargets(targets []config.Target) ([]*client.Target, error) {
	cts := make([]*client.Target, len(targets))
	for i := range targets {
		ct, err := client.TargetOf(&targets[i])
		if err != nil {
			return nil, fmt.Errorf("target %q: %w", targets[i].Name, err)
		}
		cts[i] = ct
	}
	return cts, nil
}

// promptSet is the run's prompt set. Shapes serve the rates, the
// concurrencies and the sweep; a matrix of replays alone needs none.
func promptSet(ctx context.Context, spec *Spec, targets []config.Target) (*PromptSet, error) {
	var shapes []Shape
	if len(spec.Matrix.Rates)+len(spec.Matrix.Concurrencies) > 0 || spec.Sweep != nil {
		shapes = spec.Matrix.Shapes
	}
	return NewPromptSet(ctx, targets, shapes, spec.PromptSetSize, spec.Seed, spec.Repeats)
}

// cells puts the matrix's cells (and a shard's part) in the report, and
// returns the bootstrap replicates the ranking reads and the groups it
// compares the targets on.
func (b *run) cells(ctx context.Context, targets []config.Target, groups []group, acc [][]cellAcc, interrupted bool, rep *report.Report) (map[string][numFigures][]float64, []group, error) {
	spec, opts := b.spec, b.opts
	names := make([]string, len(targets))
	for i := range targets {
		names[i] = targets[i].Name
	}
	if opts.Shard.On() {
		rep.Shard = shardPart(opts.Shard, names, groups, acc)
		if at, slack := b.starter.agreement(); !at.IsZero() {
			at = at.UTC()
			rep.Shard.StartAt, rep.Shard.SlackSeconds = &at, slack.Seconds()
		}
	}
	var cells []report.CellResult
	var reps map[string][numFigures][]float64
	rankGroups := groups
	if interrupted {
		// What finished is computed to its end: the bootstrap of the
		// finished cells runs on past the interrupt (a second signal ends
		// the process).
		cells, reps, rankGroups = finishedCells(context.WithoutCancel(ctx), spec, names, groups, acc)
		rep.Interrupted = true
		kept := 0
		for i := range cells {
			if cells[i].Partial {
				kept++
			}
		}
		b.logger.Warn("bench interrupted: reporting the finished cells", "cells", len(cells)-kept, "partial", kept)
	} else {
		cells, reps = assembleCells(ctx, spec, names, groups, acc)
		if err := ctx.Err(); err != nil {
			return nil, nil, fmt.Errorf("interrupted: %w", err) // the bootstrap stopped early
		}
	}
	pairPrefixCells(cells, spec.Matrix.Shapes)
	rep.Cells = cells
	return reps, rankGroups, nil
}

// ranking ranks the targets on the groups every one of them finished,
// leaving out a target none of whose requests succeeded: its figures
// measure nothing, and a score of 0 would rank it beside the others (alone,
// first).
func (b *run) ranking(targets []config.Target, groups, rankGroups []group, reps map[string][numFigures][]float64, rep *report.Report) report.RankingResult {
	var measured []config.Target
	var unmeasured []string
	for _, t := range targets {
		if targetSucceeded(rep, t.Name) {
			measured = append(measured, t)
		} else {
			unmeasured = append(unmeasured, t.Name)
		}
	}
	r := rank(b.rankInput(measured, rankGroups, reps, rep))
	if len(unmeasured) > 0 {
		if len(measured) == 0 {
			r.Entries = nil
		}
		r.Note = strings.TrimPrefix(r.Note+"; not ranked, no request succeeded: "+strings.Join(unmeasured, ", "), "; ")
	}
	if len(rankGroups) == 0 && len(groups) > 0 {
		// Nothing to compare the targets on: no scores of 0 tied.
		r.Entries = nil
		r.Note = strings.TrimPrefix(r.Note+"; not ranked: interrupted before every target finished one load and shape", "; ")
	}
	return r
}

// readTraces reads every replay's trace once for the run, by its name, and
// prepares it for every target as its cells will (replaySource): a record
// a target cannot be sent (a recorded body of another API than the
// target's) is refused here, before the first request and by --config.check,
// not when its cell comes after minutes of others.
func readTraces(replays []ReplaySpec, targets []config.Target) (map[string]*replay.Trace, error) {
	traces := map[string]*replay.Trace{}
	for _, r := range replays {
		format, _ := replay.ParseFormat(r.Source)
		policy, _ := replay.ParsePolicy(r.OnMalformed)
		tr, err := replay.ReadFile(r.Path, format, replay.ReadOptions{OnMalformed: policy})
		if err != nil {
			return nil, fmt.Errorf("replay %q: %w", r.Name, err)
		}
		for i := range targets {
			if _, err := replaySource(tr, &r, &targets[i], 0, nil); err != nil {
				return nil, fmt.Errorf("replay %q against target %q: %w", r.Name, targets[i].Name, err)
			}
		}
		traces[r.Name] = tr
	}
	return traces, nil
}

// matrixGroups are the matrix's loads of each shape, then its replays, in
// the order they run.
func matrixGroups(spec *Spec) []group {
	var groups []group
	for i := range spec.Matrix.Shapes {
		sh := &spec.Matrix.Shapes[i]
		for _, r := range spec.Matrix.Rates {
			groups = append(groups, group{name: sh.Name, load: report.Load{Kind: report.LoadRate, Value: r}, shape: sh})
		}
		for _, c := range spec.Matrix.Concurrencies {
			groups = append(groups, group{name: sh.Name, load: report.Load{Kind: report.LoadConcurrency, Value: float64(c)}, shape: sh})
		}
	}
	for i := range spec.Matrix.Replays {
		r := &spec.Matrix.Replays[i]
		groups = append(groups, group{name: r.Name, load: report.Load{Kind: report.LoadReplay, Value: r.Speed}, replay: r})
	}
	return groups
}

// runMatrix runs every repeat of every group on every target, in that
// order, and returns what each cell's repeats gave; interrupted says an
// interrupt (ctx cancelled: SIGINT, SIGTERM) stopped the repeat that ran,
// so that the report holds the cells whose every repeat finished.
func (b *run) runMatrix(ctx context.Context, targets []config.Target, cts []*client.Target, groups []group) (acc [][]cellAcc, interrupted bool, err error) {
	spec := b.spec
	acc = make([][]cellAcc, len(groups))
	for gi := range groups {
		acc[gi] = make([]cellAcc, len(targets))
	}
	// finished says a cell has finished, every repeat of it: until one
	// has, an interrupt keeps the cell that ran, partial.
	finished := false
matrix:
	for gi, g := range groups {
		for r := 0; r < spec.Repeats; r++ {
			for ti := range targets {
				key := report.CellKey(targets[ti].Name, g.load, g.name)
				name := render.CellName(targets[ti].Name, targets[ti].Model, g.load, g.name)
				label := name
				if spec.Repeats > 1 {
					label = fmt.Sprintf("%s repeat %d/%d", name, r+1, spec.Repeats)
				}
				watch := b.progress.begin(label, b.span(g).planned)
				res, smp, err := b.repeat(ctx, repeatPlan{
					target: &targets[ti], ct: cts[ti], group: g, index: r,
					warmup: spec.Warmup, duration: spec.Duration, stability: true, cell: key, watch: watch,
					keepPartial: !finished,
				})
				if err != nil && ctx.Err() != nil {
					interrupted = true
					// The bar's line ends here, so that what is said of
					// the interrupt starts on a line of its own.
					b.progress.close()
					if res.Partial {
						acc[gi][ti].repeats = append(acc[gi][ti].repeats, res)
						acc[gi][ti].samples = append(acc[gi][ti].samples, smp)
					}
					break matrix
				}
				if err != nil {
					return nil, false, err
				}
				acc[gi][ti].repeats = append(acc[gi][ti].repeats, res)
				acc[gi][ti].samples = append(acc[gi][ti].samples, smp)
				finished = finished || len(acc[gi][ti].repeats) == spec.Repeats
				b.progress.step(progressLine(gi*len(targets)+ti+1, len(groups)*len(targets), r+1, spec.Repeats, name,
					&res.Stats, time.Since(res.Started), longerThanPlanned(&res, spec.Warmup)))
			}
		}
	}

	return acc, interrupted, nil
}

func gpuReport(gpu *gpuSampler, timeline []report.Span, note string, rep *report.Report) {
	if gpu != nil {
		rep.GPU = gpu.report(timeline)
	} else {
		rep.GPU = report.GPUReport{Note: note}
		if rep.GPU.Note == "" {
			rep.GPU.Note = "no GPU source"
		}
	}
	rep.Environment.GPUs = rep.GPU.Devices
	rep.Environment.Covariates = rep.GPU.Covariates
	rep.Environment.GPUNote = rep.GPU.Note
}

// closeRequests closes the request log (nil: none), written to path, and
// says in the report what it holds, and the write error that left records
// out of it.
func closeRequests(l *requestLog, path string, rep *report.Report) {
	if l != nil {
		err := l.Close()
		written, dropped, left := l.counts()
		rep.RequestRecords = &report.RequestRecords{Path: path, Written: written, Dropped: dropped, LeftOut: left}
		if err != nil {
			rep.RequestRecords.Error = err.Error()
		}
	}
}

// finishedCells assembles, after an interrupt, the cells whose every
// repeat ran, and the cell the interrupt cut short when none had (its
// repeats so far, the last partial), in assembleCells' order, and returns with them the groups
// that every target finished (the ranking compares targets within a
// group, so a group that some target did not finish is not ranked).
func finishedCells(ctx context.Context, spec *Spec, targets []string, groups []group, acc [][]cellAcc) ([]report.CellResult, map[string][numFigures][]float64, []group) {
	var cells []report.CellResult
	reps := map[string][numFigures][]float64{}
	for ti, target := range targets {
		for gi, g := range groups {
			if len(acc[gi][ti].repeats) < spec.Repeats && !partial(acc[gi][ti].repeats) {
				continue
			}
			cs, rs := assembleCells(ctx, spec, []string{target}, []group{g}, [][]cellAcc{{acc[gi][ti]}})
			cells = append(cells, cs...)
			maps.Copy(reps, rs)
		}
	}
	var whole []group
	for gi, g := range groups {
		all := true
		for ti := range targets {
			all = all && len(acc[gi][ti].repeats) == spec.Repeats && !partial(acc[gi][ti].repeats)
		}
		if all {
			whole = append(whole, g)
		}
	}
	return cells, reps, whole
}

// partial says whether one of repeats is partial (cut short by the
// interrupt): its cell is reported, marked partial, and never ranked.
func partial(repeats []report.RepeatResult) bool {
	return slices.ContainsFunc(repeats, func(r report.RepeatResult) bool { return r.Partial })
}

// cellAcc gathers a cell's repeats: acc[group][target].
type cellAcc struct {
	repeats []report.RepeatResult
	samples []*sample
}

// assembleCells turns the repeats into cells, target by target; each
// cell's bootstrap now, so that only its resampled figures, not its
// requests, are kept for the ranking. Run and bench merge share it
// (shardRun.Figures).
func assembleCells(ctx context.Context, spec *Spec, targets []string, groups []group, acc [][]cellAcc) ([]report.CellResult, map[string][numFigures][]float64) {
	var cells []report.CellResult
	reps := map[string][numFigures][]float64{}
	for ti, target := range targets {
		for gi, g := range groups {
			a := &acc[gi][ti]
			key := report.CellKey(target, g.load, g.name)
			cell := report.CellResult{Key: key, Target: target, Load: g.load, Shape: g.name,
				Repeats: a.repeats, CI: map[string]report.Interval{}, Partial: partial(a.repeats)}
			stats := make([]report.Stats, len(a.repeats))
			for i, r := range a.repeats {
				stats[i] = r.Stats
			}
			cell.Degraded, cell.DegradedNote = cellDegraded(a.repeats)
			cell.Stability = report.CellStability(a.repeats)
			cell.Stable = report.StableOf(cell.Stability) // absent when no repeat was checked
			cell.Summary = medianStats(stats)
			cell.PrefixCache = cellPrefixCache(a.repeats)
			bs := bootstrapCellContext(ctx, a.samples, spec.Ranking.Resamples, uint64(spec.Seed), hashString(key))
			for f := 0; f < numFigures; f++ {
				if ci, ok := percentileInterval(bs[f], spec.Ranking.Confidence); ok && resolvable(a.samples, f, spec.Ranking.Confidence) {
					cell.CI[FigureNames[f]] = ci
				}
			}
			widenSuccessRatio(cell.CI, stats, spec.Ranking.Confidence)
			reps[key] = bs
			a.samples = nil
			cells = append(cells, cell)
		}
	}
	return cells, reps
}

func hashString(s string) uint64 {
	h := fnv.New64a()
	h.Write([]byte(s))
	return h.Sum64()
}

// environment is the report's environment of a run started at start: the
// exporter, the machine, the configuration and its inputs (the prompt
// set, the traces), and the targets' servers as info reads them.
func environment(ctx context.Context, cfg *Config, start time.Time, prompts *PromptSet, traces map[string]*replay.Trace, info InfoSource, targets []config.Target) report.Environment {
	spec := &cfg.Bench
	env := report.Environment{
		ExporterVersion: orUnknown(version.Version), ExporterRevision: orUnknown(version.Revision), GoVersion: runtime.Version(),
		OS: runtime.GOOS, Arch: runtime.GOARCH, CPUs: runtime.NumCPU(),
		Started: start, ConfigFile: cfg.File, ConfigSHA256: cfg.SHA256, Config: cfg.EffectiveYAML(),
		PromptSetSHA256: prompts.SHA256, PromptSetSize: prompts.Size, PromptSets: prompts.Infos,
		Seed: spec.Seed, MaxSamplesRepeat: spec.MaxSamplesPerRepeat,
	}
	for _, r := range spec.Matrix.Replays {
		env.Traces = append(env.Traces, report.TraceInfo{Name: r.Name, Source: r.Source, Path: r.Path,
			Records: len(traces[r.Name].Records), Skipped: traces[r.Name].Skipped})
	}
	env.Inputs = merge.Inputs(cfg.File, env.Traces, env.PromptSets)
	infos := info.Info(ctx, targets)
	for _, t := range targets {
		env.Targets = append(env.Targets, report.TargetInfo{
			Name: t.Name, URL: t.URL, Flavor: string(t.Flavor), ConfiguredModel: t.Model,
			EngineInfo: infos[t.Name],
		})
	}
	return env
}

// repeatPlan is one repeat to run.
type repeatPlan struct {
	// watch, when set, follows the repeat's requests too (the progress
	// bar's figures).
	watch  workload.Observer
	target *config.Target
	ct     *client.Target
	group  group
	index  int
	cell   string
	warmup time.Duration
	// duration is the measured time before any stability extension.
	duration  time.Duration
	stability bool
	// trendWindows, when set and the stability check is not, splits the
	// measured time into that many windows, unextended, so that the
	// repeat's window medians show whether its latency grew (a sweep
	// point's steady state).
	trendWindows int
	// keepPartial, when set, has an interrupt keep what the repeat
	// measured before it, marked partial (report.RepeatResult.Partial),
	// rather than nothing: set until a cell has finished, so that a run
	// stopped during its first cell still reports what it measured.
	keepPartial bool
}

// knownAnswers runs the accuracy checks against one target, one at a time,
// as the exporter's workload checks are sent and judged: temperature 0
// unless the bench sets one, no length extensions, and a pass when a
// successful answer matches the pattern anywhere.
func knownAnswers(ctx context.Context, spec *Spec, t *config.Target, ct *client.Target) report.AccuracyCheck {
	cl := client.New(client.Options{MaxConnsPerHost: 1})
	defer cl.Close()
	out := report.AccuracyCheck{Target: t.Name}
	tmpl := plan.Template{Sampling: spec.Sampling, Timeout: t.Timeout}
	for _, ka := range spec.KnownAnswers {
		obs := &observation.Request{Scheduled: time.Now()}
		req := tmpl.KnownAnswer(ka.Prompt, ka.MaxTokens)
		req.RequestID = fmt.Sprintf("known-answer/%s-%d", t.Name, out.Total)
		cl.Do(ctx, ct, req, obs)
		r := report.CheckResult{Prompt: ka.Prompt, Expect: ka.Expect, Answer: textcut.Cut(obs.Text, 500)}
		if obs.Outcome != observation.Success {
			r.Error = fmt.Sprintf("%s: %v", obs.Outcome, obs.Err)
		} else {
			r.Passed = plan.Judge(ka.Pattern, ka.Expect, obs) == plan.Pass
		}
		if r.Passed {
			out.Passed++
		}
		out.Total++
		out.Checks = append(out.Checks, r)
	}
	return out
}

// rankInput gathers what the ranking needs from the cells.
func (b *run) rankInput(targets []config.Target, groups []group, reps map[string][numFigures][]float64, rep *report.Report) *rankInput {
	spec := b.spec
	fig := figureIndex(spec.Ranking.Latency)
	in := &rankInput{
		weights: *spec.Weights, refs: spec.References, figure: spec.Ranking.Latency,
		confidence: spec.Ranking.Confidence, resamples: spec.Ranking.Resamples, seed: uint64(spec.Seed),
	}
	cells := map[string]*report.CellResult{}
	for i := range rep.Cells {
		cells[rep.Cells[i].Key] = &rep.Cells[i]
	}
	for _, t := range targets {
		in.targets = append(in.targets, t.Name)
	}
	for _, gr := range groups {
		g := rankGroup{}
		for _, t := range targets {
			key := report.CellKey(t.Name, gr.load, gr.name)
			c := cells[key]
			g.lat = append(g.lat, c.Summary.Figure(spec.Ranking.Latency))
			g.thr = append(g.thr, c.Summary.OutputTokensPerSecond)
			g.latRep = append(g.latRep, reps[key][fig])
			g.thrRep = append(g.thrRep, reps[key][figThroughput])
			j := math.NaN()
			if e := c.Summary.Efficiency; e != nil && e.JoulesPerOutputToken.Valid() && e.JoulesPerOutputToken > 0 {
				j = float64(e.JoulesPerOutputToken)
			}
			g.joules = append(g.joules, j)
		}
		in.groups = append(in.groups, g)
	}
	in.efficiency = len(in.groups) > 0
	for _, g := range in.groups {
		for _, j := range g.joules {
			in.efficiency = in.efficiency && !math.IsNaN(j)
		}
	}
	if peaks := rep.GPU.PeakMemoryBytes; len(peaks) > 0 {
		mem := make([]float64, len(targets))
		all := true
		for i, t := range targets {
			mem[i] = peaks[t.Name]
			all = all && mem[i] > 0
		}
		if all {
			in.memory = mem
		}
	}
	if len(rep.Accuracy) == len(targets) && len(spec.KnownAnswers) > 0 {
		in.checks = make([][]bool, len(targets))
		for i, a := range rep.Accuracy {
			for _, c := range a.Checks {
				in.checks[i] = append(in.checks[i], c.Passed)
			}
		}
	}
	in.perplexity = perplexityInput(rep, targets)
	in.validity = validityInput(rep, targets)
	in.minSuccess = spec.MinSuccess
	in.below, in.success, in.goodput = successInput(rep, targets, spec.MinSuccess)
	return in
}

// validityInput is each target's share of valid answers over its cells,
// structured answers and tool calls pooled (NaN: none checked); nil when
// no target's answers were checked.
func validityInput(rep *report.Report, targets []config.Target) []float64 {
	idx := map[string]int{}
	for i, t := range targets {
		idx[t.Name] = i
	}
	valid, all := make([]int, len(targets)), make([]int, len(targets))
	any := false
	for i := range rep.Cells {
		c := &rep.Cells[i]
		t, ok := idx[c.Target]
		if !ok {
			continue
		}
		for j := range c.Repeats {
			s := &c.Repeats[j].Stats
			for _, m := range []map[string]int{s.StructuredChecks, s.ToolCallChecks} {
				for r, n := range m {
					all[t] += n
					any = any || n > 0
					if r == observation.Valid {
						valid[t] += n
					}
				}
			}
		}
	}
	if !any {
		return nil
	}
	out := make([]float64, len(targets))
	for t := range out {
		out[t] = math.NaN()
		if all[t] > 0 {
			out[t] = float64(valid[t]) / float64(all[t])
		}
	}
	return out
}

func orUnknown(s string) string {
	if s == "" {
		return "unknown"
	}
	return s
}

// targetSucceeded says whether any request of the target's cells succeeded.
func targetSucceeded(rep *report.Report, target string) bool {
	for i := range rep.Cells {
		c := &rep.Cells[i]
		if c.Target != target {
			continue
		}
		for j := range c.Repeats {
			if c.Repeats[j].Stats.Successes > 0 {
				return true
			}
		}
	}
	return false
}

// repeatSpan is how long one repeat runs: planned, as configured (its
// warm-up, then its measured windows; a replay, its trace's window at its
// speed), and at most (a warm-up that lasts until its bound because no
// request completed, then every window the stability rule may extend it
// to). The requests in flight at a repeat's end run on after either (they
// are waited for), counted in neither: no plan can know them.
type repeatSpan struct{ planned, most time.Duration }

// runPlan is what the matrix is planned to take: said before its first
// repeat (line), in the log, and counted by the progress's estimate.
type runPlan struct {
	cells, repeats int
	// loads says the matrix has rate or concurrency cells, whose repeats
	// the fields below describe: the configured warm-up and its bound
	// (the warm-up lasts until the pipeline is full: 1.5 × the p90 E2E of
	// the first requests, or the bound), the measured time (the duration
	// in whole stability windows), the most the stability rule extends it
	// to, and why it never does when it cannot.
	loads             bool
	warmup, maxWarmup time.Duration
	duration          time.Duration
	measured, most    time.Duration
	window            time.Duration
	fixed             string
	// replays says the matrix replays traces; sweep, that a rate sweep
	// runs after it (its points depend on the rates that pass: no plan).
	replays, sweep bool
	// units are each repeat's span, in the order they run.
	units []repeatSpan
	// startAt and slack are the shards' clock (--shard.start-at,
	// --shard.slack; startAt zero without it): the first repeat waits for
	// startAt, and each next one starts the slack after the previous
	// one's planned end, a wait the totals count.
	startAt time.Time
	slack   time.Duration
}

// planned are the units' planned spans, the progress's units.
func (rp *runPlan) planned() []time.Duration {
	out := make([]time.Duration, len(rp.units))
	for i, u := range rp.units {
		out[i] = u.planned
	}
	return out
}

// totals are the matrix's planned time and the most it may take, from its
// first repeat's start: with the shards' clock, the slack between every
// two repeats is in both (the next repeat's agreed start is the slack
// after the previous one's planned end, however soon that one drained).
func (rp *runPlan) totals() (planned, most time.Duration) {
	for _, u := range rp.units {
		planned += u.planned
		most += u.most
	}
	if n := len(rp.units); n > 1 {
		gaps := time.Duration(n-1) * rp.slack
		planned, most = planned+gaps, most+gaps
	}
	return planned, most
}

// line says the plan in words: the cells and repeats, a repeat's warm-up
// and measured time with how far each may grow, and the matrix's planned
// time beside the most it may take. A run that takes longer than planned
// has said so before it started.
func (rp *runPlan) line() string {
	if len(rp.units) == 0 {
		if rp.sweep {
			return "plan: the rate sweep alone, whose length depends on the rates that pass"
		}
		return ""
	}
	ms := toMillisecond
	var parts []string
	if rp.loads {
		warm := fmt.Sprintf("warm-up %s (longer until the pipeline is full, at most %s)", ms(rp.warmup), ms(rp.maxWarmup))
		if rp.warmup == 0 {
			warm = fmt.Sprintf("warm-up until the pipeline is full (at most %s)", ms(rp.maxWarmup))
		}
		meas := fmt.Sprintf("then %s measured", ms(rp.measured))
		if ms(rp.measured) != ms(rp.duration) {
			meas += fmt.Sprintf(" (the duration, %s, in whole windows of %s)", ms(rp.duration), ms(rp.window))
		}
		if rp.fixed == "" {
			meas += fmt.Sprintf(", run on until the stability rule judges it, up to %s", ms(rp.most))
		} else {
			meas += ", never extended (" + rp.fixed + ")"
		}
		parts = append(parts, "each repeat: "+warm+", "+meas)
	}
	if rp.replays {
		parts = append(parts, "a replay: its trace's window after the warm-up, never extended")
	}
	if !rp.startAt.IsZero() {
		parts = append(parts, fmt.Sprintf("the shards' clock: the first repeat at %s (--shard.start-at), each next one %s (--shard.slack) after the previous one's planned end",
			rp.startAt.UTC().Format(time.RFC3339Nano), ms(rp.slack)))
	}
	planned, most := rp.totals()
	total := fmt.Sprintf("%s planned", ms(planned))
	if ms(most) > ms(planned) {
		total += fmt.Sprintf(", at most %s", ms(most))
	}
	total += " (the requests in flight at each repeat's end aside)"
	parts = append(parts, total)
	if rp.sweep {
		parts = append(parts, "then the rate sweep, whose length depends on the rates that pass")
	}
	return fmt.Sprintf("plan: %d %s × %d %s; %s", rp.cells, plural(rp.cells, "cell", "cells"), rp.repeats, plural(rp.repeats, "repeat", "repeats"),
		strings.Join(parts, "; "))
}

// log states the plan in the log, its durations to the millisecond.
func (rp *runPlan) log(logger *slog.Logger) {
	ms := toMillisecond
	planned, most := rp.totals()
	attrs := []any{"cells", rp.cells, "repeats", rp.repeats, "warmup", ms(rp.warmup), "max_warmup", ms(rp.maxWarmup),
		"measured", ms(rp.measured), "max_measured", ms(rp.most), "planned", ms(planned), "at_most", ms(most), "sweep", rp.sweep}
	if !rp.startAt.IsZero() {
		attrs = append(attrs, "start_at", rp.startAt.UTC().Format(time.RFC3339Nano), "shard_slack", ms(rp.slack))
	}
	logger.Info("bench plan", attrs...)
}

// toMillisecond is a duration as the plan says it: 10 s in 3 windows
// measures 9.999999999 s, said 10s.
func toMillisecond(d time.Duration) time.Duration { return d.Round(time.Millisecond) }

// runPlan is the matrix's plan: its groups on targets targets, each
// repeat's span in the order runMatrix runs them.
func (b *run) runPlan(groups []group, targets int) *runPlan {
	spec := b.spec
	rp := &runPlan{cells: len(groups) * targets, repeats: spec.Repeats, sweep: spec.Sweep != nil,
		warmup: spec.Warmup, maxWarmup: spec.warmupBound(spec.Warmup, spec.Duration), duration: spec.Duration}
	rp.startAt, rp.slack = b.starter.agreement()
	win := plannedWindows(&spec.Stability, b.opts.Shard, repeatPlan{duration: spec.Duration, stability: true})
	rp.window, rp.measured, rp.most = win.window, time.Duration(win.base)*win.window, time.Duration(win.most)*win.window
	switch {
	case !spec.Stability.On():
		rp.fixed = "the stability check is off"
	case b.opts.Shard.On():
		rp.fixed = "a shard: bench merge judges the pooled windows"
	case win.most <= win.base:
		rp.fixed = "stability.max_duration leaves no room"
	}
	for _, g := range groups {
		rp.replays = rp.replays || g.replay != nil
		rp.loads = rp.loads || g.replay == nil
		for r := 0; r < spec.Repeats; r++ {
			for range targets {
				rp.units = append(rp.units, b.span(g))
			}
		}
	}
	return rp
}

// span is how long a repeat of a group runs (repeatSpan): a rate's or a
// concurrency's, its warm-up and measured windows, at most the warm-up's
// bound and the windows the stability rule may extend it to; a replay's,
// its warm-up and its trace's window at its speed (a looping one is cut
// at its measured windows), never longer: its warm-up is the configured
// one and it is never extended.
func (b *run) span(g group) repeatSpan {
	spec := b.spec
	// A replay's windows differ only in that none is ever added
	// (replayLoad.windows), which its span below never reads.
	win := plannedWindows(&spec.Stability, b.opts.Shard, repeatPlan{duration: spec.Duration, stability: true})
	measured := spec.Warmup + time.Duration(win.base)*win.window
	switch r := g.replay; {
	case r == nil:
		return repeatSpan{planned: measured, most: spec.warmupBound(spec.Warmup, spec.Duration) + time.Duration(win.most)*win.window}
	case r.Loop:
		return repeatSpan{planned: measured, most: measured}
	}
	r := g.replay
	d := spec.Warmup
	if recs := b.traces[r.Name].Records; len(recs) > 0 {
		end := recs[len(recs)-1].Offset
		if r.End > 0 {
			end = min(end, r.End)
		}
		d += time.Duration(float64(max(0, end-r.Start)) / r.Speed)
	}
	return repeatSpan{planned: d, most: d}
}
