package merge

import (
	"context"
	"fmt"
	"math"
	"slices"
	"strings"

	"github.com/infer-exporter/infer_exporter/bench/report"
	"github.com/infer-exporter/infer_exporter/probe/observation"
)

// Bounds of what a shard report may claim, beside its configuration's own
// (max_samples_per_repeat, the stability windows). Each is far above what
// a run records and low enough that the merge's sums cannot overflow and
// its per-window slices stay small.
const (
	// MaxShardWindows bounds a repeat's windows and its per-window lists:
	// a 12-day repeat of 1 s windows. The merge makes lists of this many
	// windows, so a claim of 1e8 windows must not reach it.
	MaxShardWindows = 1 << 20
	// MaxShardCount bounds every count of a shard (requests, tokens,
	// outcomes, per-window counts): 2^40 requests of one repeat is beyond
	// any run, and MaxShards of them still add up within an int64.
	MaxShardCount = 1 << 40
	// MaxShardSeconds bounds every latency and instant of a shard, in
	// seconds: a million seconds (11.6 days) is longer than any request
	// lasts; ±1e308 is no measurement, and would overflow the merged
	// means to infinity.
	MaxShardSeconds = 1e6
	// MaxShardGPUs bounds the GPUs a shard's repeat reports the energy
	// of, and MaxShardJoules each GPU's energy: 10^12 J is a 1 kW GPU
	// for over 30 years.
	MaxShardGPUs   = 4096
	MaxShardJoules = 1e12
)

// check checks the shard reports of one merge against each other and
// against their embedded configuration, which read parses and validates
// as the bench validates its own (offline: the files it names are not
// read), and returns them in shard order with that configuration's run.
// Every error names the file and the field, as in
// "shard-1.json: shard.cells[0].repeats[2].windows: 100000000 exceeds ...".
func check(ctx context.Context, shards []ShardFile, read ReadRun) ([]ShardFile, Run, error) {
	n := 0
	for i, sf := range shards {
		r := sf.Report
		switch {
		case r == nil:
			return nil, nil, fmt.Errorf("%s: no report", name(sf, i))
		case r.Shard == nil:
			return nil, nil, fmt.Errorf("%s: shard: absent: not a shard report (run with --shard=i/N)", name(sf, i))
		case r.Shard.Count < 1 || r.Shard.Count > MaxShards:
			return nil, nil, fmt.Errorf("%s: shard.count: %d is not in [1, %d]", name(sf, i), r.Shard.Count, MaxShards)
		case r.Shard.Index < 0 || r.Shard.Index >= r.Shard.Count:
			return nil, nil, fmt.Errorf("%s: shard.index: %d is not in [0, %d)", name(sf, i), r.Shard.Index, r.Shard.Count)
		case r.Interrupted:
			// Its cells stop where it was stopped, the others' do not: a
			// merge would add up different requests.
			return nil, nil, fmt.Errorf("%s: interrupted: this shard was stopped before its end; run it again", name(sf, i))
		}
		if n == 0 {
			n = r.Shard.Count
		}
		if r.Shard.Count != n {
			return nil, nil, fmt.Errorf("%s: shard.count: shard %d/%d beside shards of %d (%s)", name(sf, i), r.Shard.Index, r.Shard.Count, n, name(shards[0], 0))
		}
	}
	byIndex := slices.Clone(shards)
	slices.SortStableFunc(byIndex, func(a, b ShardFile) int { return a.Report.Shard.Index - b.Report.Shard.Index })
	for i, sf := range byIndex {
		if sf.Report.Shard.Index != i {
			return nil, nil, fmt.Errorf("%s: shard.index: shards of %d: shard %d is missing or repeated (have %d reports)", sf.File, n, i, len(byIndex))
		}
	}
	if len(byIndex) != n {
		var missing []string
		for i := len(byIndex); i < n; i++ {
			missing = append(missing, fmt.Sprint(i))
		}
		return nil, nil, fmt.Errorf("shards of %d: %d reports given, shard %s missing (%s says --shard=%d/%d); give every shard's report",
			n, len(byIndex), strings.Join(missing, ", "), name(shards[0], 0), shards[0].Report.Shard.Index, n)
	}

	first := byIndex[0]
	env := &first.Report.Environment
	run, err := read(ctx, []byte(env.Config), first.File+": environment.config")
	if err != nil {
		return nil, nil, err
	}
	m := run.Matrix()
	if env.Seed != m.Seed {
		return nil, nil, fmt.Errorf("%s: environment.seed: %d, its configuration's bench.seed %d", first.File, env.Seed, m.Seed)
	}
	if env.MaxSamplesRepeat != m.MaxSamplesPerRepeat {
		return nil, nil, fmt.Errorf("%s: environment.max_samples_per_repeat: %d, its configuration's %d", first.File, env.MaxSamplesRepeat, m.MaxSamplesPerRepeat)
	}
	if err := checkMatrix(first, &m); err != nil {
		return nil, nil, err
	}
	for _, sf := range byIndex[1:] {
		if err := interrupted(ctx); err != nil {
			return nil, nil, err
		}
		e := &sf.Report.Environment
		switch {
		case e.ConfigSHA256 != env.ConfigSHA256:
			return nil, nil, fmt.Errorf("%s: environment.config_sha256: shard %d ran configuration %s, %s (shard 0) %s", sf.File, sf.Report.Shard.Index, e.ConfigSHA256, first.File, env.ConfigSHA256)
		case e.Config != env.Config:
			// The same hash with another text: one was edited.
			return nil, nil, fmt.Errorf("%s: environment.config: differs from %s's under the same config_sha256", sf.File, first.File)
		case e.Seed != env.Seed:
			return nil, nil, fmt.Errorf("%s: environment.seed: %d, %s has %d under the same config_sha256", sf.File, e.Seed, first.File, env.Seed)
		case e.MaxSamplesRepeat != env.MaxSamplesRepeat:
			return nil, nil, fmt.Errorf("%s: environment.max_samples_per_repeat: %d, %s has %d", sf.File, e.MaxSamplesRepeat, first.File, env.MaxSamplesRepeat)
		}
		if err := sameInputs(sf, first); err != nil {
			return nil, nil, err
		}
	}
	for _, sf := range byIndex {
		if err := interrupted(ctx); err != nil {
			return nil, nil, err
		}
		if err := checkShardCells(sf, first.Report, run, m.MaxSamplesPerRepeat); err != nil {
			return nil, nil, err
		}
	}
	return byIndex, run, nil
}

