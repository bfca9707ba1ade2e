// Alerts, in mixtool's conventions: CamelCase names, a severity label, a
// summary and a templated description.
local p = import '../lib/promql.libsonnet';
local names = import '../rules/names.libsonnet';

{
  local c = $._config,
  local n = names.new(c),
  local wl = p.labelList(c.workloadLabels),
  local tl = p.labelList(c.targetLabels),
  local reg = c.regression,
  local qn = p.quantileName(reg.quantile),
  local minRate = reg.minRequestsInWindow / p.seconds(c.rateWindow),
  local stream = '{{ $labels.target }} ({{ $labels.model }}), workload {{ $labels.workload }}',

  // p99 now over its baseline, for the histogram h. Pinned baselines win
  // over the offset one where both exist (the two sides of "or" carry the
  // same labels). The offset baseline needs the minimum traffic in the
  // baseline window too, and the alert needs it now.
  local regressionExpr(h) =
    local cur = '%s{quantile="%s"}' % [n.quantile(h), p.num(reg.quantile)];
    local pinned = |||
      (
        %(cur)s
        / on (%(tl)s) group_left ()
        %(base)s
      )
    ||| % { cur: cur, tl: tl, base: n.pinnedBaseline(h) };
    local offset = |||
      (
        %(cur)s
        /
        %(cur)s offset %(off)s
        and on (%(wl)s)
        %(rate)s offset %(off)s >= %(min)s
      )
    ||| % { cur: cur, off: reg.offset, wl: wl, rate: n.requestRate, min: p.num(minRate) };
    local branches =
      (if std.length(reg.pinned) > 0 then [pinned] else [])
      + (if reg.offset != null then [offset] else []);
    assert std.length(branches) > 0 : 'regression needs an offset or pinned baselines';
    |||
      (
      %(b)s) > %(th)s
      and on (%(wl)s)
      %(rate)s >= %(min)s
    ||| % { b: std.join('or\n', branches), th: p.num(reg.threshold), wl: wl, rate: n.requestRate, min: p.num(minRate) },

  local regressionAlert(name, h, what) = {
    alert: name,
    expr: regressionExpr(h),
    'for': reg['for'],
    labels: { severity: reg.severity },
    annotations: {
      summary: '%s %s regressed more than %s%% against its baseline.' % [qn, what, p.num(std.round((reg.threshold - 1) * 1000) / 10)],
      description: '%s %s of %s is {{ $value | humanizePercentage }} of its baseline (%s).' % [
        qn,
        what,
        stream,
        std.join(' or ', (if reg.offset != null then ['the same window %s earlier' % reg.offset] else []) + (if std.length(reg.pinned) > 0 then ['the pinned value'] else [])),
      ],
    },
  },

  local burnAlerts(name, what, ratio, objective) = [
    {
      alert: name,
      expr: |||
        %(long)s > (%(f)s * (1 - %(o)s))
        and
        %(short)s > (%(f)s * (1 - %(o)s))
      ||| % { long: ratio(b.long), short: ratio(b.short), f: p.num(b.factor), o: p.num(objective) },
      'for': b['for'],
      labels: { severity: b.severity, long: b.long, short: b.short },
      annotations: {
        summary: '%s is burning its error budget %sx too fast.' % [what, p.num(b.factor)],
        description: '%s of %s is {{ $value | humanizePercentage }} over the last %s, against an objective of %s%%: the budget burns more than %sx too fast over both %s and %s.' % [
          what,
          stream,
          b.long,
          p.num(objective * 100),
          p.num(b.factor),
          b.long,
          b.short,
        ],
      },
    }
    for b in c.slo.burnRates
  ],

  prometheusAlerts+:: {
    groups+: [
      {
        name: 'infer-probe.alerts',
        rules: [
          regressionAlert('InferProbeTTFTRegression', 'ttft', 'time to first token'),
          regressionAlert('InferProbeTPOTRegression', 'tpot', 'time per output token'),
        ] + burnAlerts('InferProbeErrorBudgetBurn', 'The error ratio', n.errorRatio, c.slo.errorObjective)
        + burnAlerts('InferProbeTTFTBudgetBurn', "The ratio of requests over the TTFT threshold (the workload's slo.ttft, else %ss)" % c.slo.ttftThreshold, n.ttftSlowRatio, c.slo.latencyObjective)
        + burnAlerts('InferProbeTPOTBudgetBurn', "The ratio of requests over the TPOT threshold (the workload's slo.tpot, else %ss)" % c.slo.tpotThreshold, n.tpotSlowRatio, c.slo.latencyObjective)
        + [
          {
            alert: 'InferProbeFailing',
            expr: 'probe_success%s == 0' % p.selector(c.oneShotProbeSelector),
            'for': c.probeFailingFor,
            labels: { severity: 'warning' },
            annotations: {
              summary: 'A /probe of an inference endpoint is failing.',
              description: 'The /probe of {{ $labels.instance }} (job {{ $labels.job }}) has failed for %s; probe_failed_due_to says why.' % c.probeFailingFor,
            },
          },
          {
            alert: 'InferExporterDown',
            expr: 'up%s == 0' % p.selector(c.exporterSelector),
            'for': c.exporterDownFor,
            labels: { severity: 'warning' },
            annotations: {
              summary: 'infer_exporter cannot be scraped.',
              description: 'Prometheus has failed to scrape infer_exporter at {{ $labels.instance }} (job {{ $labels.job }}) for %s: no probe, server or GPU metrics come from it.' % c.exporterDownFor,
            },
          },
          {
            // The exporter's own configuration: a reload (SIGHUP, POST
            // /-/reload) that failed leaves the previous configuration
            // running, so nothing else says the edit did not take.
            alert: 'InferExporterConfigReloadFailed',
            expr: 'infer_exporter_config_last_reload_successful%s == 0' % p.selector(c.exporterSelector),
            'for': c.configReloadFailedFor,
            labels: { severity: 'warning' },
            annotations: {
              summary: 'infer_exporter failed to reload its configuration.',
              description: 'The last configuration reload of infer_exporter at {{ $labels.instance }} (job {{ $labels.job }}) failed, %s ago or more: it runs on with the previous configuration, and the edit has not taken. The exporter\'s log (configuration not loaded) says why; `infer_exporter --config.check --config.file=...` checks a file before it is loaded.' % c.configReloadFailedFor,
            },
          },
          {
            // Not the server's fault: the OTLP receiver (a collector, a
            // vendor's endpoint) refuses or cannot be reached. /metrics is
            // unaffected.
            alert: 'InferExporterOTLPExportFailing',
            expr: |||
              rate(infer_exporter_otlp_export_failures_total%(sel)s[%(w)s])
              /
              (rate(infer_exporter_otlp_exports_total%(sel)s[%(w)s]) > 0)
              > %(ratio)s
            ||| % { sel: p.selector(c.exporterSelector), w: c.otlpFailureWindow, ratio: p.num(c.otlpFailureRatio) },
            'for': c.otlpFailingFor,
            labels: { severity: 'warning' },
            annotations: {
              summary: 'infer_exporter is failing to push OTLP metrics.',
              description: '{{ $value | humanizePercentage }} of the OTLP pushes of infer_exporter at {{ $labels.instance }} over the last %s failed after their retries, for %s: the OTLP backend misses the probe\'s measurements (the next successful push carries the totals; Prometheus\'s /metrics is unaffected). The exporter\'s log says what the endpoint answered.' % [c.otlpFailureWindow, c.otlpFailingFor],
            },
          },
          {
            // Readiness gates the workloads: not ready, they send nothing
            // and so burn no budget. A rollout is minutes; this is longer.
            alert: 'InferProbeTargetNotReady',
            expr: 'infer_probe_target_ready%s == 0' % p.selector(c.probeSelector),
            'for': c.targetNotReadyFor,
            labels: { severity: 'warning' },
            annotations: {
              summary: 'An inference server has not been ready for a long time; its workloads measure nothing.',
              description: 'Target {{ $labels.target }} seen from {{ $labels.instance }} has not been ready for %s: its health endpoint does not answer 200 (still loading its model, crash-looping, or stuck), so its workloads skip every arrival (infer_probe_dropped_requests_total{reason="target_not_ready"}) and no latency, error or SLO figure is measured.' % c.targetNotReadyFor,
            },
          },
          {
            // The model answers, fast and without errors, but wrongly.
            alert: 'InferProbeKnownAnswerChecksFailing',
            expr: |||
              %(ratio)s < %(min)s
              and on (%(wl)s)
              sum by (%(wl)s) (increase(infer_probe_known_answer_checks_total%(answered)s[%(w)s])) >= %(checks)s
            ||| % { ratio: n.checkPassRatio, min: p.num(c.knownAnswerMinPassRatio), wl: wl, answered: p.selector(c.probeSelector, 'result=~"pass|fail"'), w: c.accuracyWindow, checks: p.num(c.knownAnswerMinChecks) },
            'for': c.knownAnswerFailingFor,
            labels: { severity: 'warning' },
            annotations: {
              summary: 'Known-answer checks of an inference server are failing.',
              description: 'Only {{ $value | humanizePercentage }} of the known-answer checks of %s answered over the last %s matched their expected answer (under %s%%, with %s answered at least), for %s: the server answers, but not what it should. A swapped, quantised or broken model, a changed chat template or tokenizer does this; infer_probe_known_answer_checks_total{result} has the counts.' % [stream, c.accuracyWindow, p.num(c.knownAnswerMinPassRatio * 100), p.num(c.knownAnswerMinChecks), c.knownAnswerFailingFor],
            },
          },
        ] + [
          // The server answers in time but not in the shape asked for:
          // broken or schema-refused JSON, calls to functions not offered.
          // A ratio of a handful of answers is noise: minChecks judged in
          // the window at least.
          {
            alert: a.alert,
            expr: |||
              %(ratio)s < %(min)s
              and on (%(wl)s)
              sum by (%(wl)s) (increase(%(m)s%(sel)s[%(w)s])) >= %(checks)s
            ||| % { ratio: a.ratio, min: p.num(c.answerChecks.minValidRatio), wl: wl, m: a.metric, sel: p.selector(c.probeSelector), w: c.rateWindow, checks: p.num(c.answerChecks.minChecks) },
            'for': c.answerChecks['for'],
            labels: { severity: c.answerChecks.severity },
            annotations: {
              summary: a.summary,
              description: 'Only {{ $value | humanizePercentage }} of the %s of %s over the last %s were valid (under %s%%, with %s judged at least), for %s: %s %s{result} says how the others failed.' % [a.what, stream, c.rateWindow, p.num(c.answerChecks.minValidRatio * 100), p.num(c.answerChecks.minChecks), c.answerChecks['for'], a.why, a.metric],
            },
          }
          for a in [
            {
              alert: 'InferProbeStructuredOutputInvalid',
              ratio: n.structuredValidRatio,
              metric: 'infer_probe_structured_output_checks_total',
              summary: 'Answers of an inference server do not follow their response format.',
              what: 'successful answers asked for JSON (response_format)',
              why: 'the server answers, but with JSON that does not parse (truncated, fenced, text around it) or that its schema refuses. A server that ignores response_format (no guided decoding, an unsupported backend), a changed chat template or model does this;',
            },
            {
              alert: 'InferProbeToolCallsInvalid',
              ratio: n.toolCallValidRatio,
              metric: 'infer_probe_tool_call_checks_total',
              summary: 'Tool calls of an inference server are not valid.',
              what: 'successful answers offered tools',
              why: 'the server answers, but calls no function, one not offered, or with arguments that do not parse or that the parameters refuse. A tool-call parser not enabled or wrong for the model (vLLM\'s --tool-call-parser), a changed chat template or model does this;',
            },
          ]
        ] + [
          {
            alert: 'InferProbeMeasurementDegraded',
            expr: 'max by (%s) (infer_probe_measurement_degraded%s) == 1' % [wl, p.selector(c.probeSelector)],
            'for': c.measurementDegradedFor,
            labels: { severity: 'warning' },
            annotations: {
              summary: 'The probe client is saturated: its latencies include its own delay.',
              description: 'The client measuring %s is falling behind its schedule or is CPU-saturated; its latency figures are not the server alone. Give the exporter more CPU or lower the workload rate.' % stream,
            },
          },
          {
            alert: 'InferProbeRequestsStalled',
            expr: 'max by (%s) (infer_probe_stalled_requests%s) > 0' % [wl, p.selector(c.probeSelector)],
            'for': c.requestsStalledFor,
            labels: { severity: 'warning' },
            annotations: {
              summary: 'Requests to an inference server have received nothing for longer than their stall threshold.',
              description: '{{ $value }} requests of %s are in flight and have received nothing (no first token yet, or no event since the last) for longer than the workload\'s stall_threshold, and stalled requests have been seen for %s. Look for them in the server\'s logs: the exporter sends X-Request-Id {{ $labels.workload }}-<seq>; infer_probe_oldest_request_age_seconds says how long the oldest has been in flight.' % [stream, c.requestsStalledFor],
            },
          },
          {
            // 429s apart from the other errors: the server (or its
            // gateway) is shedding load, not failing. They stay in the
            // error ratio (a request rate limited is a request failed), so
            // the budget burns too; this warning names the cause.
            alert: 'InferProbeRateLimited',
            expr: |||
              sum by (%(wl)s) (rate(infer_probe_http_errors_total%(limited)s[%(w)s]))
              /
              (sum by (%(wl)s) (rate(infer_probe_requests_total%(sent)s[%(w)s])) > 0)
              > %(ratio)s
            ||| % { wl: wl, limited: p.selector(c.probeSelector, 'code="429"'), sent: p.selector(c.probeSelector, 'outcome!="dropped"'), w: c.rateLimitedWindow, ratio: p.num(c.rateLimitedRatio) },
            'for': c.rateLimitedFor,
            labels: { severity: 'warning' },
            annotations: {
              summary: 'An inference server is rate limiting the probe (HTTP 429).',
              description: '{{ $value | humanizePercentage }} of the requests sent to %s over the last %s were answered 429 Too Many Requests, for %s: the server or its gateway is shedding load (a rate limit or a full queue), not failing. infer_probe_http_errors_total{code} has the other codes.' % [stream, c.rateLimitedWindow, c.rateLimitedFor],
            },
          },
          {
            alert: 'InferProbeWorkloadFailed',
            expr: 'max by (%s) (infer_probe_workload_state%s) == 1' % [wl, p.selector(c.probeSelector, 'state="failed"')],
            'for': c.workloadFailedFor,
            labels: { severity: 'warning' },
            annotations: {
              summary: 'A probe workload failed to start and measures nothing.',
              description: 'Workload {{ $labels.workload }} of {{ $labels.target }} ({{ $labels.model }}) has been in state failed for %s: its prompts could not be built (calibrated against the server), so it sends no requests and measures nothing. The exporter\'s log (workload not started) and its landing page say why; fix the cause and reload the configuration.' % c.workloadFailedFor,
            },
          },
        ],
      },
      {
        name: 'infer-server.alerts',
        rules: [
          {
            // The exporter reads the engine's /metrics in the background:
            // when that fails, infer_server_* (KV cache, queue) are gone,
            // and so are the alerts on them.
            alert: 'InferServerMetricsDown',
            expr: 'infer_server_up%s == 0' % p.selector(c.serverSelector),
            'for': c.serverMetricsDownFor,
            labels: { severity: 'warning' },
            annotations: {
              summary: 'infer_exporter cannot read an inference server\'s own metrics.',
              description: 'infer_exporter at {{ $labels.instance }} has failed to read the metrics of target {{ $labels.target }} (engine {{ $labels.engine }}) for %s: the server is down or still loading, its metrics URL is wrong, or its scrape is refused (the exporter\'s log says which). Its infer_server_* series, and the alerts on them, are missing meanwhile.' % c.serverMetricsDownFor,
            },
          },
          {
            alert: 'InferServerKVCacheNearFull',
            expr: 'max by (%s) (infer_server_kv_cache_usage_ratio%s) > %s' % [tl, p.selector(c.serverSelector), p.num(c.kvCacheNearFullRatio)],
            'for': c.kvCacheNearFullFor,
            labels: { severity: 'warning' },
            annotations: {
              summary: 'The KV cache of an inference server is nearly full.',
              description: 'The KV cache of {{ $labels.target }} ({{ $labels.model }}) is {{ $value | humanizePercentage }} full: new requests wait and running ones may be preempted.',
            },
          },
          {
            alert: 'InferServerWaitingQueueGrowing',
            expr: |||
              max by (%(tl)s) (infer_server_requests_waiting%(sel)s) >= %(min)s
              and
              max by (%(tl)s) (deriv(infer_server_requests_waiting%(sel)s[%(w)s])) > 0
            ||| % { tl: tl, sel: p.selector(c.serverSelector), min: p.num(c.waitingQueueMin), w: c.waitingQueueWindow },
            'for': c.waitingQueueFor,
            labels: { severity: 'warning' },
            annotations: {
              summary: 'Requests are piling up in an inference server queue.',
              description: '{{ $value }} requests wait in {{ $labels.target }} ({{ $labels.model }}), and the queue has been growing for %s: the server takes more than it serves.' % c.waitingQueueFor,
            },
          },
        ],
      },
      {
        name: 'infer-gpu.alerts',
        local gpu = '{{ $labels.gpu }} ({{ $labels.name }}) on {{ $labels.instance }}',
        rules: [
          {
            alert: 'InferGPUThermalThrottling',
            expr: 'max by (instance, gpu, uuid, name, reason) (infer_gpu_clock_event_reason_active%s) == 1' % p.selector(c.gpuSelector, 'reason=~"%s"' % c.gpuThermalReasons),
            'for': c.gpuThrottleFor,
            labels: { severity: 'warning' },
            annotations: {
              summary: 'A GPU is slowing its clocks to cool down.',
              description: 'GPU %s has been throttled for %s by {{ $labels.reason }}: latency rises while it lasts. Check cooling and ambient temperature.' % [gpu, c.gpuThrottleFor],
            },
          },
          {
            alert: 'InferGPUPowerThrottling',
            expr: 'max by (instance, gpu, uuid, name, reason) (infer_gpu_clock_event_reason_active%s) == 1' % p.selector(c.gpuSelector, 'reason=~"%s"' % c.gpuPowerReasons),
            'for': c.gpuThrottleFor,
            labels: { severity: 'warning' },
            annotations: {
              summary: 'A GPU is slowed by a power brake or a hardware slowdown.',
              description: 'GPU %s has been throttled for %s by {{ $labels.reason }} (an external power brake or a hardware slowdown, not its own power limit). Check the power supply.' % [gpu, c.gpuThrottleFor],
            },
          },
          {
            alert: 'InferGPUPowerCapped',
            expr: 'max by (instance, gpu, uuid, name) (infer_gpu_clock_event_reason_active%s) == 1' % p.selector(c.gpuSelector, 'reason="sw_power_cap"'),
            'for': c.gpuPowerCapFor,
            labels: { severity: 'info' },
            annotations: {
              summary: 'A GPU has run at its power limit for a long time.',
              description: 'GPU %s has held its clocks down to stay within its power limit for %s. Normal at full load; a higher limit (nvidia-smi -pl) would buy speed.' % [gpu, c.gpuPowerCapFor],
            },
          },
        ] + [
          {
            alert: a.name,
            // A new XID series has a count already: it counts too.
            expr: |||
              (
                infer_gpu_xid_errors_total%(sel)s - infer_gpu_xid_errors_total%(sel)s offset %(w)s > 0
              )
              or
              (
                infer_gpu_xid_errors_total%(sel)s unless infer_gpu_xid_errors_total%(sel)s offset %(w)s
              )
            ||| % { sel: p.selector(c.gpuSelector, 'xid%s"%s"' % [a.op, c.criticalXids]), w: c.xidWindow },
            labels: { severity: a.severity },
            annotations: {
              summary: a.summary,
              description: 'GPU %s reported XID {{ $labels.xid }} in the last %s. %s' % [gpu, c.xidWindow, a.more],
            },
          }
          for a in [
            {
              name: 'InferGPUXIDErrors',
              op: '!~',
              severity: 'warning',
              summary: 'A GPU reported an XID error.',
              more: 'See NVIDIA\'s XID catalogue; an application XID (13, 31, 43) is often the inference server\'s own fault.',
            },
            {
              name: 'InferGPUCriticalXIDErrors',
              op: '=~',
              severity: 'critical',
              summary: 'A GPU reported an XID error that needs attention now.',
              more: 'This XID (ECC, NVLink, GSP or fallen off the bus) usually needs a GPU reset or a drain of the node.',
            },
          ]
        ],
      },
    ],
  },
}
