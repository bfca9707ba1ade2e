package prober

import (
	"context"
	"fmt"
	"log/slog"
	"maps"
	"sync"
	"time"

	"github.com/infer-exporter/infer_exporter/internal/config"
	"github.com/infer-exporter/infer_exporter/internal/textcut"
	"github.com/infer-exporter/infer_exporter/probe/client"
	"github.com/infer-exporter/infer_exporter/probe/observation"
	"github.com/infer-exporter/infer_exporter/probe/plan"
	"github.com/infer-exporter/infer_exporter/probe/prompt"
	"github.com/infer-exporter/infer_exporter/probe/slo"
)

// Drop reasons of requests a probe never sent, beside the refusal reasons.
const dropDeadline = "deadline"

// maxAnswerShown bounds the answer text a known-answer check logs.
const maxAnswerShown = 200

// probeRun is one probe's inputs.
type probeRun struct {
	cfg        *config.Config
	policy     *policy
	moduleName string
	module     *config.Module
	rawTarget  string
	timeout    time.Duration
	logger     *slog.Logger
}

// job is one request of a probe.
type job struct {
	req   *client.Request
	obs   *observation.Request
	index int
	check bool // a known-answer check, else a module request
}

// probe runs one probe. It refuses, without sending anything, a target the
// allow list refuses, a target over its concurrency ceiling, and a module
// whose requests cannot be sent before the deadline within the target's
// rate ceiling.
func (h *Handler) probe(ctx context.Context, p *probeRun) *result {
	m, logger := clampModule(*p.module), p.logger
	res := newResult(m, p.timeout)
	logger.Info("Beginning probe", "timeout_seconds", p.timeout.Seconds(), "requests", m.Requests,
		"concurrency", m.Concurrency, "known_answers", len(m.KnownAnswers))
	t, ct, tc, r := h.admit(ctx, p, m)
	if r != nil {
		return res.refused(r, logger)
	}
	defer h.ceilings.release(tc)

	g := &guard{policy: p.policy, target: t, resolver: h.opts.Resolver, logger: logger, beforeConnect: h.opts.beforeConnect}
	if res.perplexity != nil {
		h.scorePerplexity(ctx, res, tc, g, ct, logger)
		return res
	}
	// The workloads' own client and transport (h1, or net/http where h1
	// does not go), so that /probe measures a request as they do; only
	// its dials go through the guard. Closing it at the probe's end
	// closes the probe's connections: the requests are all over by then.
	cl := client.New(client.Options{MaxConnsPerHost: m.Concurrency, Wire: h.opts.Transport,
		Dial: g.DialContext, MaxHeaderBytes: maxHeaderBytes})
	defer cl.Close()
	logger.Debug("Client", "transport", cl.TransportName(ct))

	kinds, err := h.sendAll(ctx, p, m, res, tc, cl, ct, logger)
	if err != nil {
		res.reason = ReasonRequestFailed
		logger.Error("Building the module's requests", "err", err)
		return res
	}
	h.sayModel(ctx, p, cl, ct, res, logger)
	h.judge(ctx, res, m, kinds, g, logger)
	return res
}

// maxHeaderBytes bounds a response's head: a probed server is whatever
// the allow list let through, and each of a probe's connections may
// hold one head.
const maxHeaderBytes = 64 << 10

// newResult is the result of a probe of m before it ran: its requests and
// checks not yet observed, or a perplexity module's score not yet taken.
func newResult(m *config.Module, timeout time.Duration) *result {
	res := &result{timeout: timeout, slo: m.SLO, requests: make([]observation.Request, m.Requests)}
	if len(m.KnownAnswers) > 0 {
		res.checks = make([]checkResult, len(m.KnownAnswers))
	}
	if m.IsPerplexity() {
		// One scoring request, no generations (perplexity.go).
		res.requests, res.checks = nil, nil
		res.perplexity = &perplexityResult{max: m.MaxPerplexity}
	}
	return res
}

// refused ends a probe that sent nothing: every request and check is
// dropped for r's reason.
func (res *result) refused(r *refusal, logger *slog.Logger) *result {
	logger.Error("Probe refused", "reason", r.reason, "why", r.msg)
	res.reason = r.reason
	for i := range res.requests {
		res.requests[i] = observation.Request{Outcome: observation.Dropped, DropReason: r.reason}
	}
	for i := range res.checks {
		res.checks[i].obs = observation.Request{Outcome: observation.Dropped, DropReason: r.reason}
	}
	return res
}

