// The page of `hypercloud trace serve`: a live sequence diagram of cloud-provider calls and of
// the cluster objects they changed, polled from /api/events. Plain JS, no build step; the
// server's Content-Security-Policy allows nothing but this origin.
'use strict';

const COMPONENT_ORDER = ['kubelet-helper', 'apiserver-plugin', 'kube-controller-manager',
  'cloud-controller-manager', 'csi-driver'];
const POLL_MS = 500;
const BATCH = 5000; // the server's largest page
const NOTE_CHANGES = 8; // changes spelled out in an object note; the rest are counted
const ERRORS_SHOWN = 200;
const CHUNK = 250; // rows a chunk of the diagram holds
// Summary fields of objects, as named in notes.
const FIELD_NAMES = {
  taints: 'taint', addresses: 'address', labels: 'label', provider_id: 'providerID',
  ingress: 'ingress', ports: 'port', finalizers: 'finalizer', annotations: 'annotation',
};

const $ = (id) => document.getElementById(id);

function el(tag, cls, text) {
  const e = document.createElement(tag);
  if (cls) e.className = cls;
  if (text !== undefined && text !== null) e.textContent = text;
  return e;
}

const clip = (s, n) => (s.length > n ? s.slice(0, n - 1) + '…' : s);

// A value as short text: objects give their values, arrays their items.
function compact(v) {
  if (v === null || v === undefined) return 'null';
  if (Array.isArray(v)) return '[' + v.map(compact).join(', ') + ']';
  if (typeof v === 'object') return Object.values(v).map(compact).join(', ');
  return String(v);
}

function clock(ms) {
  const d = new Date(ms);
  const p = (n, w = 2) => String(n).padStart(w, '0');
  return `${p(d.getHours())}:${p(d.getMinutes())}:${p(d.getSeconds())}.${p(d.getMilliseconds(), 3)}`;
}

const latency = (ms) => (typeof ms !== 'number' ? '' : (ms < 10 ? ms.toFixed(1) : Math.round(ms)) + ' ms');

// Rows are ordered by (ts_unix_ms, seq).
const cmp = (a, b) => a.ts_unix_ms - b.ts_unix_ms || a.seq - b.seq;

// The number of elements of sorted `arr` that come before or at `ev`.
function countUpTo(arr, ev) {
  let lo = 0, hi = arr.length;
  while (lo < hi) {
    const mid = (lo + hi) >> 1;
    if (cmp(arr[mid], ev) <= 0) lo = mid + 1; else hi = mid;
  }
  return lo;
}

// Merges sorted `batch` into sorted `arr`: appended when it is all newer (the usual case),
// otherwise one linear merge.
function merge(arr, batch) {
  if (!batch.length) return arr;
  if (!arr.length || cmp(arr[arr.length - 1], batch[0]) <= 0) {
    for (const e of batch) arr.push(e);
    return arr;
  }
  const out = [];
  let i = 0, j = 0;
  while (i < arr.length && j < batch.length) out.push(cmp(arr[i], batch[j]) <= 0 ? arr[i++] : batch[j++]);
  while (i < arr.length) out.push(arr[i++]);
  while (j < batch.length) out.push(batch[j++]);
  return out;
}

const objectKey = (ev) => `${ev.kind}/${ev.namespace || ''}/${ev.name}`;
const objectName = (ev) => (ev.namespace ? `${ev.namespace}/${ev.name}` : ev.name);

const state = {
  info: null,
  after: 0, first: 0, latest: 0, dropped: 0, held: 0,
  lastUpdate: null, pollError: null, loaded: false,
  diagrams: [], // one per layout; one with layout null for a single run
  errors: [], errorCount: 0,
  pos: 0, anchor: null, follow: true,
  page: 0, pageSize: 500,
  filters: { component: '', provider: '', service: '', method: '' },
  seen: { component: new Set(), provider: new Set(), service: new Set() },
  objectsShown: '',
};

