// Recording rules. Histogram rules read native histograms when Prometheus
// ingests them (scrape_native_histograms: true), else the classic buckets:
// each expression is "native or classic", and the two give series with the
// same labels, so the first that exists wins.
local p = import '../lib/promql.libsonnet';
local names = import 'names.libsonnet';

{
  local c = $._config,
  local n = names.new(c),
  local by = p.labelList(c.workloadLabels),
  local tby = p.labelList(c.targetLabels),
  local gby = p.labelList(c.gpuJoinLabels),
  local w = c.rateWindow,
  local probe(extra='') = p.selector(c.probeSelector, extra),
  local sent = probe('outcome!="dropped"'),

  // Every window a ratio is recorded over: the rate window and the
  // burn-rate windows, shortest first.
  local sloWindows = std.set(
    [w] + std.flattenArrays([[b.long, b.short] for b in c.slo.burnRates]),
    p.seconds
  ),

  local quantileRules(h) = [
    {
      record: n.quantile(h),
      expr: |||
        histogram_quantile(%(q)s, sum by (%(by)s) (rate(%(m)s%(sel)s[%(w)s])))
        or
        histogram_quantile(%(q)s, sum by (%(by)s, le) (rate(%(m)s_bucket%(sel)s[%(w)s])))
      ||| % { q: p.num(q), by: by, m: n.histograms[h], sel: probe(), w: w },
      labels: { quantile: p.num(q) },
    }
    for q in c.quantiles
  ],

  local threshold = c.slo.ttftThreshold,

  // 1 per instance and target: the frame that joins a target to its
  // instance's GPUs (gpuJoinLabels), from the engine scraper's series (a
  // target whose metrics are read) or the probe's (one with workloads).
  local targets = '(group by (%(g)s, %(t)s) (infer_server_up%(server)s) or group by (%(g)s, %(t)s) (infer_probe_requests_total%(probe)s))' % {
    g: gby,
    t: tby,
    server: p.selector(c.serverSelector),
    probe: probe(),
  },

  prometheusRules+:: {
    groups+: [
      {
        name: 'infer-probe.rules',
        rules:
          quantileRules('ttft') + quantileRules('tpot') + quantileRules('itl') + quantileRules('e2e') + [
            {
              // Requests sent per second, every outcome but dropped.
              record: n.requestRate,
              expr: 'sum by (%s) (rate(infer_probe_requests_total%s[%s]))' % [by, sent, w],
            },
            {
              record: n.outputTokenRate,
              expr: 'sum by (%s) (rate(infer_probe_completion_tokens_total%s[%s]))' % [by, probe(), w],
            },
            {
              record: n.promptTokenRate,
              expr: 'sum by (%s) (rate(infer_probe_prompt_tokens_total%s[%s]))' % [by, probe(), w],
            },
            {
              // The client's prefix-cache hit ratio: prompt tokens the
              // server's prefix cache served, as each answer's usage reports
              // them (cached_tokens), over prompt tokens. 0 from a server
              // that reports none.
              record: n.cachedPromptRatio,
              expr: |||
                sum by (%(by)s) (rate(infer_probe_cached_prompt_tokens_total%(sel)s[%(w)s]))
                /
                (sum by (%(by)s) (rate(infer_probe_prompt_tokens_total%(sel)s[%(w)s])) > 0)
              ||| % { by: by, sel: probe(), w: w },
            },
            {
              // Successful requests that met every SLO threshold of the
              // workload, over requests sent.
              record: n.goodputRatio,
              expr: |||
                sum by (%(by)s) (rate(infer_probe_goodput_requests_total%(sel)s[%(w)s]))
                /
                (sum by (%(by)s) (rate(infer_probe_requests_total%(sent)s[%(w)s])) > 0)
              ||| % { by: by, sel: probe(), sent: sent, w: w },
            },
            {
              // The same per target and model, over every workload of it.
              record: n.targetGoodputRatio,
              expr: |||
                sum by (%(t)s) (rate(infer_probe_goodput_requests_total%(sel)s[%(w)s]))
                /
                (sum by (%(t)s) (rate(infer_probe_requests_total%(sent)s[%(w)s])) > 0)
              ||| % { t: tby, sel: probe(), sent: sent, w: w },
            },
            {
              // The client overhead's p99 per target and model, over every
              // workload of it: the client's TTFT less the engine's own
              // queue and TTFT, from each answer's per-request timings (the
              // network, a gateway, the server's front end, the client).
              // Native or classic, as quantileRules.
              record: n.targetClientOverheadQuantile,
              expr: |||
                histogram_quantile(0.99, sum by (%(t)s) (rate(infer_probe_client_overhead_seconds%(sel)s[%(w)s])))
                or
                histogram_quantile(0.99, sum by (%(t)s, le) (rate(infer_probe_client_overhead_seconds_bucket%(sel)s[%(w)s])))
              ||| % { t: tby, sel: probe(), w: w },
              labels: { quantile: '0.99' },
            },
            {
              // Jitter: the coefficient of variation (standard deviation
              // over mean) of TTFT. Needs native histograms (or classic ones
              // converted: convert_classic_histograms_to_nhcb).
              record: n.ttftJitter,
              expr: |||
                histogram_stddev(sum by (%(by)s) (rate(%(m)s%(sel)s[%(w)s])))
                /
                (histogram_avg(sum by (%(by)s) (rate(%(m)s%(sel)s[%(w)s]))) > 0)
              ||| % { by: by, m: n.histograms.ttft, sel: probe(), w: w },
            },
            {
              // Known-answer checks of the continuous workloads that got a
              // matching answer, over checks that got an answer.
              record: n.checkPassRatio,
              expr: |||
                sum by (%(by)s) (rate(infer_probe_known_answer_checks_total%(pass)s[%(w)s]))
                /
                (sum by (%(by)s) (rate(infer_probe_known_answer_checks_total%(answered)s[%(w)s])) > 0)
              ||| % { by: by, pass: probe('result="pass"'), answered: probe('result=~"pass|fail"'), w: c.accuracyWindow },
            },
          ] + [
            {
              // Successful answers judged valid, over every answer judged
              // (only successful requests are judged: failures are the
              // error ratio's), of workloads with response_format and of
              // workloads with tools.
              record: r.record,
              expr: |||
                sum by (%(by)s) (rate(%(m)s%(valid)s[%(w)s]))
                /
                (sum by (%(by)s) (rate(%(m)s%(sel)s[%(w)s])) > 0)
              ||| % { by: by, m: r.metric, valid: probe('result="valid"'), sel: probe(), w: w },
            }
            for r in [
              { record: n.structuredValidRatio, metric: 'infer_probe_structured_output_checks_total' },
              { record: n.toolCallValidRatio, metric: 'infer_probe_tool_call_checks_total' },
            ]
          ] + [
            {
              // /probe known-answer checks, for scrapes labelled with the
              // target and model they probe (see the README).
              record: n.oneShotAccuracy,
              expr: 'avg by (%s) (avg_over_time(probe_known_answer_success%s[%s]))' % [
                tby,
                p.selector(c.oneShotProbeSelector, std.join(', ', ['%s!=""' % l for l in c.targetLabels])),
                c.accuracyWindow,
              ],
            },
          ],
      },
      {
        name: 'infer-probe-slo.rules',
        rules: [
          {
            // Error SLO: failed requests over requests sent; 0, not
            // nothing, when no failure series exists.
            record: n.errorRatio(win),
            expr: |||
              (
                sum by (%(by)s) (rate(infer_probe_requests_total%(failed)s[%(w)s]))
                or
                0 * sum by (%(by)s) (rate(infer_probe_requests_total%(sent)s[%(w)s]))
              )
              /
              (sum by (%(by)s) (rate(infer_probe_requests_total%(sent)s[%(w)s])) > 0)
            ||| % { by: by, failed: probe('outcome!~"success|dropped|cancelled"'), sent: sent, w: win },
          }
          for win in sloWindows
        ] + [
          {
            // Latency SLO: requests whose TTFT exceeded the threshold, over
            // requests that got a first token. The classic bucket at the
            // threshold is exact; so is a native histogram's, when the
            // threshold is a power of two (0.5, 1, 2).
            record: n.ttftSlowRatio(win),
            // A workload whose slo.ttft is set is judged by the exporter
            // against its own threshold, request by request
            // (infer_probe_slo_requests_total): exact, one threshold in
            // one place. The histogram and slo.ttftThreshold serve the
            // workloads without one.
            expr: |||
              (
                sum by (%(by)s) (rate(infer_probe_slo_requests_total%(missed)s[%(w)s]))
                /
                (sum by (%(by)s) (rate(infer_probe_slo_requests_total%(judged)s[%(w)s])) > 0)
              )
              or
              (
                1 - (
                  sum by (%(by)s) (rate(%(m)s_bucket%(le)s[%(w)s]))
                  /
                  (sum by (%(by)s) (rate(%(m)s_count%(sel)s[%(w)s])) > 0)
                )
              )
              or
              (1 - histogram_fraction(0, %(t)s, sum by (%(by)s) (rate(%(m)s%(sel)s[%(w)s]))))
            ||| % { by: by, m: n.histograms.ttft, le: probe('le="%s"' % threshold), sel: probe(), w: win, t: threshold,
                    missed: probe('slo="ttft",result="missed"'), judged: probe('slo="ttft"') },
          }
          for win in sloWindows
        ] + [
          {
            // TPOT latency SLO: requests whose time per output token
            // exceeded slo.tpotThreshold, over requests observed (those
            // with 2 output tokens or more), as the TTFT one.
            record: n.tpotSlowRatio(win),
            expr: |||
              (
                sum by (%(by)s) (rate(infer_probe_slo_requests_total%(missed)s[%(w)s]))
                /
                (sum by (%(by)s) (rate(infer_probe_slo_requests_total%(judged)s[%(w)s])) > 0)
              )
              or
              (
                1 - (
                  sum by (%(by)s) (rate(%(m)s_bucket%(le)s[%(w)s]))
                  /
                  (sum by (%(by)s) (rate(%(m)s_count%(sel)s[%(w)s])) > 0)
                )
              )
              or
              (1 - histogram_fraction(0, %(t)s, sum by (%(by)s) (rate(%(m)s%(sel)s[%(w)s]))))
            ||| % { by: by, m: n.histograms.tpot, le: probe('le="%s"' % c.slo.tpotThreshold), sel: probe(), w: win, t: c.slo.tpotThreshold,
                    missed: probe('slo="tpot",result="missed"'), judged: probe('slo="tpot"') },
          }
          for win in sloWindows
        ],
      },
      {
        name: 'infer-gpu.rules',
        rules: [
          {
            // Power drawn by the GPUs of each instance, in watts.
            record: n.gpuEnergyRate,
            expr: 'sum by (%s) (rate(infer_gpu_energy_joules_total%s[%s]))' % [gby, p.selector(c.gpuSelector), w],
          },
          {
            // GPU memory of the serving process, or of the GPUs where no
            // serving process is seen.
            record: n.gpuServingMemory,
            expr: |||
              sum by (%(g)s) (infer_gpu_process_memory_used_bytes%(proc)s)
              or
              sum by (%(g)s) (infer_gpu_memory_used_bytes%(sel)s)
            ||| % { g: gby, proc: p.selector(c.gpuSelector, 'process=~"%s"' % c.ranking.servingProcesses), sel: p.selector(c.gpuSelector) },
          },
          {
            // The power of the GPUs of the instance(s) that measure each
            // target: the exporter and NVML come from the same scrape, so
            // a target is joined to its instance's GPUs through the
            // engine scraper's series or the probe's, whichever it has.
            record: n.targetEnergyRate,
            expr: |||
              sum by (%(t)s) (
                %(e)s
                * on (%(g)s) group_right ()
                %(targets)s
              )
            ||| % { t: tby, g: gby, e: n.gpuEnergyRate, targets: targets },
          },
        ] + [
          {
            // The configured price of each GPU of a priced model
            // (_config.gpuHourlyPriceUSD), one rule per model: the GPU's
            // identity series times the price. A GPU of a model not in the
            // map has none.
            record: n.gpuHourlyPrice,
            expr: 'group by (%s, gpu, name) (infer_gpu_info%s) * %s' % [
              gby, p.selector(c.gpuSelector, 'name=' + p.str(model)), p.num(c.gpuHourlyPriceUSD[model]),
            ],
            // The series carry it already; as the rule's label it tells
            // the rules of one name apart (promtool's duplicate check).
            labels: { name: model },
          }
          for model in std.objectFields(c.gpuHourlyPriceUSD)
        ] + [
          {
            // The GPUs' price per hour of each instance whose every GPU is
            // priced: an instance with a GPU of a model not in the map has
            // none, rather than a price that leaves that GPU out.
            record: n.instanceHourlyPrice,
            expr: |||
              sum by (%(g)s) (%(price)s)
              and on (%(g)s)
              (count by (%(g)s) (%(price)s) == count by (%(g)s) (infer_gpu_info%(sel)s))
            ||| % { g: gby, price: n.gpuHourlyPrice, sel: p.selector(c.gpuSelector) },
          },
          {
            record: n.targetHourlyPrice,
            expr: |||
              sum by (%(t)s) (
                %(price)s
                * on (%(g)s) group_right ()
                %(targets)s
              )
            ||| % { t: tby, g: gby, price: n.instanceHourlyPrice, targets: targets },
          },
          {
            record: n.targetServingMemory,
            expr: |||
              sum by (%(t)s) (
                %(m)s
                * on (%(g)s) group_right ()
                group by (%(g)s, %(t)s) (infer_probe_requests_total%(sel)s)
              )
            ||| % { t: tby, g: gby, m: n.gpuServingMemory, sel: probe() },
          },
        ],
      },
      {
        name: 'infer-server.rules',
        rules: [
          {
            record: n.kvCacheUsage,
            expr: 'avg by (%s) (avg_over_time(infer_server_kv_cache_usage_ratio%s[%s]))' % [tby, p.selector(c.serverSelector), w],
          },
          {
            // Prefix-cache hits over lookups, in the engine's unit (tokens
            // for vLLM and SGLang).
            record: n.prefixCacheHitRatio,
            expr: |||
              sum by (%(t)s) (rate(infer_server_prefix_cache_hits_total%(sel)s[%(w)s]))
              /
              (sum by (%(t)s) (rate(infer_server_prefix_cache_queries_total%(sel)s[%(w)s])) > 0)
            ||| % { t: tby, sel: p.selector(c.serverSelector), w: w },
          },
          {
            // Output and prompt tokens the engine counted per second, every
            // client's (infer_server_*_tokens_total: docs/metrics.md gives
            // each engine's source).
            record: n.serverGenerationTokenRate,
            expr: 'sum by (%s) (rate(infer_server_generation_tokens_total%s[%s]))' % [tby, p.selector(c.serverSelector), w],
          },
          {
            record: n.serverPromptTokenRate,
            expr: 'sum by (%s) (rate(infer_server_prompt_tokens_total%s[%s]))' % [tby, p.selector(c.serverSelector), w],
          },
          {
            // Joules per output token: the power of the GPUs serving the
            // target over the tokens the server generated, all its
            // clients' (the probe's are a sample). Prompt tokens are not
            // in the denominator: their energy is charged to the output.
            record: n.energyPerToken,
            expr: '%s\n/\n(%s > 0)\n' % [n.targetEnergyRate, n.serverGenerationTokenRate],
          },
          {
            // US dollars per output token: the GPUs' configured price per
            // second over the server's output tokens per second.
            record: n.costPerToken,
            expr: '%s / 3600\n/\n(%s > 0)\n' % [n.targetHourlyPrice, n.serverGenerationTokenRate],
          },
          {
            // Per good output token: the cost per token over the share of
            // the probe's requests that met every SLO (goodput), so a
            // server that misses its SLOs pays for the tokens nobody could
            // use. The probe's attainment stands for the server's traffic.
            record: n.costPerGoodToken,
            expr: '%s\n/\n(%s > 0)\n' % [n.costPerToken, n.targetGoodputRatio],
          },
        ],
      },
      {
        name: 'infer-ranking.rules',
        local r = c.ranking,
        local ref = r.reference,
        local clamp(e) = 'clamp(%s, 0, %s)' % [e, p.num(r.maxComponent)],
        local q99 = p.num(0.99),
        // One series per measured workload, at value 0: the frame the
        // components are joined onto.
        local zero = '(%s * 0)' % n.requestRate,
        rules: [
          {
            // Accuracy: the continuous workload's known-answer pass ratio,
            // else the /probe checks of its target and model.
            record: n.accuracy,
            expr: |||
              %(cont)s
              or
              (%(zero)s + on (%(t)s) group_left () %(oneshot)s)
            ||| % { cont: n.checkPassRatio, zero: zero, t: tby, oneshot: n.oneShotAccuracy },
          },
          {
            // Latency: the mean of reference/p99 of TTFT and TPOT.
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
            expr: clamp('%s / %s' % [n.outputTokenRate, p.num(ref.outputTokensPerSecond)]),
          },
          {
            record: n.component('memory'),
            expr: clamp('(%s + %s) / on (%s) group_left () (%s > 0)' % [zero, p.num(ref.memoryBytes), tby, n.targetServingMemory]),
          },
          {
            record: n.component('accuracy'),
            expr: clamp('%s / %s' % [n.accuracy, p.num(ref.accuracyRatio)]),
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
    ] + (
      if std.length(c.regression.pinned) == 0 then [] else [{
        name: 'infer-regression-baselines.rules',
        rules: std.flattenArrays([
          [
            {
              record: n.pinnedBaseline('ttft'),
              expr: 'vector(%s)' % p.num(b.ttftSeconds),
              labels: { target: b.target, model: b.model },
            },
            {
              record: n.pinnedBaseline('tpot'),
              expr: 'vector(%s)' % p.num(b.tpotSeconds),
              labels: { target: b.target, model: b.model },
            },
          ]
          for b in c.regression.pinned
        ]),
      }]
    ),
  },
}
