// The bench history dashboard: the figures of past bench runs, backfilled
// into Prometheus from `infer_exporter bench export` (infer_bench_*
// series, one sample a run at the run's end, labels target, load, shape
// and run_id), drawn over the runs, with the live probe's p99 of the same
// target beside them (docs/bench.md says how to backfill).
local d = import '../lib/dashboard.libsonnet';
local p = import '../lib/promql.libsonnet';
local names = import '../rules/names.libsonnet';

{
  local c = $._config,
  local n = names.new(c),
  // The cluster variable (dashboardClusterLabel), as on the other
  // dashboards. The backfilled series carry no cluster label: "All"
  // matches them.
  local cl = c.dashboardClusterLabel,
  local clusterMatcher = if cl == null then '' else '%s=~"$%s"' % [cl, cl],
  local withCluster(s) = std.join(', ', std.filter(function(x) x != '', [s, clusterMatcher])),
  local benchSel(extra) = p.selector(withCluster('target=~"$target", load=~"$load", shape=~"$shape"'), extra),
  // A run is one sample: each step shows the last one within its
  // window, and the points are joined across the steps between runs.
  local last(m, extra) = 'last_over_time(%s%s[$__rate_interval])' % [m, benchSel(extra)],
  local cell = '{{target}} / {{load}} / {{shape}}',
  local overRuns = { fieldConfig+: { defaults+: { custom+: { showPoints: 'always', pointSize: 6, spanNulls: true } } } },

  // A latency across the runs: its p50 and p99 with the p99's interval,
  // and the live probe's p99 of the same targets beside them.
  local latency(family, h, title, what) = d.timeseries(
    title + ': bench runs and live',
    'The %s of each bench run (%s, the median over its repeats), its p99\'s interval dashed, and the live probe\'s p99 of the same target (%s) beside it.' % [what, family, n.quantile(h)],
    [
      d.target(last(family, 'quantile="0.5"'), cell + ' p50'),
      d.target(last(family, 'quantile="0.99"'), cell + ' p99'),
      d.target(last(std.strReplace(family, '_seconds', '_lower_seconds'), 'quantile="0.99"'), cell + ' p99 low'),
      d.target(last(std.strReplace(family, '_seconds', '_upper_seconds'), 'quantile="0.99"'), cell + ' p99 high'),
      d.target('%s%s' % [n.quantile(h), p.selector(withCluster('target=~"$target", quantile="0.99"'))], 'live {{target}} / {{workload}} p99'),
    ],
    's',
    width=12,
    min=0,
  ) + overRuns + {
    fieldConfig+: { overrides+: [{
      matcher: { id: 'byRegexp', options: '.* p99 (low|high)' },
      properties: [{ id: 'custom.lineStyle', value: { fill: 'dash', dash: [6, 4] } }],
    }] },
  },

  grafanaDashboards+:: {
    'infer-bench-history.json': d.dashboard(
      c.dashboardUIDPrefix + 'bench-history',
      'infer_exporter / Bench history',
      'Bench runs over time, backfilled from `infer_exporter bench export` (infer_bench_* series, one point a run), beside the live probe\'s figures: is tonight\'s run worse than the last ten nights\', and does the live latency agree.',
      c.dashboardTags,
      (if cl == null then [] else [d.queryVariable(cl, 'Cluster', 'label_values(up%s, %s)' % [p.selector(c.exporterSelector), cl])])
      + [
        d.queryVariable('target', 'Target', 'label_values(infer_bench_tpot_seconds%s, target)' % p.selector(clusterMatcher)),
        d.queryVariable('shape', 'Shape', 'label_values(infer_bench_tpot_seconds%s, shape)' % p.selector(withCluster('target=~"$target"'))),
        d.queryVariable('load', 'Load', 'label_values(infer_bench_tpot_seconds%s, load)' % p.selector(withCluster('target=~"$target", shape=~"$shape"'))),
      ],
      [
        d.row('Latency over runs'),
        latency('infer_bench_ttft_seconds', 'ttft', 'TTFT', 'time to first token'),
        latency('infer_bench_tpot_seconds', 'tpot', 'TPOT', 'time per output token'),
        latency('infer_bench_e2e_seconds', 'e2e', 'E2E', 'end-to-end latency'),
        d.timeseries(
          'Output tokens/s over runs',
          'Each bench run\'s output tokens per second (infer_bench_output_tokens_per_second) with its interval, and the live probe\'s (%s) beside it.' % n.outputTokenRate,
          [
            d.target(last('infer_bench_output_tokens_per_second', ''), cell),
            d.target(last('infer_bench_output_tokens_lower_per_second', ''), cell + ' low'),
            d.target(last('infer_bench_output_tokens_upper_per_second', ''), cell + ' high'),
            d.target('sum by (target) (%s%s)' % [n.outputTokenRate, p.selector(withCluster('target=~"$target"'))], 'live {{target}}'),
          ],
          'suffix: tok/s',
          width=12,
          min=0,
        ) + overRuns,
        d.row('Outcomes over runs'),
        d.timeseries(
          'Success and goodput ratio over runs',
          'Each bench run\'s share of measured requests that succeeded (infer_bench_success_ratio) and that met every SLO (infer_bench_goodput_ratio).',
          [
            d.target(last('infer_bench_success_ratio', ''), cell + ' success'),
            d.target(last('infer_bench_goodput_ratio', ''), cell + ' goodput'),
          ],
          'percentunit',
          width=24,
          min=0,
          max=1,
        ) + overRuns,
      ],
      refresh='',
      timezone=c.dashboardTimezone,
      time='now-30d',
    ),
  },
}
