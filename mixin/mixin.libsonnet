// infer_exporter's monitoring mixin: recording rules, alerts and dashboards
// in the monitoring-mixins layout. Outputs: prometheusRules,
// prometheusAlerts and grafanaDashboards; knobs: _config (config.libsonnet).
(import 'config.libsonnet')
+ (import 'rules/rules.libsonnet')
+ (import 'alerts/alerts.libsonnet')
+ (import 'dashboards/dashboards.libsonnet')
