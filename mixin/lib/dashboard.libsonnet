// A few Grafana JSON builders, in plain jsonnet (no grafonnet: vendoring it
// needs GitHub). Panels get their ids and positions from dashboard(), in
// the order given.
{
  local ds = { type: 'prometheus', uid: '${datasource}' },
  // Queries without a refId get A, B, C, ... in order.
  local refIds(targets) = [
    targets[i] + (if std.objectHas(targets[i], 'refId') then {} else { refId: std.char(65 + i) })
    for i in std.range(0, std.length(targets) - 1)
  ],

  // exemplar: Grafana asks Prometheus for the exemplars of the series the
  // query reads too (query_exemplars), and draws each as a point that
  // links to its trace: a raw histogram's, never a recording rule's
  // (Prometheus keeps exemplars of scraped series only).
  target(expr, legend='', instant=false, format='time_series', refId=null, exemplar=false):: {
    datasource: ds,
    expr: expr,
    legendFormat: legend,
    [if instant then 'instant']: true,
    [if instant then 'range']: false,
    format: format,
    [if refId != null then 'refId']: refId,
    [if exemplar then 'exemplar']: true,
  },

  // A time series panel. width is in grid columns (24 per row). hidden:
  // refIds whose lines are not drawn, listed nor in the tooltip, for a
  // query there for its exemplars alone (Grafana draws exemplars as
  // annotations, which the override does not touch).
  timeseries(title, description, targets, unit, width=12, height=8, min=null, max=null, stack=false, hidden=[]):: {
    type: 'timeseries',
    title: title,
    description: description,
    datasource: ds,
    targets: refIds(targets),
    fieldConfig: {
      defaults: {
        unit: unit,
        [if min != null then 'min']: min,
        [if max != null then 'max']: max,
        custom: {
          lineWidth: 1,
          fillOpacity: if stack then 20 else 0,
          showPoints: 'never',
          spanNulls: false,
          stacking: { mode: if stack then 'normal' else 'none', group: 'A' },
        },
      },
      overrides: [
        {
          matcher: { id: 'byFrameRefID', options: ref },
          properties: [{ id: 'custom.hideFrom', value: { legend: true, tooltip: true, viz: true } }],
        }
        for ref in hidden
      ],
    },
    options: {
      legend: { displayMode: 'table', placement: 'bottom', showLegend: true, calcs: ['mean', 'max', 'lastNotNull'] },
      tooltip: { mode: 'multi', sort: 'desc' },
    },
    gridWidth:: width,
    gridHeight:: height,
  },

  stat(title, description, targets, unit, width=6, height=4):: {
    type: 'stat',
    title: title,
    description: description,
    datasource: ds,
    targets: refIds(targets),
    fieldConfig: { defaults: { unit: unit }, overrides: [] },
    options: {
      reduceOptions: { calcs: ['lastNotNull'], fields: '', values: false },
      colorMode: 'value',
      graphMode: 'area',
      textMode: 'auto',
      justifyMode: 'auto',
      orientation: 'auto',
      wideLayout: true,
      showPercentChange: false,
      percentChangeColorMode: 'standard',
    },
    gridWidth:: width,
    gridHeight:: height,
  },

  // A table of instant queries merged on their labels. columns: a list of
  // { ref, title, unit } naming each query's value column.
  table(title, description, targets, unit, columns, sortBy, width=24, height=10, hide=[], desc=true):: {
    type: 'table',
    title: title,
    description: description,
    datasource: ds,
    targets: refIds(targets),
    fieldConfig: {
      defaults: { unit: unit, custom: { align: 'auto', filterable: true, inspect: false } },
      overrides: [
        {
          matcher: { id: 'byName', options: col.title },
          properties: [{ id: 'unit', value: col.unit }] + (
            if std.objectHas(col, 'decimals') then [{ id: 'decimals', value: col.decimals }] else []
          ),
        }
        for col in columns
      ],
    },
    options: { showHeader: true, sortBy: [{ displayName: sortBy, desc: desc }], cellHeight: 'sm', frameIndex: 0 },
    transformations: [
      { id: 'merge', options: {} },
      {
        id: 'organize',
        options: {
          excludeByName: { Time: true } + { [h]: true for h in hide },
          renameByName: { ['Value #' + col.ref]: col.title for col in columns },
        },
      },
      { id: 'sortBy', options: { sort: [{ field: sortBy, desc: desc }] } },
    ],
    gridWidth:: width,
    gridHeight:: height,
  },

  // A state timeline of 0/1 series (throttle reasons), or, given states (a
  // list of { text, color }), of series whose value is a state's 1-based
  // index in the list.
  stateTimeline(title, description, targets, width=24, height=8, states=null):: {
    type: 'state-timeline',
    title: title,
    description: description,
    datasource: ds,
    targets: refIds(targets),
    fieldConfig: {
      defaults: if states == null then {
        unit: 'bool_on_off',
        mappings: [{ type: 'value', options: { '0': { text: 'off', color: 'green' }, '1': { text: 'active', color: 'red' } } }],
        color: { mode: 'thresholds' },
        thresholds: { mode: 'absolute', steps: [{ color: 'green', value: null }, { color: 'red', value: 1 }] },
      } else {
        unit: 'none',
        mappings: [{
          type: 'value',
          options: { [std.toString(i + 1)]: { text: states[i].text, color: states[i].color, index: i } for i in std.range(0, std.length(states) - 1) },
        }],
        color: { mode: 'thresholds' },
        thresholds: { mode: 'absolute', steps: [{ color: 'text', value: null }] },
      },
      overrides: [],
    },
    options: {
      showValue: 'never',
      mergeValues: true,
      rowHeight: 0.8,
      legend: { displayMode: 'list', placement: 'bottom', showLegend: true, calcs: [] },
      tooltip: { mode: 'single', sort: 'none' },
    },
    gridWidth:: width,
    gridHeight:: height,
  },

  // A heatmap of series as rows (one row per legend), value as colour.
  heatmapRows(title, description, targets, unit, width=24, height=8):: {
    type: 'heatmap',
    title: title,
    description: description,
    datasource: ds,
    targets: refIds(targets),
    fieldConfig: { defaults: { unit: unit }, overrides: [] },
    options: {
      calculate: false,
      cellGap: 1,
      color: { mode: 'scheme', scheme: 'Oranges', steps: 64, fill: 'dark-orange', exponent: 0.5, reverse: false },
      yAxis: { axisPlacement: 'left' },
      rowsFrame: { layout: 'auto' },
      tooltip: { mode: 'single', yHistogram: false },
      legend: { show: true },
      cellValues: { unit: unit },
      showValue: 'auto',
      exemplars: { color: 'rgba(255,0,255,0.7)' },
    },
    gridWidth:: width,
    gridHeight:: height,
  },

  // A heatmap of a classic histogram: its targets are bucket counts per
  // interval with format 'heatmap' and legend '{{le}}', drawn as they are
  // (calculate off), each bucket a row up to its upper bound.
  histogramHeatmap(title, description, targets, unit, width=12, height=8):: {
    type: 'heatmap',
    title: title,
    description: description,
    datasource: ds,
    targets: refIds([t { format: 'heatmap', legendFormat: '{{le}}' } for t in targets]),
    fieldConfig: { defaults: { unit: unit }, overrides: [] },
    options: {
      calculate: false,
      cellGap: 1,
      color: { mode: 'scheme', scheme: 'Spectral', steps: 64, exponent: 0.5, fill: 'dark-orange', reverse: false },
      yAxis: { axisPlacement: 'left', unit: unit },
      rowsFrame: { layout: 'le' },
      tooltip: { mode: 'single', yHistogram: true },
      legend: { show: true },
      cellValues: { unit: 'short' },
      showValue: 'auto',
      exemplars: { color: 'rgba(255,0,255,0.7)' },
    },
    gridWidth:: width,
    gridHeight:: height,
  },

  row(title):: {
    type: 'row',
    title: title,
    collapsed: false,
    panels: [],
    gridWidth:: 24,
    gridHeight:: 1,
  },

  // An annotation from a Prometheus query: an event at each step where the
  // query returns a sample (Grafana's Prometheus annotations), titled with
  // the series' labels.
  annotation(name, expr, title, text, color, step='1m'):: {
    name: name,
    datasource: ds,
    enable: true,
    hide: false,
    iconColor: color,
    expr: expr,
    step: step,
    titleFormat: title,
    textFormat: text,
    tagKeys: 'target',
    useValueForTime: false,
  },

  // Template variables.
  datasourceVariable:: {
    name: 'datasource',
    label: 'Data source',
    type: 'datasource',
    query: 'prometheus',
    // Grafana's own value for the default data source.
    current: { text: 'default', value: 'default' },
    hide: 0,
    refresh: 1,
    regex: '',
  },

  queryVariable(name, label, query, multi=true):: {
    name: name,
    label: label,
    type: 'query',
    datasource: ds,
    query: { query: query, refId: 'PrometheusVariableQueryEditor-VariableQuery' },
    definition: query,
    refresh: 2,
    includeAll: multi,
    multi: multi,
    allValue: '.*',
    // All, as Grafana writes it, until the viewer picks.
    current: if multi then { text: 'All', value: '$__all' } else { text: '', value: '' },
    sort: 1,
    hide: 0,
    regex: '',
  },

  // Lays panels out left to right, wrapping at 24 columns, and numbers
  // them from 1.
  local layout(panels) = std.foldl(
    function(acc, panel)
      local w = panel.gridWidth;
      local h = panel.gridHeight;
      local wrap = acc.x + w > 24;
      local x = if wrap then 0 else acc.x;
      local y = if wrap then acc.y + acc.rowHeight else acc.y;
      local rowHeight = if wrap then h else std.max(acc.rowHeight, h);
      {
        x: x + w,
        y: y,
        rowHeight: rowHeight,
        panels: acc.panels + [panel { id: std.length(acc.panels) + 1, gridPos: { x: x, y: y, w: w, h: h } }],
      },
    panels,
    { x: 0, y: 0, rowHeight: 0, panels: [] }
  ).panels,

  dashboard(uid, title, description, tags, variables, panels, refresh='30s', timezone='utc', time='now-1h', annotations=[]):: {
    uid: uid,
    title: title,
    description: description,
    tags: tags,
    editable: true,
    graphTooltip: 1,
    schemaVersion: 39,
    version: 1,
    refresh: refresh,
    timezone: timezone,
    time: { from: time, to: 'now' },
    timepicker: {},
    templating: { list: [$.datasourceVariable] + variables },
    annotations: {
      list: [{
        builtIn: 1,
        datasource: { type: 'grafana', uid: '-- Grafana --' },
        enable: true,
        hide: true,
        iconColor: 'rgba(0, 211, 255, 1)',
        name: 'Annotations & Alerts',
        type: 'dashboard',
      }] + annotations,
    },
    links: [{ type: 'dashboards', tags: tags, asDropdown: true, title: 'infer_exporter', includeVars: true, keepTime: true, icon: 'external link', tooltip: '', targetBlank: false, url: '' }],
    panels: layout(panels),
  },
}
