// Weir's dashboard script: no framework, no build step (served as is from the binary).
// It keeps the admin token in sessionStorage (this tab only; never in a URL), polls
// /dashboard/data once a second with "Authorization: Bearer <token>", and draws the page
// with DOM calls: server data is always written as text, never parsed as markup. The
// charts are hand-drawn SVG.
'use strict';

(function () {
  const TOKEN_KEY = 'weir.dashboard.token';
  const POLL_MS = 1000;
  const SVG = 'http://www.w3.org/2000/svg';
  const $ = (id) => document.getElementById(id);

  let timer = null;
  let inFlight = false;

  function el(tag, className, text) {
    const node = document.createElement(tag);
    if (className) node.className = className;
    if (text !== undefined && text !== null) node.textContent = String(text);
    return node;
  }

  function svg(tag, attrs) {
    const node = document.createElementNS(SVG, tag);
    for (const [name, value] of Object.entries(attrs || {})) node.setAttribute(name, value);
    return node;
  }

  function setStatus(state, message) {
    document.body.dataset.state = state;
    $('status').textContent = message;
  }

  function token() {
    return sessionStorage.getItem(TOKEN_KEY);
  }

  function stop() {
    if (timer !== null) clearInterval(timer);
    timer = null;
  }

  function lock(message) {
    stop();
    sessionStorage.removeItem(TOKEN_KEY);
    $('board').hidden = true;
    $('forget').hidden = true;
    $('login').hidden = false;
    $('login-error').textContent = message || '';
    setStatus('locked', 'locked');
    $('token').value = '';
    $('token').focus();
  }

  function start() {
    $('login').hidden = true;
    $('forget').hidden = false;
    setStatus('loading', 'loading…');
    poll();
    timer = setInterval(poll, POLL_MS);
  }

  async function poll() {
    if (inFlight || token() === null) return;
    inFlight = true;
    try {
      const response = await fetch('/dashboard/data', {
        headers: { Authorization: 'Bearer ' + token() },
        cache: 'no-store',
        credentials: 'omit',
        referrerPolicy: 'no-referrer',
      });
      if (response.status === 401 || response.status === 403) {
        lock('Refused (' + response.status + '): missing or wrong admin token.');
        return;
      }
      if (!response.ok) {
        setStatus('error', 'the data endpoint answered ' + response.status);
        return;
      }
      const data = await response.json();
      render(data);
      $('board').hidden = false;
      setStatus('live', 'live · ' + new Date(data.now_unix_ms).toISOString().replace('T', ' ').slice(0, 19) + ' UTC');
    } catch (error) {
      setStatus('error', 'cannot reach the server: ' + error.message);
    } finally {
      inFlight = false;
    }
  }

  // ---- formatting ----

  function ago(nowMs, thenMs) {
    const s = Math.max(0, Math.round((nowMs - thenMs) / 1000));
    if (s < 120) return s + ' s ago';
    if (s < 7200) return Math.round(s / 60) + ' min ago';
    return Math.round(s / 3600) + ' h ago';
  }

  function clock(ms) {
    return new Date(ms).toISOString().replace('T', ' ').slice(0, 19) + ' UTC';
  }

  function duration(ms) {
    if (ms === null || ms === undefined) return '';
    if (ms % 86400000 === 0) return ms / 86400000 + ' d';
    if (ms % 3600000 === 0) return ms / 3600000 + ' h';
    if (ms % 60000 === 0) return ms / 60000 + ' min';
    if (ms % 1000 === 0) return ms / 1000 + ' s';
    return ms + ' ms';
  }

  // A time left, in whole seconds rounded up (29.46 s is "30 s": never sooner than said).
  function countdown(ms) {
    if (ms === null || ms === undefined) return '';
    return Math.ceil(ms / 1000) + ' s';
  }

  function count(n, one, many) {
    return n + ' ' + (n === 1 ? one : many);
  }

  function sum(values, from) {
    let total = 0;
    for (let i = Math.max(0, from); i < values.length; i++) total += values[i];
    return total;
  }

  // ---- rendering ----

  function render(data) {
    $('shadow-banner').hidden = !data.global_shadow;
    renderStore(data.store);
    renderConfig(data.config, data.now_unix_ms);
    const history = data.history;
    const byRule = new Map(history.series.map((s) => [s.rule, s]));
    renderRates(history);
    renderCharts(history);
    renderTop(data.top_denied, 'top', 'top-total', 'enforced denial', 'enforced denials', 'No key denied yet.');
    renderTop(data.top_shadow_denied, 'top-shadow', 'top-shadow-total', 'denial not enforced',
      'denials not enforced', 'No denial left unenforced.');
    renderRules(data.rules, data.rules_total, byRule);
    const panels = data.panels || {};
    renderBreakers(panels.upstreams || []);
    renderInFlight(panels.in_flight || null);
  }

  // weir proxy's in-flight limit. The server sends the figures now; the chart is this
  // page's own memory of them, one point per poll (the last 5 minutes).
  const IN_FLIGHT_POINTS = 300;
  const inFlightSeen = [];

  function renderInFlight(p) {
    $('in-flight').hidden = p === null;
    if (p === null) return;
    inFlightSeen.push([p.limit, p.in_flight, p.queued]);
    if (inFlightSeen.length > IN_FLIGHT_POINTS) inFlightSeen.shift();
    const mode = $('in-flight-mode');
    mode.textContent = p.mode;
    mode.className = 'badge in-flight-' + p.mode;
    $('in-flight-now').textContent = 'limit ' + p.limit + ' · ' + p.in_flight +
      ' in flight · ' + p.queued + ' queued';
    const ms = (v) => (v === null || v === undefined ? 'not measured yet' : v.toFixed(1) + ' ms');
    $('in-flight-rtt').textContent = p.mode === 'adaptive'
      ? 'unloaded latency (min RTT) ' + ms(p.min_rtt_ms) + (p.measuring ? ', measuring now' : '') +
        ' · sampled latency ' + ms(p.sample_rtt_ms)
      : 'a fixed limit: no latency is measured';
    $('in-flight-chart').replaceChildren(inFlightChart(inFlightSeen));
    const priorities = new Map();
    for (const a of p.admitted) priorities.set(a.priority, [a.count, 0]);
    for (const s of p.shed) priorities.set(s.priority, [(priorities.get(s.priority) || [0])[0], s.count]);
    const rows = [...priorities.entries()].sort((a, b) => b[0] - a[0]).map(([priority, [admitted, shed]]) => {
      const row = el('tr', shed > 0 ? 'hot' : null);
      row.append(el('td', 'num', priority), el('td', 'num', admitted), el('td', 'num', shed));
      return row;
    });
    $('in-flight-table').tBodies[0].replaceChildren(...rows);
  }

  function inFlightChart(points) {
    // The rules' charts' proportions (a view box 1000 wide, the scale's top at the left),
    // so that the page draws its label at their size, not four times it.
    const width = 1000;
    const height = 110;
    const left = 40;
    const plotW = width - left - 4;
    const plotH = height - 14 - 6;
    const top = Math.max(1, ...points.map((p) => Math.max(...p)));
    const offset = IN_FLIGHT_POINTS - points.length;
    const x = (i) => left + ((offset + i) * plotW) / (IN_FLIGHT_POINTS - 1);
    const y = (v) => 6 + plotH - (v * plotH) / top;
    const root = svg('svg', { viewBox: '0 0 ' + width + ' ' + height });
    root.append(svg('line', { x1: left, y1: y(0), x2: width - 4, y2: y(0), class: 'axis' }));
    const label = svg('text', { x: left - 6, y: 16, class: 'label', 'text-anchor': 'end' });
    label.textContent = String(top);
    root.append(label);
    ['line-allowed', 'line-denied', 'line-shadow'].forEach((cls, k) => {
      const d = points.map((p, i) => (i === 0 ? 'M' : 'L') + x(i).toFixed(1) + ' ' + y(p[k]).toFixed(1));
      root.append(svg('path', { d: d.join(' '), class: cls }));
    });
    return root;
  }

  // weir proxy's circuit breakers, one row per upstream. The server sends the state now;
  // the strip is this page's own memory of it, one mark per poll (the last 5 minutes).
  const BREAKER_MARKS = 300;
  const breakerSeen = new Map();

  function renderBreakers(upstreams) {
    $('breakers').hidden = upstreams.length === 0;
    const rows = upstreams.map((b) => {
      const marks = breakerSeen.get(b.upstream) || [];
      marks.push(b.state);
      if (marks.length > BREAKER_MARKS) marks.shift();
      breakerSeen.set(b.upstream, marks);
      const row = el('tr', b.state === 'closed' ? null : 'hot');
      row.dataset.upstream = b.upstream;
      const state = el('span', 'badge breaker-' + b.state, b.state.replace('_', '-'));
      let now;
      if (b.state === 'open') now = 'probes in ' + countdown(b.open_remaining_ms);
      else if (b.state === 'half_open') now = 'probe calls decide';
      else now = b.window_calls + ' calls in the window, ' + b.window_failures + ' failed, ' +
        b.window_slow + ' slow';
      const stateCell = el('td');
      stateCell.append(state);
      const strip = el('td');
      strip.append(breakerStrip(marks));
      row.append(el('td', 'mono', b.upstream), stateCell, el('td', null, now), strip,
        el('td', 'num', b.opened), el('td', 'num', b.closed), el('td', 'num', b.rejected));
      return row;
    });
    $('breaker-table').tBodies[0].replaceChildren(...rows);
  }

  function breakerStrip(marks) {
    const root = svg('svg', { viewBox: '0 0 ' + BREAKER_MARKS + ' 10', class: 'strip',
      preserveAspectRatio: 'none' });
    const offset = BREAKER_MARKS - marks.length;
    marks.forEach((state, i) => {
      root.append(svg('rect', { x: offset + i, y: 0, width: 1, height: 10,
        class: 'mark-' + state }));
    });
    return root;
  }

  function renderStore(store) {
    const mode = store.mode === 'store' ? 'normal' : store.mode;
    $('store-kind').textContent = store.store;
    const badge = $('store-mode');
    badge.textContent = mode;
    badge.className = 'badge ' + mode;
    $('store-card').dataset.mode = mode;
    $('store-ready').textContent =
      (store.ready ? 'ready' : 'NOT READY') + ' · ' + (store.store_reachable ? 'answers' : 'does not answer');
    $('store-detail').textContent = store.detail || '';
  }

  function renderConfig(config, nowMs) {
    $('config-source').textContent = config.source;
    $('config-loaded').textContent =
      count(config.rules, 'rule', 'rules') + ' in ' +
      count(config.domains.length, 'domain', 'domains') + ', generation ' +
      config.generation + ', loaded ' + clock(config.loaded_at_unix_ms) + ' (' +
      ago(nowMs, config.loaded_at_unix_ms) + ')';
    const last = $('config-last');
    last.textContent = 'last reload: ' + (config.last_ok ? 'ok' : 'FAILED, the rules above stay in force') +
      ', ' + ago(nowMs, config.last_attempt_unix_ms) + ' (' + config.reloads_ok + ' ok, ' +
      config.reloads_failed + ' failed since start)';
    last.className = config.last_ok ? '' : 'alert';
    const error = $('config-error');
    error.hidden = !config.last_error;
    error.textContent = config.last_error || '';
  }

  function renderRates(history) {
    let allowedNow = 0;
    let deniedNow = 0;
    let deniedMinute = 0;
    let shadowMinute = 0;
    const last = history.seconds - 1;
    for (const s of history.series) {
      allowedNow += s.allowed[last] || 0;
      deniedNow += s.denied[last] || 0;
      deniedMinute += sum(s.denied, history.seconds - 60);
      shadowMinute += sum(s.shadow_denied, history.seconds - 60);
    }
    $('rate-allowed').textContent = allowedNow;
    $('rate-denied').textContent = deniedNow;
    $('minute-denied').textContent = deniedMinute;
    $('minute-shadow').textContent = shadowMinute;
  }

  function renderCharts(history) {
    const charts = $('charts');
    const series = history.series.slice();
    // The most denied rules first, then the busiest.
    const weight = (s) => [sum(s.denied, 0) + sum(s.shadow_denied, 0), sum(s.allowed, 0)];
    series.sort((a, b) => {
      const [da, aa] = weight(a);
      const [db, ab] = weight(b);
      return db - da || ab - aa;
    });
    if (series.length > 1) {
      const total = { rule: 'all rules', domain: '', allowed: [], denied: [], shadow_denied: [] };
      for (let i = 0; i < history.seconds; i++) {
        total.allowed.push(series.reduce((t, s) => t + s.allowed[i], 0));
        total.denied.push(series.reduce((t, s) => t + s.denied[i], 0));
        total.shadow_denied.push(series.reduce((t, s) => t + s.shadow_denied[i], 0));
      }
      series.unshift(total);
    }
    charts.replaceChildren(...series.map((s) => chart(s, history.seconds)));
    $('charts-empty').hidden = series.length > 0;
  }

  function chart(series, seconds) {
    const box = el('div', 'chart');
    box.dataset.rule = series.rule;
    const deniedMinute = sum(series.denied, seconds - 60);
    box.dataset.denied = String(deniedMinute);
    const title = el('h3', null, series.rule);
    const last = seconds - 1;
    title.append(el('span', 'rates',
      'now ' + series.allowed[last] + ' allowed/s, ' + series.denied[last] + ' denied/s · ' +
      sum(series.allowed, seconds - 60) + ' allowed, ' + deniedMinute + ' denied in the last minute'));
    box.append(title);

    const width = 1000;
    const height = 110;
    const left = 40;
    const bottom = 14;
    const plotW = width - left - 4;
    const plotH = height - bottom - 6;
    const max = Math.max(1, ...series.allowed, ...series.denied, ...series.shadow_denied);
    const x = (i) => left + (seconds <= 1 ? plotW : (i * plotW) / (seconds - 1));
    const y = (v) => 6 + plotH - (v * plotH) / max;
    const points = (values) => values.map((v, i) => x(i).toFixed(1) + ',' + y(v).toFixed(1)).join(' ');

    const root = svg('svg', { viewBox: '0 0 ' + width + ' ' + height, role: 'img' });
    root.append(svg('title'));
    root.firstChild.textContent = series.rule + ': decisions per second over the last ' + seconds + ' s';
    root.append(svg('line', { class: 'axis', x1: left, x2: width - 4, y1: 6 + plotH, y2: 6 + plotH }));
    root.append(svg('line', { class: 'axis', x1: left, x2: width - 4, y1: 6, y2: 6 }));
    const maxLabel = svg('text', { class: 'label', x: left - 4, y: 14, 'text-anchor': 'end' });
    maxLabel.textContent = max + '/s';
    root.append(maxLabel);
    const zero = svg('text', { class: 'label', x: left - 4, y: 6 + plotH, 'text-anchor': 'end' });
    zero.textContent = '0';
    root.append(zero);
    for (let m = Math.floor(seconds / 60); m >= 0; m--) {
      const i = seconds - 1 - m * 60;
      if (i < 0) continue;
      const tick = svg('text', { class: 'label', x: x(i), y: height - 2, 'text-anchor': m === 0 ? 'end' : 'middle' });
      tick.textContent = m === 0 ? 'now' : '−' + m + ' min';
      root.append(tick);
    }
    const deniedArea = x(0).toFixed(1) + ',' + y(0).toFixed(1) + ' ' + points(series.denied) + ' ' +
      x(seconds - 1).toFixed(1) + ',' + y(0).toFixed(1);
    root.append(svg('polygon', { class: 'area-denied', points: deniedArea }));
    root.append(svg('polyline', { class: 'line-allowed', points: points(series.allowed) }));
    if (series.shadow_denied.some((v) => v > 0)) {
      root.append(svg('polyline', { class: 'line-shadow', points: points(series.shadow_denied) }));
    }
    root.append(svg('polyline', { class: 'line-denied', points: points(series.denied) }));
    box.append(root);
    return box;
  }

  // The enforced denials and, apart, those not enforced (shadow, roll-out): a shadow key
  // never ranks among the most denied, and each total matches its own chart line.
  function renderTop(top, table, total, one, many, none) {
    $(total).textContent = count(top.total_denials, one, many) + ' counted since start';
    const rows = top.keys.map((k) => {
      const row = el('tr');
      row.append(el('td', 'key', k.key), el('td', 'mono', k.rule),
        el('td', 'num', k.error > 0 ? k.count + ' (±' + k.error + ')' : k.count));
      return row;
    });
    if (rows.length === 0) {
      const row = el('tr');
      const cell = el('td', 'hint', none);
      cell.colSpan = 3;
      row.append(cell);
      rows.push(row);
    }
    $(table).tBodies[0].replaceChildren(...rows);
  }

  function renderRules(rules, total, byRule) {
    $('rules-count').textContent = rules.length < total
      ? 'The first ' + rules.length + ' of ' + total + ' rules.'
      : count(total, 'rule', 'rules') + '.';
    const rows = rules.map((r) => {
      const s = byRule.get(r.id);
      const allowed = s ? sum(s.allowed, s.allowed.length - 60) : 0;
      const denied = s ? sum(s.denied, s.denied.length - 60) : 0;
      const row = el('tr', denied > 0 ? 'hot' : null);
      row.dataset.rule = r.id;
      const name = el('td', 'mono', r.id);
      if (r.name) name.title = r.name;
      let enforced = r.shadow ? 'shadow' : (r.enforce_percent < 100 ? r.enforce_percent + ' %' : 'yes');
      if (r.on_failure) enforced += ' · on failure: ' + r.on_failure;
      let algorithm = r.warmup
        ? r.algorithm + ', warming up over ' + duration(r.warmup.period_ms) + ' from 1/' + r.warmup.cold_factor
        : r.algorithm;
      if (r.mode === 'leased') algorithm += ', leased';
      if (r.lockout) {
        algorithm += ', lockout ' + duration(r.lockout.duration_ms) +
          (r.lockout.max_ms > r.lockout.duration_ms ? ' up to ' + duration(r.lockout.max_ms) : '');
      }
      row.append(name, el('td', null, algorithm),
        el('td', 'num', r.limit === null ? '∞' : r.limit), el('td', null, duration(r.window_ms)),
        el('td', null, enforced), el('td', 'mono', r.file),
        el('td', 'num', allowed), el('td', 'num' + (denied > 0 ? ' denied' : ''), denied));
      return row;
    });
    $('rules').tBodies[0].replaceChildren(...rows);
  }

  // ---- wiring ----

  document.addEventListener('DOMContentLoaded', () => {
    $('login').addEventListener('submit', (event) => {
      event.preventDefault();
      const value = $('token').value.trim();
      if (!value) return;
      sessionStorage.setItem(TOKEN_KEY, value);
      $('token').value = '';
      $('login-error').textContent = '';
      start();
    });
    $('forget').addEventListener('click', () => lock(''));
    if (token() !== null) start();
    else lock('');
  });
})();