// sameInputs refuses a shard whose audited inputs (the exporter binary,
// the configuration, every trace, every prompt set) are not shard 0's:
// shards that replayed different trace contents, ran another build, or
// sent other prompts did not measure one run.
func sameInputs(sf, first ShardFile) error {
	key := func(in report.Input) string { return in.Kind + " " + in.Name }
	want := map[string]string{}
	for _, in := range first.Report.Environment.Inputs {
		want[key(in)] = in.SHA256
	}
	got := map[string]bool{}
	for _, in := range sf.Report.Environment.Inputs {
		k := key(in)
		got[k] = true
		w, ok := want[k]
		switch {
		case !ok:
			return fmt.Errorf("%s: environment.inputs: %s is not among %s's inputs", sf.File, strings.TrimSpace(k), first.File)
		case w != in.SHA256:
			return fmt.Errorf("%s: environment.inputs: %s has sha256 %s, %s's has %s: the shards did not run the same inputs", sf.File, strings.TrimSpace(k), short(in.SHA256), first.File, short(w))
		}
	}
	for _, in := range first.Report.Environment.Inputs {
		if !got[key(in)] {
			return fmt.Errorf("%s: environment.inputs: %s of %s is missing", sf.File, strings.TrimSpace(key(in)), first.File)
		}
	}
	return nil
}

func name(sf ShardFile, i int) string {
	if sf.File != "" {
		return sf.File
	}
	return fmt.Sprintf("report %d", i+1)
}

// checkMatrix checks that shard 0's cells are its configuration's matrix:
// every run target × every group (shape × load, then the replays), in the
// order the bench runs them, each with bench.repeats repeats.
func checkMatrix(sf ShardFile, m *Matrix) error {
	r, targets, groups := sf.Report, m.Targets, m.Groups
	if want := len(targets) * len(groups); len(r.Cells) != want {
		return fmt.Errorf("%s: cells: %d cells, its configuration's matrix has %d (%d targets × %d loads and shapes)", sf.File, len(r.Cells), want, len(targets), len(groups))
	}
	for ci, c := range r.Cells {
		t, g := targets[ci/len(groups)], groups[ci%len(groups)]
		if key := report.CellKey(t, g.Load, g.Shape); c.Key != key || c.Target != t || c.Load != g.Load || c.Shape != g.Shape {
			return fmt.Errorf("%s: cells[%d].key: %q, its configuration's matrix has %q there", sf.File, ci, c.Key, key)
		}
		if len(c.Repeats) != m.Repeats {
			return fmt.Errorf("%s: cells[%d].repeats: %d repeats, its configuration's bench.repeats is %d", sf.File, ci, len(c.Repeats), m.Repeats)
		}
	}
	return nil
}