// admit checks the probe's target against the allow list and the
// module's credentials, takes a place under the target's concurrency
// ceiling, and checks that the module's requests can be sent before the
// deadline within its rate ceiling; it counts a refusal as invalid or
// refused. When it admits, the caller releases tc.
func (h *Handler) admit(ctx context.Context, p *probeRun, m *config.Module) (*probeTarget, *client.Target, *targetCeiling, *refusal) {
	t, r := p.policy.check(p.rawTarget)
	if r != nil {
		h.invalid.WithLabelValues(r.reason).Inc()
		return nil, nil, nil, r
	}
	ct, credsFrom, r := clientTarget(p.cfg, p.policy, m, t)
	if r != nil {
		h.invalid.WithLabelValues(r.reason).Inc()
		return nil, nil, nil, r
	}
	p.logger.Debug("Target allowed", "url", t.url.String(), "basis", t.basis.String(), "credentials", credsFrom,
		"flavor", ct.Flavor.Name(), "model", ct.Model)

	cfgProbe := p.cfg.Probe
	tc, r := h.ceilings.acquire(t.origin(), cfgProbe.MaxConcurrentProbes, cfgProbe.MaxRequestsPerSecond)
	if r != nil {
		h.refused.WithLabelValues(r.reason).Inc()
		return nil, nil, nil, r
	}
	n := m.Requests + len(m.KnownAnswers)
	if deadline, ok := ctx.Deadline(); ok {
		now := time.Now()
		if need := tc.timeToSend(n, now); now.Add(need).After(deadline) {
			h.ceilings.release(tc)
			h.refused.WithLabelValues(ReasonRateCeiling).Inc()
			return nil, nil, nil, refuse(ReasonRateCeiling,
				"the module's %d requests need %.3gs at probe.max_requests_per_second %g (shared by every probe of %s), more than the %.3gs left before the deadline; refused without sending",
				n, need.Seconds(), cfgProbe.MaxRequestsPerSecond, t.origin(), deadline.Sub(now).Seconds())
		}
	}
	return t, ct, tc, nil
}

// sendAll sends the module's requests and then its known-answer checks,
// from Concurrency senders, each request when the target's rate ceiling
// lets it go, and records each in res. It returns the module's request
// kinds, which judge checks the answers against, or why they could not
// be built (then nothing was sent).
func (h *Handler) sendAll(ctx context.Context, p *probeRun, m *config.Module, res *result,
	tc *targetCeiling, cl *client.Client, ct *client.Target, logger *slog.Logger) (*plan.Kinds, error) {
	// Each probe draws new prompts, from the module's seed plus the probe's
	// sequence number: repeating one prompt every scrape would have the
	// server's prefix cache answer it, and TTFT would measure the cache.
	probeSeq := h.probes.Add(1)
	gen := prompt.New(m.Prompt.InputTokens, m.Prompt.OutputTokens, m.Prompt.Seed+probeSeq)
	// The module's tools, response format and images, built once per
	// configuration (kindsFor): its schemas were compiled at load, and
	// its images are bounded (config.MaxImagePixelBytes).
	kinds, err := h.kindsFor(p.cfg, p.moduleName, p.module, logger)
	if err != nil {
		return nil, err
	}
	// The probe's deadline bounds every request, so the template has no
	// timeout of its own.
	tmpl := plan.Template{Sampling: m.Sampling, Kinds: kinds}
	// Each request carries an X-Request-Id the server can log (vLLM takes it
	// as its request id): probe-<module>-<probe number>-<request>.
	id := func(kind string, i int) string {
		return fmt.Sprintf("probe-%s-%d-%s%d", p.moduleName, probeSeq, kind, i)
	}
	jobs := make(chan job)
	go produceJobs(ctx, jobs, res, m, tmpl, gen, id)

	spans := h.spansFor(ct, p.moduleName, m.Sampling)
	var wg sync.WaitGroup
	for range m.Concurrency {
		wg.Go(func() {
			for j := range jobs {
				h.send(ctx, tc, cl, ct, j, spans, logger)
			}
		})
	}
	wg.Wait()
	return kinds, nil
}

