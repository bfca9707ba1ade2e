// Small PromQL helpers shared by rules, alerts and dashboards.
{
  // 'target, model, workload'
  labelList(labels):: std.join(', ', labels),

  // A selector body from the configured selector and extra matchers:
  // selector('job="x"', 'outcome!="dropped"') = '{job="x", outcome!="dropped"}'.
  selector(base, extra=''):: '{' + std.join(', ', std.filter(function(s) s != '', [base, extra])) + '}',

  // Seconds in a Prometheus duration of one unit ('90s', '5m', '1h', '1d',
  // '1w').
  seconds(d)::
    local units = { ms: 0.001, s: 1, m: 60, h: 3600, d: 86400, w: 604800, y: 31536000 };
    local unit = if std.endsWith(d, 'ms') then 'ms' else d[std.length(d) - 1];
    local n = std.parseJson(std.substr(d, 0, std.length(d) - std.length(unit)));
    assert std.objectHas(units, unit) : 'unsupported duration ' + d;
    n * units[unit],

  // 'p99' for 0.99, 'p50' for 0.5, 'p999' for 0.999.
  quantileName(q):: 'p' + std.strReplace($.num(q * 100), '.', ''),

  // A PromQL string literal of s: double-quoted, its backslashes and
  // double quotes escaped (a GPU's model name becomes a label matcher).
  str(s):: '"' + std.strReplace(std.strReplace(s, '\\', '\\\\'), '"', '\\"') + '"',

  // A number as written by hand: 0.95, not 0.94999999999999996.
  num(x):: std.format('%.12g', x),
}