// checkShardCells checks one shard's cells and recorders against shard 0's
// (whose cells checkMatrix checked) and the configuration's run: the
// windows it allows a repeat, the records it keeps (maxRecs).
func checkShardCells(sf ShardFile, first *report.Report, run Run, maxRecs int) error {
	r := sf.Report
	if len(r.Cells) != len(first.Cells) {
		return fmt.Errorf("%s: cells: %d cells, shard 0 has %d", sf.File, len(r.Cells), len(first.Cells))
	}
	if len(r.Shard.Cells) != len(first.Cells) {
		return fmt.Errorf("%s: shard.cells: %d cells, shard 0 has %d", sf.File, len(r.Shard.Cells), len(first.Cells))
	}
	for ci, c := range first.Cells {
		rc, sc := &r.Cells[ci], &r.Shard.Cells[ci]
		switch {
		case rc.Key != c.Key:
			return fmt.Errorf("%s: cells[%d].key: %q, shard 0 has %q", sf.File, ci, rc.Key, c.Key)
		case sc.Key != c.Key:
			return fmt.Errorf("%s: shard.cells[%d].key: %q, shard 0 has %q", sf.File, ci, sc.Key, c.Key)
		case len(rc.Repeats) != len(c.Repeats):
			return fmt.Errorf("%s: cells[%d].repeats: %d repeats, shard 0 has %d", sf.File, ci, len(rc.Repeats), len(c.Repeats))
		case len(sc.Repeats) != len(c.Repeats):
			return fmt.Errorf("%s: shard.cells[%d].repeats: %d repeats, shard 0 has %d", sf.File, ci, len(sc.Repeats), len(c.Repeats))
		}
		for ri := range c.Repeats {
			if err := checkRepeat(&rc.Repeats[ri]); err != nil {
				return fmt.Errorf("%s: cells[%d].repeats[%d].%w", sf.File, ci, ri, err)
			}
			// Every shard read the same trace (sameInputs) and computed
			// its whole seeded window: one length, one row count.
			fr, rr := c.Repeats[ri].Replay, rc.Repeats[ri].Replay
			switch {
			case c.Load.Kind != report.LoadReplay:
			case rr == nil:
				return fmt.Errorf("%s: cells[%d].repeats[%d].replay: absent in a replay cell", sf.File, ci, ri)
			case fr == nil:
				// Shard 0 is checked first: its own absent replay is refused above.
				return fmt.Errorf("%s: cells[%d].repeats[%d].replay: shard 0's is absent", sf.File, ci, ri)
			case rr.WindowSeconds != fr.WindowSeconds || rr.Rows != fr.Rows:
				return fmt.Errorf("%s: cells[%d].repeats[%d].replay: a window of %v s and %d rows, shard 0's has %v s and %d rows: the shards did not replay one trace",
					sf.File, ci, ri, rr.WindowSeconds, rr.Rows, fr.WindowSeconds, fr.Rows)
			}
			maxK := run.MaxWindows(&c, ri)
			if err := checkState(&sc.Repeats[ri], maxK, maxRecs); err != nil {
				return fmt.Errorf("%s: shard.cells[%d].repeats[%d].%w", sf.File, ci, ri, err)
			}
		}
	}
	return nil
}