// produceJobs builds the probe's requests one at a time, as a sender takes
// one, and closes jobs after the last: a probe holds at most Concurrency
// prompts and bodies (and the one being built), never all of its
// requests' at once. Those no sender took before ctx ended are dropped.
func produceJobs(ctx context.Context, jobs chan<- job, res *result, m *config.Module, tmpl plan.Template,
	gen *prompt.Generator, id func(kind string, i int) string) {
	defer close(jobs)
	next := func(j job) bool {
		select {
		case jobs <- j:
			return true
		case <-ctx.Done():
			return false
		}
	}
	for i := range res.requests {
		req := tmpl.Request(gen.Next())
		req.RequestID = id("", i)
		if !next(job{req: req, obs: &res.requests[i], index: i}) {
			res.notSent(i, 0, ctx.Err())
			return
		}
	}
	for i, ka := range m.KnownAnswers {
		req := tmpl.KnownAnswer(ka.Prompt, ka.MaxTokens)
		req.RequestID = id("ka", i)
		if !next(job{req: req, obs: &res.checks[i].obs, index: i, check: true}) {
			res.notSent(len(res.requests), i, ctx.Err())
			return
		}
	}
}

// spansFor is the spans of a probe of module against ct, or nil when no
// spans are recorded.
func (h *Handler) spansFor(ct *client.Target, module string, sampling config.Sampling) Spans {
	if h.opts.Spans == nil {
		return nil
	}
	flavor := config.FlavorOpenAIChat
	if ct.Flavor != nil {
		flavor = config.Flavor(ct.Flavor.Name())
	}
	return h.opts.Spans(&config.Target{Name: ct.Name, URL: ct.BaseURL, Flavor: flavor, Model: ct.Model}, module, sampling)
}

// sayModel says why a probe's requests were refused as not found
// (client.ModelRefused), from what the server's /v1/models lists: in the
// probe's own log (debug=true, the landing page's history) at each such
// probe, and in the exporter's log once per target and model, at warning
// level, until a probe of it succeeds again; the exporter's log otherwise
// hears probes at debug level only (logging.go). The server's models are
// read once per story (client.ModelWatch), not at every scrape: later
// probes repeat what was said.
func (h *Handler) sayModel(ctx context.Context, p *probeRun, cl *client.Client, ct *client.Target, res *result, logger *slog.Logger) {
	refused, served := false, false
	see := func(o *observation.Request) {
		refused = refused || client.ModelRefused(o)
		served = served || o.Outcome == observation.Success
	}
	for i := range res.requests {
		see(&res.requests[i])
	}
	for i := range res.checks {
		see(&res.checks[i].obs)
	}
	switch {
	case served && !refused:
		h.models.Served(ct)
		return
	case !refused:
		return
	}
	said := h.models.Said(ct)
	if said == "" {
		if ctx.Err() != nil {
			// No time left to look: the requests' statuses say the rest.
			return
		}
		due := h.models.Due(ct)
		said = scrub(cl.Models(ctx, ct).NotServed(ct.Model), p.policy.secrets)
		if due {
			h.models.Say(ct, said)
			h.opts.Logger.Warn("Probe requests refused: "+said, "module", p.moduleName,
				"target", displayTarget(p.rawTarget), "model", ct.Model)
		}
	}
	logger.Error("Requests refused: "+said, "model", ct.Model)
}

// notSent marks the requests from index requests and the checks from index
// checks on as dropped at the deadline: the probe ended before a sender
// took them.
func (res *result) notSent(requests, checks int, err error) {
	for i := requests; i < len(res.requests); i++ {
		res.requests[i] = observation.Request{Outcome: observation.Dropped, DropReason: dropDeadline, Err: err}
	}
	for i := checks; i < len(res.checks); i++ {
		res.checks[i].obs = observation.Request{Outcome: observation.Dropped, DropReason: dropDeadline, Err: err}
	}
}