function newDiagram(layout) {
  return {
    layout,
    rows: [], // every event of this layout, sorted
    objects: [], // its object events, sorted
    byObject: new Map(), // object key -> its events, sorted
    baseline: new Map(), // object key -> last event dropped from `objects`
    objVersion: 0,
    components: new Set(), providers: new Set(), hasCluster: false,
    lanes: [], laneIndex: new Map(), laneSig: '',
    els: new Map(), // seq -> row element
    scrolledTo: null,
    section: null, scroll: null, head: null, list: null,
  };
}

// ---- events in ----

function diagramOf(ev) {
  if (state.diagrams.length === 1 && !state.info.layouts.length) return state.diagrams[0];
  return state.diagrams.find((d) => d.layout === ev.layout);
}

function apply(body) {
  const batches = new Map();
  for (const ev of body.events) {
    if (ev.type === 'error') {
      state.errorCount++;
      state.errors.push(ev);
      if (state.errors.length > ERRORS_SHOWN) state.errors.shift();
    }
    const d = diagramOf(ev);
    if (!d) continue;
    if (ev.type === 'call') {
      d.components.add(ev.component);
      d.providers.add(ev.provider);
      state.seen.component.add(ev.component);
      state.seen.provider.add(ev.provider);
      if (ev.service) state.seen.service.add(ev.service);
    } else if (ev.type === 'object') {
      d.hasCluster = true;
    }
    if (!batches.has(d)) batches.set(d, []);
    batches.get(d).push(ev);
  }
  for (const [d, batch] of batches) {
    batch.sort(cmp);
    d.rows = merge(d.rows, batch);
    const objs = batch.filter((e) => e.type === 'object');
    if (objs.length) {
      d.objects = merge(d.objects, objs);
      d.objVersion++;
      for (const ev of objs) addObjectEvent(d, ev);
    }
  }
  state.held += body.events.length;
  state.after = body.next;
  state.latest = body.latest;
  state.dropped = body.dropped || 0;
  if (body.events.length) state.lastUpdate = Date.now();
  // Stay within the server's bound: drop what it dropped, or anything beyond max_events.
  const max = state.info.max_events;
  const cutoff = Math.max(body.first || 0, max ? state.latest - max + 1 : 0);
  if (cutoff > state.first) dropBefore(cutoff);
}

function addObjectEvent(d, ev) {
  const key = objectKey(ev);
  let list = d.byObject.get(key);
  if (!list) d.byObject.set(key, (list = []));
  const i = countUpTo(list, ev);
  list.splice(i, 0, ev);
  // The next event of this object now has another predecessor: its note must be redrawn.
  if (i + 1 < list.length) d.els.delete(list[i + 1].seq);
}

function dropBefore(seq) {
  state.first = seq;
  let held = 0;
  for (const d of state.diagrams) {
    d.rows = d.rows.filter((e) => e.seq >= seq);
    held += d.rows.length;
    const keep = [];
    for (const e of d.objects) {
      if (e.seq >= seq) keep.push(e);
      else d.baseline.set(objectKey(e), e); // sorted, so the last one wins
    }
    if (keep.length !== d.objects.length) {
      d.objects = keep;
      d.objVersion++;
      for (const [k, list] of d.byObject) {
        const rest = list.filter((e) => e.seq >= seq);
        if (rest.length) d.byObject.set(k, rest); else d.byObject.delete(k);
      }
    }
    for (const s of d.els.keys()) if (s < seq) d.els.delete(s);
  }
  state.held = held;
}

// ---- lanes and rows ----

function laneList(d) {
  const comps = [...d.components].sort((a, b) => {
    const ra = COMPONENT_ORDER.indexOf(a), rb = COMPONENT_ORDER.indexOf(b);
    return (ra < 0 ? 99 : ra) - (rb < 0 ? 99 : rb) || a.localeCompare(b);
  });
  const lanes = comps.map((c) => ({ key: 'c:' + c, label: c, kind: 'component' }));
  for (const p of [...d.providers].sort()) lanes.push({ key: 'p:' + p, label: 'cloud: ' + p, kind: 'cloud' });
  if (d.hasCluster || state.info.objects) lanes.push({ key: 'cluster', label: 'cluster', kind: 'cluster' });
  return lanes;
}