// checkRepeat checks the figures of a shard's repeat result that the merge
// carries over; the error begins with the field's name.
func checkRepeat(rr *report.RepeatResult) error {
	if err := count("prompts_drawn", rr.PromptsDrawn); err != nil {
		return err
	}
	if err := seconds("scheduling_latency_p99_seconds", rr.SchedulingLatencyP99, false); err != nil {
		return err
	}
	if e := rr.Stats.Efficiency; e != nil {
		if len(e.Devices) > MaxShardGPUs {
			return fmt.Errorf("stats.efficiency.devices: %d GPUs, above %d (merge.MaxShardGPUs)", len(e.Devices), MaxShardGPUs)
		}
		for i, d := range e.Devices {
			switch {
			case !slices.Contains([]string{"", report.EnergyCounter, report.EnergyPower}, d.Source):
				return fmt.Errorf("stats.efficiency.devices[%d].source: %.64q is not an energy source", i, d.Source)
			case d.Source == "" && !math.IsNaN(float64(d.Joules)):
				return fmt.Errorf("stats.efficiency.devices[%d].joules: a figure without a source", i)
			case d.Source != "" && !(d.Joules >= 0 && d.Joules <= MaxShardJoules):
				return fmt.Errorf("stats.efficiency.devices[%d].joules: %v is not in [0, %g]", i, float64(d.Joules), float64(MaxShardJoules))
			case len(d.UUID) > 256 || len(d.Name) > 256 || len(d.GPU) > 256:
				return fmt.Errorf("stats.efficiency.devices[%d]: a name longer than 256 bytes", i)
			}
		}
	}
	if err := checkClient(rr.Client); err != nil {
		return err
	}
	if rp := rr.Replay; rp != nil {
		for _, c := range []struct {
			field string
			v     int
		}{{"replay.replayed", rp.Replayed}, {"replay.dropped", rp.Dropped}, {"replay.rows", rp.Rows}} {
			if err := count(c.field, c.v); err != nil {
				return err
			}
		}
		if rp.Clamped > MaxShardCount {
			return fmt.Errorf("replay.clamped: %d exceeds %d (merge.MaxShardCount)", rp.Clamped, uint64(MaxShardCount))
		}
		if err := seconds("replay.window_seconds", rp.WindowSeconds, false); err != nil {
			return err
		}
		if err := seconds("replay.drift.p99", rp.Drift.P99, true); err != nil {
			return err
		}
	}
	return nil
}

// checkClient checks a shard's client verdict (absent: none, from before
// it): a state of the closed set, counts in bounds and no more late
// arrivals than arrivals, its figures finite.
func checkClient(c *report.ClientCheck) error {
	if c == nil {
		return nil
	}
	switch {
	case !slices.Contains([]string{report.ClientOK, report.ClientDegraded, report.StateNotJudged}, c.State):
		return fmt.Errorf("client.state: %.64q is not a client verdict", c.State)
	case c.Late > c.Arrivals:
		return fmt.Errorf("client.late: %d of %d arrivals", c.Late, c.Arrivals)
	case len(c.Note) > maxNoteBytes:
		return fmt.Errorf("client.note: longer than %d bytes", maxNoteBytes)
	}
	if err := count("client.arrivals", c.Arrivals); err != nil {
		return err
	}
	if err := count("client.late", c.Late); err != nil {
		return err
	}
	if err := seconds("client.lag_p99_seconds", float64(c.LagP99), true); err != nil {
		return err
	}
	return seconds("client.scheduling_latency_p99_seconds", c.SchedulingLatencyP99, false)
}

// maxNoteBytes bounds a sentence a shard's report carries over.
const maxNoteBytes = 4096

// checkState checks one shard recorder: its windows within what the
// configuration allows, every count in [0, MaxShardCount], every figure
// finite and within MaxShardSeconds, its outcomes from the closed set, its
// lists within the recorder's own bounds. The error begins with the
// field's name.
func checkState(st *report.RecorderState, maxK, maxRecs int) error {
	switch {
	case st.Windows < 0 || st.Windows > maxK:
		return fmt.Errorf("windows: %d exceeds the %d windows its configuration allows a repeat of this cell (the stability check's max_duration / window, or a replay's span / window)", st.Windows, maxK)
	case !(st.WindowSeconds >= 0 && st.WindowSeconds <= MaxShardSeconds):
		return fmt.Errorf("window_seconds: %v is not in [0, %g]", st.WindowSeconds, MaxShardSeconds)
	case st.Windows > 0 && st.WindowSeconds == 0:
		return fmt.Errorf("window_seconds: 0 with %d windows", st.Windows)
	case !(st.SpanSeconds >= 0 && st.SpanSeconds <= MaxShardSeconds):
		return fmt.Errorf("span_seconds: %v is not in [0, %g]", st.SpanSeconds, MaxShardSeconds)
	}
	for _, c := range []struct {
		field string
		v     int
	}{
		{"measured", st.Measured}, {"goodput", st.Goodput}, {"reasoning_tokens", st.ReasoningTokens},
		{"reasoning_requests", st.ReasoningRequests}, {"records_seen", st.RecordsSeen}, {"itl_seen", st.ITLSeen},
		{"usage_not_believed", st.UsageNotBelieved},
	} {
		if err := count(c.field, c.v); err != nil {
			return err
		}
	}
	switch {
	case st.Goodput > st.Measured:
		return fmt.Errorf("goodput: %d above measured %d", st.Goodput, st.Measured)
	case len(st.Records) > maxRecs:
		return fmt.Errorf("records: %d records, above its configuration's max_samples_per_repeat %d", len(st.Records), maxRecs)
	case st.RecordsSeen < len(st.Records):
		return fmt.Errorf("records_seen: %d, below the %d records kept", st.RecordsSeen, len(st.Records))
	case len(st.ITL) > report.MaxITL:
		return fmt.Errorf("itl: %d gaps, above the %d a recorder keeps", len(st.ITL), report.MaxITL)
	case st.ITLSeen < len(st.ITL):
		return fmt.Errorf("itl_seen: %d, below the %d gaps kept", st.ITLSeen, len(st.ITL))
	}
	if err := checkOutcomes(st); err != nil {
		return err
	}
	if err := checkWindows(st); err != nil {
		return err
	}
	for i, v := range st.ITL {
		if err := seconds(fmt.Sprintf("itl[%d]", i), v, false); err != nil {
			return err
		}
	}
	for i := range st.Records {
		if err := checkRecord(&st.Records[i]); err != nil {
			return fmt.Errorf("records[%d].%w", i, err)
		}
	}
	return nil
}

