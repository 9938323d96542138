#include "report/page_script.hpp"

namespace kvsim::report {

// Each block draws into the <div> of the same id that report/page.cpp writes for the inputs given.
const char* const kPageScript = R"JS(
(function () {
  'use strict';
  var data = JSON.parse(document.getElementById('kvsim-data').textContent);
  var config = {responsive: true, displaylogo: false};
  var GiB = 1024 * 1024 * 1024;
  var palette = ['#1f77b4', '#ff7f0e', '#2ca02c', '#d62728', '#9467bd', '#8c564b', '#e377c2', '#7f7f7f', '#bcbd22', '#17becf'];

  function plot(id, traces, layout) {
    var el = document.getElementById(id);
    if (!el) return;
    Plotly.newPlot(el, traces, Object.assign({margin: {t: 40}, hovermode: 'closest'}, layout), config);
  }
  function groupBy(items, key) {
    var groups = new Map();
    items.forEach(function (it) {
      var k = key(it);
      if (!groups.has(k)) groups.set(k, []);
      groups.get(k).push(it);
    });
    return groups;
  }
  // A CSV input (columns and rows) as one object per row.
  function records(t) {
    return t.rows.map(function (r) {
      var o = {};
      t.columns.forEach(function (c, i) { o[c] = r[i]; });
      return o;
    });
  }
  // SVG for what it draws quickly (and where WebGL is off); WebGL for long lines.
  function fastType(points) { return points > 20000 ? 'scattergl' : 'scatter'; }
  function isNum(v) { return typeof v === 'number' && isFinite(v); }
  function label(r) { return r.policy + ' @ ' + r.context_tokens; }

  // Per policy, a line over context (x) of y(row).
  function linesOverContext(groups, y, extra) {
    var traces = [];
    groups.forEach(function (rows, policy) {
      rows.sort(function (a, b) { return a.context - b.context; });
      traces.push(Object.assign({name: policy, type: 'scatter', mode: 'lines+markers',
        x: rows.map(function (r) { return r.context; }), y: rows.map(y)}, extra || {}));
    });
    return traces;
  }

  function drawPlan(plan) {
    var feasible = plan.results.filter(function (r) { return r.feasible; });
    var rows = feasible.map(function (r) {
      return {policy: r.policy, context: r.context_tokens, tpot: r.tpot_ms, xput: r.throughput_tok_s,
              bound: r.bound ? r.bound.tpot_ms : null};
    });
    var groups = groupBy(rows, function (r) { return r.policy; });
    // The estimate per policy, and beside it (dotted, same legend entry) the roofline bound where the
    // calibration in force is not the roofline itself.
    var tpot = linesOverContext(groups, function (r) { return r.tpot; });
    var bounds = linesOverContext(groups, function (r) { return r.bound; });
    tpot.forEach(function (t, i) {
      var color = palette[i % palette.length];
      t.legendgroup = t.name;
      t.line = {color: color};
      t.marker = {color: color};
      bounds[i].legendgroup = t.name;
      bounds[i].name = t.name + ' (roofline bound)';
      bounds[i].showlegend = false;
      bounds[i].line = {color: color, dash: 'dot'};
      bounds[i].marker = {color: color, symbol: 'x'};
    });
    plot('chart-tpot', tpot.concat(bounds.filter(function (t) { return t.y.some(isNum); })),
         {title: 'TPOT against context: calibrated estimate (solid), roofline bound (dotted)',
          xaxis: {title: 'context tokens', type: 'log'}, yaxis: {title: 'TPOT ms', type: 'log'}});
    plot('chart-throughput', linesOverContext(groups, function (r) { return r.xput; }),
         {title: 'Throughput against context', xaxis: {title: 'context tokens', type: 'log'},
          yaxis: {title: 'tokens/s per GPU', type: 'log'}});
    drawMemory(plan.results);
    drawPhases(feasible);
  }

  // Memory per tier: HBM (weights, workspace, KV, index, the policy's other state) and host DRAM.
  function drawMemory(results) {
    var x = results.map(label);
    function bar(name, f) {
      return {name: name, type: 'bar', x: x, y: results.map(function (r) { return Math.max(0, f(r.memory)) / GiB; })};
    }
    var hbm = [
      bar('weights', function (m) { return m.weight_bytes; }),
      bar('workspace', function (m) { return m.workspace_bytes; }),
      bar('KV cache', function (m) { return m.kv_hbm_bytes; }),
      bar('index', function (m) { return m.index_hbm_bytes || 0; }),
      bar('other policy state', function (m) {
        return m.hbm_bytes - m.weight_bytes - m.workspace_bytes - m.kv_hbm_bytes - (m.index_hbm_bytes || 0);
      })];
    hbm.push({name: 'usable HBM', type: 'scatter', mode: 'markers', marker: {symbol: 'line-ew-open', size: 24},
              x: x, y: results.map(function (r) { return r.memory.hbm_usable_bytes / GiB; })});
    plot('chart-memory-hbm', hbm, {title: 'HBM per GPU at peak, by part', barmode: 'stack', yaxis: {title: 'GiB'}});
    var dram = [bar('KV cache', function (m) { return m.kv_dram_bytes; }),
                bar('other', function (m) { return m.dram_bytes - m.kv_dram_bytes; })];
    plot('chart-memory-dram', dram, {title: 'Host DRAM, by part', barmode: 'stack', yaxis: {title: 'GiB'}});
  }

  // Each result's decode phases stacked (each alone, as the roofline with the calibration times it),
  // with the step's estimate after overlap and the roofline bound beside it.
  function drawPhases(results) {
    var x = results.map(label);
    var names = [];
    results.forEach(function (r) {
      r.phases.forEach(function (p) { if (p.stage === 'decode' && names.indexOf(p.name) < 0) names.push(p.name); });
    });
    var traces = names.map(function (n) {
      return {name: n, type: 'bar', x: x, y: results.map(function (r) {
        var t = 0;
        r.phases.forEach(function (p) { if (p.stage === 'decode' && p.name === n) t += p.time_ms; });
        return t;
      })};
    });
    // The estimate with its 80% range as an error bar (docs/uncertainty.md; absent in older plans).
    traces.push({name: 'estimate (TPOT, 80% range)', type: 'scatter', mode: 'markers', marker: {symbol: 'diamond', size: 10, color: 'black'},
                 x: x, y: results.map(function (r) { return r.tpot_ms; }),
                 error_y: {type: 'data', symmetric: false, visible: true,
                           array: results.map(function (r) { return r.tpot_ms_high == null ? null : r.tpot_ms_high - r.tpot_ms; }),
                           arrayminus: results.map(function (r) { return r.tpot_ms_low == null ? null : r.tpot_ms - r.tpot_ms_low; })}});
    traces.push({name: 'roofline bound', type: 'scatter', mode: 'markers', marker: {symbol: 'x', size: 10, color: 'red'},
                 x: x, y: results.map(function (r) { return r.bound ? r.bound.tpot_ms : null; })});
    plot('chart-phases', traces, {title: 'Decode phases per policy: estimate against bound', barmode: 'stack',
                                  yaxis: {title: 'ms per step (phases alone)'}});
  }

  // Without a plan, the sweep's points give TPOT and throughput over context: per policy and context
  // the best feasible point (lowest TPOT, highest throughput) over the other axes.
  function drawSweep(sweep) {
    var pts = records(sweep).filter(function (r) { return r.feasible === 1 && isNum(r.tpot_s); });
    if (!pts.length || !('workload.context_tokens' in pts[0])) return;
    var best = new Map();
    pts.forEach(function (r) {
      var k = r.policy + '|' + r['workload.context_tokens'];
      var b = best.get(k) || {policy: r.policy, context: r['workload.context_tokens'], tpot: Infinity, xput: 0};
      b.tpot = Math.min(b.tpot, r.tpot_s * 1e3);
      b.xput = Math.max(b.xput, r.throughput_tok_s);
      best.set(k, b);
    });
    var groups = groupBy(Array.from(best.values()), function (r) { return r.policy; });
    plot('chart-sweep-tpot', linesOverContext(groups, function (r) { return r.tpot; }),
         {title: 'Sweep: lowest TPOT against context', xaxis: {title: 'context tokens', type: 'log'},
          yaxis: {title: 'TPOT ms', type: 'log'}});
    plot('chart-sweep-throughput', linesOverContext(groups, function (r) { return r.xput; }),
         {title: 'Sweep: highest throughput against context', xaxis: {title: 'context tokens', type: 'log'},
          yaxis: {title: 'tokens/s per GPU', type: 'log'}});
  }

  // One chart per front ("x~y" columns): every feasible sweep point in grey, the front's points per
  // policy on top, each hover naming the knobs (the columns between policy and params).
  function drawPareto(pareto, sweep) {
    var host = document.getElementById('chart-pareto');
    if (!host) return;
    var cols = pareto.columns;
    var knobs = cols.slice(cols.indexOf('policy') + 1, cols.indexOf('params') < 0 ? cols.length : cols.indexOf('params'));
    function hover(r) {
      var lines = ['<b>' + r.policy + '</b>'];
      knobs.forEach(function (k) { if (r[k] !== null && r[k] !== undefined) lines.push(k + ' = ' + r[k]); });
      lines.push('batch = ' + r.batch);
      if (r.params) lines.push(r.params);
      return lines.join('<br>');
    }
    var front = records(pareto);
    var all = sweep ? records(sweep).filter(function (r) { return r.feasible === 1; }) : [];
    groupBy(front, function (r) { return r.front; }).forEach(function (rows, name, map) {
      var axes = String(name).split('~');
      var div = document.createElement('div');
      div.className = 'chart';
      div.id = 'chart-pareto-' + axes.join('-');
      host.appendChild(div);
      var traces = [{name: 'all points', type: 'scatter', mode: 'markers', marker: {color: '#ccc', size: 5},
                     x: all.map(function (r) { return r[axes[0]]; }), y: all.map(function (r) { return r[axes[1]]; }),
                     text: all.map(hover), hovertemplate: '%{text}<extra></extra>'}];
      groupBy(rows, function (r) { return r.policy; }).forEach(function (prs, policy) {
        prs.sort(function (a, b) { return a[axes[0]] - b[axes[0]]; });
        traces.push({name: policy, type: 'scatter', mode: 'lines+markers',
                     x: prs.map(function (r) { return r[axes[0]]; }), y: prs.map(function (r) { return r[axes[1]]; }),
                     text: prs.map(hover), hovertemplate: '%{text}<br>' + axes[0] + ' %{x}<br>' + axes[1] + ' %{y}<extra></extra>'});
      });
      plot(div.id, traces, {title: 'Pareto front: ' + axes[1] + ' against ' + axes[0],
                            xaxis: {title: axes[0], type: 'log'}, yaxis: {title: axes[1], type: 'log'}});
    });
  }

  // The latency CDF per policy, with the summary's p50 and p99 (dotted, dashed) and the SLO (red).
  function drawCdf(serve, requests, metric, id, title) {
    var reqs = records(requests);
    var traces = [];
    var shapes = [];
    var top = 0;
    serve.policies.forEach(function (p, i) {
      var v = reqs.filter(function (r) { return r.policy === p.policy && isNum(r[metric]); })
                  .map(function (r) { return r[metric] * 1e3; }).sort(function (a, b) { return a - b; });
      var color = palette[i % palette.length];
      traces.push({name: p.policy, type: fastType(v.length), mode: 'lines', line: {color: color, shape: 'hv'},
                   x: v, y: v.map(function (_, k) { return (k + 1) / v.length; })});
      [['p50', 'dot'], ['p99', 'dash']].forEach(function (q) {
        var x = p[metric][q[0]] * 1e3;
        top = Math.max(top, x);
        traces.push({name: p.policy + ' ' + q[0], legendgroup: p.policy, showlegend: false, type: 'scatter', mode: 'lines',
                     line: {color: color, dash: q[1], width: 1}, x: [x, x], y: [0, 1],
                     hovertemplate: p.policy + ' ' + q[0] + ' %{x:.3f} ms<extra></extra>'});
      });
    });
    var slo = serve.policies.length ? serve.policies[0].slo[metric] : null;
    if (isNum(slo) && slo > 0) {
      shapes.push({type: 'line', x0: slo * 1e3, x1: slo * 1e3, y0: 0, y1: 1, line: {color: 'red', width: 2}});
      traces.push({name: 'SLO ' + (slo * 1e3) + ' ms', type: 'scatter', mode: 'lines', line: {color: 'red', width: 2},
                   x: [slo * 1e3, slo * 1e3], y: [0, 1]});
    }
    plot(id, traces, {title: title + ' (dotted p50, dashed p99)', shapes: shapes, xaxis: {title: 'ms', type: 'log'},
                      yaxis: {title: 'fraction of requests', range: [0, 1.02]}});
  }

  // Waiting requests and the running batch over time, a line per policy and replica.
  function drawSeries(series) {
    var rows = records(series);
    var groups = groupBy(rows, function (r) { return r.policy + (r.replica ? ' #' + r.replica : ''); });
    function traces(col) {
      var out = [];
      groups.forEach(function (rs, name) {
        out.push({name: name, type: fastType(rs.length), mode: 'lines', line: {shape: 'hv'},
                  x: rs.map(function (r) { return r.start_s; }), y: rs.map(function (r) { return r[col]; })});
      });
      return out;
    }
    plot('chart-queue', traces('waiting'), {title: 'Queue: waiting requests over time', xaxis: {title: 's'}, yaxis: {title: 'requests'}});
    plot('chart-batch', traces('running'), {title: 'Batch: running requests over time', xaxis: {title: 's'}, yaxis: {title: 'requests'}});
  }

  // Replay: each policy's (and budget's) attention recall against its TPOT with the measured statistics.
  function drawReplay(replay) {
    var groups = groupBy(replay.policies, function (p) { return p.policy || p.label; });
    var traces = [];
    groups.forEach(function (ps, policy) {
      traces.push({name: policy, type: 'scatter', mode: ps.length > 1 ? 'lines+markers' : 'markers',
                   x: ps.map(function (p) { return p.plan.measured ? p.plan.measured.tpot_s * 1e3 : null; }),
                   y: ps.map(function (p) { return p.quality.attention_recall ? p.quality.attention_recall.mean : null; }),
                   text: ps.map(function (p) { return p.label; }), hovertemplate: '%{text}<br>TPOT %{x:.3f} ms<br>recall %{y:.4f}<extra></extra>'});
    });
    plot('chart-replay', traces, {title: 'Replay: attention recall against TPOT (measured statistics)',
                                  xaxis: {title: 'TPOT ms', type: 'log'}, yaxis: {title: 'attention recall (mean)'}});
  }

  if (data.plan) drawPlan(data.plan);
  if (data.sweep && !data.plan) drawSweep(data.sweep);
  if (data.pareto) drawPareto(data.pareto, data.sweep);
  if (data.serve && data.requests) {
    drawCdf(data.serve, data.requests, 'ttft_s', 'chart-cdf-ttft', 'TTFT CDF');
    drawCdf(data.serve, data.requests, 'tpot_s', 'chart-cdf-tpot', 'TPOT CDF');
  }
  if (data.series) drawSeries(data.series);
  if (data.replay) drawReplay(data.replay);
})();
)JS";

}  // namespace kvsim::report
