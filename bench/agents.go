package bench

import (
	"context"
	"fmt"
	"log/slog"
	"math"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/infer-exporter/infer_exporter/bench/render"
	"github.com/infer-exporter/infer_exporter/bench/report"
	"github.com/infer-exporter/infer_exporter/internal/config"
	"github.com/infer-exporter/infer_exporter/probe/client"
	"github.com/infer-exporter/infer_exporter/probe/observation"
	"github.com/infer-exporter/infer_exporter/probe/plan"
	"github.com/infer-exporter/infer_exporter/probe/sessions"
	"github.com/infer-exporter/infer_exporter/probe/workload"
)

// agentSearcher runs the agents search after the matrix (AgentsSpec): for
// every target, the most agents running jobs closed-loop whose turns meet
// the tier. Each point is a sessions workload of N agents
// (sessions.Options.Agents) through the exporter's runner and client, so
// every turn is measured as every request is, from its scheduled instant.
type agentSearcher struct {
	spec     *AgentsSpec
	seed     int64
	sampling config.Sampling
	progress *progress
	logger   *slog.Logger
	// saturation is the process's goroutine scheduling latency (the
	// bench's), part of the client's verdict on each point; nil: none.
	saturation interface{ P99() float64 }
}

// run runs the search of every target; an interrupt leaves out the
// search that ran and marks the report interrupted.
func (a *agentSearcher) run(ctx context.Context, targets []config.Target, cts []*client.Target, rep *report.Report) error {
	for i := range targets {
		res, err := a.search(ctx, &targets[i], cts[i])
		if err != nil && ctx.Err() != nil {
			rep.Interrupted = true
			return nil
		}
		if err != nil {
			return err
		}
		rep.Agents = append(rep.Agents, res)
	}
	return nil
}

// search finds the most agents meeting the tier on one target.
func (a *agentSearcher) search(ctx context.Context, t *config.Target, ct *client.Target) (report.AgentSearch, error) {
	res := report.AgentSearch{Target: t.Name, Tier: agentTier(&a.spec.SLO), Quantile: a.spec.SLO.Quantile}
	try := func(n int) (report.AgentPoint, error) {
		watch := a.progress.begin(fmt.Sprintf("agents %s: %d agents", t.Name, n), a.spec.Warmup+a.spec.Duration)
		m, err := a.point(ctx, t, ct, n, watch)
		if err != nil {
			return report.AgentPoint{}, err
		}
		var schedP99 float64
		if a.saturation != nil {
			schedP99 = a.saturation.P99()
		}
		pt := m.judge(&a.spec.SLO, n, a.spec.Duration, schedP99)
		a.progress.say(render.AgentPointLine(t.Name, t.Model, a.spec.SLO.Quantile, pt))
		return pt, nil
	}
	err := searchAgents(a.spec.Start, a.spec.MaxAgents, &res, try)
	if err == nil {
		a.progress.say(render.AgentResultLine(t.Model, &res))
	}
	return res, err
}

// searchAgents runs the counts through try, which measures and judges
// one: start, 2×start, ... up to most until one fails, then integer
// bisection between the last passing and the first failing count until
// they are adjacent; and fills res with the points, the result and its
// note. A point whose client was degraded counts for neither side: it
// ends the search there, as the client's limit, not the server's (as a
// sweep's point does).
func searchAgents(start, most int, res *report.AgentSearch, try func(n int) (report.AgentPoint, error)) error {
	var pass, fail, client int
	var passPt, failPt, clientPt report.AgentPoint
	// judge runs one point: false when the search ends on its client.
	judge := func(n int) (report.AgentPoint, bool, error) {
		pt, err := try(n)
		if err != nil {
			return pt, false, err
		}
		res.Points = append(res.Points, pt)
		if pt.Degraded {
			client, clientPt = n, pt
			return pt, false, nil
		}
		return pt, true, nil
	}
	for n := start; ; {
		pt, judged, err := judge(n)
		if err != nil {
			return err
		}
		if !judged {
			break
		}
		if !pt.Pass {
			fail, failPt = n, pt
			break
		}
		pass, passPt = n, pt
		if n >= most {
			break
		}
		n = min(2*n, most)
	}
	for client == 0 && pass > 0 && fail-pass > 1 {
		mid := pass + (fail-pass)/2
		pt, judged, err := judge(mid)
		if err != nil {
			return err
		}
		switch {
		case !judged:
		case pt.Pass:
			pass, passPt = mid, pt
		default:
			fail, failPt = mid, pt
		}
	}
	res.MaxAgents, res.FirstFailingAgents, res.JobsPerHourPerAgent = pass, fail, passPt.JobsPerHourPerAgent
	res.ClientLimitedAgents = client
	switch {
	case client > 0:
		res.Note = clientLimitedNote(client, pass, fail, start, &clientPt)
	case pass == 0 && start > 1:
		res.Note = fmt.Sprintf("even %d agents failed the tier (%s): lower bench.agents.start", start, failPt.Note)
	case pass == 0:
		// No lower count to try: the server holds no agent in the tier.
		res.Note = fmt.Sprintf("even 1 agent failed the tier (%s): the server holds no agent within it", failPt.Note)
	case fail == 0:
		res.Note = fmt.Sprintf("passed up to max_agents %d: the server may hold more (raise bench.agents.max_agents)", most)
	}
	return nil
}

