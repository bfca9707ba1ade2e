// Renders the mixin into files: jsonnet -c -m generated -S build.jsonnet
// (`make mixin`). Pass a configuration override as the top-level argument
// config (a JSON object merged into _config), as the end-to-end test does.
function(config={})
  // config is merged into _config key by key, objects recursively, so that
  // { regression: { offset: '2m' } } changes only the offset.
  local merge(a, b) =
    if std.isObject(a) && std.isObject(b)
    then a + { [k]: if std.objectHas(a, k) then merge(a[k], b[k]) else b[k] for k in std.objectFields(b) }
    else b;
  local mixin = (import 'mixin.libsonnet') + { _config:: merge(super._config, config) };
  local yaml(v) = std.manifestYamlDoc(v, indent_array_in_object=true, quote_keys=false) + '\n';
  // Every expression as a YAML block, so that it reads as PromQL, quotes
  // unescaped.
  local blocks(groups) = {
    groups: [
      g { rules: [r { expr: if std.endsWith(r.expr, '\n') then r.expr else r.expr + '\n' } for r in g.rules] }
      for g in groups.groups
    ],
  };
  {
    'rules.yaml': yaml(blocks(mixin.prometheusRules)),
    'alerts.yaml': yaml(blocks(mixin.prometheusAlerts)),
  } + {
    ['dashboards/' + name]: std.manifestJsonEx(mixin.grafanaDashboards[name], '  ') + '\n'
    for name in std.objectFields(mixin.grafanaDashboards)
  }
