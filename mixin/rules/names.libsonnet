// Names of the recording rules, built from the configuration (their windows
// are part of their names), so that rules, alerts and dashboards agree.
// Names follow level:metric:operations.
local p = import '../lib/promql.libsonnet';

{
  new(c):: {
    local w = c.rateWindow,
    local level = std.join('_', c.workloadLabels),
    local tlevel = std.join('_', c.targetLabels),
    local glevel = std.join('_', c.gpuJoinLabels),

    histograms:: {
      ttft: 'infer_probe_time_to_first_token_seconds',
      tpot: 'infer_probe_time_per_output_token_seconds',
      itl: 'infer_probe_inter_token_latency_seconds',
      e2e: 'infer_probe_request_duration_seconds',
    },

    // Quantiles of a histogram, with a quantile label.
    quantile(h):: level + '_quantile:' + self.histograms[h] + ':histogram_quantile_rate' + w,

    requestRate: level + ':infer_probe_requests:rate' + w,
    outputTokenRate: level + ':infer_probe_completion_tokens:rate' + w,
    promptTokenRate: level + ':infer_probe_prompt_tokens:rate' + w,
    // The client's prefix-cache hit ratio: the cached prompt tokens the
    // answers' usage reports over the prompt tokens.
    cachedPromptRatio: level + ':infer_probe_cached_prompt_tokens:ratio_rate' + w,
    errorRatio(window):: level + ':infer_probe_requests:error_ratio_rate' + window,
    goodputRatio: level + ':infer_probe_goodput_requests:ratio_rate' + w,
    ttftSlowRatio(window):: level + ':infer_probe_time_to_first_token_seconds:slow_ratio_rate' + window,
    tpotSlowRatio(window):: level + ':infer_probe_time_per_output_token_seconds:slow_ratio_rate' + window,
    ttftJitter: level + ':infer_probe_time_to_first_token_seconds:coefficient_of_variation_rate' + w,
    checkPassRatio: level + ':infer_probe_known_answer_checks:pass_ratio_rate' + c.accuracyWindow,
    // Answers judged valid over answers judged, of workloads with
    // response_format, and of workloads with tools.
    structuredValidRatio: level + ':infer_probe_structured_output_checks:valid_ratio_rate' + w,
    toolCallValidRatio: level + ':infer_probe_tool_call_checks:valid_ratio_rate' + w,
    oneShotAccuracy: tlevel + ':probe_known_answer_success:avg_over_time' + c.accuracyWindow,

    gpuEnergyRate: glevel + ':infer_gpu_energy_joules:rate' + w,
    gpuServingMemory: glevel + ':infer_gpu_serving_memory_used_bytes:sum',
    targetEnergyRate: tlevel + ':infer_gpu_energy_joules:rate' + w,
    // The price per hour of each GPU whose model _config.gpuHourlyPriceUSD
    // prices, per instance where every GPU is priced, and per target.
    gpuHourlyPrice: glevel + '_gpu_name:infer_gpu_hourly_price_usd:config',
    instanceHourlyPrice: glevel + ':infer_gpu_hourly_price_usd:sum',
    targetHourlyPrice: tlevel + ':infer_gpu_hourly_price_usd:sum',
    targetServingMemory: tlevel + ':infer_gpu_serving_memory_used_bytes:sum',

    kvCacheUsage: tlevel + ':infer_server_kv_cache_usage_ratio:avg_over_time' + w,
    prefixCacheHitRatio: tlevel + ':infer_server_prefix_cache_hits:ratio_rate' + w,
    // The server's own tokens (every client's), and what each output token
    // cost in energy and money: joules and US dollars per token (base
    // units; the dashboards show dollars per million).
    serverGenerationTokenRate: tlevel + ':infer_server_generation_tokens:rate' + w,
    serverPromptTokenRate: tlevel + ':infer_server_prompt_tokens:rate' + w,
    targetGoodputRatio: tlevel + ':infer_probe_goodput_requests:ratio_rate' + w,
    // The client overhead's quantile per target and model (a quantile
    // label): the client's TTFT less the engine's own queue and TTFT.
    targetClientOverheadQuantile: tlevel + '_quantile:infer_probe_client_overhead_seconds:histogram_quantile_rate' + w,
    energyPerToken: tlevel + ':infer_gpu_energy_joules_per_generation_token:ratio_rate' + w,
    costPerToken: tlevel + ':infer_gpu_cost_usd_per_generation_token:ratio_rate' + w,
    costPerGoodToken: tlevel + ':infer_gpu_cost_usd_per_good_generation_token:ratio_rate' + w,

    pinnedBaseline(h):: tlevel + ':' + self.histograms[h] + ':' + p.quantileName(c.regression.quantile) + '_baseline',

    accuracy: level + ':infer_ranking_accuracy:ratio',
    component(name):: level + ':infer_ranking_' + name + '_score:ratio',
    score: level + ':infer_ranking_score:weighted_sum',
  },
}
