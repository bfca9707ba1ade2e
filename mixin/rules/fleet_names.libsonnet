// Names of the fleet view's recording rules (rules/fleet.libsonnet), built
// from the configuration like names.libsonnet, so that rules, dashboard and
// tests agree. Level: the fleet's labels (model, engine).
local names = import 'names.libsonnet';

{
  new(c):: {
    local w = c.rateWindow,
    local f = c.fleet,
    local level = std.join('_', f.labels),
    local base = names.new(c),

    // One series per sidecar's target, at 1, with its engine.
    engine: std.join('_', f.engineJoinLabels + ['engine']) + ':infer_server_info:group',
    // One series per sidecar (instance) and the model and engine it measures.
    instanceModelEngine: std.join('_', c.gpuJoinLabels + f.labels) + ':infer_probe_requests:group',

    quantile(h):: level + '_quantile:' + base.histograms[h] + ':histogram_quantile_rate' + w,
    requestRate: level + ':infer_probe_requests:rate' + w,
    outputTokenRate: level + ':infer_probe_completion_tokens:rate' + w,
    // The output tokens each sidecar's engine generated, every client's
    // (infer_server_generation_tokens_total), the probe's own where its
    // engine exposes none: the leaderboard's throughput.
    servedTokenRate: level + ':infer_served_output_tokens:rate' + w,
    promptTokenRate: level + ':infer_probe_prompt_tokens:rate' + w,
    goodputRatio: level + ':infer_probe_goodput_requests:ratio_rate' + w,
    errorRatio: level + ':infer_probe_requests:error_ratio_rate' + w,
    checkPassRatio: level + ':infer_probe_known_answer_checks:pass_ratio_rate' + c.accuracyWindow,
    sidecars: level + ':infer_probe_requests:instance_count',
    servingMemory: level + ':infer_gpu_serving_memory_used_bytes:avg',

    component(name):: level + ':infer_ranking_' + name + '_score:ratio',
    score: level + ':infer_ranking_score:weighted_sum',
  },
}