// clientLimitedNote is the note of a search that the client's limit
// ended at client agents (clientPt), after the last passing count pass
// and the first failing fail (0: none).
func clientLimitedNote(client, pass, fail, start int, clientPt *report.AgentPoint) string {
	server := fmt.Sprintf("it was the first count tried, so no count was judged (lower bench.agents.start below %d)", start)
	switch {
	case pass > 0 && fail > 0:
		server = fmt.Sprintf("the server passed the tier at %d agents and failed it at %d", pass, fail)
	case pass > 0:
		server = fmt.Sprintf("the server passed the tier up to %d agents", pass)
	}
	return fmt.Sprintf("the search stopped at %d agents, the client's limit, not the server's (%s); %s, so the server may hold more agents: %s",
		client, clientPt.Note, server, agentsRemedy)
}

// agentsRemedy is what to change when the client is degraded at a point.
const agentsRemedy = "give the bench more CPU (GOMAXPROCS, cores) or a machine of its own, or end the search below it (bench.agents.max_agents)"

// agentTier is the tier for people: "success >= 0.99, TTFT p90 <= 1s,
// TPOT p90 <= 50ms".
func agentTier(slo *AgentSLO) string {
	parts := []string{fmt.Sprintf("success >= %g", slo.MinSuccess)}
	q := render.QuantileName(slo.Quantile)
	if slo.TTFT > 0 {
		parts = append(parts, fmt.Sprintf("TTFT %s <= %s", q, slo.TTFT))
	}
	if slo.TPOT > 0 {
		parts = append(parts, fmt.Sprintf("TPOT %s <= %s", q, slo.TPOT))
	}
	return strings.Join(parts, ", ")
}

// point runs n agents against t for the warm-up and the duration, and
// returns what its meter heard.
func (a *agentSearcher) point(ctx context.Context, t *config.Target, ct *client.Target, n int, watch workload.Observer) (*agentMeter, error) {
	sp := a.spec
	agent := sp.Agent
	user, output := sp.UserTokens.Distribution, sp.OutputTokens.Distribution
	total := sp.Warmup + sp.Duration
	ss, err := sessions.New(sessions.Options{
		Config: config.Sessions{
			// A job's turns are its turn limit, as a workload's agent
			// block makes them: a reply without a call ends it earlier.
			Turns:      config.Distribution{Dist: "fixed", Mean: float64(agent.MaxTurns)},
			UserTokens: user, OutputTokens: output, MaxConversationTokens: sp.MaxConversationTokens,
			MaxActive: n, Seed: a.seed, Agent: &agent,
		},
		Agents: n, Duration: total, Chat: true, Logger: a.logger,
		Build: func(ctx context.Context) (workload.Prompts, int, error) {
			// The same calibration as the matrix's prompts (plan.Tokenizer).
			tok, err := plan.Tokenizer(ctx, t)
			if err != nil {
				return nil, 0, fmt.Errorf("target %q: prompt calibration: %w", t.Name, err)
			}
			gen, err := plan.Prompts(ctx, tok, user, output, a.seed)
			if err != nil {
				return nil, 0, fmt.Errorf("target %q: prompt calibration: %w", t.Name, err)
			}
			limit := 0
			if tok != nil {
				limit = tok.MaxModelLen()
			}
			return gen, limit, nil
		},
	})
	if err != nil {
		return nil, err
	}
	m := &agentMeter{warmup: sp.Warmup, duration: sp.Duration}
	ss.BindJobs(m)
	kinds, err := plan.NewKinds(&config.RequestKinds{Tools: sp.Tools})
	if err != nil {
		return nil, err
	}
	observers := workload.Observers{m}
	if watch != nil {
		observers = append(observers, watch)
	}
	// At most n turns are in flight, one per agent: the cap never drops
	// one (a slot is freed before the reply's end is heard).
	cl := client.New(client.Options{MaxConnsPerHost: n})
	defer cl.Close()
	runner := workload.Plan{
		Name: fmt.Sprintf("agents/%s/%d", t.Name, n), Target: ct, Prepare: ss.Prepare, Client: cl, Observer: observers,
		Template: plan.Template{Sampling: a.sampling, Timeout: t.Timeout, Kinds: kinds},
		Limits:   workload.Limits{MaxInFlight: n, Unceiled: true, Duration: total, DegradedLag: degradedLag},
		Logger:   a.logger,
	}.Runner()
	runner.Run(ctx)
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("agents %s, %d agents: interrupted: %w", t.Name, n, err)
	}
	if st := runner.Status(); st.State == workload.StateFailed {
		return nil, fmt.Errorf("agents %s, %d agents: %s", t.Name, n, st.Reason)
	}
	return m, nil
}