// clampModule bounds a module that was built in code rather than parsed
// (parsing enforces the same bounds), so that request labels stay bounded
// and every request has a worker.
func clampModule(m config.Module) *config.Module {
	m.Requests = min(max(m.Requests, 1), config.MaxModuleRequests)
	m.Concurrency = min(max(m.Concurrency, 1), m.Requests)
	if len(m.KnownAnswers) > config.MaxKnownAnswers {
		m.KnownAnswers = m.KnownAnswers[:config.MaxKnownAnswers]
	}
	return &m
}

// send waits for the target's rate ceiling, then sends one request.
func (h *Handler) send(ctx context.Context, tc *targetCeiling, cl *client.Client, ct *client.Target, j job, spans Spans, logger *slog.Logger) {
	if err := tc.wait(ctx); err != nil {
		reason := ReasonRateCeiling
		if ctx.Err() != nil {
			reason = dropDeadline
		}
		*j.obs = observation.Request{Outcome: observation.Dropped, DropReason: reason, Err: err}
		logger.Warn("Request not sent", "request", j.name(), "drop_reason", reason, "err", err)
		return
	}
	// The request's clock starts when the ceiling lets it go: that is the
	// instant the probe chose, and the server's latency starts there.
	j.obs.Scheduled = time.Now()
	if spans != nil {
		j.req.Trace = spans.Trace()
	}
	cl.Do(ctx, ct, j.req, j.obs)
	if spans != nil {
		spans.Done(j.obs)
	}
	o := j.obs
	attrs := []any{"request", j.name(), "request_id", j.req.RequestID, "outcome", o.Outcome, "http_status", o.HTTPStatus,
		"output_tokens", o.OutputTokens, "token_source", o.TokenSource}
	if o.Trace.Valid() {
		// The trace to look the request up by, as its exemplars name it.
		traceID, _ := o.Trace.IDs()
		attrs = append(attrs, "trace_id", traceID)
	}
	if d, ok := o.TTFT(); ok {
		attrs = append(attrs, "ttft_seconds", d.Seconds())
	}
	if o.ReasoningEvents > 0 {
		// A model that reasoned: when its answer began, and how much it
		// reasoned (the server's count, when it sent one).
		if d, ok := o.TTFA(); ok {
			attrs = append(attrs, "ttfa_seconds", d.Seconds())
		}
		attrs = append(attrs, "reasoning_events", o.ReasoningEvents, "reasoning_tokens", o.ReasoningTokens)
	}
	if o.ToolCallEvents > 0 {
		// An answer that called a tool: its events carried the call.
		attrs = append(attrs, "tool_call_events", o.ToolCallEvents)
	}
	if d, ok := o.TPOT(); ok {
		attrs = append(attrs, "tpot_seconds", d.Seconds())
	}
	if d, ok := o.E2E(); ok {
		attrs = append(attrs, "e2e_seconds", d.Seconds())
	}
	if o.Outcome == observation.Success {
		logger.Debug("Request finished", attrs...)
		return
	}
	logger.Warn("Request failed", append(attrs, "err", o.Err)...)
}

func (j job) name() string {
	if j.check {
		return fmt.Sprintf("known_answer[%d]", j.index)
	}
	return fmt.Sprintf("request[%d]", j.index)
}