function ensureLanes(d) {
  const lanes = laneList(d);
  const sig = lanes.map((l) => l.key).join('|');
  if (sig === d.laneSig) return;
  d.laneSig = sig;
  d.lanes = lanes;
  d.laneIndex = new Map(lanes.map((l, i) => [l.key, i]));
  d.els.clear(); // every row's columns move
  d.list.replaceChildren();
  d.section.style.setProperty('--lanes', String(Math.max(1, lanes.length)));
  d.head.replaceChildren(el('span', 'time', 'time'),
    ...lanes.map((l) => el('span', 'lane-name ' + l.kind, l.label)));
}

// The grid columns (1-based, after the time column) from lane a to lane b.
function span(a, b) {
  return `${Math.min(a, b) + 2} / ${Math.max(a, b) + 3}`;
}

function rowEl(d, ev) {
  let row = d.els.get(ev.seq);
  if (row) return row;
  row = el('div', 'row ' + ev.type);
  row.setAttribute('role', 'listitem');
  row.dataset.seq = ev.seq;
  row.dataset.type = ev.type;
  row.dataset.ts = ev.ts_unix_ms;
  row.append(el('span', 'time', clock(ev.ts_unix_ms)));
  if (ev.type === 'call') fillCall(d, row, ev);
  else if (ev.type === 'object') fillObject(d, row, ev);
  else fillError(d, row, ev);
  d.els.set(ev.seq, row);
  return row;
}

function fillCall(d, row, ev) {
  Object.assign(row.dataset, { component: ev.component, provider: ev.provider, service: ev.service || '', method: ev.method });
  const from = d.laneIndex.get('c:' + ev.component), to = d.laneIndex.get('p:' + ev.provider);
  const msg = el('div', 'msg ' + (to >= from ? 'ltr' : 'rtl'));
  msg.style.gridColumn = span(from, to);
  const label = `${ev.method}(${compact(ev.args || {})})`;
  const failed = ev.error !== null && ev.error !== undefined;
  const answer = failed ? 'error: ' + ev.error : (ev.result === null || ev.result === undefined ? 'ok' : compact(ev.result));
  const l = el('span', 'label', clip(label, 90));
  l.title = label;
  const a = el('span', 'answer' + (failed ? ' err' : ''), clip(answer, 90) + '  ·  ' + latency(ev.latency_ms));
  a.title = failed ? answer : JSON.stringify(ev.result);
  msg.append(el('span', 'visually-hidden', `${ev.component} to ${ev.provider}: `), l,
    el('span', 'arrow'), a);
  row.append(msg);
}

// What changed in `cur` since `prev` (the object's previous event, or none), as "+ x"/"- x".
function changes(prev, cur) {
  if (cur.deleted) return ['deleted'];
  const a = prev && !prev.deleted ? prev.summary || {} : {};
  const b = cur.summary || {};
  const out = [];
  for (const k of new Set([...Object.keys(b), ...Object.keys(a)])) {
    const name = FIELD_NAMES[k] || k.replace(/_/g, ' ');
    const x = a[k], y = b[k];
    if (Array.isArray(x) || Array.isArray(y)) {
      const xs = new Set((x || []).map(String)), ys = new Set((y || []).map(String));
      for (const v of xs) if (!ys.has(v)) out.push(`- ${name} ${v}`);
      for (const v of ys) if (!xs.has(v)) out.push(`+ ${name} ${v}`);
    } else if ((x && typeof x === 'object') || (y && typeof y === 'object')) {
      const xo = x || {}, yo = y || {};
      for (const kk of Object.keys(xo)) if (!(kk in yo)) out.push(`- ${name} ${kk}`);
      for (const [kk, v] of Object.entries(yo)) if (xo[kk] !== v) out.push(`+ ${name} ${kk}=${v}`);
    } else if (x !== y && (x ?? null) !== (y ?? null)) {
      if (x === null || x === undefined) out.push(`+ ${name} ${y}`);
      else if (y === null || y === undefined) out.push(`- ${name} ${x}`);
      else out.push(`${name} ${x} → ${y}`);
    }
  }
  return out;
}

