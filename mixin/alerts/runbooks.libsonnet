// Every alert's runbook_url annotation, from _config.runbookURLPattern and
// the alert's name in lower case (the anchor of its section in
// docs/runbooks.md, as GitHub makes heading anchors). Applied after every
// other part of the mixin, so that it reaches every alert group.
// mixin/mixin_test.go fails on an alert without one, or whose anchor has no
// section in docs/runbooks.md.
{
  local pattern = $._config.runbookURLPattern,
  prometheusAlerts+:: {
    groups: [
      g {
        rules: [
          if pattern == null || pattern == '' then r
          else r { annotations+: { runbook_url: pattern % std.asciiLower(r.alert) } }
          for r in g.rules
        ],
      }
      for g in super.groups
    ],
  },
}