// judge decides the probe's success and reason, in Reasons' order.
func (h *Handler) judge(ctx context.Context, res *result, m *config.Module, kinds *plan.Kinds, g *guard, logger *slog.Logger) {
	var rateDropped, failed, sloMissed, wrong, invalid bool
	for i := range res.requests {
		o := &res.requests[i]
		switch {
		case o.Outcome == observation.Dropped && o.DropReason == ReasonRateCeiling:
			rateDropped = true
		case o.Outcome != observation.Success:
			failed = true
		case !slo.Met(o, m.SLO):
			sloMissed = true
			logger.Warn("Request missed the SLO", "request", fmt.Sprintf("request[%d]", i), "slo_ttft", m.SLO.TTFT, "slo_tpot", m.SLO.TPOT, "slo_e2e", m.SLO.E2E)
		}
		// Validity is judged apart from the SLO: a fast broken answer
		// fails as one, and the log says why.
		if why := kinds.Check(ctx, o); why != "" {
			invalid = true
			logger.Warn("Answer not valid", "request", fmt.Sprintf("request[%d]", i), "structured", o.StructuredCheck,
				"tool_call", o.ToolCallCheck, "why", why, "answer", textcut.Cut(o.Text+o.ToolCalls, maxAnswerShown))
		}
	}
	for i := range res.checks {
		cr := &res.checks[i]
		ka := &m.KnownAnswers[i]
		o := &cr.obs
		switch {
		case o.Outcome == observation.Dropped && o.DropReason == ReasonRateCeiling:
			rateDropped = true
		case o.Outcome != observation.Success:
			failed = true
			logger.Warn("Known-answer check got no answer", "request", fmt.Sprintf("known_answer[%d]", i), "outcome", o.Outcome)
		default:
			cr.pass = plan.Judge(ka.Pattern, ka.Expect, o) == plan.Pass
			level := slog.LevelDebug
			if !cr.pass {
				wrong = true
				level = slog.LevelWarn
			}
			logger.Log(context.Background(), level, "Known-answer check", "request", fmt.Sprintf("known_answer[%d]", i), "pass", cr.pass,
				"expect", ka.Expect, "answer", textcut.Cut(o.Text, maxAnswerShown))
		}
	}
	switch {
	case g.refused.Load():
		res.reason = ReasonNotAllowed
		h.invalid.WithLabelValues(ReasonNotAllowed).Inc()
	case rateDropped:
		res.reason = ReasonRateCeiling
		h.refused.WithLabelValues(ReasonRateCeiling).Inc()
	case failed:
		res.reason = ReasonRequestFailed
	case sloMissed:
		res.reason = ReasonSLOMissed
	case invalid:
		res.reason = ReasonInvalidAnswer
	case wrong:
		res.reason = ReasonWrongAnswer
	default:
		res.success = true
	}
}

// clientTarget builds the client's view of target t for module m, and says
// where its credentials came from. Credentials come only from the
// configuration, never from the scrape:
//   - module.target: that target's token and headers, and only for its
//     own origin; another origin is refused.
//   - module.bearer_token_file: the module's token, for every allowed
//     target.
//   - otherwise, when t's origin is a configured target's, that target's
//     token and headers: they go to the server they were configured for.
func clientTarget(cfg *config.Config, pol *policy, m *config.Module, t *probeTarget) (*client.Target, string, *refusal) {
	var from *config.Target
	credsFrom := "none"
	ct := &client.Target{Name: t.origin(), BaseURL: t.url.String()}
	switch {
	case m.Target != "":
		ref, ok := cfg.Target(m.Target)
		if !ok {
			return nil, "", refuse(ReasonNotAllowed, "the module's target %q is not configured", m.Target)
		}
		rt, err := parseTarget(ref.URL)
		if err != nil || rt.origin() != t.origin() {
			return nil, "", refuse(ReasonNotAllowed, "the module carries target %q's credentials, which are sent only to that target's own origin, not to %s",
				m.Target, t.origin())
		}
		from, credsFrom = ref, "target "+ref.Name
	case m.BearerTokenFile != "":
		ct.BearerToken = string(m.BearerToken)
		credsFrom = "module bearer_token_file"
	default:
		if ref, ok := pol.byOrigin[t.origin()]; ok {
			from, credsFrom = ref, "target "+ref.Name
		}
	}
	flavor, model := m.Flavor, m.Model
	headers := map[string]string{}
	if from != nil {
		ct.BearerToken = string(from.BearerToken)
		maps.Copy(headers, from.Headers)
		if flavor == "" {
			flavor = from.Flavor
		}
		if model == "" {
			model = from.Model
		}
	}
	maps.Copy(headers, m.Headers)
	if flavor == "" {
		flavor = config.FlavorOpenAIChat
	}
	f, err := client.ParseFlavor(string(flavor))
	if err != nil {
		return nil, "", refuse(ReasonBadTarget, "%v", err)
	}
	ct.Flavor, ct.Model, ct.Headers = f, model, headers
	return ct, credsFrom, nil
}

func (b basis) String() string {
	switch b {
	case basisConfiguredAddr, basisConfiguredName:
		return "configured target"
	case basisCIDRAddr:
		return "CIDR"
	case basisPattern:
		return "host pattern"
	default:
		return "CIDR (each resolved address is checked)"
	}
}
