// The fleet view: the client histograms and counters of every sidecar,
// aggregated by the model served and the engine serving it, and a
// leaderboard of (model, engine) across the fleet. The rules of
// rules.libsonnet keep target, model and workload (the replicas of one
// Deployment share a target name, so they are summed already); these sum
// over targets too, so that vLLM serving a model on 12 nodes under three
// target names is one row beside SGLang serving it on 4.
//
// The engine is not a label of infer_probe_*: it comes from the engine
// scraper's infer_server_info{target, engine} of the same scrape, joined on
// the instance and the target. A target whose engine metrics are off
// (metrics: {engine: none}) is counted with engine "unknown" rather than
// left out.
local p = import '../lib/promql.libsonnet';
local fleetNames = import 'fleet_names.libsonnet';
local names = import 'names.libsonnet';

{
  _config+:: {
    fleet: {
      // The labels the fleet view aggregates by.
      labels: ['model', 'engine'],
      // The labels on which a probe series meets its target's
      // infer_server_info: the sidecar's scrape, and the target.
      engineJoinLabels: ['instance', 'target'],
      // The engine of a target the exporter reads no engine metrics for.
      unknownEngine: 'unknown',
      // The shards of a sharded bench (deploy/kubernetes/bench), scraped
      // as a job of their own: the fleet dashboard shows them live, and no
      // rule or alert reads them.
      benchSelector: 'job="infer-bench"',
    },
  },

  local c = $._config,
  local f = c.fleet,
  local n = fleetNames.new(c),
  local base = names.new(c),
  local by = p.labelList(f.labels),
  local join = p.labelList(f.engineJoinLabels),
  local w = c.rateWindow,
  local probe(extra='') = p.selector(c.probeSelector, extra),
  local sent = probe('outcome!="dropped"'),

  // A probe series with its target's engine.
  local withEngine(e) = '%s * on (%s) group_left (engine) %s' % [e, join, n.engine],
  local sumRate(metric, sel, window=w) = 'sum by (%s) (%s)' % [by, withEngine('rate(%s%s[%s])' % [metric, sel, window])],

  local quantileRules(h) = [
    {
      record: n.quantile(h),
      expr: |||
        histogram_quantile(%(q)s, sum by (%(by)s) (%(native)s))
        or
        histogram_quantile(%(q)s, sum by (%(by)s, le) (%(classic)s))
      ||| % {
        q: p.num(q),
        by: by,
        native: withEngine('rate(%s%s[%s])' % [base.histograms[h], probe(), w]),
        classic: withEngine('rate(%s_bucket%s[%s])' % [base.histograms[h], probe(), w]),
      },
      labels: { quantile: p.num(q) },
    }
    for q in c.quantiles
  ],

  prometheusRules+:: {
    groups+: [
      {
        name: 'infer-fleet.rules',
        rules: [
          {
            // 1 per (instance, target), labelled with its engine; engine
            // "unknown" where the scrape has no infer_server_info for it.
            record: n.engine,
            expr: |||
              group by (%(join)s, engine) (infer_server_info%(server)s)
              or on (%(join)s)
              label_replace(group by (%(join)s) (infer_probe_requests_total%(probe)s), "engine", "%(unknown)s", "", "")
            ||| % { join: join, server: p.selector(c.serverSelector), probe: probe(), unknown: f.unknownEngine },
          },
          {
            // 1 per sidecar and the model and engine it measures.
            record: n.instanceModelEngine,
            expr: 'group by (%s, %s) (%s)' % [p.labelList(c.gpuJoinLabels), by, withEngine('infer_probe_requests_total' + probe())],
          },
        ] + quantileRules('ttft') + quantileRules('tpot') + quantileRules('itl') + quantileRules('e2e') + [
          {
            record: n.requestRate,
            expr: sumRate('infer_probe_requests_total', sent),
          },
          {
            record: n.outputTokenRate,
            expr: sumRate('infer_probe_completion_tokens_total', probe()),
          },
          {
            record: n.servedTokenRate,
            expr: |||
              sum by (%(by)s) (
                %(perSidecar)s
              )
            ||| % {
              by: by,
              perSidecar: withEngine(|||
                (
                  sum by (%(join)s, model) (rate(infer_server_generation_tokens_total%(server)s[%(w)s]))
                  or
                  sum by (%(join)s, model) (rate(infer_probe_completion_tokens_total%(probe)s[%(w)s]))
                )
              ||| % { join: join, server: p.selector(c.serverSelector), probe: probe(), w: w }),
            },
          },
          {
            record: n.promptTokenRate,
            expr: sumRate('infer_probe_prompt_tokens_total', probe()),
          },
          {
            record: n.goodputRatio,
            expr: '%s\n/\n(%s > 0)\n' % [sumRate('infer_probe_goodput_requests_total', probe()), sumRate('infer_probe_requests_total', sent)],
          },
          {
            // Failed over sent; 0, not nothing, when nothing failed.
            record: n.errorRatio,
            expr: '(\n  %s\n  or\n  0 * %s\n)\n/\n(%s > 0)\n' % [
              sumRate('infer_probe_requests_total', probe('outcome!~"success|dropped|cancelled"')),
              sumRate('infer_probe_requests_total', sent),
              sumRate('infer_probe_requests_total', sent),
            ],
          },
          {
            // Known-answer checks of the sidecars' workloads that passed,
            // over those answered.
            record: n.checkPassRatio,
            expr: '%s\n/\n(%s > 0)\n' % [
              sumRate('infer_probe_known_answer_checks_total', probe('result="pass"'), c.accuracyWindow),
              sumRate('infer_probe_known_answer_checks_total', probe('result=~"pass|fail"'), c.accuracyWindow),
            ],
          },
          {
            // How many sidecars measure each model and engine.
            record: n.sidecars,
            expr: 'count by (%s) (%s)' % [by, n.instanceModelEngine],
          },
          {
            // GPU memory of the serving process per sidecar (its
            // instance's GPUs, as in the per-target ranking), averaged.
            record: n.servingMemory,
            expr: |||
              avg by (%(by)s) (
                %(mem)s
                * on (%(g)s) group_right ()
                %(ime)s
              )
            ||| % { by: by, mem: base.gpuServingMemory, g: p.labelList(c.gpuJoinLabels), ime: n.instanceModelEngine },
          },
        ],
      },
      {
        // The leaderboard across the fleet: the per-target ranking's
        // components and weights (_config.ranking), from the fleet's
        // figures. Throughput is per sidecar, so that a model and engine is
        // not ranked higher for running on more nodes, and is what the
        // engines generated (every client's), not the probe's offered
        // load, wherever they count it.
        name: 'infer-fleet-ranking.rules',
        local r = c.ranking,
        local ref = r.reference,
        local clamp(e) = 'clamp(%s, 0, %s)' % [e, p.num(r.maxComponent)],
        local q99 = p.num(0.99),
        local zero = '(%s * 0)' % n.requestRate,
        rules: [
          {
            record: n.component('latency'),
            expr: clamp(|||
              max without (quantile) (
                (
                  %(rttft)s / (%(ttft)s{quantile="%(q)s"} > 0)
                  + %(rtpot)s / (%(tpot)s{quantile="%(q)s"} > 0)
                ) / 2
              )
            ||| % { rttft: p.num(ref.ttftSeconds), rtpot: p.num(ref.tpotSeconds), ttft: n.quantile('ttft'), tpot: n.quantile('tpot'), q: q99 }),
          },
          {
            record: n.component('throughput'),
            expr: clamp('%s / (%s > 0) / %s' % [n.servedTokenRate, n.sidecars, p.num(ref.outputTokensPerSecond)]),
          },
          {
            record: n.component('memory'),
            expr: clamp('%s / (%s > 0)' % [p.num(ref.memoryBytes), n.servingMemory]),
          },
          {
            record: n.component('accuracy'),
            expr: clamp('%s / %s' % [n.checkPassRatio, p.num(ref.accuracyRatio)]),
          },
          {
            // The weighted sum; a component that is missing counts 0.
            record: n.score,
            expr: std.join('\n+ ', [
              '%s * (%s or %s)' % [p.num(r.weights[k]), n.component(k), zero]
              for k in ['latency', 'throughput', 'memory', 'accuracy']
            ]) + '\n',
          },
        ],
      },
    ],
  },
}