function fillObject(d, row, ev) {
  row.dataset.kind = ev.kind;
  row.dataset.name = ev.name;
  if (ev.namespace) row.dataset.namespace = ev.namespace;
  const list = d.byObject.get(objectKey(ev)) || [];
  const i = list.indexOf(ev);
  const prev = i > 0 ? list[i - 1] : d.baseline.get(objectKey(ev));
  const all = changes(prev, ev);
  const shown = all.slice(0, NOTE_CHANGES);
  if (all.length > NOTE_CHANGES) shown.push(`… ${all.length - NOTE_CHANGES} more`);
  const head = `${ev.kind} ${objectName(ev)}${prev ? '' : ' (new)'}: `;
  const note = el('div', 'note' + (ev.deleted ? ' deleted' : ''), head + (shown.join(', ') || 'no visible change'));
  note.title = head + all.join('\n');
  const lane = d.laneIndex.get('cluster') ?? d.lanes.length - 1;
  note.style.gridColumn = span(Math.max(0, lane - 2), lane);
  row.append(note);
}

function fillError(d, row, ev) {
  const note = el('div', 'note err', `error: ${ev.source || 'server'}: ${ev.message || ''}`);
  note.style.gridColumn = span(0, Math.max(0, d.lanes.length - 1));
  row.append(note);
}

function passesFilters(ev) {
  const f = state.filters;
  if (ev.type !== 'call') return true;
  return (!f.component || ev.component === f.component) && (!f.provider || ev.provider === f.provider) &&
    (!f.service || ev.service === f.service) && (!f.method || ev.method.toLowerCase().includes(f.method));
}

// ---- drawing ----

const maxLen = () => Math.max(0, ...state.diagrams.map((d) => d.rows.length));
const pageOf = (i) => (state.pageSize === Infinity ? 0 : Math.floor(Math.max(0, i) / state.pageSize));

function render() {
  const n = maxLen();
  if (state.follow) {
    state.pos = Math.max(0, n - 1);
  } else if (state.anchor && state.diagrams.length === 1) {
    // Keep the position on the same event when earlier ones arrive.
    state.pos = Math.max(0, countUpTo(state.diagrams[0].rows, state.anchor) - 1);
  }
  state.pos = Math.min(state.pos, Math.max(0, n - 1));
  const pages = state.pageSize === Infinity ? 1 : Math.max(1, Math.ceil(n / state.pageSize));
  if (state.follow) state.page = pages - 1;
  state.page = Math.min(Math.max(0, state.page), pages - 1);

  const range = $('timeline');
  range.max = String(Math.max(0, n - 1));
  range.value = String(state.pos);
  range.disabled = n === 0;
  $('follow').checked = state.follow;
  $('page-info').textContent = `page ${state.page + 1} of ${pages}`;
  $('page-prev').disabled = state.page === 0;
  $('page-next').disabled = state.page >= pages - 1;
  $('step-prev').disabled = state.pos <= 0;
  $('step-next').disabled = state.pos >= n - 1;

  for (const d of state.diagrams) renderDiagram(d);
  const d0 = state.diagrams[0];
  const cur = d0 && d0.rows[Math.min(state.pos, d0.rows.length - 1)];
  $('position').textContent = n ? `row ${state.pos + 1} of ${n}` + (cur ? `, ${clock(cur.ts_unix_ms)}` : '') : 'no rows yet';
  renderObjects();
  renderStatus();
}

