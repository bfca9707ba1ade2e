// The dashboards, as Grafana JSON (schemaVersion 39). Every rate uses
// $__rate_interval; recorded series carry their own window.
local d = import '../lib/dashboard.libsonnet';
local p = import '../lib/promql.libsonnet';
local names = import '../rules/names.libsonnet';

{
  // The configuration, with the cluster variable's matcher added to every
  // selector the dashboards use (recorded series get it through rec, trec
  // and q99 below).
  local cfg = $._config,
  local cl = cfg.dashboardClusterLabel,
  local clusterMatcher = if cl == null then '' else '%s=~"$%s"' % [cl, cl],
  local withCluster(sel) = std.join(', ', std.filter(function(s) s != '', [sel, clusterMatcher])),
  local c = cfg {
    probeSelector: withCluster(cfg.probeSelector),
    serverSelector: withCluster(cfg.serverSelector),
    gpuSelector: withCluster(cfg.gpuSelector),
    oneShotProbeSelector: withCluster(cfg.oneShotProbeSelector),
  },
  local n = names.new(c),
  local uid(s) = c.dashboardUIDPrefix + s,
  // The cluster variable, first on every dashboard: the values of the label
  // on the exporter's scrape health.
  local clusterVariables =
    if cl == null then []
    else [d.queryVariable(cl, 'Cluster', 'label_values(up%s, %s)' % [p.selector(cfg.exporterSelector), cl])],
  local dash(u, title, description, variables, panels) =
    d.dashboard(uid(u), title, description, c.dashboardTags, clusterVariables + variables, panels, c.dashboardRefresh, c.dashboardTimezone,
                annotations=annotations(std.length([v for v in variables if v.name == 'target']) > 0)),

  // Events an on-call engineer lines a change in a graph up with: the
  // exporter's configuration reloads (a new workload, SLO or rate), failed
  // reloads (the old configuration runs on), and the servers' starts (a
  // restart, a model load), as the exporter saw them. Each is an event at
  // the step (1m) where the counter or timestamp changed.
  local exporterSel = p.selector(withCluster(cfg.exporterSelector)),
  local annotations(byTarget) = [
    d.annotation(
      'Configuration reloads',
      'changes(infer_exporter_config_last_reload_success_timestamp_seconds%s[1m]) > 0' % exporterSel,
      'Configuration reloaded',
      'infer_exporter on {{instance}} applied a new configuration.',
      'blue',
    ) { tagKeys: 'instance' },
    d.annotation(
      'Failed reloads',
      'infer_exporter_config_last_reload_successful%s == 0' % exporterSel,
      'Configuration reload failed',
      'infer_exporter on {{instance}} refused its new configuration and runs on the old one (InferExporterConfigReloadFailed).',
      'red',
    ) { tagKeys: 'instance' },
    d.annotation(
      'Server starts',
      'increase(infer_server_starts_total%s[1m]) > 0' % (if byTarget then p.selector(c.serverSelector, 'target=~"$target"') else p.selector(c.serverSelector)),
      'Server start: {{target}}',
      'The exporter saw {{target}} start (a new process, or serving again after refusing): a cold start follows (the Cold starts row of Server internals).',
      'orange',
    ),
  ],

  // Selectors with the dashboard's variables.
  local wsel = 'target=~"$target", model=~"$model", workload=~"$workload"',
  local tsel = 'target=~"$target", model=~"$model"',
  // The longest burn-rate window: the error budget left is read over it.
  local budgetWindow = std.sort(c.slo.burnRates, function(b) p.seconds(b.long))[std.length(c.slo.burnRates) - 1].long,
  local rawProbe = p.selector(c.probeSelector, wsel),
  local rec = '{' + withCluster(wsel) + '}',
  local trec = '{' + withCluster(tsel) + '}',
  local stream = '{{target}} / {{workload}}',

  local probeVariables = [
    d.queryVariable('target', 'Target', 'label_values(infer_probe_requests_total%s, target)' % p.selector(c.probeSelector)),
    d.queryVariable('model', 'Model', 'label_values(infer_probe_requests_total%s, model)' % p.selector(c.probeSelector, 'target=~"$target"')),
    d.queryVariable('workload', 'Workload', 'label_values(infer_probe_requests_total%s, workload)' % p.selector(c.probeSelector, tsel)),
  ],

  // A quantile of a histogram over $__rate_interval, native or classic
  // (as the recording rules read them).
  local rawQuantile(q, m) =
    'histogram_quantile(%(q)s, sum by (%(by)s) (rate(%(m)s%(sel)s[$__rate_interval]))) or histogram_quantile(%(q)s, sum by (%(by)s, le) (rate(%(m)s_bucket%(sel)s[$__rate_interval])))' % {
      q: p.num(q),
      by: p.labelList(c.workloadLabels),
      m: m,
      sel: rawProbe,
    },

  // The time to first token split by the engine's own per-request
  // timings, per target and model: its queue, its own TTFT, and the
  // client overhead (the rest: network, gateway, front end, client); p50
  // and p99 over the rate interval, the overhead's p99 from its recording
  // rule. Empty for an engine whose answers carry no timings.
  local firstTokenPartsPanel =
    local tby = p.labelList(c.targetLabels);
    local raw(q, m) =
      'histogram_quantile(%(q)s, sum by (%(by)s) (rate(%(m)s%(sel)s[$__rate_interval]))) or histogram_quantile(%(q)s, sum by (%(by)s, le) (rate(%(m)s_bucket%(sel)s[$__rate_interval])))' % {
        q: p.num(q),
        by: tby,
        m: m,
        sel: rawProbe,
      };
    local parts = [
      { name: 'queue', metric: 'infer_probe_server_queue_seconds' },
      { name: 'engine TTFT', metric: 'infer_probe_server_time_to_first_token_seconds' },
      { name: 'overhead', metric: 'infer_probe_client_overhead_seconds' },
    ];
    d.timeseries(
      "Where the first token's time went",
      "The time to first token split by the engine's own per-request timings, read from each answer (docs/metrics.md): the engine's queue, its own TTFT, and the client overhead, the client's TTFT less those two (the network, a gateway, the server's front end, the client). p50 and p99 per target and model over every workload; the overhead's p99 from the recording rule %s (over %s). Empty when the engine's answers carry no timings (vLLM needs --enable-per-request-metrics)." % [n.targetClientOverheadQuantile, c.rateWindow],
      [
        d.target(raw(q, part.metric), '{{target}} (%s) %s %s' % ['{{model}}', part.name, p.quantileName(q)])
        for part in parts
        for q in [0.5, 0.99]
        if !(part.name == 'overhead' && q == 0.99)
      ] + [
        d.target('%s%s' % [n.targetClientOverheadQuantile, p.selector(withCluster(tsel), 'quantile="0.99"')], '{{target}} ({{model}}) overhead p99'),
      ],
      's',
      width=24,
    ),

  // The values of infer_probe_workload_state's state label, in the order
  // of a workload's life; the state panel shows each as its 1-based index.
  local workloadStates = [
    { text: 'calibrating', color: 'yellow' },
    { text: 'running', color: 'green' },
    { text: 'finished', color: 'blue' },
    { text: 'failed', color: 'red' },
  ],

  // A latency panel: the recorded quantiles, and the raw histogram's
  // highest quantile, not drawn (refId X, hidden), there for its
  // exemplars: a recording rule's series has none.
  local quantilePanel(h, title, description) = d.timeseries(
    title,
    description + ' Quantiles %s over %s, from the recording rule %s. The points are exemplars of %s: one request each, one a bucket at a time, whose trace_id links to its trace where the Prometheus data source has an exemplar link (docs/mixin.md).' % [std.join(', ', [p.num(q) for q in c.quantiles]), c.rateWindow, n.quantile(h), n.histograms[h]],
    [
      d.target('%s%s' % [n.quantile(h), rec], stream + ' q{{quantile}}'),
      d.target(rawQuantile(std.sort(c.quantiles)[std.length(c.quantiles) - 1], n.histograms[h]), stream + ' exemplars', refId='X', exemplar=true),
    ],
    's',
    hidden=['X'],
  ),

  grafanaDashboards+:: {
    'infer-overview.json': dash(
      'overview',
      'infer_exporter / Overview',
      'What the continuous probe measured, per target, model and workload: latency quantiles, tokens per second, request rates, errors and goodput, and the live streams (stalls, the oldest request in flight, time to first answer token, workload state).',
      probeVariables,
      [
        d.row('Status'),
        d.table(
          'Status per target',
          'One row per target, worst error budget first: whether the exporter reads the engine\'s metrics (infer_server_up) and the server is ready (infer_probe_target_ready: workloads send only then), the success ratio over %(w)s and the error budget left over %(bw)s (1 - error ratio / (1 - %(o)s)), both of its worst workload, and whether a workload\'s measurement is degraded (the client saturated). docs/runbooks.md says what to do about each.' % { w: c.rateWindow, bw: budgetWindow, o: p.num(c.slo.errorObjective) },
          [
            d.target('min by (target) (infer_server_up%s)' % p.selector(c.serverSelector, tsel), '', instant=true, format='table', refId='A'),
            d.target('min by (target) (infer_probe_target_ready%s)' % p.selector(c.probeSelector, 'target=~"$target"'), '', instant=true, format='table', refId='B'),
            d.target('1 - max by (target) (%s%s)' % [n.errorRatio(c.rateWindow), rec], '', instant=true, format='table', refId='C'),
            d.target('1 - max by (target) (%s%s) / %s' % [n.errorRatio(budgetWindow), rec, p.num(1 - c.slo.errorObjective)], '', instant=true, format='table', refId='D'),
            d.target('max by (target) (infer_probe_measurement_degraded%s)' % rawProbe, '', instant=true, format='table', refId='E'),
          ],
          'none',
          [
            { ref: 'A', title: 'Engine metrics up', unit: 'bool_yes_no' },
            { ref: 'B', title: 'Ready', unit: 'bool_yes_no' },
            { ref: 'C', title: 'Success ratio (%s)' % c.rateWindow, unit: 'percentunit' },
            { ref: 'D', title: 'Error budget left (%s)' % budgetWindow, unit: 'percentunit' },
            { ref: 'E', title: 'Degraded', unit: 'bool_yes_no' },
          ],
          'Error budget left (%s)' % budgetWindow,
          height=6,
          desc=false,
        ),
        d.row('Latency'),
        quantilePanel('ttft', 'Time to first token', 'From the scheduled instant to the first content token.'),
        quantilePanel('tpot', 'Time per output token', '(last byte - first token) / (output tokens - 1), per successful request.'),
        quantilePanel('itl', 'Inter-token latency', 'Every gap between consecutive content events.'),
        quantilePanel('e2e', 'End-to-end latency', 'From the scheduled instant to the last byte, successful requests.'),
        firstTokenPartsPanel,
        d.row('Throughput and outcomes'),
        d.timeseries(
          'Output tokens per second',
          'Output tokens of successful requests per second.',
          [d.target('sum by (target, model, workload) (rate(infer_probe_completion_tokens_total%s[$__rate_interval]))' % rawProbe, stream)],
          'suffix: tok/s',
          width=8,
        ),
        d.timeseries(
          'Prompt tokens per second',
          'Prompt tokens of successful requests per second, from the server\'s usage.',
          [d.target('sum by (target, model, workload) (rate(infer_probe_prompt_tokens_total%s[$__rate_interval]))' % rawProbe, stream)],
          'suffix: tok/s',
          width=8,
        ),
        d.timeseries(
          'Requests per second by outcome',
          'Every request by how it ended; dropped arrivals were never sent.',
          [d.target('sum by (target, workload, outcome) (rate(infer_probe_requests_total%s[$__rate_interval]))' % rawProbe, stream + ' {{outcome}}')],
          'reqps',
          width=8,
          stack=true,
        ),
        d.timeseries(
          'Error ratio',
          'Failed requests over requests sent, over %s (%s).' % [c.rateWindow, n.errorRatio(c.rateWindow)],
          [d.target('%s%s' % [n.errorRatio(c.rateWindow), rec], stream)],
          'percentunit',
          width=8,
          min=0,
        ),
        d.timeseries(
          'Goodput ratio',
          'Requests that succeeded and met every SLO threshold of their workload, over requests sent, over %s.' % c.rateWindow,
          [d.target('%s%s' % [n.goodputRatio, rec], stream)],
          'percentunit',
          width=8,
          min=0,
          max=1,
        ),
        d.timeseries(
          'TTFT over the SLO threshold',
          'Requests whose TTFT exceeded %ss, over requests with a first token, over %s. The latency SLO allows %s.' % [c.slo.ttftThreshold, c.rateWindow, p.num(std.round((1 - c.slo.latencyObjective) * 10000) / 100) + '%'],
          [d.target('%s%s' % [n.ttftSlowRatio(c.rateWindow), rec], stream)],
          'percentunit',
          width=8,
          min=0,
        ),
        d.row('Measurement'),
        d.timeseries(
          'TTFT jitter (σ/μ)',
          'Coefficient of variation of TTFT: its standard deviation over its mean, from native histograms, over %s.' % c.rateWindow,
          [d.target('%s%s' % [n.ttftJitter, rec], stream)],
          'none',
          width=8,
          min=0,
        ),
        d.timeseries(
          'Known-answer accuracy',
          'Known-answer checks whose answer matched, over checks answered (the workload\'s, else its target\'s /probe checks), over %s.' % c.accuracyWindow,
          [d.target('%s%s' % [n.accuracy, rec], stream)],
          'percentunit',
          width=8,
          min=0,
          max=1,
        ),
        d.timeseries(
          'Dropped arrivals',
          'Arrivals never sent, by reason: the client held back to protect the measurement or the server.',
          [d.target('sum by (target, workload, reason) (rate(infer_probe_dropped_requests_total%s[$__rate_interval]))' % rawProbe, stream + ' {{reason}}')],
          'reqps',
          width=8,
        ),
        d.timeseries(
          'Schedule lag p99',
          'The client\'s own delay between the scheduled and the sent instant (p99 over --probe.degraded-window).',
          [d.target('infer_probe_schedule_lag_p99_seconds%s' % rawProbe, stream)],
          's',
          width=8,
        ),
        d.timeseries(
          'Measurement degraded',
          '1 when the client is saturated: its latencies then include its own delay.',
          [d.target('max by (target, model, workload) (infer_probe_measurement_degraded%s)' % rawProbe, stream)],
          'bool',
          width=8,
          min=0,
          max=1,
        ),
        d.timeseries(
          'Offered and sent rate',
          'The arrival process\'s configured rate and the rate of requests sent.',
          [
            d.target('max by (target, model, workload) (infer_probe_configured_rate_requests_per_second%s)' % rawProbe, stream + ' configured'),
            d.target('%s%s' % [n.requestRate, rec], stream + ' sent'),
          ],
          'reqps',
          width=8,
        ),
        d.row('Live streams'),
        d.timeseries(
          'Stalled requests',
          'Requests in flight that have received nothing (no first token yet, or no event since the last) for longer than the workload\'s stall_threshold, and the stalls that began in each rate interval (each counted once). The exporter sends X-Request-Id <workload>-<seq>: look for a stalled request in the server\'s logs.',
          [
            d.target('max by (target, model, workload) (infer_probe_stalled_requests%s)' % rawProbe, stream + ' stalled'),
            d.target('sum by (target, model, workload) (increase(infer_probe_stalls_total%s[$__rate_interval]))' % rawProbe, stream + ' new stalls'),
          ],
          'short',
          width=8,
          min=0,
        ),
        d.timeseries(
          'Oldest request in flight',
          'Age of the oldest request in flight, from its scheduled instant; 0 with none in flight. A line that keeps climbing is a request that does not finish.',
          [d.target('max by (target, model, workload) (infer_probe_oldest_request_age_seconds%s)' % rawProbe, stream)],
          's',
          width=8,
          min=0,
        ),
        d.timeseries(
          'Streamed and completed tokens per second',
          'Content events per second as they arrive (infer_probe_streamed_tokens_total, all kinds: content, reasoning and tool calls), beside output tokens of successful requests per second (infer_probe_completion_tokens_total: the server\'s usage count, at the end of each request). Streamed rises during a stream; an event may carry more than one token.',
          [
            d.target('sum by (target, model, workload) (rate(infer_probe_streamed_tokens_total%s[$__rate_interval]))' % rawProbe, stream + ' streamed'),
            d.target('sum by (target, model, workload) (rate(infer_probe_completion_tokens_total%s[$__rate_interval]))' % rawProbe, stream + ' completed'),
          ],
          'suffix: tok/s',
          width=8,
          min=0,
        ),
        d.timeseries(
          'Time to first answer token and first token',
          'TTFA (to the first answer token, not reasoning) beside TTFT (to the first token of either kind), p50 and p99 over the rate interval. For a model that reasons first, the gap is its thinking time; without reasoning they agree. TTFA is observed only for successful streams that had an answer.',
          [
            d.target(rawQuantile(q, m.metric), '%s %s %s' % [stream, m.name, p.quantileName(q)])
            for m in [
              { name: 'TTFA', metric: 'infer_probe_time_to_first_answer_token_seconds' },
              { name: 'TTFT', metric: n.histograms.ttft },
            ]
            for q in [0.5, 0.99]
          ],
          's',
          width=12,
          min=0,
        ),
        d.stateTimeline(
          'Workload state',
          'Each workload\'s state: calibrating (building its prompts), running, finished (its schedule or duration ended) or failed (it could not start; the exporter\'s log says why).',
          [d.target(
            'max by (target, model, workload) (%s)' % std.join(' or ', [
              'infer_probe_workload_state%s * %d' % [p.selector(c.probeSelector, wsel + ', state="%s"' % workloadStates[i].text), i + 1]
              for i in std.range(0, std.length(workloadStates) - 1)
            ]),
            stream,
          )],
          width=12,
          states=workloadStates,
        ),
        // The quality probe (probe/quality): its series carry target,
        // model and text (the reference text's SHA-256 prefix), no
        // workload.
        d.row('Quality'),
        d.timeseries(
          'Perplexity',
          'Perplexity of each target\'s model over the reference text, from the server\'s log-probabilities of the text\'s own tokens (infer_probe_perplexity, scored every quality.interval), beside its value %s earlier. Lower is better; it rises when the model is quantised, swapped or broken, however fast it answers. Compare only equal texts.' % c.perplexity.offset,
          [
            d.target('max by (target, model, text) (infer_probe_perplexity%s)' % p.selector(c.probeSelector, tsel), '{{target}} ({{model}}) text {{text}}'),
            d.target('max by (target, model, text) (infer_probe_perplexity%s offset %s)' % [p.selector(c.probeSelector, tsel), c.perplexity.offset], '{{target}} ({{model}}) %s earlier' % c.perplexity.offset),
          ],
          'none',
          width=12,
          min=1,
        ),
        d.timeseries(
          'Perplexity against its baseline',
          'The perplexity over its value %s earlier: the ratio InferProbePerplexityRise alerts on above %s.' % [c.perplexity.offset, p.num(c.perplexity.threshold)],
          [d.target(
            'max by (target, model, text) (infer_probe_perplexity%(s)s) / max by (target, model, text) (infer_probe_perplexity%(s)s offset %(o)s)' % { s: p.selector(c.probeSelector, tsel), o: c.perplexity.offset },
            '{{target}} ({{model}}) text {{text}}',
          )],
          'percentunit',
          width=12,
        ),
        d.timeseries(
          'Perplexity score failures',
          'Perplexity scores that failed in each interval, by reason (infer_probe_perplexity_failures_total): unsupported, timeout, connection, http_status, bad_response, no_logprobs (a server that returns none: TGI without --enable-prefill-logprobs), incomplete (tokens without a log-probability).',
          [d.target('sum by (target, reason) (increase(infer_probe_perplexity_failures_total%s[$__rate_interval])) > 0' % p.selector(c.probeSelector, 'target=~"$target"'), '{{target}} {{reason}}')],
          'short',
          width=12,
          min=0,
        ),
        d.timeseries(
          'Age of the last perplexity score',
          'Time since the last successful perplexity score of each target; InferProbePerplexityStale fires above %s.' % c.perplexity.staleAfter,
          [d.target('time() - max by (target, model, text) (infer_probe_perplexity_last_success_timestamp_seconds%s)' % p.selector(c.probeSelector, tsel), '{{target}} ({{model}})')],
          's',
          width=12,
          min=0,
        ),
      ],
    ),

    'infer-ranking.json': dash(
      'ranking',
      'infer_exporter / Ranking',
      'Targets ranked by a weighted score: latency %s, throughput %s, memory %s, accuracy %s, each normalised against the reference values of the mixin\'s _config.' % [
        p.num(c.ranking.weights.latency),
        p.num(c.ranking.weights.throughput),
        p.num(c.ranking.weights.memory),
        p.num(c.ranking.weights.accuracy),
      ],
      probeVariables,
      local q99 = '{quantile="0.99", %s}' % withCluster(wsel);
      local perWorkload(e) = '(%s%s * 0) + on (%s) group_left () %s' % [n.requestRate, rec, p.labelList(c.targetLabels), e];
      local cols = [
        { ref: 'A', title: 'Score', unit: 'none', decimals: 3, expr: n.score + rec },
        { ref: 'B', title: 'Latency score', unit: 'none', decimals: 3, expr: n.component('latency') + rec },
        { ref: 'C', title: 'Throughput score', unit: 'none', decimals: 3, expr: n.component('throughput') + rec },
        { ref: 'D', title: 'Memory score', unit: 'none', decimals: 3, expr: n.component('memory') + rec },
        { ref: 'E', title: 'Accuracy score', unit: 'none', decimals: 3, expr: n.component('accuracy') + rec },
        { ref: 'F', title: 'TTFT p99', unit: 's', expr: n.quantile('ttft') + q99 },
        { ref: 'G', title: 'TPOT p99', unit: 's', expr: n.quantile('tpot') + q99 },
        { ref: 'H', title: 'Output tokens/s', unit: 'suffix: tok/s', expr: n.outputTokenRate + rec },
        { ref: 'I', title: 'GPU memory', unit: 'bytes', expr: perWorkload(n.targetServingMemory) },
        { ref: 'J', title: 'Accuracy', unit: 'percentunit', expr: n.accuracy + rec },
        // The server's own figures, every client's tokens (not the
        // probe's sample): its output tokens/s, the energy and the cost of
        // each output token, and the cost of one that met the SLOs.
        { ref: 'K', title: 'Server output tokens/s', unit: 'suffix: tok/s', expr: perWorkload(n.serverGenerationTokenRate) },
        { ref: 'L', title: 'Energy per output token', unit: 'joule', expr: perWorkload(n.energyPerToken) },
        { ref: 'M', title: '$ per 1M output tokens', unit: 'currencyUSD', expr: perWorkload('1e6 * ' + n.costPerToken) },
        { ref: 'N', title: '$ per 1M good tokens', unit: 'currencyUSD', expr: perWorkload('1e6 * ' + n.costPerGoodToken) },
      ];
      [
        d.table(
          'Leaderboard',
          'One row per target, model and workload, best score first. Components are 0..%s (%s: as good as the reference); a component that cannot be measured counts 0. Raw values beside them.' % [p.num(c.ranking.maxComponent), p.num(c.ranking.maxComponent)],
          // Without __name__ and extra labels, so that the merge joins the
          // queries' rows on target, model and workload.
          [d.target('max by (%s) (%s)' % [p.labelList(c.workloadLabels), col.expr], '', instant=true, format='table', refId=col.ref) for col in cols],
          'none',
          [{ ref: col.ref, title: col.title, unit: col.unit } + (if std.objectHas(col, 'decimals') then { decimals: col.decimals } else {}) for col in cols],
          'Score',
          height=12,
        ),
        d.timeseries(
          'Score over time',
          'The weighted score (%s).' % n.score,
          [d.target(n.score + rec, stream)],
          'none',
          width=12,
          min=0,
        ),
        d.timeseries(
          'Components over time',
          'Each normalised component, before weighting.',
          [d.target('%s%s' % [n.component(k), rec], stream + ' ' + k) for k in ['latency', 'throughput', 'memory', 'accuracy']],
          'none',
          width=12,
          min=0,
        ),
      ],
    ),

    'infer-gpu.json': dash(
      'gpu',
      'infer_exporter / GPU',
      'The GPUs beside the inference server, read through NVML: utilisation, SM activity, power, temperature, clocks, throttle reasons and memory.',
      [
        d.queryVariable('instance', 'Instance', 'label_values(infer_gpu_info%s, instance)' % p.selector(c.gpuSelector)),
        d.queryVariable('gpu', 'GPU', 'label_values(infer_gpu_info%s, gpu)' % p.selector(c.gpuSelector, 'instance=~"$instance"')),
      ],
      local g = p.selector(c.gpuSelector, 'instance=~"$instance", gpu=~"$gpu"');
      local gs(extra) = p.selector(c.gpuSelector, 'instance=~"$instance", gpu=~"$gpu", ' + extra);
      local legend = '{{instance}} GPU {{gpu}}';
      [
        d.timeseries('Utilisation', 'Fraction of the sample period in which a kernel ran (NVML utilisation).', [d.target('infer_gpu_utilization_ratio' + g, legend)], 'percentunit', width=8, min=0, max=1),
        d.timeseries(
          'SM active, occupancy and tensor active',
          'GPM metrics (Hopper and later): the fraction of SMs busy, of warps resident, of tensor-core cycles.',
          [
            d.target('infer_gpu_sm_active_ratio' + g, legend + ' SM active'),
            d.target('infer_gpu_sm_occupancy_ratio' + g, legend + ' SM occupancy'),
            d.target('infer_gpu_tensor_active_ratio' + g, legend + ' tensor active'),
          ],
          'percentunit',
          width=8,
          min=0,
          max=1,
        ),
        d.timeseries(
          'Power',
          'Power draw (1 s average on Hopper), the enforced limit, and the draw from the energy counter over the rate interval.',
          [
            d.target('infer_gpu_power_watts' + g, legend),
            d.target('infer_gpu_power_limit_watts' + g, legend + ' limit'),
            d.target('rate(infer_gpu_energy_joules_total%s[$__rate_interval])' % g, legend + ' from energy'),
          ],
          'watt',
          width=8,
          min=0,
        ),
        d.timeseries('Temperature', 'GPU core temperature.', [d.target('infer_gpu_temperature_celsius' + g, legend)], 'celsius', width=8),
        d.timeseries(
          'Clocks',
          'SM and memory clocks, and their maxima.',
          [
            d.target('infer_gpu_clock_hertz' + g, legend + ' {{clock}}'),
            d.target('infer_gpu_clock_max_hertz' + g, legend + ' {{clock}} max'),
          ],
          'hertz',
          width=8,
        ),
        d.timeseries(
          'Energy per output token',
          'Joules the instance\'s GPUs drew per output token the server generated, every client\'s tokens (%s).' % n.energyPerToken,
          [d.target(n.energyPerToken + p.selector(clusterMatcher), '{{target}} / {{model}}')],
          'joule',
          width=8,
          min=0,
        ),
        d.stateTimeline(
          'Throttle reasons',
          'Clock event reasons: why the clocks are below their maximum. sw_power_cap at full load is normal; thermal and hardware slowdowns are not.',
          [d.target('infer_gpu_clock_event_reason_active' + gs('reason!="gpu_idle"'), legend + ' {{reason}}')],
        ),
        d.heatmapRows(
          'Memory used over time, per GPU',
          'GPU memory in use, one row per GPU.',
          [d.target('infer_gpu_memory_used_bytes' + g, legend)],
          'bytes',
        ),
        d.timeseries(
          'Memory',
          'Used and total memory, and the memory of each process on the GPU (the largest users).',
          [
            d.target('infer_gpu_memory_used_bytes' + g, legend + ' used'),
            d.target('infer_gpu_memory_total_bytes' + g, legend + ' total'),
            d.target('infer_gpu_process_memory_used_bytes' + g, legend + ' {{process}} ({{pid}})'),
          ],
          'bytes',
          width=12,
          min=0,
        ),
        d.timeseries(
          'PCIe throughput',
          'Bytes per second over PCIe, by direction.',
          [d.target('infer_gpu_pcie_bytes_per_second' + g, legend + ' {{direction}}')],
          'Bps',
          width=12,
          min=0,
        ),
        d.timeseries(
          'XID errors',
          'XID errors reported by the driver in each rate interval.',
          [d.target('increase(infer_gpu_xid_errors_total%s[$__rate_interval])' % g, legend + ' XID {{xid}}')],
          'short',
          width=12,
          min=0,
        ),
        d.timeseries(
          'ECC errors',
          'Corrected and uncorrected ECC errors per second.',
          [d.target('rate(infer_gpu_ecc_errors_total%s[$__rate_interval])' % g, legend + ' {{type}}')],
          'short',
          width=12,
          min=0,
        ),
      ],
    ),

    'infer-server.json': dash(
      'server',
      'infer_exporter / Server internals',
      'The inference engine\'s own metrics, normalised as infer_server_*: KV cache, running and waiting requests, prefix cache and preemptions; the engine\'s own per-request times (TTFT, queue, prefill, decode), finish reasons and prompt and generation lengths, where the engine exposes them; and the client\'s TTFT less the server\'s.',
      [
        d.queryVariable('target', 'Target', 'label_values(infer_server_up%s, target)' % p.selector(c.serverSelector)),
        d.queryVariable('model', 'Model', 'label_values(infer_server_up%s, model)' % p.selector(c.serverSelector, 'target=~"$target"')),
      ],
      local s = p.selector(c.serverSelector, tsel);
      local legend = '{{target}} ({{engine}})';
      // The cold-start series carry target alone (probe/coldstart).
      local cs = p.selector(c.serverSelector, 'target=~"$target"');
      local phase = '{{target}} {{phase}}';
      // A quantile of an engine histogram per target, from its classic
      // buckets (the exporter renders the engine's buckets as they are).
      local serverQuantile(m, q) =
        'histogram_quantile(%s, sum by (target, engine, le) (rate(%s_bucket%s[$__rate_interval])))' % [p.num(q), m, s];
      local serverQuantiles(m) = [
        d.target(serverQuantile(m, q), legend + ' ' + p.quantileName(q))
        for q in c.quantiles
      ];
      local quantileList = std.join(', ', [p.quantileName(q) for q in c.quantiles]);
      // The client's TTFT for the same targets: native buckets, else
      // classic, like the recording rules.
      local ps = p.selector(c.probeSelector, tsel);
      local clientTTFT(q) =
        '(histogram_quantile(%(q)s, sum by (target) (rate(infer_probe_time_to_first_token_seconds%(s)s[$__rate_interval]))) or histogram_quantile(%(q)s, sum by (target, le) (rate(infer_probe_time_to_first_token_seconds_bucket%(s)s[$__rate_interval]))))' % { q: p.num(q), s: ps };
      local serverTTFT(q) =
        'histogram_quantile(%s, sum by (target, le) (rate(infer_server_time_to_first_token_seconds_bucket%s[$__rate_interval])))' % [p.num(q), s];
      [
        d.timeseries('KV cache usage', 'Fraction of the KV cache in use, as the engine reports it.', [d.target('infer_server_kv_cache_usage_ratio' + s, legend)], 'percentunit', width=12, min=0, max=1),
        d.timeseries(
          'Running and waiting requests',
          'Requests in the engine\'s batch, and queued for it.',
          [
            d.target('infer_server_requests_running' + s, legend + ' running'),
            d.target('infer_server_requests_waiting' + s, legend + ' waiting'),
          ],
          'short',
          width=12,
          min=0,
        ),
        d.timeseries(
          'Prefix cache hit ratio',
          'Prefix-cache hits over lookups, in the engine\'s unit (tokens for vLLM and SGLang), over %s (%s).' % [c.rateWindow, n.prefixCacheHitRatio],
          [d.target(n.prefixCacheHitRatio + trec, '{{target}}')],
          'percentunit',
          width=8,
          min=0,
          max=1,
        ),
        d.timeseries(
          'Prefix cache hits and lookups',
          'Per second, in the engine\'s unit.',
          [
            d.target('rate(infer_server_prefix_cache_hits_total%s[$__rate_interval])' % s, legend + ' hits'),
            d.target('rate(infer_server_prefix_cache_queries_total%s[$__rate_interval])' % s, legend + ' lookups'),
          ],
          'short',
          width=8,
          min=0,
        ),
        d.timeseries(
          'Declared cache-hit rate: three views',
          'Workloads with prompt.cache_hit_rate: the client\'s hit ratio (cached prompt tokens from the answers\' usage over prompt tokens, over %s: %s), the server\'s (its prefix-cache hits over lookups since the workload started) and the best the workload\'s prompts allow (a cache that holds its prefix pool). The server\'s far below the best: the cache does not keep the pool (docs/kinds.md).' % [c.rateWindow, n.cachedPromptRatio],
          [
            d.target(n.cachedPromptRatio + trec, '{{target}} {{workload}} client'),
            d.target('infer_probe_server_prefix_cache_hit_ratio' + ps, '{{target}} {{workload}} server'),
            d.target('infer_probe_prefix_cache_best_hit_ratio' + ps, '{{target}} {{workload}} best'),
          ],
          'percentunit',
          width=16,
          min=0,
          max=1,
        ),
        d.timeseries(
          'Prefix cache eviction',
          '1 when a workload\'s server hit ratio is below half the best its prompts allow, once it has sent three times its pool (infer_probe_prefix_cache_eviction): the cache is too small for the pool, or other traffic evicts it.',
          [d.target('infer_probe_prefix_cache_eviction' + ps, '{{target}} {{workload}}')],
          'bool',
          width=8,
          min=0,
          max=1,
        ),
        d.timeseries(
          'Preemptions',
          'Requests the engine preempted per second (SGLang: retracted): a sign of KV-cache pressure.',
          [d.target('rate(infer_server_preemptions_total%s[$__rate_interval])' % s, legend)],
          'ops',
          width=8,
          min=0,
        ),
        d.timeseries('Engine metrics up', '1 when the exporter\'s last read of the engine\'s metrics succeeded.', [d.target('infer_server_up' + s, legend)], 'bool', width=12, min=0, max=1),
        d.table(
          'Engines',
          'The engine behind each target, as its info endpoints report it.',
          [d.target('infer_server_info' + s, '', instant=true, format='table', refId='A')],
          'none',
          [{ ref: 'A', title: 'Up', unit: 'none' }],
          'target',
          width=12,
          height=8,
          hide=['__name__', 'job', 'instance'],
        ),
        d.timeseries(
          'LoRA adapters',
          'LoRA adapters with requests running in the engine\'s batch and waiting for it (infer_server_lora_adapters; vLLM with --enable-lora); max_lora in the Engines table is how many one batch may hold.',
          [d.target('infer_server_lora_adapters' + s, legend + ' {{state}}')],
          'short',
          width=12,
          min=0,
        ),
        d.row('Energy and cost'),
        d.timeseries(
          'Server tokens per second',
          'Output and prompt tokens the engine counted per second, every client\'s (%s, %s), beside the probe\'s own output tokens: the probe is a sample of the server\'s traffic.' % [n.serverGenerationTokenRate, n.serverPromptTokenRate],
          [
            d.target(n.serverGenerationTokenRate + trec, '{{target}} output'),
            d.target(n.serverPromptTokenRate + trec, '{{target}} prompt'),
            d.target('sum by (target) (rate(infer_probe_completion_tokens_total%s[$__rate_interval]))' % ps, '{{target}} probe output'),
          ],
          'suffix: tok/s',
          width=8,
          min=0,
        ),
        d.timeseries(
          'Energy per output token',
          'Joules the GPUs serving the target drew per output token the server generated, over %s (%s): the GPUs\' energy counter over the server\'s own token count.' % [c.rateWindow, n.energyPerToken],
          [d.target(n.energyPerToken + trec, '{{target}}')],
          'joule',
          width=8,
          min=0,
        ),
        d.timeseries(
          'Cost per million output tokens',
          'US dollars per million output tokens, from the GPUs\' price per hour in the mixin\'s _config.gpuHourlyPriceUSD over the server\'s output tokens (%s); per good token, over the share of the probe\'s requests that met every SLO (%s). Absent where a GPU\'s model has no price.' % [n.costPerToken, n.costPerGoodToken],
          [
            d.target('1e6 * ' + n.costPerToken + trec, '{{target}}'),
            d.target('1e6 * ' + n.costPerGoodToken + trec, '{{target}} good tokens'),
          ],
          'currencyUSD',
          width=8,
          min=0,
        ),
        d.row('Requests inside the engine'),
        d.timeseries(
          'Server time to first token',
          'The engine\'s own TTFT (infer_server_time_to_first_token_seconds), %s per target over all the requests it served, ours and every other client\'s: its clock starts when the engine receives the request (vLLM, SGLang), so it leaves out the network and anything in front of the engine. Quantiles are interpolated within the engine\'s own buckets (vLLM\'s: 0.1, 0.25, 0.5, 0.75, 1 s, ...), so they are only as fine as those. Absent for an engine without one (TGI).' % quantileList,
          serverQuantiles('infer_server_time_to_first_token_seconds'),
          's',
          width=12,
          min=0,
        ),
        d.timeseries(
          'Client TTFT minus server TTFT (p50)',
          'Per target, the median TTFT the exporter measured (infer_probe_time_to_first_token_seconds) less the median the engine reports (infer_server_time_to_first_token_seconds): the part of the first token\'s time the server cannot see. It holds the client\'s schedule lag (infer_probe_schedule_lag_seconds: the client\'s clock starts at the scheduled instant), the network both ways, HTTP (connection, TLS, writing the request, any proxy, gateway or load balancer in front of the engine and its queue), the server\'s HTTP front end before the engine\'s clock starts (the engine\'s TTFT clock starts at its arrival), and the client\'s own read and parse of the stream up to its first content event. It is meaningless when the engine serves other clients whose requests differ from the probe\'s (the server\'s histogram covers all its requests, the client\'s only the probe\'s), with few requests per interval, and within the engine\'s bucket width (a difference of two interpolated medians, not the median of per-request differences: it can be negative). Absent where the engine reports no TTFT.',
          [d.target('%s - %s' % [clientTTFT(0.5), serverTTFT(0.5)], '{{target}}')],
          's',
          width=12,
        ),
        d.timeseries(
          'Queue time',
          'Time each request waited in the engine\'s queue before it was first scheduled (infer_server_request_queue_time_seconds), %s per target: the cost of a full batch or KV cache, which running and waiting requests above explain. vLLM observes it when the request finishes; SGLang and TGI time their own queues.' % quantileList,
          serverQuantiles('infer_server_request_queue_time_seconds'),
          's',
          width=8,
          min=0,
        ),
        d.timeseries(
          'Prefill time',
          'Time from a request\'s first scheduling to its first token (infer_server_request_prefill_time_seconds), %s per target, observed when the request finishes: how long its prompt took to compute, chunked prefill and preemption included. vLLM only.' % quantileList,
          serverQuantiles('infer_server_request_prefill_time_seconds'),
          's',
          width=8,
          min=0,
        ),
        d.timeseries(
          'Decode time',
          'Time from a request\'s first token to its last (infer_server_request_decode_time_seconds), %s per target, observed when the request finishes: it grows with the output length as well as with a slower step. vLLM only.' % quantileList,
          serverQuantiles('infer_server_request_decode_time_seconds'),
          's',
          width=8,
          min=0,
        ),
        d.timeseries(
          'Finished requests by reason',
          'Requests the engine finished per second, by reason (infer_server_requests_finished_total): stop (a stop token or string), length (max_tokens or the context length), abort (the client went away, or the server cancelled it), error, other (a reason outside these, such as vLLM\'s repetition). A rise of length means answers cut short; of abort, clients giving up. vLLM only: SGLang and TGI count finished requests without a reason.',
          [d.target('sum by (target, engine, reason) (rate(infer_server_requests_finished_total%s[$__rate_interval]))' % s, legend + ' {{reason}}')],
          'reqps',
          width=24,
          min=0,
          stack=true,
        ),
        d.histogramHeatmap(
          'Prompt length, all requests (server)',
          'Prompt tokens of the requests the engine served, ours and every other client\'s, in each interval, in the engine\'s own buckets (infer_server_request_prompt_tokens; vLLM, TGI, SGLang with --collect-tokens-histogram).',
          [d.target('sum by (le) (increase(infer_server_request_prompt_tokens_bucket%s[$__rate_interval]))' % s)],
          'short',
          width=8,
        ),
        d.histogramHeatmap(
          'Prompt length, the probe\'s requests (client)',
          'Prompt tokens of the exporter\'s own successful requests as the server\'s usage reported them (infer_probe_prompt_length_tokens), in each interval: set beside the server\'s, it shows whether the probe sends what the server\'s real traffic looks like.',
          [d.target('sum by (le) (increase(infer_probe_prompt_length_tokens_bucket%s[$__rate_interval]))' % ps)],
          'short',
          width=8,
        ),
        d.histogramHeatmap(
          'Generation length, all requests (server)',
          'Tokens the engine generated per request, all clients\' requests, in each interval, in its own buckets (infer_server_request_generation_tokens; vLLM, TGI, SGLang with --collect-tokens-histogram).',
          [d.target('sum by (le) (increase(infer_server_request_generation_tokens_bucket%s[$__rate_interval]))' % s)],
          'short',
          width=8,
        ),
        d.row('Cold starts'),
        d.stat(
          'Starts seen',
          'Server starts the exporter saw since it started: a new process start (process_start_time_seconds changed), or serving again after refusing (infer_server_starts_total).',
          [d.target('sum by (target) (infer_server_starts_total%s)' % cs, '{{target}}')],
          'short',
          width=6,
          height=8,
        ),
        d.timeseries(
          'Cold start, per start',
          'Seconds from each server start to its readiness (its health endpoint\'s first 200) and to its first served token (the first token of the first request to succeed), and that request\'s own TTFT (first_request_ttft: the model\'s load for an engine that loads on the first request, as Ollama does), shown in the interval after the start; several starts in one interval show their mean (infer_server_cold_start_seconds).',
          [d.target('increase(infer_server_cold_start_seconds_sum%(s)s[$__rate_interval]) / increase(infer_server_cold_start_seconds_count%(s)s[$__rate_interval]) > 0' % { s: cs }, phase)],
          's',
          width=12,
          min=0,
        ),
        d.timeseries(
          'Starts',
          'Server starts seen in each interval: a restart loop shows as a steady rate.',
          [d.target('increase(infer_server_starts_total%s[$__rate_interval])' % cs, '{{target}}')],
          'short',
          width=6,
          min=0,
        ),
      ],
    ),
  },
}
