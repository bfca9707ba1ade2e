// The mixin's rules and alerts as a Prometheus Operator PrometheusRule, for
// deploy/kubernetes (`make mixin` writes deploy/kubernetes/prometheusrule.yaml).
local mixin = import 'mixin.libsonnet';
local rule = {
  apiVersion: 'monitoring.coreos.com/v1',
  kind: 'PrometheusRule',
  metadata: {
    name: 'infer-exporter',
    labels: {
      'app.kubernetes.io/name': 'infer-exporter',
      'app.kubernetes.io/component': 'monitoring-mixin',
      // The Prometheus Operator's default ruleSelector of kube-prometheus-stack.
      release: 'prometheus',
    },
  },
  spec: {
    groups: mixin.prometheusRules.groups + mixin.prometheusAlerts.groups,
  },
};
'# Generated from mixin/ by `make mixin`; do not edit.\n'
+ std.manifestYamlDoc(rule, indent_array_in_object=true, quote_keys=false) + '\n'