function renderDiagram(d) {
  ensureLanes(d);
  const size = state.pageSize;
  // Following live shows the newest rows, a full page of them.
  const start = size === Infinity ? 0 : state.follow ? Math.max(0, d.rows.length - size) : state.page * size;
  const end = Math.min(d.rows.length, start + size);
  const want = [];
  for (let i = start; i < end; i++) want.push(rowEl(d, d.rows[i]));

  // Rows go in chunks: a chunk out of sight is skipped by layout and paint (content-visibility),
  // which keeps even a page of all 100000 rows usable.
  const chunks = Math.ceil(want.length / CHUNK);
  while (d.list.childElementCount > chunks) d.list.lastElementChild.remove();
  while (d.list.childElementCount < chunks) d.list.append(el('div', 'chunk'));
  for (let c = 0; c < chunks; c++) {
    const box = d.list.children[c], part = want.slice(c * CHUNK, (c + 1) * CHUNK);
    syncChildren(box, part);
    if (box._n !== part.length) {
      box._n = part.length;
      box.style.containIntrinsicSize = `auto ${part.length * 40}px`; // a guess until first shown
    }
  }
  if (d.els.size > 2 * want.length + 1000) {
    const keep = new Set(want);
    for (const [s, e] of d.els) if (!keep.has(e)) d.els.delete(s);
  }

  const cur = Math.min(state.pos, d.rows.length - 1);
  let current = null;
  for (let k = 0; k < want.length; k++) {
    const row = want[k], i = start + k;
    const future = i > cur, isCur = i === cur;
    const hidden = !passesFilters(d.rows[i]);
    // Touch the DOM only on change: with "all" rows a page can hold 100000 of them.
    if (row._future !== future) { row.classList.toggle('future', future); row._future = future; }
    if (row._cur !== isCur) {
      row.classList.toggle('current', isCur);
      if (isCur) row.setAttribute('aria-current', 'step'); else row.removeAttribute('aria-current');
      row._cur = isCur;
    }
    if (row._hidden !== hidden) { row.hidden = hidden; row._hidden = hidden; }
    if (isCur) current = row;
  }
  if (current && d.scrolledTo !== current) {
    d.scrolledTo = current;
    scrollIntoBox(d, current);
  }
}

// Makes `box`'s children the elements of `want`, in order, touching only what differs: rows
// leaving at the top, arriving at the bottom, or inserted (they never change order).
function syncChildren(box, want) {
  let node = box.firstChild;
  for (const w of want) {
    while (node && node !== w && w.parentNode === box) {
      const next = node.nextSibling;
      node.remove();
      node = next;
    }
    if (node === w) node = node.nextSibling;
    else box.insertBefore(w, node);
  }
  while (node) {
    const next = node.nextSibling;
    node.remove();
    node = next;
  }
}

// Scrolls the diagram's own box (not the window) to show the row below the lane names: at the
// bottom when following live, else in the middle, so that the rows leading up to it show too.
function scrollIntoBox(d, row) {
  const box = d.scroll, headH = d.head.offsetHeight;
  const top = row.getBoundingClientRect().top - box.getBoundingClientRect().top + box.scrollTop;
  const bottom = top + row.offsetHeight;
  if (top - headH >= box.scrollTop && bottom <= box.scrollTop + box.clientHeight) return;
  box.scrollTop = state.follow ? bottom - box.clientHeight : top - (headH + box.clientHeight - row.offsetHeight) / 2;
}

// The objects of a diagram as of the timeline's position: key -> last event.
function objectsAt(d) {
  const cur = d.rows[Math.min(state.pos, d.rows.length - 1)];
  const n = cur ? countUpTo(d.objects, cur) : 0;
  const map = new Map(d.baseline);
  for (let i = 0; i < n; i++) map.set(objectKey(d.objects[i]), d.objects[i]);
  return { n, map };
}

function renderObjects() {
  const parts = state.diagrams.map((d) => ({ d, ...objectsAt(d) }));
  const sig = parts.map((p) => `${p.d.objVersion}:${p.n}:${p.d.baseline.size}`).join(',');
  if (sig === state.objectsShown) return;
  state.objectsShown = sig;
  const box = $('objects');
  const any = parts.some((p) => p.d.hasCluster || p.map.size);
  $('objects-box').hidden = !state.info.objects && !any;
  box.replaceChildren(...parts.map((p) => objectsGroup(p.d, p.map)));
}

function objectsGroup(d, map) {
  const g = el('div', 'objects-group');
  if (d.layout) {
    g.dataset.layout = d.layout;
    g.append(el('h3', null, d.layout));
  }
  const live = [...map.values()].filter((e) => !e.deleted);
  live.sort((a, b) => a.kind.localeCompare(b.kind) || objectName(a).localeCompare(objectName(b)));
  if (!live.length) g.append(el('p', 'muted', 'No objects at this position.'));
  for (const ev of live) g.append(objectCard(ev));
  return g;
}

