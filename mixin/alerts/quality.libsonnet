// The quality probe's alerts: the perplexity of a target's model over the
// reference text rising above its baseline (a quantised, swapped or broken
// model answers as fast as ever; its perplexity rises), and the score
// going stale. The series are infer_probe_perplexity{target, model, text}
// and infer_probe_perplexity_last_success_timestamp_seconds (probe/quality).
local p = import '../lib/promql.libsonnet';

{
  _config+:: {
    perplexity: {
      // Fire when the perplexity is more than 10% above its baseline ...
      threshold: 1.1,
      // ... which is its value this long ago ('1d', '7d'); null to use
      // pinned baselines only. A model that is deliberately changed fires
      // for as long as the offset: pin its new baseline, or silence it.
      offset: '1d',
      // Pinned baselines, which win over the offset where present, one per
      // target, model and text (the text label of infer_probe_perplexity,
      // the reference text's SHA-256 prefix):
      //   [{ target: 'vllm', model: 'llama', text: '29c164798e0a8ac2', perplexity: 6.2 }]
      pinned: [],
      // The score is taken every quality.interval (5m by default): a rise
      // must hold over a few scores.
      'for': '15m',
      severity: 'warning',
      // No successful score for this long, while the probe is configured.
      staleAfter: '30m',
      staleFor: '5m',
      staleSeverity: 'warning',
    },
  },

  local c = $._config,
  local q = c.perplexity,
  local sel = p.selector(c.probeSelector),
  local by = 'target, model, text',
  local baselineName = 'target_model_text:infer_probe_perplexity:baseline',
  local current = 'max by (%s) (infer_probe_perplexity%s)' % [by, sel],

  prometheusRules+:: {
    groups+: (
      if std.length(q.pinned) == 0 then [] else [{
        name: 'infer-quality-baselines.rules',
        rules: [
          {
            record: baselineName,
            expr: 'vector(%s)' % p.num(b.perplexity),
            labels: { target: b.target, model: b.model, text: b.text },
          }
          for b in q.pinned
        ],
      }]
    ),
  },

  prometheusAlerts+:: {
    local branches =
      (if std.length(q.pinned) > 0 then [|||
         (
           %(cur)s
           / on (%(by)s)
           %(base)s
         )
       ||| % { cur: current, by: by, base: baselineName }] else [])
      + (if q.offset != null then [|||
           (
             %(cur)s
             /
             max by (%(by)s) (infer_probe_perplexity%(sel)s offset %(off)s)
           )
         ||| % { cur: current, by: by, sel: sel, off: q.offset }] else []),
    assert std.length(branches) > 0 : 'perplexity needs an offset or pinned baselines',
    groups+: [
      {
        name: 'infer-quality.alerts',
        rules: [
          {
            alert: 'InferProbePerplexityRise',
            expr: '(\n%s) > %s\n' % [std.join('or\n', branches), p.num(q.threshold)],
            'for': q['for'],
            labels: { severity: q.severity },
            annotations: {
              summary: 'The perplexity of a model over the reference text rose more than %s%% above its baseline.' % p.num(std.round((q.threshold - 1) * 1000) / 10),
              description: 'The perplexity of {{ $labels.target }} ({{ $labels.model }}) over the reference text {{ $labels.text }} is {{ $value | humanizePercentage }} of its baseline (%s) and has been above %s of it for %s: the model answers as before but predicts the same text worse. A quantisation, a swapped or corrupted checkpoint, or a changed tokenizer or runtime does this; compare the server\'s model and version with the baseline\'s.' % [
                std.join(' or ', (if q.offset != null then ['its value %s earlier' % q.offset] else []) + (if std.length(q.pinned) > 0 then ['the pinned value'] else [])),
                p.num(q.threshold),
                q['for'],
              ],
            },
          },
          {
            alert: 'InferProbePerplexityStale',
            expr: 'time() - max by (%s) (infer_probe_perplexity_last_success_timestamp_seconds%s) > %s\n' % [by, sel, p.num(p.seconds(q.staleAfter))],
            'for': q.staleFor,
            labels: { severity: q.staleSeverity },
            annotations: {
              summary: 'The perplexity of a model has not been scored for a long time.',
              description: 'The last successful perplexity score of {{ $labels.target }} ({{ $labels.model }}) is {{ $value | humanizeDuration }} old, more than %s: its quality is not watched. infer_probe_perplexity_failures_total{target="{{ $labels.target }}"} says why the scores fail.' % q.staleAfter,
            },
          },
        ],
      },
    ],
  },
}