// checkOutcomes bounds a recorder state's outcome and status counts: known
// names, counts in bounds, no more status codes than failed requests.
func checkOutcomes(st *report.RecorderState) error {
	for o, n := range st.Outcomes {
		if !slices.Contains(observation.Outcomes, observation.Outcome(o)) {
			return fmt.Errorf("outcomes: %.64q is not an outcome (%v)", o, observation.Outcomes)
		}
		if err := count("outcomes."+o, n); err != nil {
			return err
		}
	}
	failed := 0
	for code, n := range st.HTTPErrors {
		if !slices.Contains(observation.StatusCodes, code) {
			return fmt.Errorf("http_errors: %.64q is not a status code of the set (%v)", code, observation.StatusCodes)
		}
		if err := count("http_errors."+code, n); err != nil {
			return err
		}
		failed += n
	}
	if nHTTP := st.Outcomes[string(observation.HTTP4xx)] + st.Outcomes[string(observation.HTTP5xx)]; failed > nHTTP {
		return fmt.Errorf("http_errors: %d, above the %d requests of outcome http_4xx or http_5xx", failed, nHTTP)
	}
	// The validity counts: known results, no more than the successes.
	for _, m := range []struct {
		field  string
		counts map[string]int
	}{{"structured_checks", st.StructuredChecks}, {"tool_call_checks", st.ToolCallChecks}} {
		checked := 0
		for r, n := range m.counts {
			if !slices.Contains(observation.ValidityResults, r) {
				return fmt.Errorf("%s: %.64q is not a result (%v)", m.field, r, observation.ValidityResults)
			}
			if err := count(m.field+"."+r, n); err != nil {
				return err
			}
			checked += n
		}
		if ok := st.Outcomes[string(observation.Success)]; checked > ok {
			return fmt.Errorf("%s: %d, above the %d successful requests", m.field, checked, ok)
		}
	}
	return nil
}

// checkWindows bounds a recorder state's per-window counts, tokens and
// E2E samples.
func checkWindows(st *report.RecorderState) error {
	for _, l := range []struct {
		field string
		v     []int
	}{
		{"win_successes", st.WinSuccesses}, {"win_completions", st.WinCompletions}, {"win_input_tokens", st.WinInputTokens}, {"win_offered", st.WinOffered},
		{"win_dropped", st.WinDropped}, {"win_sent", st.WinSent}, {"win_ended", st.WinEnded},
	} {
		if len(l.v) > MaxShardWindows+1 {
			return fmt.Errorf("%s: %d windows, above %d (merge.MaxShardWindows)", l.field, len(l.v), MaxShardWindows)
		}
		for i, v := range l.v {
			if err := count(fmt.Sprintf("%s[%d]", l.field, i), v); err != nil {
				return err
			}
		}
	}
	for _, l := range []struct {
		field string
		v     []float64
	}{{"win_tokens", st.WinTokens}, {"win_good_tokens", st.WinGoodTokens}} {
		if len(l.v) > MaxShardWindows {
			return fmt.Errorf("%s: %d windows, above %d (merge.MaxShardWindows)", l.field, len(l.v), MaxShardWindows)
		}
		for i, v := range l.v {
			if !(v >= 0 && v <= MaxShardCount) {
				return fmt.Errorf("%s[%d]: %v is not in [0, %d]", l.field, i, v, int64(MaxShardCount))
			}
		}
	}
	for i, v := range st.WinGoodTokens {
		if i < len(st.WinTokens) && v > st.WinTokens[i]*(1+1e-6) || i >= len(st.WinTokens) && v > 0 {
			return fmt.Errorf("win_good_tokens[%d]: %v, above the window's %v tokens", i, v, winAt(st.WinTokens, i))
		}
	}
	if len(st.WinE2E) > MaxShardWindows {
		return fmt.Errorf("win_e2e: %d windows, above %d (merge.MaxShardWindows)", len(st.WinE2E), MaxShardWindows)
	}
	for i, w := range st.WinE2E {
		if len(w) > report.MaxWindowE2E {
			return fmt.Errorf("win_e2e[%d]: %d values, above the %d a recorder keeps per window", i, len(w), report.MaxWindowE2E)
		}
		for j, v := range w {
			if err := seconds(fmt.Sprintf("win_e2e[%d][%d]", i, j), v, false); err != nil {
				return err
			}
		}
	}
	return nil
}