function field(dl, name, value, cls) {
  if (value === null || value === undefined || value === '') value = 'none';
  dl.append(el('dt', null, name));
  const dd = el('dd', cls);
  if (value instanceof Node) dd.append(value); else dd.textContent = value;
  dl.append(dd);
}

function objectCard(ev) {
  const s = ev.summary || {};
  const card = el('article', 'obj');
  card.dataset.kind = ev.kind;
  card.dataset.name = ev.name;
  if (ev.namespace) card.dataset.namespace = ev.namespace;
  const h = el('h4', null, `${ev.kind} ${objectName(ev)}`);
  card.append(h);
  const dl = el('dl');
  const labels = s.labels || {};
  if (ev.kind === 'Node') {
    if (s.ready !== undefined) h.append(' ', el('span', 'badge ready-' + String(s.ready).toLowerCase(), 'Ready: ' + (s.ready ?? 'unknown')));
    const taints = s.taints || [];
    let t = null;
    if (taints.length) {
      t = el('ul', 'taints');
      for (const x of taints) t.append(el('li', 'taint', x));
    }
    field(dl, 'taints', t);
    field(dl, 'addresses', (s.addresses || []).join(', '));
    // The GA topology labels; the beta ones the cloud also sets say the same.
    for (const k of ['topology.kubernetes.io/region', 'topology.kubernetes.io/zone', 'node.kubernetes.io/instance-type']) {
      if (labels[k] !== undefined) field(dl, k.replace(/^.*\//, ''), labels[k]);
    }
    field(dl, 'providerID', s.provider_id, 'provider-id');
  } else if (ev.kind === 'Service') {
    field(dl, 'type', s.type);
    field(dl, 'ingress', (s.ingress || []).join(', '), 'ingress');
    field(dl, 'ports', (s.ports || []).join(', '));
  } else if (ev.kind === 'PersistentVolume') {
    field(dl, 'phase', s.phase);
    field(dl, 'labels', Object.entries(labels).map(([k, v]) => `${k}=${v}`).join(', '));
    field(dl, 'source', s.source);
    field(dl, 'claim', s.claim);
  } else {
    for (const [k, v] of Object.entries(s)) field(dl, k, typeof v === 'object' && v !== null ? JSON.stringify(v) : v);
  }
  card.append(dl);
  return card;
}

function renderStatus() {
  const parts = [];
  if (!state.loaded) parts.push('loading');
  parts.push(`${state.held} events`);
  if (state.dropped) parts.push(`${state.dropped} older events dropped (the server keeps ${state.info.max_events})`);
  parts.push(state.lastUpdate ? `last update ${clock(state.lastUpdate).slice(0, 8)}` : 'no events yet');
  parts.push(`${state.errorCount} ${state.errorCount === 1 ? 'error' : 'errors'}`);
  if (state.pollError) parts.push(`error: cannot poll the server (${state.pollError}); retrying`);
  const text = parts.join(' · ');
  const status = $('status');
  if (status.textContent !== text) status.textContent = text;
  status.classList.toggle('failing', !!state.pollError);
  renderErrors();
}

function renderErrors() {
  const list = $('errors');
  if (list.childElementCount === state.errors.length && list.dataset.count === String(state.errorCount)) return;
  list.dataset.count = String(state.errorCount);
  list.replaceChildren(...state.errors.map((e) => el('li', null, `error: ${e.source || 'server'}: ${e.message || ''}`)));
  $('errors-box').hidden = state.errorCount === 0;
  $('errors-heading').textContent = state.errorCount > state.errors.length
    ? `Errors (the last ${state.errors.length} of ${state.errorCount})` : 'Errors';
}

function renderFilterOptions() {
  for (const what of ['component', 'provider', 'service']) {
    const sel = $('filter-' + what);
    const values = [...state.seen[what]].sort();
    if (sel.options.length - 1 === values.length) continue;
    const chosen = sel.value;
    sel.replaceChildren(el('option', null, 'all'), ...values.map((v) => el('option', null, v)));
    sel.options[0].value = '';
    sel.value = chosen;
  }
}

// ---- the page's skeleton, from /api/info ----

function setup(info) {
  state.info = info;
  info.layouts = info.layouts || [];
  document.title = info.title || document.title;
  $('title').textContent = info.title || 'hypercloud: cloud calls';
  $('sources').replaceChildren(...(info.sources || []).map((s) =>
    el('li', null, s.path + (s.layout ? ` (${s.layout})` : ''))));
  const area = el('div', 'diagrams' + (info.layouts.length ? ' compare' : ''));
  area.id = 'rows';
  for (const layout of (info.layouts.length ? info.layouts : [null])) {
    const d = newDiagram(layout);
    d.section = el('section', 'layout');
    if (layout) d.section.dataset.layout = layout;
    const h = el('h2', null, layout ? `Layout: ${layout}` : 'Calls and changes');
    h.id = 'diagram-heading-' + (layout || 'all');
    d.section.setAttribute('aria-labelledby', h.id);
    d.scroll = el('div', 'scroll');
    d.scroll.tabIndex = 0; // scrollable by keyboard
    d.scroll.setAttribute('aria-label', `Sequence diagram${layout ? ' of ' + layout : ''}`);
    d.head = el('div', 'lanes-head');
    d.head.setAttribute('aria-hidden', 'true');
    d.list = el('div', 'rows-list');
    d.list.setAttribute('role', 'list');
    d.scroll.append(d.head, d.list);
    d.section.append(h, d.scroll);
    area.append(d.section);
    state.diagrams.push(d);
  }
  state.area = area;
  if (info.layouts.length) $('diagram-area').after(differencesPanel(info));
}

function differencesPanel(info) {
  const sec = el('section', 'differences-box');
  const h = el('h2', null, 'Differences between the layouts');
  h.id = 'differences-heading';
  sec.setAttribute('aria-labelledby', h.id);
  const diffs = info.differences || [];
  const bad = diffs.filter((x) => !x.explanation).length;
  const summary = el('p', bad ? 'summary bad' : 'summary',
    `${diffs.length} ${diffs.length === 1 ? 'line differs' : 'lines differ'}: ${diffs.length - bad} explained, ${bad} unexplained.`);
  const list = el('ul');
  list.id = 'differences';
  // Lines with the same reason are one item: the reason is shown once, under all of them.
  const groups = new Map();
  diffs.forEach((x, i) => {
    const key = x.explanation ? `e:${x.explanation}` : `u:${i}`;
    if (!groups.has(key)) groups.set(key, []);
    groups.get(key).push(x);
  });
  for (const lines of groups.values()) {
    const first = lines[0];
    const row = el('li', first.explanation ? 'explained' : 'unexplained');
    row.dataset.side = [...new Set(lines.map((x) => x.side || ''))].join(' ');
    for (const x of lines) {
      const top = el('div', 'diff-line');
      top.dataset.side = x.side || '';
      top.append(el('span', 'side', x.side ? `only ${x.side}` : 'both'), el('code', null, x.line));
      row.append(top);
    }
    if (first.explanation) {
      row.append(el('p', 'explanation', first.explanation));
      for (const pattern of new Set(lines.map((x) => x.pattern).filter(Boolean))) {
        const p = el('p', 'pattern', 'expected by ');
        p.append(el('code', null, pattern));
        row.append(p);
      }
    } else {
      row.append(el('p', 'explanation', 'Unexplained: no expected difference matches this line.'));
    }
    list.append(row);
  }
  sec.append(h, summary, list);
  const views = Object.entries(info.views || {});
  if (views.length) {
    const det = el('details', 'views');
    det.append(el('summary', null, 'The cluster views that were compared'));
    const grid = el('div', 'views-grid');
    for (const [layout, text] of views) {
      const fig = el('figure');
      fig.append(el('figcaption', null, layout), el('pre', null, text));
      grid.append(fig);
    }
    det.append(grid);
    sec.append(det);
  }
  return sec;
}

// ---- polling ----

async function getJSON(url) {
  const r = await fetch(url, { cache: 'no-store', headers: { Accept: 'application/json' } });
  if (!r.ok) throw new Error(`GET ${url}: HTTP ${r.status}: ${clip((await r.text()).trim(), 200)}`);
  return r.json();
}

function reset() {
  const info = state.info;
  Object.assign(state, { after: 0, first: 0, latest: 0, held: 0, dropped: 0, errors: [], errorCount: 0, anchor: null, objectsShown: '' });
  for (const d of state.diagrams) {
    Object.assign(d, newDiagram(d.layout), { section: d.section, scroll: d.scroll, head: d.head, list: d.list });
    d.list.replaceChildren();
  }
  state.info = info;
}

async function poll() {
  let busy = 0;
  try {
    for (;;) {
      const body = await getJSON(`api/events?after=${state.after}&limit=${BATCH}`);
      const t = performance.now();
      if (body.latest < state.after) { reset(); continue; } // the server started again
      apply(body);
      if (!state.loaded && body.next >= body.latest) state.loaded = true;
      const first = !state.area.isConnected;
      if (first) $('diagram-area').replaceChildren(state.area); // #rows appears with the first answer
      if (body.events.length || first) {
        renderFilterOptions();
        render();
      }
      busy = performance.now() - t;
      if (body.next >= body.latest || !body.events.length) break;
    }
    state.pollError = null;
    renderStatus();
  } catch (e) {
    state.pollError = e.message;
    renderStatus();
  }
  // A costly update (a page of "all" rows, say) leaves the page time for the reader in between.
  setTimeout(poll, Math.min(10000, Math.max(POLL_MS, 2 * busy)));
}

// ---- controls ----

function setPos(i) {
  const n = maxLen();
  if (!n) return;
  state.follow = false;
  state.pos = Math.min(Math.max(0, i), n - 1);
  state.anchor = state.diagrams[0].rows[Math.min(state.pos, state.diagrams[0].rows.length - 1)] || null;
  state.page = pageOf(state.pos);
  render();
}

function wire() {
  const range = $('timeline');
  range.addEventListener('input', () => setPos(Number(range.value)));
  range.addEventListener('change', () => setPos(Number(range.value)));
  $('step-prev').addEventListener('click', () => setPos(state.pos - 1));
  $('step-next').addEventListener('click', () => setPos(state.pos + 1));
  $('follow').addEventListener('change', (e) => {
    state.follow = e.target.checked;
    if (!state.follow) setPos(state.pos); else render();
  });
  $('page-size').addEventListener('change', (e) => {
    state.pageSize = e.target.value === 'all' ? Infinity : Number(e.target.value);
    state.page = pageOf(state.pos);
    render();
  });
  $('page-prev').addEventListener('click', () => { state.follow = false; state.page--; render(); });
  $('page-next').addEventListener('click', () => { state.follow = false; state.page++; render(); });
  for (const what of ['component', 'provider', 'service']) {
    $('filter-' + what).addEventListener('change', (e) => { state.filters[what] = e.target.value; render(); });
  }
  $('filter-method').addEventListener('input', (e) => {
    state.filters.method = e.target.value.trim().toLowerCase();
    render();
  });
  document.addEventListener('keydown', (e) => {
    if (e.altKey || e.ctrlKey || e.metaKey || !state.info) return;
    const t = e.target;
    if (t.closest && t.closest('input:not([type=range]):not([type=checkbox]), select, textarea, [contenteditable]')) return;
    let step = 0;
    if (e.key === 'j' || e.key === 'ArrowRight') step = 1;
    else if (e.key === 'k' || e.key === 'ArrowLeft') step = -1;
    if (!step || (t === range && e.key.startsWith('Arrow'))) return; // the range steps itself
    e.preventDefault();
    setPos(state.pos + step);
  });
}

async function start() {
  wire();
  for (;;) {
    try {
      setup(await getJSON('api/info'));
      break;
    } catch (e) {
      $('status').textContent = `error: cannot load api/info (${e.message}); retrying`;
      await new Promise((r) => setTimeout(r, 2000));
    }
  }
  poll();
}

start();
