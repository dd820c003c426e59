// The leasekeeper operator console (docs/console.md). Read-only: it sends
// GET requests only. Every name it shows (locks, clients, keys) was chosen by
// whoever called the API, so it goes into the page as text (textContent,
// text nodes, attribute values), never as HTML: this file must not use
// innerHTML, outerHTML, insertAdjacentHTML or document.write. The server's
// Content-Security-Policy forbids inline script and style as a second line.
'use strict';

(() => {
  const TOKEN_KEY = 'leasekeeper.token';
  const LOCKS_PAGE = 100;
  const LIST_PAGE = 50;
  const SVGNS = 'http://www.w3.org/2000/svg';

  // The token lives in this tab's sessionStorage only: no cookie, no URL.
  let token = sessionStorage.getItem(TOKEN_KEY) || '';
  let serverOffsetMs = 0; // the server's clock minus this browser's, from Date headers
  let booted = false;
  let eventsAbort = null;
  let lastEventId = null;
  let pollTimer = null;

  const state = {
    prefix: '',
    cursors: [''], // the after of each page seen, for "previous"
    next: null,
    view: null, // {kind: 'lock' | 'client', name}
    storeNext: null,
    historyNext: null,
    deadlocks: [],
  };

  const $ = (id) => document.getElementById(id);

  // el makes an element; string and number children become text nodes.
  function el(tag, props, ...kids) {
    const e = document.createElement(tag);
    setProps(e, props);
    append(e, kids);
    return e;
  }

  function svg(tag, attrs, ...kids) {
    const e = document.createElementNS(SVGNS, tag);
    for (const [k, v] of Object.entries(attrs || {})) e.setAttribute(k, String(v));
    append(e, kids);
    return e;
  }

  function setProps(e, props) {
    for (const [k, v] of Object.entries(props || {})) {
      if (v === undefined || v === null) continue;
      if (k === 'class') e.className = v;
      else if (k === 'data') for (const [dk, dv] of Object.entries(v)) e.dataset[dk] = String(dv);
      else if (k === 'on') for (const [ev, fn] of Object.entries(v)) e.addEventListener(ev, fn);
      else e.setAttribute(k, String(v));
    }
  }

  function append(e, kids) {
    for (const k of kids.flat()) {
      if (k === null || k === undefined || k === false) continue;
      e.appendChild(typeof k === 'string' || typeof k === 'number' ? document.createTextNode(String(k)) : k);
    }
  }

  function clear(node) {
    while (node.firstChild) node.removeChild(node.firstChild);
  }

  const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

  // ---- time ----

  function serverNow() {
    return (Date.now() + serverOffsetMs) / 1000;
  }

  function noteDate(res) {
    const d = Date.parse(res.headers.get('Date') || '');
    if (!Number.isFinite(d)) return;
    const off = d - Date.now();
    // The header has whole seconds: below 1.5 s the clocks agree.
    serverOffsetMs = Math.abs(off) > 1500 ? off : 0;
  }

  function pad(n) {
    return String(n).padStart(2, '0');
  }

  function fmtTime(unix) {
    if (unix === null || unix === undefined) return '';
    const d = new Date(unix * 1000);
    const t = pad(d.getHours()) + ':' + pad(d.getMinutes()) + ':' + pad(d.getSeconds());
    const now = new Date();
    if (d.toDateString() === now.toDateString()) return t;
    return d.getFullYear() + '-' + pad(d.getMonth() + 1) + '-' + pad(d.getDate()) + ' ' + t;
  }

  function fmtDur(s) {
    s = Math.max(0, Math.floor(s));
    if (s < 60) return s + 's';
    if (s < 3600) return Math.floor(s / 60) + 'm ' + pad(s % 60) + 's';
    if (s < 86400) return Math.floor(s / 3600) + 'h ' + pad(Math.floor((s % 3600) / 60)) + 'm';
    return Math.floor(s / 86400) + 'd ' + Math.floor((s % 86400) / 3600) + 'h';
  }

  // countdown shows the time left until expires_at, ticking (tick()).
  function countdown(expiresAt) {
    const e = el('span', { class: 'countdown', data: { expires: expiresAt }, title: 'expires at ' + fmtTime(expiresAt) });
    paintCountdown(e);
    return e;
  }

  function paintCountdown(e) {
    const left = Number(e.dataset.expires) - serverNow();
    e.textContent = left > 0 ? fmtDur(Math.ceil(left)) : 'ending';
    e.classList.toggle('soon', left < 5);
  }

  // since shows how long ago a unix time was, ticking.
  function since(unix) {
    const e = el('span', { class: 'since', data: { since: unix } });
    e.textContent = fmtDur(serverNow() - unix);
    return e;
  }

  function tick() {
    for (const e of document.querySelectorAll('[data-expires]')) paintCountdown(e);
    for (const e of document.querySelectorAll('[data-since]')) e.textContent = fmtDur(serverNow() - Number(e.dataset.since));
  }

  // ---- the API ----

  class AuthError extends Error {}

  async function api(path, params) {
    const url = new URL(path, location.origin);
    for (const [k, v] of Object.entries(params || {})) {
      if (v !== null && v !== undefined && v !== '') url.searchParams.set(k, v);
    }
    const headers = { Accept: 'application/json' };
    if (token) headers.Authorization = 'Bearer ' + token;
    const res = await fetch(url, { headers, credentials: 'omit', cache: 'no-store', referrerPolicy: 'no-referrer' });
    noteDate(res);
    let body = null;
    try {
      body = await res.json();
    } catch (_) {
      body = null;
    }
    const msg = (body && body.message) || 'HTTP ' + res.status;
    if (res.status === 401) throw new AuthError(token ? 'The server refused this token: ' + msg : msg);
    if (!res.ok) {
      const err = new Error(msg);
      err.status = res.status;
      throw err;
    }
    return body;
  }

  // ---- links ----

  function lockLink(name) {
    return el('a', { class: 'name lock-link', href: '#lock=' + encodeURIComponent(name), title: name }, name);
  }

  function clientLink(name) {
    if (name === null || name === undefined) return el('span', { class: 'muted', title: 'a client id this token may not see' }, '(hidden)');
    return el('a', { class: 'name client-link', href: '#client=' + encodeURIComponent(name), title: name }, name);
  }

  function modeSpan(mode) {
    return el('span', { class: 'mode mode-' + mode }, mode || '');
  }

  function fill(tbodyParent, emptyId, rows) {
    const tbody = tbodyParent.tBodies[0];
    clear(tbody);
    for (const r of rows) tbody.appendChild(r);
    if (emptyId) $(emptyId).hidden = rows.length > 0;
  }

  // ---- locks list ----

  let locksSeq = 0;

  async function loadLocks() {
    const seq = ++locksSeq;
    const after = state.cursors[state.cursors.length - 1];
    const res = await api('/v1/locks', { limit: LOCKS_PAGE, after, prefix: state.prefix });
    if (seq !== locksSeq) return; // a later load (another page, a search) answers instead
    $('locks-error').textContent = '';
    state.next = res.next;
    const rows = res.locks.map((l) => {
      const holders = el('td', { class: 'holders' },
        l.holders.map((h) => el('span', { class: 'holder', data: { client: h.client, token: h.token } },
          clientLink(h.client), ' ', modeSpan(h.mode), ' ', el('span', { class: 'token' }, '#' + h.token), ' ', countdown(h.expires_at))));
      // A listing shows a lock's first holders only; the lock's view pages them.
      if (l.holder_count > l.holders.length) {
        holders.appendChild(el('span', { class: 'more' }, '+' + (l.holder_count - l.holders.length) + ' more'));
      }
      const oldest = el('td', { class: 'num oldest' });
      if (l.oldest_wait_s !== undefined && l.oldest_wait_s !== null) {
        oldest.appendChild(since(serverNow() - l.oldest_wait_s));
      }
      const tr = el('tr', { data: { lock: l.lock } },
        el('td', null, lockLink(l.lock)), holders, el('td', { class: 'num waiting' }, l.waiting), oldest);
      if (state.view && state.view.kind === 'lock' && state.view.name === l.lock) tr.classList.add('selected');
      return tr;
    });
    fill($('locks'), 'locks-empty', rows);
    $('prev').disabled = state.cursors.length <= 1;
    $('next').disabled = !state.next;
    $('page-info').textContent = 'page ' + state.cursors.length + (state.prefix ? ' · names starting with the search' : '');
  }

  // ---- one lock ----

  async function loadLock(name) {
    $('lock-name').textContent = name;
    $('lock-error').textContent = '';
    const jobs = [
      api('/v1/inspect', { lock: name }).then((r) => {
        fill($('holders'), 'holders-empty', r.holders.map((h) => el('tr', { data: { client: h.client } },
          el('td', null, clientLink(h.client)), el('td', null, modeSpan(h.mode)),
          el('td', { class: 'num token' }, h.token), el('td', { class: 'num' }, countdown(h.expires_at)))));
        fill($('queue'), 'queue-empty', r.queue.map((w) => el('tr', { data: { client: w.client } },
          el('td', { class: 'num position' }, w.position), el('td', null, clientLink(w.client)), el('td', null, modeSpan(w.mode)),
          el('td', { class: 'num estimate', title: 'an estimate from the lock\'s recent hold times' },
            w.estimated_wait_s !== undefined && w.estimated_wait_s !== null ? '~' + fmtDur(w.estimated_wait_s) : '—'))));
        // inspect answers a first page: say how much it left out.
        if (r.next) {
          $('queue').tBodies[0].appendChild(el('tr', { class: 'more' }, el('td', { colspan: 4 },
            'first ' + r.holders.length + ' of ' + r.holder_count + ' holders and ' + r.queue.length + ' of ' + r.queue_length + ' waiters')));
        }
      }),
      loadStore(name, false),
      loadHistory(name, false),
      loadGraph({ lock: name }, { kind: 'lock', name }),
    ];
    const results = await Promise.allSettled(jobs);
    const failed = results.find((r) => r.status === 'rejected');
    if (failed) {
      if (failed.reason instanceof AuthError) throw failed.reason;
      $('lock-error').textContent = failed.reason.message;
    }
  }

  async function loadStore(name, more) {
    const res = await api('/v1/store', { lock: name, limit: LIST_PAGE, after: more ? state.storeNext : '' });
    if (!state.view || state.view.name !== name) return;
    $('store-fence').textContent = res.highest_token === null
      ? '(never written)'
      : '(fence: highest token ' + res.highest_token + ', ' + res.key_count + ' key' + (res.key_count === 1 ? '' : 's') + ')';
    const rows = res.keys.map((k) => el('tr', { data: { key: k.key } },
      el('td', { class: 'name' }, k.key), el('td', { class: 'num token' }, k.token),
      el('td', { title: fmtTime(k.written_at) }, fmtTime(k.written_at)), el('td', { class: 'num' }, k.value_bytes)));
    const tbody = $('store').tBodies[0];
    if (!more) clear(tbody);
    for (const r of rows) tbody.appendChild(r);
    $('store-empty').hidden = tbody.rows.length > 0;
    state.storeNext = res.next;
    $('store-more').hidden = !res.next;
  }

  function historyRow(g, withLock) {
    const how = g.ended === null ? 'live' : g.ended;
    return el('tr', { class: g.ended === null ? 'live' : 'ended-' + g.ended, data: { token: g.token, ended: how } },
      withLock ? el('td', null, lockLink(g.lock)) : null,
      el('td', { class: 'num token' }, g.token),
      withLock ? null : el('td', null, clientLink(g.client)),
      el('td', null, modeSpan(g.mode)),
      el('td', null, fmtTime(g.granted_at)),
      el('td', null, g.ended_at === null ? '' : fmtTime(g.ended_at)),
      el('td', { class: 'how' }, how));
  }

  async function loadHistory(name, more) {
    const res = await api('/v1/history', { lock: name, limit: LIST_PAGE, before: more ? state.historyNext : '' });
    if (!state.view || state.view.name !== name) return;
    const tbody = $('history').tBodies[0];
    if (!more) clear(tbody);
    for (const g of res.grants) tbody.appendChild(historyRow(g, false));
    $('history-empty').hidden = tbody.rows.length > 0;
    state.historyNext = res.next;
    $('history-more').hidden = !res.next;
  }

  // ---- one client ----

  async function loadClient(name) {
    $('client-title').textContent = name;
    $('client-error').textContent = '';
    const jobs = [
      api('/v1/status', { client: name, limit: 1000 }).then((st) => {
        $('client-age').textContent = st.age === null ? 'none: not registered (it holds and waits for nothing)' : String(st.age);
        fill($('holds'), 'holds-empty', st.holds.map((h) => el('tr', { data: { lock: h.lock } },
          el('td', null, lockLink(h.lock)), el('td', null, modeSpan(h.mode)),
          el('td', { class: 'num token' }, h.token), el('td', { class: 'num' }, countdown(h.expires_at)))));
        const w = $('waiting');
        clear(w);
        if (st.waiting) {
          append(w, ['for ', lockLink(st.waiting.lock), ', number ' + st.waiting.position + ' in line',
            st.waiting.estimated_wait_s !== undefined && st.waiting.estimated_wait_s !== null
              ? ' (estimated wait ~' + fmtDur(st.waiting.estimated_wait_s) + ')' : '']);
        } else {
          w.appendChild(el('span', { class: 'muted' }, 'nothing'));
        }
        const ab = $('client-aborted');
        const body = ab.querySelector('.aborted-body');
        clear(body);
        ab.hidden = !st.aborted;
        if (st.aborted) body.appendChild(renderAbort(st.aborted, {}));
      }),
      api('/v1/history', { client: name, limit: LIST_PAGE }).then((res) => {
        fill($('client-history'), 'client-history-empty', res.grants.map((g) => historyRow(g, true)));
      }),
      loadGraph({ client: name }, { kind: 'client', name }),
    ];
    const results = await Promise.allSettled(jobs);
    const failed = results.find((r) => r.status === 'rejected');
    if (failed) {
      if (failed.reason instanceof AuthError) throw failed.reason;
      $('client-error').textContent = failed.reason.message;
    }
  }

  // ---- the wait-for graph ----

  let svgIds = 0;

  function arrowDefs(prefix) {
    const defs = svg('defs');
    for (const kind of ['hold', 'wait', 'cycle']) {
      defs.appendChild(svg('marker', { id: prefix + kind, viewBox: '0 0 10 10', refX: 10, refY: 5, markerWidth: 7, markerHeight: 7, orient: 'auto-start-reverse' },
        svg('path', { d: 'M0,0 L10,5 L0,10 z', class: 'ah-' + kind })));
    }
    return defs;
  }

  function shortName(s) {
    return s.length > 22 ? s.slice(0, 21) + '…' : s;
  }

  // node draws a lock (a square-cornered box) or a client (a rounded one).
  function node(kind, name, x, y, extra) {
    const w = 150;
    const h = 22;
    const cls = 'node n-' + kind + (extra ? ' ' + extra : '');
    const g = svg('g', { class: cls, 'data-kind': kind, 'data-name': name, transform: 'translate(' + x + ',' + y + ')' },
      svg('title', {}, (kind === 'lock' ? 'lock ' : 'client ') + name));
    if (kind === 'lock') {
      g.appendChild(svg('rect', { width: w, height: h, rx: 2 }));
    } else {
      g.appendChild(svg('rect', { width: w, height: h, rx: 11, class: 'client-box' }));
      g.appendChild(svg('circle', { cx: 11, cy: 11, r: 6 }));
    }
    g.appendChild(svg('text', { x: kind === 'client' ? 22 : 8, y: 15 }, shortName(name)));
    return g;
  }

  function edge(kind, a, b, prefix) {
    // From the right side of a to the left side of b, or between their
    // centres' sides when they stand in one column.
    const w = 150;
    const h = 22;
    let x1 = a.x + w;
    let x2 = b.x;
    if (b.x < a.x) { x1 = a.x; x2 = b.x + w; }
    if (b.x === a.x) { x1 = a.x + w; x2 = b.x + w; }
    const y1 = a.y + h / 2;
    const y2 = b.y + h / 2;
    const mx = b.x === a.x ? a.x + w + 40 : (x1 + x2) / 2;
    return svg('path', { class: 'e-' + kind, d: 'M' + x1 + ',' + y1 + ' C' + mx + ',' + y1 + ' ' + mx + ',' + y2 + ' ' + x2 + ',' + y2,
      'marker-end': 'url(#' + prefix + (kind === 'cycle' ? 'cycle' : kind) + ')' });
  }

  async function loadGraph(params, start) {
    const g = await api('/v1/graph', params);
    if (!state.view || state.view.name !== start.name || state.view.kind !== start.kind) return;
    $('graph-card').hidden = false;
    const box = $('graph');
    clear(box);
    const n = g.locks.length + g.clients.length;
    $('graph-note').textContent = n + ' node' + (n === 1 ? '' : 's') + (g.cut ? ' — cut: the component is larger, these are the nearest' : '');
    box.appendChild(renderGraph(g, start));
  }

  // renderGraph lays the component out in columns by distance from the
  // start, and draws lock -> holder and waiter -> lock edges.
  function renderGraph(g, start) {
    const key = (kind, name) => kind + '\u0000' + name;
    const adj = new Map();
    const link = (a, b) => {
      if (!adj.has(a)) adj.set(a, []);
      if (!adj.has(b)) adj.set(b, []);
      adj.get(a).push(b);
      adj.get(b).push(a);
    };
    for (const h of g.holds) link(key('lock', h.lock), key('client', h.client));
    for (const w of g.waits) link(key('client', w.client), key('lock', w.lock));
    const all = [...g.locks.map((l) => key('lock', l.lock)), ...g.clients.map((c) => key('client', c.client))];
    const first = key(start.kind, start.name);
    const layer = new Map([[first, 0]]);
    const order = [first];
    for (let i = 0; i < order.length; i++) {
      for (const m of adj.get(order[i]) || []) {
        if (!layer.has(m)) { layer.set(m, layer.get(order[i]) + 1); order.push(m); }
      }
    }
    for (const k of all) if (!layer.has(k)) { layer.set(k, 0); order.push(k); }
    const cols = new Map();
    const pos = new Map();
    for (const k of order) {
      const c = layer.get(k);
      const row = cols.get(c) || 0;
      cols.set(c, row + 1);
      pos.set(k, { x: 10 + c * 210, y: 10 + row * 34 });
    }
    const width = 10 + Math.max(1, cols.size) * 210;
    const height = 20 + Math.max(1, ...cols.values()) * 34;
    const prefix = 'g' + (++svgIds) + '-';
    const s = svg('svg', { viewBox: '0 0 ' + width + ' ' + height, width, height, role: 'img', 'aria-label': 'wait-for graph' }, arrowDefs(prefix));
    const edges = svg('g', { class: 'edges' });
    for (const h of g.holds) {
      const e = edge('hold', pos.get(key('lock', h.lock)), pos.get(key('client', h.client)), prefix);
      e.appendChild(svg('title', {}, 'lock ' + h.lock + ' is held by ' + h.client + ' (' + h.mode + ', token ' + h.token + ')'));
      edges.appendChild(e);
    }
    for (const w of g.waits) {
      const e = edge('wait', pos.get(key('client', w.client)), pos.get(key('lock', w.lock)), prefix);
      e.appendChild(svg('title', {}, w.client + ' waits for lock ' + w.lock + ' (' + w.mode + ')'));
      edges.appendChild(e);
    }
    s.appendChild(edges);
    for (const k of order) {
      const cut = k.indexOf('\u0000'); // the kind has none; a name may
      const kind = k.slice(0, cut);
      const name = k.slice(cut + 1);
      const p = pos.get(k);
      const nd = node(kind, name, p.x, p.y, k === first ? 'n-start' : '');
      nd.addEventListener('click', () => { location.hash = kind + '=' + encodeURIComponent(name); });
      s.appendChild(nd);
    }
    return s;
  }

  // renderAbort draws a broken deadlock: the cycle set D4 found, oldest
  // first, each member with the lock it waited for, and the victim.
  function renderAbort(abort, meta) {
    const box = el('div', { class: 'deadlock', data: { victim: abort.victim === null ? '' : abort.victim } });
    const head = el('p', null,
      meta.at !== undefined ? 'At ' + fmtTime(meta.at) + ': ' : '',
      'victim ', el('span', { class: 'victim name' }, abort.victim === null ? '(hidden)' : abort.victim),
      ' (age ' + abort.age + ', the youngest of the cycle) was aborted',
      meta.requester && meta.requester === abort.victim ? ' by its own acquire' : '',
      meta.requester && meta.requester !== abort.victim ? el('span', null, ' by the acquire of ', clientLink(meta.requester)) : '',
      meta.lost && meta.lost.length ? '; it lost ' + meta.lost.map((h) => h.lock + ' #' + h.token).join(', ') : '', '.');
    box.appendChild(head);
    const cycle = abort.cycle || [];
    const table = el('table', { class: 'cycle-table' },
      el('thead', null, el('tr', null, el('th', null, 'client'), el('th', { class: 'num' }, 'age'), el('th', null, 'waited for'))),
      el('tbody', null, cycle.map((m) => el('tr', { class: m.client === abort.victim ? 'victim' : '', data: { client: m.client === null ? '' : m.client } },
        el('td', null, clientLink(m.client), m.client === abort.victim ? ' (victim)' : ''),
        el('td', { class: 'num' }, m.age), el('td', null, lockLink(m.waits_for))))));
    box.appendChild(table);
    box.appendChild(el('div', { class: 'cycle' }, renderCycle(abort, meta)));
    return box;
  }

  // renderCycle draws the members on a ring, each followed by the lock it
  // waited for, with an edge from member to lock; the victim's lost leases
  // are drawn as edges from those locks back to it. (Which member held the
  // other locks, the event does not say.)
  function renderCycle(abort, meta) {
    const cycle = abort.cycle || [];
    const slots = [];
    const seenLocks = new Set();
    for (const m of cycle) {
      slots.push({ kind: 'client', name: m.client, member: m });
      if (!seenLocks.has(m.waits_for)) { seenLocks.add(m.waits_for); slots.push({ kind: 'lock', name: m.waits_for }); }
    }
    const n = Math.max(slots.length, 1);
    const ry = Math.max(60, 22 * n);
    const rx = ry + 90;
    const cx = rx + 80;
    const cy = ry + 16;
    const prefix = 'c' + (++svgIds) + '-';
    const s = svg('svg', { viewBox: '0 0 ' + (2 * cx) + ' ' + (2 * cy), width: 2 * cx, height: 2 * cy, class: 'cycle-svg', role: 'img', 'aria-label': 'deadlock cycle' }, arrowDefs(prefix));
    const at = new Map();
    slots.forEach((sl, i) => {
      const a = (2 * Math.PI * i) / n - Math.PI / 2;
      at.set(sl.kind + '\u0000' + sl.name, { x: cx + rx * Math.cos(a) - 75, y: cy + ry * Math.sin(a) - 11 });
    });
    const pos = (kind, name) => at.get(kind + '\u0000' + name);
    const edges = svg('g', { class: 'edges' });
    for (const m of cycle) {
      const e = edge('cycle', pos('client', m.client), pos('lock', m.waits_for), prefix);
      e.appendChild(svg('title', {}, (m.client === null ? '(hidden)' : m.client) + ' waited for lock ' + m.waits_for));
      edges.appendChild(e);
    }
    for (const h of meta.lost || []) {
      if (pos('lock', h.lock) && pos('client', abort.victim)) {
        const e = edge('hold', pos('lock', h.lock), pos('client', abort.victim), prefix);
        e.appendChild(svg('title', {}, 'lock ' + h.lock + ' was held by the victim (token ' + h.token + ')'));
        edges.appendChild(e);
      }
    }
    s.appendChild(edges);
    for (const sl of slots) {
      const p = pos(sl.kind, sl.name);
      const name = sl.name === null ? '(hidden)' : sl.name;
      s.appendChild(node(sl.kind, name, p.x, p.y, sl.kind === 'client' && sl.name === abort.victim ? 'n-victim' : ''));
    }
    return s;
  }

  function addDeadlock(e) {
    state.deadlocks.unshift(e);
    state.deadlocks.length = Math.min(state.deadlocks.length, 10);
    const box = $('deadlocks');
    clear(box);
    for (const d of state.deadlocks) box.appendChild(renderAbort(d.abort, { at: d.at, requester: d.requester, lost: d.lost }));
    $('deadlocks-empty').hidden = state.deadlocks.length > 0;
  }

  // ---- events ----

  function describe(e) {
    const parts = ['#' + e.id, fmtTime(e.at), e.kind];
    if (e.lock) parts.push(e.lock);
    if (e.client !== undefined) parts.push(e.client === null ? '(hidden)' : e.client);
    if (e.token) parts.push('token ' + e.token);
    if (e.mode) parts.push(e.mode);
    if (e.position) parts.push('position ' + e.position);
    if (e.predecessors && e.predecessors.length) {
      parts.push('after ' + e.predecessors.map((p) => p.ended + ' #' + p.token + ' of ' + (p.client === null ? '(hidden)' : p.client)).join(', '));
    }
    if (e.abort) parts.push('victim ' + (e.abort.victim === null ? '(hidden)' : e.abort.victim));
    // A fence in a job's own database (fence_stale) names the newer token
    // that had written, and what: beside the fenced store's stale_write.
    if (e.highest) parts.push((e.kind === 'fence_stale' ? 'newer ' : 'highest ') + e.highest);
    if (e.resource) parts.push('on ' + e.resource);
    return parts.join(' ');
  }

  function addEventLine(e) {
    const list = $('events');
    list.insertBefore(el('li', { class: 'kind-' + e.kind, data: { kind: e.kind } }, describe(e)), list.firstChild);
    while (list.children.length > 100) list.removeChild(list.lastChild);
    $('last-event').textContent = 'last event ' + fmtTime(e.at);
  }

  function onEvent(ev) {
    if (ev.id) lastEventId = ev.id;
    if (ev.event === 'reset' || ev.event === 'overflow') {
      // Events were missed: read the state again.
      scheduleRefresh();
      return;
    }
    if (!ev.data.length) return;
    let e;
    try {
      e = JSON.parse(ev.data.join('\n'));
    } catch (_) {
      return;
    }
    addEventLine(e);
    if (e.kind === 'deadlock_abort' && e.abort) addDeadlock(e);
    scheduleRefresh();
  }

  function setLive(on, text) {
    const b = $('live');
    b.className = 'badge ' + (on ? 'on' : 'off');
    b.textContent = text || (on ? 'live' : 'offline');
  }

  // readSSE parses a text/event-stream body by hand: EventSource cannot
  // send the Authorization header.
  async function readSSE(body, cb) {
    const reader = body.getReader();
    const dec = new TextDecoder();
    let buf = '';
    let ev = { event: 'message', data: [], id: null };
    for (;;) {
      const { value, done } = await reader.read();
      if (done) return;
      buf += dec.decode(value, { stream: true });
      for (;;) {
        const i = buf.search(/\r\n|\r|\n/);
        if (i < 0) break;
        if (buf[i] === '\r' && i === buf.length - 1) break; // a \r\n may be cut between chunks
        const line = buf.slice(0, i);
        buf = buf.slice(i + (buf[i] === '\r' && buf[i + 1] === '\n' ? 2 : 1));
        if (line === '') {
          if (ev.data.length || ev.event !== 'message') cb(ev);
          ev = { event: 'message', data: [], id: null };
          continue;
        }
        if (line[0] === ':') continue;
        const c = line.indexOf(':');
        const field = c < 0 ? line : line.slice(0, c);
        let v = c < 0 ? '' : line.slice(c + 1);
        if (v[0] === ' ') v = v.slice(1);
        if (field === 'data') ev.data.push(v);
        else if (field === 'event') ev.event = v;
        else if (field === 'id') { ev.id = v; lastEventId = v; }
      }
    }
  }

  async function connectEvents() {
    if (eventsAbort) eventsAbort.abort();
    const ctl = new AbortController();
    eventsAbort = ctl;
    let delay = 500;
    while (!ctl.signal.aborted) {
      try {
        const headers = { Accept: 'text/event-stream' };
        if (token) headers.Authorization = 'Bearer ' + token;
        if (lastEventId) headers['Last-Event-ID'] = lastEventId;
        const res = await fetch('/v1/events', { headers, credentials: 'omit', cache: 'no-store', signal: ctl.signal });
        if ([401, 403, 404, 405].includes(res.status)) {
          // No stream for us here: poll instead.
          setLive(false, res.status === 404 || res.status === 405 ? 'no event stream: polling' : 'events refused: polling');
          startPolling(5000);
          return;
        }
        if (!res.ok || !res.body) throw new Error('HTTP ' + res.status);
        setLive(true);
        stopPolling();
        delay = 500;
        scheduleRefresh(); // what happened while we were away
        await readSSE(res.body, onEvent);
      } catch (_) {
        // reconnect below
      }
      if (ctl.signal.aborted) return;
      setLive(false, 'reconnecting');
      startPolling(5000);
      await sleep(delay);
      delay = Math.min(delay * 2, 10000);
    }
  }

  function startPolling(ms) {
    if (!pollTimer) pollTimer = setInterval(scheduleRefresh, ms);
  }

  function stopPolling() {
    if (pollTimer) clearInterval(pollTimer);
    pollTimer = null;
  }

  // ---- refresh ----

  // Events come in bursts (a busy server sends thousands a second): they
  // coalesce into one refresh at a time, at most one a second, the first
  // soon after a quiet spell.
  let refreshing = false;
  let again = false;
  let lastRefresh = 0;

  function scheduleRefresh() {
    if (refreshing) { again = true; return; }
    refreshing = true;
    const wait = Math.max(150, 1000 - (Date.now() - lastRefresh));
    setTimeout(async () => {
      try {
        lastRefresh = Date.now();
        await refreshAll();
      } finally {
        refreshing = false;
        if (again) { again = false; scheduleRefresh(); }
      }
    }, wait);
  }

  async function refreshAll() {
    try {
      await Promise.all([loadLocks(), loadView()]);
    } catch (e) {
      if (e instanceof AuthError) { askToken(e.message); return; }
      $('locks-error').textContent = e.message;
    }
  }

  async function loadView() {
    const v = state.view;
    $('intro').hidden = !!v;
    $('lock-view').hidden = !v || v.kind !== 'lock';
    $('client-view').hidden = !v || v.kind !== 'client';
    if (!v) { $('graph-card').hidden = true; return; }
    if (v.kind === 'lock') await loadLock(v.name);
    else await loadClient(v.name);
  }

  function route() {
    const h = location.hash.slice(1);
    const eq = h.indexOf('=');
    let v = null;
    if (eq > 0) {
      const kind = h.slice(0, eq);
      let name = '';
      try {
        name = decodeURIComponent(h.slice(eq + 1));
      } catch (_) {
        name = '';
      }
      if ((kind === 'lock' || kind === 'client') && name) v = { kind, name };
    }
    const changed = JSON.stringify(v) !== JSON.stringify(state.view);
    state.view = v;
    if (changed) {
      state.storeNext = null;
      state.historyNext = null;
      clear($('graph'));
    }
    for (const tr of $('locks').tBodies[0].rows) {
      tr.classList.toggle('selected', !!v && v.kind === 'lock' && tr.dataset.lock === v.name);
    }
    return loadView().catch((e) => {
      if (e instanceof AuthError) askToken(e.message);
    });
  }

  // ---- the token ----

  function askToken(msg) {
    booted = false;
    if (eventsAbort) eventsAbort.abort();
    stopPolling();
    setLive(false, 'signed out');
    $('login-error').textContent = msg || '';
    const d = $('login');
    if (!d.open) d.showModal();
    $('token').focus();
  }

  async function boot() {
    try {
      await loadLocks();
    } catch (e) {
      if (e instanceof AuthError || e.status === 403) {
        askToken(e.status === 403 ? 'This token may not list locks: give a reader\'s or an admin\'s. (' + e.message + ')' : e.message);
        return;
      }
      $('locks-error').textContent = e.message;
    }
    booted = true;
    $('forget').hidden = !token;
    route();
    connectEvents();
  }

  function init() {
    api('/v1/health').then((h) => { $('version').textContent = 'v' + h.version; }).catch(() => {});
    $('login-form').addEventListener('submit', (ev) => {
      ev.preventDefault();
      token = $('token').value.trim();
      $('token').value = '';
      if (token) sessionStorage.setItem(TOKEN_KEY, token);
      $('login').close();
      boot();
    });
    $('login').addEventListener('cancel', (ev) => ev.preventDefault());
    $('forget').addEventListener('click', () => {
      sessionStorage.removeItem(TOKEN_KEY);
      token = '';
      $('forget').hidden = true;
      askToken('');
    });
    let searchTimer = null;
    $('search').addEventListener('input', () => {
      clearTimeout(searchTimer);
      searchTimer = setTimeout(() => {
        state.prefix = $('search').value;
        state.cursors = [''];
        loadLocks().catch((e) => { $('locks-error').textContent = e.message; });
      }, 250);
    });
    $('search-form').addEventListener('submit', (ev) => ev.preventDefault());
    $('client-form').addEventListener('submit', (ev) => {
      ev.preventDefault();
      const name = $('client-name').value;
      if (name) location.hash = 'client=' + encodeURIComponent(name);
    });
    $('next').addEventListener('click', () => {
      if (!state.next) return;
      state.cursors.push(state.next);
      // Until the page comes, next is unknown: a second click must not
      // push the same cursor again.
      state.next = null;
      $('next').disabled = true;
      loadLocks().catch((e) => { $('locks-error').textContent = e.message; });
    });
    $('prev').addEventListener('click', () => {
      if (state.cursors.length <= 1) return;
      state.cursors.pop();
      loadLocks().catch((e) => { $('locks-error').textContent = e.message; });
    });
    $('store-more').addEventListener('click', () => state.view && loadStore(state.view.name, true).catch(() => {}));
    $('history-more').addEventListener('click', () => state.view && loadHistory(state.view.name, true).catch(() => {}));
    window.addEventListener('hashchange', () => { if (booted) route(); });
    setInterval(tick, 1000);
    boot();
  }

  document.addEventListener('DOMContentLoaded', init);
})();