// agentMeter hears a point's turns and jobs. The window is known once
// the run has ended (its start is the first turn's instant, every first
// job's), so it keeps what it needs of each and judges afterwards.
type agentMeter struct {
	warmup, duration time.Duration

	mu    sync.Mutex
	turns []agentTurn
	jobs  []sessions.Job
}

// agentTurn is what the tier asks of a turn.
type agentTurn struct {
	scheduled  time.Time
	seq        uint64 // the runner's sequence number: late turns' runs
	outcome    observation.Outcome
	ttft, tpot time.Duration // -1: none
	lag        time.Duration // sent minus scheduled; -1: not sent
}

func (m *agentMeter) Sent(*observation.Request)       {}
func (m *agentMeter) FirstToken(*observation.Request) {}
func (m *agentMeter) Token(*observation.Request)      {}

// Done implements workload.Observer.
func (m *agentMeter) Done(o *observation.Request) { m.turn(o) }

// Dropped implements workload.Observer: a dropped turn is a failed one.
func (m *agentMeter) Dropped(o *observation.Request) { m.turn(o) }

func (m *agentMeter) turn(o *observation.Request) {
	t := agentTurn{scheduled: o.Scheduled, seq: o.Seq, outcome: o.Outcome, ttft: -1, tpot: -1, lag: -1}
	if d, sent := o.ScheduleLag(); sent {
		t.lag = d
	}
	if d, ok := o.TTFT(); ok {
		t.ttft = d
	}
	if d, ok := o.TPOT(); ok {
		t.tpot = d
	}
	m.mu.Lock()
	m.turns = append(m.turns, t)
	m.mu.Unlock()
}

// ToolWait implements sessions.JobRecorder.
func (m *agentMeter) ToolWait(int, time.Duration) {}

// JobEnded implements sessions.JobRecorder.
func (m *agentMeter) JobEnded(j sessions.Job) {
	m.mu.Lock()
	m.jobs = append(m.jobs, j)
	m.mu.Unlock()
}

