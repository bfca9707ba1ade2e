// The mixin's knobs. Override any of them with
//   (import 'mixin.libsonnet') + { _config+:: { rateWindow: '2m' } }
// Every rule, alert and dashboard is generated from these values, so the
// names of recording rules follow the windows chosen here.
{
  _config+:: {
    // Selectors of the series each part reads. The exporter is one scrape
    // (a sidecar beside the inference server) that exposes infer_probe_*,
    // infer_server_* and infer_gpu_*; /probe results come from their own
    // scrape job (deploy/prometheus/probe-scrape-config.yml).
    exporterSelector: 'job="infer-exporter"',
    probeSelector: self.exporterSelector,
    serverSelector: self.exporterSelector,
    gpuSelector: self.exporterSelector,
    oneShotProbeSelector: 'job="infer-probe"',

    // The labels that identify one measured stream. Recording rules keep
    // them and drop the rest (instance, pod), so that a series outlives a
    // restart of the pod and a 1-day-old baseline still matches it.
    workloadLabels: ['target', 'model', 'workload'],
    targetLabels: ['target', 'model'],

    // Labels that join a target's probe series to the GPUs it runs on.
    // There is no label linking a target to a GPU: the exporter runs beside
    // the inference server (a sidecar in its pod, or on its node), so the
    // GPUs it reads through NVML are the server's, and both come from the
    // same scrape: the same instance. Every GPU of the instance is counted.
    gpuJoinLabels: ['instance'],

    // Window of rates and quantiles in recording rules (and in the
    // regression alert). Long enough to hold 100+ requests at the
    // workloads' rate.
    rateWindow: '5m',
    // Window of the accuracy ratio: known-answer checks are rare.
    accuracyWindow: '1h',

    // Quantiles recorded for TTFT, TPOT, ITL and end-to-end latency.
    quantiles: [0.5, 0.95, 0.99],

    // p99 regression alerts (TTFT and TPOT).
    regression: {
      quantile: 0.99,
      // Fire when p99 now is more than 5% above the baseline ...
      threshold: 1.05,
      // ... which is the same window this long ago: '1d' (yesterday, same
      // hour) or '7d' (same hour last week: weekly seasonality); null to
      // use pinned baselines only.
      offset: '1d',
      // Pinned baselines, which win over the offset where present:
      //   [{ target: 'vllm', model: 'llama', ttftSeconds: 0.25, tpotSeconds: 0.02 }]
      pinned: [],
      // Minimum traffic: no verdict on a p99 from fewer requests than this
      // in the window, now and in the baseline window.
      minRequestsInWindow: 100,
      'for': '15m',
      severity: 'warning',
    },

    // Service level objectives over the continuous probe's requests.
    slo: {
      // Error SLO: the fraction of sent requests that succeed (dropped
      // arrivals are the client's, not the server's, and are excluded).
      errorObjective: 0.99,
      // Latency SLO: the fraction of requests whose TTFT is at most the
      // threshold. It must be a bucket boundary of
      // infer_probe_time_to_first_token_seconds (probe/live/metrics.go:
      // ..., 0.3, 0.5, 0.75, 1, 1.5, 2, ...); with native histograms any
      // power of two is exact too.
      latencyObjective: 0.99,
      ttftThreshold: '0.5',
      // TPOT latency SLO: the fraction of requests (with 2 output tokens or
      // more) whose time per output token is at most this, against
      // latencyObjective too. A bucket boundary of
      // infer_probe_time_per_output_token_seconds (..., 0.05, 0.075, 0.1,
      // 0.15, ...); with native histograms the fraction is interpolated
      // unless it is a power of two.
      tpotThreshold: '0.1',
      // Multi-window, multi-burn-rate alerts (the SRE workbook, chapter 5):
      // fire when both windows burn the budget faster than factor.
      burnRates: [
        { long: '1h', short: '5m', factor: 14.4, severity: 'critical', 'for': '2m' },
        { long: '6h', short: '30m', factor: 6, severity: 'critical', 'for': '15m' },
        { long: '1d', short: '2h', factor: 3, severity: 'warning', 'for': '1h' },
        { long: '3d', short: '6h', factor: 1, severity: 'warning', 'for': '3h' },
      ],
    },

    // Every alert's runbook_url annotation: this pattern with the alert's
    // name in lower case (the anchor of its section in docs/runbooks.md),
    // as kubernetes-mixin's runbookURLPattern. Point it at your own copy
    // (a wiki, a fork); null or '' leaves the annotation out.
    runbookURLPattern: 'https://github.com/infer-exporter/infer_exporter/blob/main/docs/runbooks.md#%s',

    // Other alerts.
    probeFailingFor: '5m',
    exporterDownFor: '5m',
    // The exporter cannot read an engine's /metrics (infer_server_up 0),
    // this long: longer than most model loads, which take the server's
    // metrics down with it.
    serverMetricsDownFor: '10m',
    // The last configuration reload failed (the previous one runs on).
    configReloadFailedFor: '5m',
    // A target not ready (infer_probe_target_ready 0: its workloads send
    // nothing) this long: longer than a model load should take.
    targetNotReadyFor: '15m',
    // Known-answer checks: fire when the fraction of answered checks that
    // matched, over accuracyWindow, is under this, with at least
    // knownAnswerMinChecks answered in the window, for the duration.
    knownAnswerMinPassRatio: 0.9,
    knownAnswerMinChecks: 5,
    knownAnswerFailingFor: '15m',
    // Checked answers of workloads with response_format or tools
    // (infer_probe_structured_output_checks_total,
    // infer_probe_tool_call_checks_total; docs/kinds.md): fire when the
    // fraction judged valid over rateWindow is under minValidRatio, with at
    // least minChecks judged in the window (two invalid answers of a
    // handful are no verdict), for the duration. One alert per counter.
    answerChecks: {
      minValidRatio: 0.95,
      minChecks: 20,
      'for': '10m',
      severity: 'warning',
    },
    // OTLP push (--otlp.endpoint): fire when more than this fraction of
    // pushes failed over the window, for the duration.
    otlpFailureRatio: 0.1,
    otlpFailureWindow: '15m',
    otlpFailingFor: '15m',
    measurementDegradedFor: '5m',
    // Stalled requests: in flight and nothing received for longer than
    // their workload's stall_threshold (the exporter's configuration,
    // default 30s), with at least one stalled this long.
    requestsStalledFor: '2m',
    // Rate limited: the fraction of requests sent that were answered 429
    // (infer_probe_http_errors_total{code="429"}) over rateLimitedWindow,
    // above rateLimitedRatio for rateLimitedFor. 429s count against the
    // error SLO too (they are failed requests); this warning says why.
    rateLimitedRatio: 0.05,
    rateLimitedWindow: '10m',
    rateLimitedFor: '10m',
    // A workload in state failed (its prompts could not be built, so it
    // sends nothing) this long.
    workloadFailedFor: '5m',
    kvCacheNearFullRatio: 0.95,
    kvCacheNearFullFor: '10m',
    // Waiting queue growing: at least this many waiting and rising over the
    // window, for the duration.
    waitingQueueMin: 10,
    waitingQueueWindow: '10m',
    waitingQueueFor: '10m',
    gpuThrottleFor: '5m',
    // Clock event reasons that mean thermal or power trouble. sw_power_cap
    // is left out: a GPU at full load sits at its power limit by design
    // (the H200 fixture shows it under a matmul); see gpuPowerCapFor.
    gpuThermalReasons: 'hw_thermal_slowdown|sw_thermal_slowdown',
    gpuPowerReasons: 'hw_power_brake_slowdown|hw_slowdown',
    // sw_power_cap held this long is reported, as information.
    gpuPowerCapFor: '1h',
    xidWindow: '10m',
    // XIDs that mean the GPU needs attention now: 48 double-bit ECC, 74
    // NVLink, 79 fallen off the bus, 94/95 contained/uncontained ECC, 119/120
    // GSP.
    criticalXids: '48|74|79|94|95|119|120',

    // The price of one GPU for an hour, in US dollars, by the GPU's model
    // as NVML names it (infer_gpu_info's name label, exactly), for the cost
    // per output token. The defaults are illustrative on-demand rental
    // prices, not a quote: set your own (a contract, a reservation, the
    // hardware's amortised cost and power). A GPU whose model is not here
    // has no price, and an instance with such a GPU no cost figures; {}
    // prices none. One recording rule per model, so a name holds any
    // character (it is escaped into the rule's label matcher).
    gpuHourlyPriceUSD: {
      'NVIDIA H100 80GB HBM3': 2.5,
      'NVIDIA H200': 3.5,
      'NVIDIA A100-SXM4-80GB': 1.5,
      'NVIDIA L4': 0.8,
    },

    // The ranking score: a weighted sum of four components, each normalised
    // against a reference value to 0..maxComponent (1 = as good as the
    // reference). A component that cannot be measured (no GPU metrics, no
    // known-answer checks) counts 0, so a score is only comparable between
    // targets measured the same way; the leaderboard shows every raw value.
    ranking: {
      weights: { latency: 0.4, throughput: 0.3, memory: 0.2, accuracy: 0.1 },
      reference: {
        // Latency: the mean of reference/p99 for TTFT and TPOT.
        ttftSeconds: 0.5,
        tpotSeconds: 0.05,
        // Throughput: output tokens per second of the workload.
        outputTokensPerSecond: 100,
        // Memory: reference/used, from the serving process's GPU memory.
        memoryBytes: 80e9,
        // Accuracy: the known-answer pass ratio over the reference.
        accuracyRatio: 1,
      },
      maxComponent: 1,
      // Process names (NVML, /proc/<pid>/comm) of inference servers. Where
      // none is found (a sidecar does not see the server's processes without
      // shareProcessNamespace), the GPUs' used memory stands in.
      servingProcesses: 'vllm.*|VLLM.*|sglang.*|python.*|text-generation.*|llama-server|ollama.*|tritonserver|trtllm.*',
    },

    // Dashboards.
    dashboardTags: ['infer-exporter'],
    dashboardTimezone: 'utc',
    dashboardRefresh: '30s',
    dashboardUIDPrefix: 'infer-',
    // A template variable over this label on every dashboard, matched by
    // every query, for a Prometheus (or a Thanos or Mimir in front of
    // several) that holds more than one cluster, told apart by an external
    // label. "All" matches series without the label too, so a single
    // cluster needs nothing. null: no variable.
    dashboardClusterLabel: 'cluster',
  },
}
