// Cove's dashboard: one page, no build step. It logs in with an API key
// (the server keeps the session in an HttpOnly cookie, and the page the
// session's token in this origin's storage, sent with every call: a
// cookie a sandbox's page on a sibling host plants is no session without
// it), then calls E2B's
// REST API as the session's team under /dashboard/api/e2b/, and Cove's own
// /dashboard/api/ for API keys and nodes. Every value shown goes through
// esc() or textContent: sandboxes' metadata and logs are the users'.
import { Terminal } from './vendor/xterm.mjs';

const E2B = '/dashboard/api/e2b';
const TOKEN = 'cove.session';
const $ = (sel) => document.querySelector(sel);
const view = () => $('#view');
let team = '';
let csrf = localStorage.getItem(TOKEN) || '';
let operator = false;
let timers = [];
let cleanups = [];

const esc = (s) => String(s ?? '').replace(/[&<>"']/g, (c) => ({ '&': '&amp;', '<': '&lt;', '>': '&gt;', '"': '&quot;', "'": '&#39;' }[c]));

class LoggedOut extends Error {}

// api calls the dashboard's server; a 401 shows the login again.
async function api(method, path, body) {
  const headers = {};
  if (body !== undefined) headers['Content-Type'] = 'application/json';
  if (csrf) headers['X-Cove-CSRF'] = csrf;
  const r = await fetch(path, { method, headers, body: body === undefined ? undefined : JSON.stringify(body), credentials: 'same-origin' });
  if (r.status === 401 && !path.endsWith('/login')) {
    showLogin();
    throw new LoggedOut('logged out');
  }
  const text = await r.text();
  const data = text ? JSON.parse(text) : null;
  if (!r.ok) throw new Error((data && data.message) || `${r.status} ${r.statusText}`);
  return { data, headers: r.headers };
}

function every(ms, fn) {
  const t = setInterval(() => fn().catch(report), ms);
  timers.push(t);
}

function report(err) {
  if (err instanceof LoggedOut) return;
  const el = $('#error');
  if (el) el.textContent = err.message;
  else console.error(err);
}

// ---- login ----

function showLogin() {
  csrf = '';
  localStorage.removeItem(TOKEN);
  stopView();
  $('#top').hidden = true;
  view().innerHTML = '';
  $('#login-view').hidden = false;
  $('#api-key').focus();
}

async function login(ev) {
  ev.preventDefault();
  const key = $('#api-key').value.trim();
  const adminToken = $('#admin-token').value.trim();
  $('#login-error').textContent = '';
  try {
    const { data } = await api('POST', '/dashboard/login', adminToken ? { apiKey: key, adminToken } : { apiKey: key });
    $('#api-key').value = '';
    $('#admin-token').value = '';
    start(data);
  } catch (err) {
    $('#login-error').textContent = err.message;
  }
}

function start(session) {
  csrf = session.csrf;
  localStorage.setItem(TOKEN, csrf);
  team = session.team;
  operator = session.operator === true;
  $('#team').textContent = session.team;
  $('#login-view').hidden = true;
  $('#top').hidden = false;
  route();
}

async function logout() {
  try { await api('POST', '/dashboard/logout'); } catch (err) { /* the session may be gone already */ }
  showLogin();
}

// ---- routing ----

function stopView() {
  timers.forEach(clearInterval);
  timers = [];
  cleanups.forEach((f) => f());
  cleanups = [];
}

function route() {
  if (!csrf) return;
  stopView();
  const [, page = 'sandboxes', arg] = location.hash.split('/');
  document.querySelectorAll('[data-nav]').forEach((a) => a.classList.toggle('active', page.startsWith(a.dataset.nav.replace(/s$/, ''))));
  const pages = { sandboxes: sandboxesPage, sandbox: sandboxPage, templates: templatesPage, template: templatePage, keys: keysPage, usage: usagePage, nodes: nodesPage };
  (pages[page] || sandboxesPage)(arg && decodeURIComponent(arg)).catch(report);
}

// ---- sandboxes ----

const dateFormat = new Intl.DateTimeFormat(undefined, { dateStyle: 'short', timeStyle: 'medium' });
// fmtTime shows a time, or — for none (Go's zero time is year 1).
const fmtTime = (t) => {
  const d = new Date(t);
  return !t || Number.isNaN(d.getTime()) || d.getFullYear() < 2000 ? '—' : dateFormat.format(d);
};
const clockFormat = new Intl.DateTimeFormat(undefined, { timeStyle: 'medium' });
const fmtLeft = (t) => {
  const s = Math.round((new Date(t) - Date.now()) / 1000);
  if (s <= 0) return '—';
  return s >= 3600 ? `${Math.floor(s / 3600)}h ${Math.floor((s % 3600) / 60)}m` : s >= 60 ? `${Math.floor(s / 60)}m ${s % 60}s` : `${s}s`;
};
const fmtMeta = (m) => Object.entries(m || {}).map(([k, v]) => `${k}=${v}`).join(' ');
const fmtAxisBytes = (n) => (n >= 1 << 30 ? `${(n / (1 << 30)).toFixed(1)} GiB` : `${Math.round(n / (1 << 20))} MiB`);
const fmtBytes = (n) => (n >= 1 << 30 ? `${(n / (1 << 30)).toFixed(1)} GiB` : `${(n / (1 << 20)).toFixed(1)} MiB`);

// listSandboxes reads every page of the team's sandboxes the filters select.
async function listSandboxes(f) {
  const out = [];
  let next = '';
  do {
    const q = new URLSearchParams({ limit: '100' });
    if (f.state) q.set('state', f.state);
    if (f.template) q.set('template', f.template);
    if (f.metadata) q.set('metadata', f.metadata);
    if (next) q.set('nextToken', next);
    const { data, headers } = await api('GET', `${E2B}/v2/sandboxes?${q}`);
    out.push(...data);
    next = headers.get('X-Next-Token') || '';
  } while (next);
  return out;
}

function sandboxActions(s) {
  const toggle = s.state === 'paused'
    ? `<button type="button" data-act="resume" data-id="${esc(s.sandboxID)}">Resume</button>`
    : `<button type="button" data-act="pause" data-id="${esc(s.sandboxID)}">Pause</button>`;
  return `<span class="actions">${toggle}<button type="button" class="danger" data-act="kill" data-id="${esc(s.sandboxID)}">Kill</button></span>`;
}

// renderSandboxes fills the list's table: one string, one DOM write.
function renderSandboxes(list) {
  const rows = list.map((s) => `<tr data-id="${esc(s.sandboxID)}">
<td><a href="#/sandbox/${esc(encodeURIComponent(s.sandboxID))}">${esc(s.sandboxID)}</a></td>
<td>${esc(s.alias || s.templateID)}</td><td>${esc(s.isolation)}</td>
<td class="state-${esc(s.state)}">${esc(s.state)}</td><td>${esc(s.cpuCount)}</td><td>${esc(s.memoryMB)} MiB</td>
<td>${esc(fmtTime(s.startedAt))}</td><td>${esc(s.state === 'running' ? fmtLeft(s.endAt) : '—')}</td>
<td class="meta">${esc(fmtMeta(s.metadata))}</td><td>${sandboxActions(s)}</td></tr>`).join('');
  $('#sandboxes tbody').innerHTML = rows;
  $('#count').textContent = `${list.length} sandbox${list.length === 1 ? '' : 'es'}`;
}
window.coveRenderSandboxes = renderSandboxes; // the benchmark renders lists of its own

// act runs a sandbox's action; false when the user called it off (a kill
// asks first: what the sandbox holds goes with it).
async function act(action, id) {
  if (action === 'kill') {
    if (!confirm(`Kill sandbox ${id}? Its processes and files go with it; it cannot be resumed.`)) return false;
    await api('DELETE', `${E2B}/sandboxes/${encodeURIComponent(id)}`);
  }
  if (action === 'pause') await api('POST', `${E2B}/sandboxes/${encodeURIComponent(id)}/pause`);
  if (action === 'resume') await api('POST', `${E2B}/sandboxes/${encodeURIComponent(id)}/resume`, { timeout: 300 });
}

async function sandboxesPage() {
  view().innerHTML = `<h1>Sandboxes</h1>
<form class="filters" id="filters">
  <select id="f-state"><option value="running,paused">running and paused</option><option value="running">running</option><option value="paused">paused</option></select>
  <input id="f-template" placeholder="template">
  <input id="f-metadata" placeholder="metadata key=value">
  <span class="count" id="count"></span>
</form>
<p id="error" class="error"></p>
<table id="sandboxes"><thead><tr><th>ID</th><th>Template</th><th>Isolation</th><th>State</th><th>CPUs</th><th>Memory</th><th>Started</th><th>Ends in</th><th>Metadata</th><th></th></tr></thead><tbody></tbody></table>`;
  const filters = () => ({ state: $('#f-state').value, template: $('#f-template').value.trim(), metadata: $('#f-metadata').value.trim() });
  const refresh = async () => renderSandboxes(await listSandboxes(filters()));
  $('#filters').addEventListener('input', () => refresh().catch(report));
  $('#filters').addEventListener('submit', (ev) => ev.preventDefault());
  $('#sandboxes').addEventListener('click', async (ev) => {
    const b = ev.target.closest('button[data-act]');
    if (!b) return;
    b.disabled = true;
    try {
      if (await act(b.dataset.act, b.dataset.id) === false) { b.disabled = false; return; }
      await refresh();
    } catch (err) { report(err); b.disabled = false; }
  });
  await refresh();
  every(2000, refresh);
}

// chart draws one series as an SVG polyline on axes: the value's scale
// (fmtY of 0, half and max) on the left, the first and last sample's
// times below.
function chart(el, points, max, label, fmtY) {
  const w = 420, h = 170, left = 70, right = 10, top = 24, bottom = 24;
  el.setAttribute('viewBox', `0 0 ${w} ${h}`);
  if (points.length === 0) {
    el.innerHTML = `<text x="${left}" y="${h / 2}">no samples yet</text>`;
    return;
  }
  const t0 = points[0][0], t1 = Math.max(points[points.length - 1][0], t0 + 1);
  const x = (t) => (left + ((t - t0) / (t1 - t0)) * (w - left - right)).toFixed(1);
  const y = (v) => (h - bottom - (Math.min(v, max) / max) * (h - top - bottom)).toFixed(1);
  const xy = points.map(([t, v]) => `${x(t)},${y(v)}`);
  const ticks = [0, max / 2, max].map((v) => `<line x1="${left}" y1="${y(v)}" x2="${w - right}" y2="${y(v)}"/>
<text class="y" x="${left - 6}" y="${y(v)}" text-anchor="end" dominant-baseline="middle">${esc(fmtY(v))}</text>`).join('');
  const times = `<text class="x" x="${left}" y="${h - 6}">${esc(clockFormat.format(new Date(t0 * 1000)))}</text>
<text class="x" x="${w - right}" y="${h - 6}" text-anchor="end">${esc(clockFormat.format(new Date(t1 * 1000)))}</text>`;
  el.setAttribute('data-points', String(points.length));
  el.innerHTML = `${ticks}${times}<text x="${left}" y="${top - 8}">${esc(label)}</text><polyline points="${xy.join(' ')}"/>`;
}

async function sandboxPage(id) {
  const path = `${E2B}/sandboxes/${encodeURIComponent(id)}`;
  view().innerHTML = `<h1>Sandbox <span id="sb-id"></span></h1><p id="error" class="error"></p>
<div class="actions" id="sb-actions"></div>
<div class="cards">
  <div class="card"><h2>Details</h2><dl id="sb-details"></dl></div>
  <div class="card"><h2>CPU</h2><svg class="chart" id="cpu-chart"></svg></div>
  <div class="card"><h2>Memory</h2><svg class="chart" id="mem-chart"></svg></div>
</div>
<h2>Terminal</h2><div id="terminal-box"><button type="button" id="open-terminal" class="primary">Open a terminal</button></div>
<h2>Logs</h2><pre class="log" id="sb-logs"></pre>`;
  $('#sb-id').textContent = id;
  let sb = null;
  const details = async () => {
    try {
      sb = (await api('GET', path)).data;
    } catch (err) {
      if (err instanceof LoggedOut) throw err;
      $('#sb-details').innerHTML = '<dt>state</dt><dd id="sb-state">gone</dd>';
      $('#sb-actions').innerHTML = '';
      return;
    }
    const rows = [['state', sb.state], ['template', sb.alias || sb.templateID], ['isolation', sb.isolation], ['CPUs', sb.cpuCount],
      ['memory', `${sb.memoryMB} MiB`], ['disk', `${sb.diskSizeMB} MiB`], ['started', fmtTime(sb.startedAt)],
      ['ends in', sb.state === 'running' ? fmtLeft(sb.endAt) : '—'], ['metadata', fmtMeta(sb.metadata)]];
    $('#sb-details').innerHTML = rows.map(([k, v]) => `<dt>${esc(k)}</dt><dd${k === 'state' ? ' id="sb-state"' : ''}>${esc(v)}</dd>`).join('');
    $('#sb-actions').innerHTML = sandboxActions(sb);
  };
  const metrics = async () => {
    const { data } = await api('GET', `${path}/metrics`);
    chart($('#cpu-chart'), data.map((m) => [m.timestampUnix, m.cpuUsedPct]), 100, 'CPU used, % of its CPUs', (v) => `${Math.round(v)} %`);
    const memMax = Math.max(1, ...data.map((m) => m.memTotal));
    chart($('#mem-chart'), data.map((m) => [m.timestampUnix, m.memUsed]), memMax, `memory used, of ${fmtBytes(memMax)}`, fmtAxisBytes);
  };
  const logs = async () => {
    const { data } = await api('GET', `${E2B}/v2/sandboxes/${encodeURIComponent(id)}/logs?direction=backward&limit=200`);
    $('#sb-logs').textContent = data.logs.reverse().map((l) => {
      // The command line last: it runs to the line's end (as the CLI shows it).
      const f = Object.entries(l.fields || {}).sort(([a], [b]) => (a === 'cmd') - (b === 'cmd')).map(([k, v]) => `${k}=${v}`).join(' ');
      return `${new Date(l.timestamp).toLocaleTimeString()} ${l.level.toUpperCase().padEnd(5)} ${l.message} ${f}`;
    }).join('\n');
  };
  $('#sb-actions').addEventListener('click', async (ev) => {
    const b = ev.target.closest('button[data-act]');
    if (!b) return;
    b.disabled = true;
    try {
      if (await act(b.dataset.act, id) === false) { b.disabled = false; return; }
      if (b.dataset.act === 'kill') { location.hash = '#/sandboxes'; return; }
      await details();
    } catch (err) { report(err); b.disabled = false; }
  });
  $('#open-terminal').addEventListener('click', () => openTerminal(sb).catch(report));
  await details();
  await Promise.all([metrics().catch(report), logs().catch(report)]);
  every(2000, async () => { await details(); await metrics(); await logs(); });
}

// ---- terminal: the agent's process RPC (Connect, JSON) through the
// proxy, routed by the E2b-Sandbox-Id header; no cookie goes with it.

const enc = new TextEncoder();
const b64 = (bytes) => { let s = ''; for (const b of bytes) s += String.fromCharCode(b); return btoa(s); };
const unb64 = (s) => Uint8Array.from(atob(s), (c) => c.charCodeAt(0));

function agentHeaders(sb, contentType) {
  const h = { 'E2b-Sandbox-Id': sb.sandboxID, 'E2b-Sandbox-Port': '49983', 'Content-Type': contentType, 'Connect-Protocol-Version': '1' };
  if (sb.envdAccessToken) h['X-Access-Token'] = sb.envdAccessToken;
  return h;
}

async function agentCall(sb, method, msg) {
  const r = await fetch(`/process.Process/${method}`, { method: 'POST', headers: agentHeaders(sb, 'application/json'), body: JSON.stringify(msg), credentials: 'omit' });
  if (!r.ok) throw new Error(`${method}: ${r.status} ${await r.text()}`);
}

async function openTerminal(sb) {
  if (!sb || sb.state !== 'running') throw new Error('the sandbox is not running');
  const box = $('#terminal-box');
  box.innerHTML = '<div id="terminal"></div>';
  const cols = 100, rows = 28;
  const term = new Terminal({ cols, rows, convertEol: false, cursorBlink: true, fontSize: 13 });
  term.open($('#terminal'));
  const abort = new AbortController();
  cleanups.push(() => { abort.abort(); term.dispose(); });
  const start = JSON.stringify({ process: { cmd: '/bin/bash', args: ['-l'], envs: { TERM: 'xterm-256color' } }, pty: { size: { cols, rows } } });
  const payload = enc.encode(start);
  const frame = new Uint8Array(5 + payload.length);
  new DataView(frame.buffer).setUint32(1, payload.length);
  frame.set(payload, 5);
  const r = await fetch('/process.Process/Start', { method: 'POST', headers: agentHeaders(sb, 'application/connect+json'), body: frame, credentials: 'omit', signal: abort.signal });
  if (!r.ok) throw new Error(`terminal: ${r.status} ${await r.text()}`);
  // Keystrokes go one request at a time, in order: what is typed while
  // one is on its way goes together in the next.
  let pid = 0, typed = '', sending = false;
  const flush = async () => {
    sending = true;
    while (typed && pid) {
      const d = typed;
      typed = '';
      await agentCall(sb, 'SendInput', { process: { pid }, input: { pty: b64(enc.encode(d)) } }).catch(report);
    }
    sending = false;
  };
  term.onData((d) => { typed += d; if (!sending) flush(); });
  term.focus();
  // The stream: frames of a flags byte, a big-endian length and a JSON
  // message; flag 2 ends it.
  const reader = r.body.getReader();
  let buf = new Uint8Array(0);
  for (;;) {
    const { value, done } = await reader.read().catch(() => ({ done: true }));
    if (done) break;
    const joined = new Uint8Array(buf.length + value.length);
    joined.set(buf);
    joined.set(value, buf.length);
    buf = joined;
    while (buf.length >= 5) {
      const len = new DataView(buf.buffer, buf.byteOffset).getUint32(1);
      if (buf.length < 5 + len) break;
      const flags = buf[0];
      const msg = JSON.parse(new TextDecoder().decode(buf.subarray(5, 5 + len)));
      buf = buf.slice(5 + len);
      if (flags & 2) {
        if (msg.error) term.write(`\r\n[${msg.error.message || msg.error.code}]\r\n`);
        continue;
      }
      const ev = msg.event || {};
      if (ev.start) { pid = ev.start.pid; if (typed && !sending) flush(); }
      if (ev.data && ev.data.pty) term.write(unb64(ev.data.pty));
      if (ev.end) term.write('\r\n[the shell ended]\r\n');
    }
  }
}

// ---- templates ----

// templateStatus is a template's newest build's state: a build in
// progress with how far it is and what it does now; "ready (rebuilding)"
// or "ready (rebuild failed)" while an older build serves.
function templateStatus(t) {
  let status = t.buildStatus;
  if (t.servingBuildID && t.servingBuildID !== t.buildID) {
    if (status === 'building' || status === 'waiting') status = 'ready (rebuilding)';
    else if (status === 'error') status = 'ready (rebuild failed)';
  }
  let html = esc(status);
  if (t.buildProgress !== undefined && t.buildProgress !== null) {
    html += ` ${esc(t.buildProgress)}%${bar(t.buildProgress, 100)}<div class="doing">${esc(t.buildDoing)}</div>`;
  }
  if (t.warmError) html += ` <span class="error">${esc(t.warmError)}</span>`;
  return html;
}

async function templatesPage() {
  view().innerHTML = `<h1>Templates</h1><p id="error" class="error"></p>
<table id="templates"><thead><tr><th>ID</th><th>Names</th><th>Latest build</th><th>Status</th><th>Builds</th><th>CPUs</th><th>Memory</th><th>Updated</th></tr></thead><tbody></tbody></table>`;
  const refresh = async () => {
    const { data } = await api('GET', `${E2B}/templates`);
    $('#templates tbody').innerHTML = data.map((t) => `<tr><td><a href="#/template/${esc(encodeURIComponent(t.templateID))}">${esc(t.templateID)}</a></td>
<td>${esc((t.names || []).join(', '))}</td><td>${esc(t.buildID)}</td><td class="wrap" data-status>${templateStatus(t)}</td>
<td>${esc(t.buildCount)}</td><td>${esc(t.cpuCount)}</td><td>${esc(t.memoryMB)} MiB</td><td>${esc(fmtTime(t.updatedAt))}</td></tr>`).join('');
  };
  await refresh();
  every(3000, refresh);
}

async function templatePage(id) {
  view().innerHTML = `<h1>Template <span id="tpl-id"></span></h1><p id="error" class="error"></p>
<table id="builds"><thead><tr><th>Build</th><th>Status</th><th>Created</th><th>Finished</th><th>CPUs</th><th>Memory</th><th></th></tr></thead><tbody></tbody></table>
<h2>Build log <span id="build-id"></span></h2><pre class="log" id="build-log"></pre>`;
  $('#tpl-id').textContent = id;
  const builds = async () => {
    const { data } = await api('GET', `${E2B}/templates/${encodeURIComponent(id)}`);
    // A build in progress can be cancelled (Cove's own call).
    const cancel = (b) => (b.status === 'building' || b.status === 'waiting'
      ? `<button type="button" class="danger" data-cancel="${esc(b.buildID)}">Cancel</button>` : '');
    $('#builds tbody').innerHTML = data.builds.map((b) => `<tr><td><a href="#" data-build="${esc(b.buildID)}">${esc(b.buildID)}</a></td><td>${esc(b.status)}</td>
<td>${esc(fmtTime(b.createdAt))}</td><td>${esc(b.finishedAt ? fmtTime(b.finishedAt) : '—')}</td><td>${esc(b.cpuCount)}</td><td>${esc(b.memoryMB)} MiB</td><td>${cancel(b)}</td></tr>`).join('');
    return data;
  };
  const data = await builds();
  let shown = '', offset = 0, finished = false;
  // follow reads the shown build's log a page at a time (the server sends
  // at most 100 entries an answer) until the build ended and its log is
  // read to the end.
  const follow = async () => {
    if (!shown || finished) return;
    const { data: st } = await api('GET', `${E2B}/templates/${encodeURIComponent(id)}/builds/${encodeURIComponent(shown)}/status?logsOffset=${offset}`);
    const lines = st.logEntries.map((e) => `${new Date(e.timestamp).toLocaleTimeString()} ${e.level.toUpperCase().padEnd(5)} ${e.step ? `[${e.step}] ` : ''}${e.message}`);
    offset += st.logEntries.length;
    if (lines.length) $('#build-log').textContent += lines.join('\n') + '\n';
    finished = (st.status === 'ready' || st.status === 'error') && st.logEntries.length === 0;
    if (finished && st.reason) $('#build-log').textContent += `error: ${st.reason.message}\n`;
    if (!finished && st.logEntries.length === 100) await follow();
  };
  const show = (build) => {
    shown = build; offset = 0; finished = false;
    $('#build-id').textContent = build;
    $('#build-log').textContent = '';
    follow().catch(report);
  };
  $('#builds').addEventListener('click', async (ev) => {
    const c = ev.target.closest('button[data-cancel]');
    if (c) {
      if (!confirm(`Cancel build ${c.dataset.cancel}? Its steps stop and what it made so far goes.`)) return;
      c.disabled = true;
      try {
        await api('POST', `${E2B}/templates/${encodeURIComponent(id)}/builds/${encodeURIComponent(c.dataset.cancel)}/cancel`);
        await builds();
      } catch (err) {
        report(err);
        c.disabled = false;
      }
      return;
    }
    const a = ev.target.closest('a[data-build]');
    if (!a) return;
    ev.preventDefault();
    show(a.dataset.build);
  });
  if (data.builds.length) show(data.builds[0].buildID);
  every(1000, follow); // a build's log, live while it builds
  every(3000, async () => { await builds(); });
}

// ---- API keys ----

async function keysPage() {
  view().innerHTML = `<h1>API keys</h1><p id="error" class="error"></p>
<form class="filters" id="new-key"><input id="key-name" placeholder="name of a new key" required><button type="submit" class="primary" id="create-key">Create</button></form>
<div id="created"></div>
<table id="keys"><thead><tr><th>Name</th><th>Key</th><th>Created</th><th>Last used</th><th></th></tr></thead><tbody></tbody></table>`;
  const refresh = async () => {
    const { data } = await api('GET', '/dashboard/api/keys');
    const used = (t) => (t && !t.startsWith('0001-') ? fmtTime(t) : 'never');
    $('#keys tbody').innerHTML = data.map((k) => `<tr><td>${esc(k.name)}${k.current ? ' <em>(this session)</em>' : ''}</td><td><code>${esc(k.masked)}</code></td>
<td>${esc(fmtTime(k.createdAt))}</td><td>${esc(used(k.lastUsed))}</td><td><button type="button" class="danger" data-revoke="${esc(k.id)}">Revoke</button></td></tr>`).join('');
  };
  $('#new-key').addEventListener('submit', async (ev) => {
    ev.preventDefault();
    try {
      const { data } = await api('POST', '/dashboard/api/keys', { name: $('#key-name').value });
      $('#key-name').value = '';
      $('#created').innerHTML = '<p class="newkey">Copy the new key now; it is not shown again: <code id="new-key-value"></code></p>';
      $('#new-key-value').textContent = data.key;
      await refresh();
    } catch (err) { report(err); }
  });
  $('#keys').addEventListener('click', async (ev) => {
    const b = ev.target.closest('button[data-revoke]');
    if (!b) return;
    try {
      await api('DELETE', `/dashboard/api/keys/${encodeURIComponent(b.dataset.revoke)}`);
      await refresh();
    } catch (err) { report(err); }
  });
  await refresh();
}

// ---- usage ----

// templateNames maps the team's templates' ids to their first names.
async function templateNames() {
  const { data } = await api('GET', `${E2B}/templates`);
  return Object.fromEntries(data.map((t) => [t.templateID, (t.names || [])[0] || t.templateID]));
}

async function usagePage() {
  view().innerHTML = `<h1>Usage</h1><p id="error" class="error"></p>
<p id="now"></p>
<table id="usage"><thead><tr><th>Template</th><th>Sandbox-seconds</th><th>CPU-seconds</th><th>GiB-seconds of memory</th></tr></thead><tbody></tbody></table>
<p class="hint">What this team's sandboxes held while they ran (paused ones do not count), since the server started: their CPU and memory limits times the seconds they ran.</p>`;
  const refresh = async () => {
    const [{ data: use }, { data: samples }, names] = await Promise.all([
      api('GET', '/dashboard/api/usage'),
      api('GET', `/dashboard/api/e2b/teams/${encodeURIComponent(team)}/metrics`),
      templateNames(),
    ]);
    const last = samples[samples.length - 1];
    const peak = samples.reduce((m, s) => Math.max(m, s.concurrentSandboxes), 0);
    $('#now').textContent = last ? `${last.concurrentSandboxes} running now, at most ${peak} in the last ${samples.length} samples` : 'no sandbox yet';
    $('#usage tbody').innerHTML = use.metered
      ? use.templates.map((u) => `<tr><td>${esc(names[u.template] || u.template)}</td><td>${esc(u.seconds.toFixed(0))}</td><td>${esc(u.cpuSeconds.toFixed(0))}</td><td>${esc(u.memoryGiBSeconds.toFixed(1))}</td></tr>`).join('')
      : '<tr><td colspan="4">Each node meters its own: see its Prometheus metrics (cove_team_sandbox_seconds_total and the like).</td></tr>';
  };
  await refresh();
  every(5000, refresh);
}

// ---- nodes ----

const bar = (used, total) => `<div class="bar" title="${esc(used)} of ${esc(total)}"><span style="width:${total ? Math.min(100, (100 * used) / total).toFixed(0) : 0}%"></span></div>`;

async function nodesPage() {
  view().innerHTML = `<h1>Nodes</h1><p id="error" class="error"></p>
<div class="scroll"><table id="nodes"><thead><tr><th>Node</th><th>Drivers</th><th>Sandboxes</th><th>Warm</th><th>CPU promised</th><th></th><th>Memory promised</th><th></th><th>Last heartbeat</th></tr></thead><tbody></tbody></table></div>
<p class="hint" id="scope">${operator ? 'Every team\'s sandboxes and warm sandboxes (you logged in as the operator).'
    : `Your team's sandboxes alone, and the warm sandboxes of its templates and the built-in ones; promised is what the limits of your team's sandboxes add up to. The operator (logged in with the admin token) sees every team's.`}</p>
<p class="hint" id="overcommit">Promised is what the limits of the node's sandboxes (warm ones included) add up to. CPU may be promised
beyond the node's cores, and that is no fault: a limit is a ceiling (each sandbox gets at most its CPUs), sandboxes seldom use it
all at once, and when they do they share the cores by weight, each running slower. Memory may be promised up to
<code>--memory-overcommit</code> times the node's memory (4 by default); a create past that is refused as the node being full.</p>`;
  const refresh = async () => {
    const [{ data }, names] = await Promise.all([api('GET', '/dashboard/api/nodes'), templateNames()]);
    $('#nodes tbody').innerHTML = data.map((n) => `<tr><td>${esc(n.id)}</td><td class="wrap">${esc(n.drivers.join(', '))}</td><td>${esc(n.sandboxes)}</td>
<td class="wrap" data-warm>${esc(Object.entries(n.warm || {}).map(([t, c]) => `${names[t] || t}: ${c}`).join(', '))}</td>
<td>${esc((n.committedCPUMillis / 1000).toFixed(1))} of ${esc(n.cpus)}</td><td>${bar(n.committedCPUMillis, n.cpus * 1000)}</td>
<td>${esc(n.committedMemoryMB)} of ${esc(n.memoryMB)} MiB</td><td>${bar(n.committedMemoryMB, n.memoryMB)}</td>
<td>${esc(n.heartbeatAgeSeconds ? `${n.heartbeatAgeSeconds.toFixed(1)} s ago` : '—')}</td></tr>`).join('');
  };
  await refresh();
  every(3000, refresh);
}

// ---- start ----

$('#login-form').addEventListener('submit', login);
$('#logout').addEventListener('click', logout);
window.addEventListener('hashchange', route);
if (csrf) {
  api('GET', '/dashboard/api/session')
    .then(({ data }) => start(data))
    .catch(() => showLogin());
} else {
  showLogin();
}
