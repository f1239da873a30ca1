#include "controller/api/status_page.h"

namespace controller {

namespace {

// Everything the page needs is in this one document: no <link>, no src=, no
// url(), no external address (tests/controller/status_page_test.cpp checks).
// All job and region data reaches the DOM through textContent/setAttribute,
// never as markup. The SVG namespace comes from an inline <svg> element's
// namespaceURI, so the page spells out no address at all.
const char* const kHtml = R"HTML(<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<meta name="referrer" content="no-referrer">
<link rel="icon" href="data:,">
<title>GreenShard status</title>
<style>
  :root { --fg: #1d2521; --muted: #5f6b65; --bg: #f6f8f7; --card: #fff; --line: #d7dedb;
          --green: #1f7a4d; --amber: #a86b00; --red: #b3261e; --win: rgba(31, 122, 77, 0.22); }
  * { box-sizing: border-box; }
  [hidden] { display: none !important; }
  body { margin: 0; font: 14px/1.4 system-ui, -apple-system, "Segoe UI", Roboto, sans-serif;
         color: var(--fg); background: var(--bg); }
  header { display: flex; flex-wrap: wrap; align-items: center; gap: 12px 24px; padding: 12px 20px;
           background: var(--card); border-bottom: 1px solid var(--line); }
  header h1 { font-size: 18px; margin: 0; color: var(--green); }
  header .meta { color: var(--muted); }
  header form { display: flex; gap: 6px; margin-left: auto; }
  header input { font: inherit; padding: 3px 6px; width: 22em; }
  button { font: inherit; padding: 3px 10px; cursor: pointer; }
  main { padding: 16px 20px; }
  h2 { font-size: 15px; margin: 18px 0 8px; }
  #error { background: #fdecea; color: var(--red); border: 1px solid #f4c7c3; border-radius: 4px;
           padding: 8px 12px; margin-bottom: 12px; white-space: pre-wrap; }
  table { border-collapse: collapse; width: 100%; background: var(--card); border: 1px solid var(--line); }
  th, td { text-align: left; padding: 6px 8px; border-bottom: 1px solid var(--line); white-space: nowrap; }
  th { background: #eef2f0; font-weight: 600; }
  td[data-field="id"] { font-family: ui-monospace, monospace; font-size: 12px; }
  td.num { text-align: right; font-variant-numeric: tabular-nums; }
  .state { font-weight: 600; }
  .state-running, .state-succeeded { color: var(--green); }
  .state-scheduled, .state-starting, .state-pending, .state-suspended, .state-recovering { color: var(--amber); }
  .state-failed, .state-cancelled { color: var(--red); }
  .bar { display: inline-block; width: 60px; height: 8px; margin-right: 6px; background: #e3e8e6;
         border-radius: 4px; overflow: hidden; vertical-align: middle; }
  .bar > span { display: block; height: 100%; background: var(--green); }
  #jobs-empty { color: var(--muted); padding: 8px 0; }
  #regions { display: grid; grid-template-columns: repeat(auto-fill, minmax(520px, 1fr)); gap: 14px; }
  figure.region { margin: 0; background: var(--card); border: 1px solid var(--line); border-radius: 4px; padding: 8px; }
  figure.region figcaption { font-weight: 600; margin-bottom: 4px; }
  figure.region figcaption .meta { font-weight: 400; color: var(--muted); }
  svg.forecast { width: 100%; height: auto; display: block; }
  svg.forecast .axis { stroke: var(--line); stroke-width: 1; }
  svg.forecast .label { fill: var(--muted); font-size: 10px; }
  svg.forecast .line { fill: none; stroke: var(--fg); stroke-width: 1.5; }
  svg.forecast rect.window { fill: var(--win); stroke: var(--green); stroke-width: 0.5; }
  .legend { color: var(--muted); font-size: 12px; margin-top: 4px; }
  .legend i { display: inline-block; width: 12px; height: 10px; background: var(--win);
              border: 1px solid var(--green); vertical-align: middle; margin-right: 4px; }
</style>
</head>
<body data-status="loading">
<svg id="svg-ns" width="0" height="0" aria-hidden="true" style="position:absolute"></svg>
<header>
  <h1>GreenShard</h1>
  <span class="meta">policy <b id="policy">-</b></span>
  <span class="meta" id="updated">not loaded yet</span>
  <form id="token-form" hidden autocomplete="off">
    <label for="token-input">Bearer token</label>
    <input id="token-input" type="password" autocomplete="off" spellcheck="false">
    <button type="submit">Use</button>
  </form>
  <button id="forget" type="button" hidden>Forget token</button>
</header>
<main>
  <div id="error" role="alert" hidden></div>
  <h2>Jobs</h2>
  <table id="jobs">
    <thead><tr>
      <th>id</th><th>name</th><th>state</th><th>progress</th><th>loss</th><th>tokens/s</th>
      <th>gCO2e so far (operational + embodied)</th><th>region</th><th>placement saving</th>
    </tr></thead>
    <tbody id="jobs-body"></tbody>
  </table>
  <div id="jobs-empty" hidden>No jobs.</div>
  <h2>Regions: grid intensity forecast, next 48 h (gCO2e/kWh), placed windows shaded</h2>
  <div id="regions"></div>
</main>
<script>
'use strict';
(function () {
  var REFRESH_MS = 5000;
  var KEY = 'greenshard.token';
  var HOUR = 3600 * 1000;
  var TERMINAL = { SUCCEEDED: 1, FAILED: 1, CANCELLED: 1 };
  var SVGNS = document.getElementById('svg-ns').namespaceURI;
  var memToken = '';
  var timer = null;
  var generation = 0;

  function $(id) { return document.getElementById(id); }

  function getToken() {
    try { return sessionStorage.getItem(KEY) || memToken; } catch (e) { return memToken; }
  }
  function setToken(t) {
    memToken = t;
    try { if (t) sessionStorage.setItem(KEY, t); else sessionStorage.removeItem(KEY); } catch (e) {}
  }
  // /#token=... : keep it in sessionStorage and drop it from the address bar.
  function takeFragmentToken() {
    var h = location.hash.replace(/^#/, '');
    if (!h) return;
    var t = new URLSearchParams(h).get('token');
    if (t) {
      setToken(t);
      history.replaceState(null, '', location.pathname + location.search);
    }
  }

  function setStatus(s) { document.body.setAttribute('data-status', s); }
  function showError(msg) {
    var e = $('error');
    e.textContent = msg;
    e.hidden = false;
    setStatus('error');
  }
  function clearError() {
    var e = $('error');
    e.textContent = '';
    e.hidden = true;
  }
  function showTokenForm(show) {
    $('token-form').hidden = !show;
    $('forget').hidden = show || !getToken();
  }

  function api(path) {
    return fetch(path, {
      headers: { 'Authorization': 'Bearer ' + getToken(), 'Accept': 'application/json' },
      cache: 'no-store'
    }).then(function (res) {
      return res.text().then(function (text) {
        var body = null;
        try { body = JSON.parse(text); } catch (e) {}
        if (!res.ok) {
          var msg = body && body.error ? body.error.code + ': ' + body.error.message : (res.statusText || text);
          var err = new Error('GET ' + path + ' -> HTTP ' + res.status + ' ' + msg);
          err.status = res.status;
          throw err;
        }
        if (!body) throw new Error('GET ' + path + ': the answer is not JSON');
        return body;
      });
    }, function (e) {
      throw new Error('cannot reach the controller (GET ' + path + '): ' + (e && e.message ? e.message : e));
    });
  }

  function listJobs() {
    var items = [];
    function page(cont, n) {
      var q = '/v1/jobs?limit=1000' + (cont ? '&continue=' + encodeURIComponent(cont) : '');
      return api(q).then(function (b) {
        items = items.concat(b.items || []);
        if (b['continue'] && n < 50) return page(b['continue'], n + 1);
        return items;
      });
    }
    return page('', 0);
  }

  function num(x, digits) {
    return (typeof x === 'number' && isFinite(x)) ? x.toFixed(digits) : '-';
  }
  function utc(ms) {
    var d = new Date(ms);
    var p = function (v) { return (v < 10 ? '0' : '') + v; };
    return d.getUTCFullYear() + '-' + p(d.getUTCMonth() + 1) + '-' + p(d.getUTCDate()) + ' ' +
           p(d.getUTCHours()) + ':' + p(d.getUTCMinutes()) + ' UTC';
  }
  function cell(tr, field, text, title, cls) {
    var td = document.createElement('td');
    td.setAttribute('data-field', field);
    td.textContent = text;
    if (title) td.title = title;
    if (cls) td.className = cls;
    tr.appendChild(td);
    return td;
  }

  function renderJobs(jobs) {
    var rows = [];
    jobs.slice().reverse().forEach(function (j) {  // newest first
      var p = j.progress || {}, e = j.energy || {}, pl = j.placement, spec = j.spec || {};
      var reported = !!p.state;
      var tr = document.createElement('tr');
      tr.setAttribute('data-job-id', j.id);
      tr.setAttribute('data-state', j.state);
      cell(tr, 'id', j.id);
      cell(tr, 'name', spec.name || '');
      cell(tr, 'state', j.state, j.failure_reason || (p.message || ''), 'state state-' + String(j.state).toLowerCase());
      var prog = '-', pct = -1;
      if (p.total_steps > 0) {
        pct = Math.max(0, Math.min(100, Math.floor(100 * p.step / p.total_steps)));
        prog = pct + '% \u00b7 step ' + p.step + '/' + p.total_steps;
      } else if (p.step > 0) {
        prog = 'step ' + p.step;
      }
      var pc = cell(tr, 'progress', '', p.eta_s > 0 ? 'ETA ' + Math.round(p.eta_s) + ' s' : '');
      if (pct >= 0) {
        var bar = document.createElement('span'), fill = document.createElement('span');
        bar.className = 'bar';
        fill.style.width = pct + '%';
        bar.appendChild(fill);
        pc.appendChild(bar);
      }
      pc.appendChild(document.createTextNode(prog));
      cell(tr, 'loss', reported ? num(p.loss, 3) : '-', p.val_loss ? 'validation ' + num(p.val_loss, 3) : '', 'num');
      cell(tr, 'tokens_per_s', reported ? num(p.tokens_per_s, 0) : '-', '', 'num');
      var og = e.operational_grams || 0, eg = e.embodied_grams || 0;
      cell(tr, 'grams', (reported || og || eg) ? num(og + eg, 2) + ' g (' + num(og, 2) + ' + ' + num(eg, 2) + ')' : '-',
           e.joules ? num(e.joules / 3.6e6, 4) + ' kWh' : '', 'num');
      cell(tr, 'region', pl ? pl.region : '-', pl ? pl.explanation : '');
      var saving = '-';
      if (pl) {
        saving = num(pl.grams_avoided, 2) + ' g';
        if (pl.run_now_home_grams > 0) saving += ' (' + Math.round(100 * pl.grams_avoided / pl.run_now_home_grams) + '%)';
      }
      cell(tr, 'saving', saving, pl ? pl.policy + ': expected ' + num(pl.expected_grams, 2) + ' g vs ' +
           num(pl.run_now_home_grams, 2) + ' g running now at home' : '', 'num');
      rows.push(tr);
    });
    var tb = $('jobs-body');
    while (tb.firstChild) tb.removeChild(tb.firstChild);
    rows.forEach(function (r) { tb.appendChild(r); });
    $('jobs-empty').hidden = jobs.length > 0;
  }

  function el(tag, attrs, parent) {
    var n = document.createElementNS(SVGNS, tag);
    for (var k in attrs) n.setAttribute(k, attrs[k]);
    if (parent) parent.appendChild(n);
    return n;
  }

  function chart(r, jobs) {
    var W = 640, H = 210, L = 46, R = 10, T = 10, B = 28;
    var s = el('svg', { 'class': 'forecast', viewBox: '0 0 ' + W + ' ' + H, role: 'img',
                        'data-region': r.name, 'aria-label': r.name + ' intensity forecast' });
    var pts = (r.forecast || []).map(function (f) { return { t: Date.parse(f.time), g: f.gco2_per_kwh }; })
      .filter(function (q) { return isFinite(q.t) && typeof q.g === 'number' && isFinite(q.g); })
      .sort(function (a, b) { return a.t - b.t; });
    if (!pts.length) {
      el('text', { x: W / 2, y: H / 2, 'text-anchor': 'middle', 'class': 'label' }, s).textContent = 'no forecast';
      return s;
    }
    var t0 = pts[0].t, t1 = t0 + 48 * HOUR;
    var top = 1;
    pts.forEach(function (q) { if (q.t < t1 && q.g > top) top = q.g; });
    // A round tick step (1, 2, 2.5 or 5 x 10^n) giving at most 5 gridlines.
    var raw = top / 4, mag = Math.pow(10, Math.floor(Math.log10(raw))), step = 10 * mag;
    [1, 2, 2.5, 5].some(function (m) { if (m * mag >= raw) { step = m * mag; return true; } return false; });
    var ticks = Math.ceil(top / step), gmax = ticks * step;
    var x = function (t) { return L + (Math.min(Math.max(t, t0), t1) - t0) / (t1 - t0) * (W - L - R); };
    var y = function (g) { return T + (1 - g / gmax) * (H - T - B); };
    // The chosen windows, beneath the line.
    jobs.forEach(function (j) {
      (j.placement.windows || []).forEach(function (w) {
        var a = Date.parse(w.start), b = Date.parse(w.end);
        if (!(b > t0 && a < t1)) return;
        var rect = el('rect', { 'class': 'window', 'data-window-job': j.id, x: x(a).toFixed(1), y: T,
                                width: Math.max(1.5, x(b) - x(a)).toFixed(1), height: H - T - B }, s);
        el('title', {}, rect).textContent = ((j.spec && j.spec.name) || j.id) + ' (' + j.id + ', ' + j.state +
          '): ' + utc(a) + ' to ' + utc(b);
      });
    });
    // Axes, horizontal grid with labels, a tick every 6 h labelled every 12 h.
    for (var i = 0; i <= ticks; ++i) {
      var g = step * i, yy = y(g).toFixed(1);
      el('line', { 'class': 'axis', x1: L, x2: W - R, y1: yy, y2: yy, 'stroke-dasharray': i ? '2 3' : '' }, s);
      el('text', { 'class': 'label', x: L - 4, y: (+yy + 3).toFixed(1), 'text-anchor': 'end' }, s).textContent =
        String(Math.round(g * 10) / 10);
    }
    for (var h = 0; h <= 48; h += 6) {
      var xx = x(t0 + h * HOUR).toFixed(1);
      el('line', { 'class': 'axis', x1: xx, x2: xx, y1: H - B, y2: H - B + 4 }, s);
      if (h % 12 === 0) {
        var d = new Date(t0 + h * HOUR);
        el('text', { 'class': 'label', x: xx, y: H - B + 15, 'text-anchor': h === 0 ? 'start' : h === 48 ? 'end' : 'middle' }, s)
          .textContent = (h === 0 ? 'now ' : '+' + h + ' h ') + ('0' + d.getUTCHours()).slice(-2) + ':00Z';
      }
    }
    // The forecast as a step function: each point holds until the next
    // (the last one until the end of the chart).
    var path = '';
    pts.forEach(function (q) {
      if (q.t >= t1) return;
      var X = x(q.t).toFixed(1), Y = y(q.g).toFixed(1);
      path += path ? ' H' + X + ' V' + Y : 'M' + X + ' ' + Y;
    });
    path += ' H' + x(t1).toFixed(1);
    el('path', { 'class': 'line', d: path }, s);
    return s;
  }

  function renderRegions(reg, jobs) {
    var box = $('regions');
    while (box.firstChild) box.removeChild(box.firstChild);
    (reg.items || []).forEach(function (r) {
      var placed = jobs.filter(function (j) {
        return j.placement && j.placement.region === r.name && !TERMINAL[j.state];
      });
      var fig = document.createElement('figure');
      fig.className = 'region';
      fig.setAttribute('data-region', r.name);
      var cap = document.createElement('figcaption');
      cap.textContent = r.name + ' ';
      var meta = document.createElement('span');
      meta.className = 'meta';
      meta.textContent = 'now ' + num(r.intensity_gco2_per_kwh, 0) + ' gCO2e/kWh \u00b7 ' + r.free_nodes + '/' +
        r.capacity_nodes + ' nodes free \u00b7 ' + r.gpus_per_node + ' GPUs/node \u00b7 PUE ' + num(r.pue, 2) +
        ' \u00b7 ' + r.executor;
      cap.appendChild(meta);
      fig.appendChild(cap);
      fig.appendChild(chart(r, placed));
      var legend = document.createElement('div');
      legend.className = 'legend';
      legend.appendChild(document.createElement('i'));
      legend.appendChild(document.createTextNode(placed.length
        ? 'windows of ' + placed.map(function (j) { return (j.spec && j.spec.name) || j.id; }).join(', ')
        : 'no job placed here'));
      fig.appendChild(legend);
      box.appendChild(fig);
    });
  }

  function refresh() {
    clearTimeout(timer);
    timer = null;
    var gen = ++generation;
    if (!getToken()) {
      setStatus('no-token');
      showTokenForm(true);
      return;
    }
    showTokenForm(false);
    if (document.body.getAttribute('data-status') !== 'ok') setStatus('loading');
    Promise.all([listJobs(), api('/v1/regions')]).then(function (res) {
      if (gen !== generation) return;
      renderJobs(res[0]);
      renderRegions(res[1], res[0]);
      $('policy').textContent = res[1].policy || '-';
      $('updated').textContent = 'updated ' + new Date().toISOString().replace('T', ' ').slice(0, 19) + ' UTC';
      clearError();
      setStatus('ok');
      timer = setTimeout(refresh, REFRESH_MS);
    }, function (e) {
      if (gen !== generation) return;
      showError(e.message + (e.status === 401 ? '\nThe token was refused: enter another one.' : ''));
      if (e.status === 401 || e.status === 403) {
        showTokenForm(true);  // a refused token will not start working: wait for a new one
      } else {
        timer = setTimeout(refresh, REFRESH_MS);
      }
    });
  }

  $('token-form').addEventListener('submit', function (ev) {
    ev.preventDefault();
    var t = $('token-input').value.trim();
    if (!t) return;
    setToken(t);
    $('token-input').value = '';
    clearError();
    refresh();
  });
  $('forget').addEventListener('click', function () {
    setToken('');
    renderJobs([]);
    renderRegions({ items: [] }, []);
    clearError();
    refresh();
  });
  window.addEventListener('hashchange', function () { takeFragmentToken(); refresh(); });
  takeFragmentToken();
  refresh();
})();
</script>
</body>
</html>
)HTML";

}  // namespace

const std::string& status_page_html() {
  static const std::string html(kHtml);
  return html;
}

const std::vector<std::pair<std::string, std::string>>& status_page_headers() {
  static const std::vector<std::pair<std::string, std::string>> h = {
      {"Content-Security-Policy",
       "default-src 'none'; script-src 'unsafe-inline'; style-src 'unsafe-inline'; connect-src 'self'; "
       "img-src data:; base-uri 'none'; form-action 'none'; frame-ancestors 'none'"},
      {"Cache-Control", "no-store"},
      {"X-Content-Type-Options", "nosniff"},
      {"Referrer-Policy", "no-referrer"},
      {"X-Frame-Options", "DENY"}};
  return h;
}

}  // namespace controller