// checkRecord checks one request record: its figures null or finite and
// within MaxShardSeconds (the schedule instant and the lag may be
// negative: a warm-up request, a send a little early), its windows within
// MaxShardWindows.
func checkRecord(r *report.Record) error {
	if !(math.Abs(r.Sched) <= MaxShardSeconds) {
		return fmt.Errorf("s: %v is not in [-%g, %g]", r.Sched, MaxShardSeconds, MaxShardSeconds)
	}
	for _, f := range []struct {
		field string
		v     report.Num
	}{{"ttft", r.TTFT}, {"ttfa", r.TTFA}, {"tpot", r.TPOT}, {"e2e", r.E2E}} {
		if err := seconds(f.field, float64(f.v), true); err != nil {
			return err
		}
	}
	if l := float64(r.Lag); !math.IsNaN(l) && !(math.Abs(l) <= MaxShardSeconds) {
		return fmt.Errorf("lag: %v is not in [-%g, %g]", l, MaxShardSeconds, MaxShardSeconds)
	}
	if err := checkServerParts(r.Server); err != nil {
		return err
	}
	if r.FirstWin < 0 || r.FirstWin > MaxShardWindows || len(r.WinTokens) > MaxShardWindows {
		return fmt.Errorf("w: window %d with %d windows of tokens, not within %d windows (merge.MaxShardWindows)", r.FirstWin, len(r.WinTokens), MaxShardWindows)
	}
	for i, v := range r.WinTokens {
		if !(v >= 0 && float64(v) <= MaxShardCount) {
			return fmt.Errorf("t[%d]: %v is not in [0, %d]", i, v, int64(MaxShardCount))
		}
	}
	return nil
}

// checkServerParts checks a record's timings by the engine's account:
// durations, or null; the client overhead, which clock resolution may
// make slightly negative, within as many seconds either side.
func checkServerParts(p *report.ServerParts) error {
	if p == nil {
		return nil
	}
	for _, f := range []struct {
		field string
		v     report.Num
	}{{"sv.q", p.Queue}, {"sv.f", p.EngineTTFT}, {"sv.g", p.Generation}} {
		if err := seconds(f.field, float64(f.v), true); err != nil {
			return err
		}
	}
	if o := float64(p.ClientOverhead); !math.IsNaN(o) && !(math.Abs(o) <= MaxShardSeconds) {
		return fmt.Errorf("sv.o: %v is not in [-%g, %g]", o, MaxShardSeconds, MaxShardSeconds)
	}
	return nil
}

// count checks a count: in [0, MaxShardCount].
func count(field string, v int) error {
	if v < 0 || v > MaxShardCount {
		return fmt.Errorf("%s: %d is not a count in [0, %d] (merge.MaxShardCount)", field, v, int64(MaxShardCount))
	}
	return nil
}

// seconds checks a duration in seconds: finite, in [0, MaxShardSeconds];
// null (NaN) too when nullable.
func seconds(field string, v float64, nullable bool) error {
	if nullable && math.IsNaN(v) {
		return nil
	}
	if !(v >= 0 && v <= MaxShardSeconds) {
		return fmt.Errorf("%s: %v is not a duration in [0, %g] seconds (merge.MaxShardSeconds)", field, v, MaxShardSeconds)
	}
	return nil
}

// winAt is a window's value, 0 past the windows given.
func winAt(a []float64, i int) float64 {
	if i < len(a) {
		return a[i]
	}
	return 0
}