// judge is the point of n agents against the tier: the turns scheduled in
// the measured window (from the run's start plus the warm-up, for the
// duration) and the jobs that ended in it; and the client's verdict on
// those turns, with schedP99, the goroutine scheduling latency p99
// (seconds): a degraded client fails the point with its note.
func (m *agentMeter) judge(slo *AgentSLO, n int, window time.Duration, schedP99 float64) report.AgentPoint {
	m.mu.Lock()
	defer m.mu.Unlock()
	pt := report.AgentPoint{Agents: n, TTFTSeconds: report.NaN(), TPOTSeconds: report.NaN(), MeanJobSeconds: report.NaN()}
	if len(m.turns) == 0 {
		pt.Note = "no turn was sent"
		return pt
	}
	start := slices.MinFunc(m.turns, func(a, b agentTurn) int { return a.scheduled.Compare(b.scheduled) }).scheduled
	from, to := start.Add(m.warmup), start.Add(m.warmup+window)
	var ttft, tpot []float64
	ok := 0
	for _, t := range m.turns {
		// A turn the run's end cut short is not measured: it says
		// nothing of the server.
		if t.scheduled.Before(from) || !t.scheduled.Before(to) || t.outcome == observation.Cancelled {
			continue
		}
		pt.Turns++
		if t.outcome != observation.Success {
			continue
		}
		ok++
		if t.ttft >= 0 {
			ttft = append(ttft, t.ttft.Seconds())
		}
		if t.tpot >= 0 {
			tpot = append(tpot, t.tpot.Seconds())
		}
	}
	var jobTime time.Duration
	for _, j := range m.jobs {
		if j.Reason == sessions.Completed && !j.End.Before(from) && !j.End.After(to) {
			pt.JobsCompleted++
			jobTime += j.Duration
		}
	}
	if pt.Turns > 0 {
		pt.SuccessRatio = float64(ok) / float64(pt.Turns)
	}
	pt.TTFTSeconds, pt.TPOTSeconds = quantileOf(ttft, slo.Quantile), quantileOf(tpot, slo.Quantile)
	pt.JobsPerHourPerAgent = float64(pt.JobsCompleted) / (float64(n) * window.Hours())
	if pt.JobsCompleted > 0 {
		pt.MeanJobSeconds = report.Num(jobTime.Seconds() / float64(pt.JobsCompleted))
	}
	pt.Pass, pt.Note = tierVerdict(slo, &pt)
	if c := m.client(from, to, schedP99); c.State == report.ClientDegraded {
		// Whatever else the point shows, the client's delay is in it, so
		// it says nothing of the server either way.
		pt.Pass, pt.Degraded, pt.Note = false, true, c.Note+"; the point measured the client, not the server"
	}
	return pt
}

// client is the matrix's client verdict (judgeClient) on the turns
// scheduled in [from, to): each sent one is an arrival, late when sent
// over lateAfter after its scheduled instant. m.mu is held.
func (m *agentMeter) client(from, to time.Time, schedP99 float64) *report.ClientCheck {
	var n clientCounts
	var lags []float64
	var late []lateArrival
	for _, t := range m.turns {
		if t.scheduled.Before(from) || !t.scheduled.Before(to) || t.lag < 0 {
			continue
		}
		n.arrivals++
		lags = append(lags, t.lag.Seconds())
		if t.lag > lateAfter {
			n.late++
			late = append(late, lateArrival{t.seq, t.scheduled})
		}
	}
	n.runs, n.longest = lateRuns(late)
	return judgeClient(n, float64(quantileOf(lags, 0.99)), schedP99)
}

// tierVerdict says whether a point met the tier, and which bounds it
// missed.
func tierVerdict(slo *AgentSLO, pt *report.AgentPoint) (bool, string) {
	if pt.Turns == 0 {
		return false, "no turn was measured: lengthen bench.agents.duration"
	}
	var missed []string
	if pt.SuccessRatio < slo.MinSuccess {
		missed = append(missed, fmt.Sprintf("success %.3f < %g", pt.SuccessRatio, slo.MinSuccess))
	}
	q := render.QuantileName(slo.Quantile)
	for _, b := range []struct {
		name  string
		bound time.Duration
		got   report.Num
	}{{"TTFT", slo.TTFT, pt.TTFTSeconds}, {"TPOT", slo.TPOT, pt.TPOTSeconds}} {
		switch {
		case b.bound <= 0:
		case math.IsNaN(float64(b.got)):
			missed = append(missed, fmt.Sprintf("no turn had a %s", b.name))
		case float64(b.got) > b.bound.Seconds():
			missed = append(missed, fmt.Sprintf("%s %s %.3gs > %s", b.name, q, float64(b.got), b.bound))
		}
	}
	if len(missed) > 0 {
		return false, "failed " + strings.Join(missed, ", ")
	}
	return true, ""
}

// quantileOf is the q-quantile of xs (sorted here); NaN when empty.
func quantileOf(xs []float64, q float64) report.Num {
	slices.Sort(xs)
	return report.Num(quantileSorted(xs, q))
}
