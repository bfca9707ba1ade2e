// infer_exporter's monitoring mixin: recording rules, alerts and dashboards
// in the monitoring-mixins layout. Outputs: prometheusRules,
// prometheusAlerts and grafanaDashboards; knobs: _config (config.libsonnet).
(import 'config.libsonnet')
+ (import 'rules/rules.libsonnet')
+ (import 'alerts/alerts.libsonnet')
+ (import 'dashboards/dashboards.libsonnet')
// The quality probe's alerts (perplexity), with its knobs, _config.perplexity.
+ (import 'alerts/quality.libsonnet')
// The fleet view: rules by model and engine across sidecars, its dashboard
// (with its own knobs, _config.fleet).
+ (import 'rules/fleet.libsonnet')
+ (import 'dashboards/fleet.libsonnet')
// Bench runs backfilled from `bench export`, beside the live figures.
+ (import 'dashboards/bench_history.libsonnet')
// Last: a runbook_url on every alert above (_config.runbookURLPattern).
+ (import 'alerts/runbooks.libsonnet')
