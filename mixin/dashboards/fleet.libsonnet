// The fleet dashboard: the leaderboard of (model, engine) across every
// sidecar, the fleet's latency, throughput and outcomes from the rules of
// rules/fleet.libsonnet, and a sharded bench live, summed over its shards.
local d = import '../lib/dashboard.libsonnet';
local p = import '../lib/promql.libsonnet';
local fleetNames = import '../rules/fleet_names.libsonnet';

{
  local c = $._config,
  local f = c.fleet,
  local n = fleetNames.new(c),
  local by = p.labelList(f.labels),
  // The cluster variable (dashboardClusterLabel), as on the other
  // dashboards: its matcher in every selector.
  local cl = c.dashboardClusterLabel,
  local clusterMatcher = if cl == null then '' else '%s=~"$%s"' % [cl, cl],
  local withCluster(s) = std.join(', ', std.filter(function(x) x != '', [s, clusterMatcher])),
  local sel = withCluster('model=~"$model", engine=~"$engine"'),
  local rec = '{' + sel + '}',
  local legend = '{{model}} / {{engine}}',
  local bench(extra='') = p.selector(withCluster(f.benchSelector), extra),
  local stream = '{{target}} / {{workload}}',
  local workload = 'target, model, workload',

  local quantilePanel(h, title, description) = d.timeseries(
    title,
    description + ' Over every sidecar of the model and engine: quantiles %s over %s (%s).' % [std.join(', ', [p.num(q) for q in c.quantiles]), c.rateWindow, n.quantile(h)],
    [d.target(n.quantile(h) + rec, legend + ' q{{quantile}}')],
    's',
    width=6,
  ),

  // A quantile of a histogram summed over the bench's shards, native or
  // classic.
  local benchQuantile(q, m) =
    'histogram_quantile(%(q)s, sum by (%(by)s) (rate(%(m)s%(sel)s[$__rate_interval]))) or histogram_quantile(%(q)s, sum by (%(by)s, le) (rate(%(m)s_bucket%(sel)s[$__rate_interval])))' % {
      q: p.num(q),
      by: workload,
      m: m,
      sel: bench(),
    },

  grafanaDashboards+:: {
    'infer-fleet.json': d.dashboard(
      c.dashboardUIDPrefix + 'fleet',
      'infer_exporter / Fleet',
      'Every sidecar of the fleet, by the model served and the engine serving it: a leaderboard of (model, engine), latency quantiles, throughput and outcomes over all their sidecars; and a sharded bench live, summed over its shards.',
      c.dashboardTags,
      (if cl == null then [] else [d.queryVariable(cl, 'Cluster', 'label_values(up%s, %s)' % [p.selector(c.exporterSelector), cl])])
      + [
        d.queryVariable('model', 'Model', 'label_values(%s%s, model)' % [n.requestRate, p.selector(clusterMatcher)]),
        d.queryVariable('engine', 'Engine', 'label_values(%s, engine)' % (n.requestRate + p.selector(withCluster('model=~"$model"')))),
      ],
      local q99 = '{quantile="0.99", %s}' % sel;
      local cols = [
        { ref: 'A', title: 'Score', unit: 'none', decimals: 3, expr: n.score + rec },
        { ref: 'B', title: 'Latency score', unit: 'none', decimals: 3, expr: n.component('latency') + rec },
        { ref: 'C', title: 'Throughput score', unit: 'none', decimals: 3, expr: n.component('throughput') + rec },
        { ref: 'D', title: 'Memory score', unit: 'none', decimals: 3, expr: n.component('memory') + rec },
        { ref: 'E', title: 'Accuracy score', unit: 'none', decimals: 3, expr: n.component('accuracy') + rec },
        { ref: 'F', title: 'Sidecars', unit: 'none', decimals: 0, expr: n.sidecars + rec },
        { ref: 'G', title: 'TTFT p99', unit: 's', expr: n.quantile('ttft') + q99 },
        { ref: 'H', title: 'TPOT p99', unit: 's', expr: n.quantile('tpot') + q99 },
        { ref: 'I', title: 'E2E p99', unit: 's', expr: n.quantile('e2e') + q99 },
        { ref: 'J', title: 'Requests/s', unit: 'reqps', expr: n.requestRate + rec },
        { ref: 'K', title: 'Output tokens/s', unit: 'suffix: tok/s', expr: n.servedTokenRate + rec },
        { ref: 'L', title: 'Output tokens/s per sidecar', unit: 'suffix: tok/s', expr: '%s%s / %s%s' % [n.servedTokenRate, rec, n.sidecars, rec] },
        { ref: 'M', title: 'Goodput', unit: 'percentunit', expr: n.goodputRatio + rec },
        { ref: 'N', title: 'Errors', unit: 'percentunit', expr: n.errorRatio + rec },
        { ref: 'O', title: 'GPU memory per sidecar', unit: 'bytes', expr: n.servingMemory + rec },
        { ref: 'P', title: 'Accuracy', unit: 'percentunit', expr: n.checkPassRatio + rec },
      ];
      [
        d.row('Leaderboard'),
        d.table(
          'Fleet leaderboard',
          'One row per model and engine, over all their sidecars, best score first. The score weighs the components as the per-target ranking does (latency %s, throughput %s, memory %s, accuracy %s), from the fleet\'s p99 TTFT and TPOT, output tokens per second per sidecar (what the engines generated, every client\'s; the probe\'s own where an engine counts none), GPU memory per sidecar and known-answer accuracy; a component that cannot be measured counts 0. Raw values beside them.' % [
            p.num(c.ranking.weights.latency),
            p.num(c.ranking.weights.throughput),
            p.num(c.ranking.weights.memory),
            p.num(c.ranking.weights.accuracy),
          ],
          // Without __name__ and extra labels, so that the merge joins the
          // queries' rows on model and engine.
          [d.target('max by (%s) (%s)' % [by, col.expr], '', instant=true, format='table', refId=col.ref) for col in cols],
          'none',
          [{ ref: col.ref, title: col.title, unit: col.unit } + (if std.objectHas(col, 'decimals') then { decimals: col.decimals } else {}) for col in cols],
          'Score',
          height=10,
        ),
        d.timeseries(
          'Fleet score over time',
          'The weighted score of each model and engine (%s).' % n.score,
          [d.target(n.score + rec, legend)],
          'none',
          width=12,
          min=0,
        ),
        d.timeseries(
          'Sidecars',
          'Sidecars (scrapes of the exporter) measuring each model and engine (%s): the size of the fleet behind each row.' % n.sidecars,
          [d.target(n.sidecars + rec, legend)],
          'none',
          width=12,
          min=0,
        ),
        d.row('Latency across the fleet'),
        quantilePanel('ttft', 'Time to first token', 'From the scheduled instant to the first content token.'),
        quantilePanel('tpot', 'Time per output token', '(last byte - first token) / (output tokens - 1), per successful request.'),
        quantilePanel('itl', 'Inter-token latency', 'Every gap between consecutive content events.'),
        quantilePanel('e2e', 'End-to-end latency', 'From the scheduled instant to the last byte, successful requests.'),
        d.row('Throughput and outcomes across the fleet'),
        d.timeseries(
          'Requests per second',
          'Requests sent per second (every outcome but dropped), over every sidecar, over %s.' % c.rateWindow,
          [d.target(n.requestRate + rec, legend)],
          'reqps',
          width=6,
          min=0,
        ),
        d.timeseries(
          'Output and prompt tokens per second',
          'Output and prompt tokens of successful requests per second, over every sidecar, over %s.' % c.rateWindow,
          [
            d.target(n.outputTokenRate + rec, legend + ' output'),
            d.target(n.promptTokenRate + rec, legend + ' prompt'),
          ],
          'suffix: tok/s',
          width=6,
          min=0,
        ),
        d.timeseries(
          'Goodput ratio',
          'Requests that succeeded and met every SLO threshold of their workload, over requests sent, over every sidecar, over %s.' % c.rateWindow,
          [d.target(n.goodputRatio + rec, legend)],
          'percentunit',
          width=6,
          min=0,
          max=1,
        ),
        d.timeseries(
          'Error ratio',
          'Failed requests over requests sent, over every sidecar, over %s.' % c.rateWindow,
          [d.target(n.errorRatio + rec, legend)],
          'percentunit',
          width=6,
          min=0,
        ),
        d.row('Bench shards (live)'),
        d.timeseries(
          'Bench: requests per second by outcome',
          'The sharded bench\'s requests (%s), summed over its shards: the whole test\'s load, by how each request ended; dropped arrivals were never sent.' % f.benchSelector,
          [d.target('sum by (%s, outcome) (rate(infer_probe_requests_total%s[$__rate_interval]))' % [workload, bench()], stream + ' {{outcome}}')],
          'reqps',
          width=8,
          stack=true,
        ),
        d.timeseries(
          'Bench: TTFT and E2E',
          'p50 and p99 of TTFT and end-to-end latency over every shard\'s requests, over the rate interval. The points are exemplars of both histograms (asked with the p99 of each): one request each, one a bucket at a time, whose trace_id links to its trace where the Prometheus data source has an exemplar link (docs/mixin.md).',
          [
            d.target(benchQuantile(q, m.metric), '%s %s %s' % [stream, m.name, p.quantileName(q)], exemplar=q == 0.99)
            for m in [
              { name: 'TTFT', metric: 'infer_probe_time_to_first_token_seconds' },
              { name: 'E2E', metric: 'infer_probe_request_duration_seconds' },
            ]
            for q in [0.5, 0.99]
          ],
          's',
          width=8,
          min=0,
        ),
        d.timeseries(
          'Bench: output tokens per second',
          'Output tokens of successful requests per second, summed over the shards.',
          [d.target('sum by (%s) (rate(infer_probe_completion_tokens_total%s[$__rate_interval]))' % [workload, bench()], stream)],
          'suffix: tok/s',
          width=8,
          min=0,
        ),
        d.timeseries(
          'Bench: requests sent per shard',
          'Requests sent per second by each shard (the label shard, from the pod\'s completion index): the shards split one schedule, so their lines should lie together.',
          [d.target('sum by (shard) (rate(infer_probe_requests_total%s[$__rate_interval]))' % bench('outcome!="dropped"'), 'shard {{shard}}')],
          'reqps',
          width=12,
          min=0,
        ),
        d.timeseries(
          'Bench: shards up',
          'Shards whose metrics Prometheus scraped: all N while the bench runs, none once it has ended.',
          [d.target('sum(up%s)' % bench(), 'shards up')],
          'none',
          width=12,
          min=0,
        ),
      ],
      c.dashboardRefresh,
      c.dashboardTimezone,
    ),
  },
}
