// DOM helpers shared by the pages: element building, tables, formatting, the
// confirmation dialog and the message banners. No framework: each page builds
// its DOM with h() and replaces parts of it when new data arrives.

/**
 * h('div', {class: 'x', testid: 'y', onclick: fn}, child, ...) builds an element.
 * Children may be strings, numbers, nodes, null/undefined/false (skipped) or arrays.
 */
export function h(tag, attrs, ...children) {
  const el = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (v === undefined || v === null || v === false) continue;
    if (k === 'testid') el.dataset.testid = v;
    else if (k === 'class') el.className = v;
    else if (k.startsWith('on') && typeof v === 'function') el.addEventListener(k.slice(2), v);
    else if (k === 'value') el.value = v;
    else if (k === 'checked') el.checked = !!v;
    else if (k === 'dataset') Object.assign(el.dataset, v);
    else el.setAttribute(k, v === true ? '' : String(v));
  }
  append(el, children);
  return el;
}

function append(el, children) {
  for (const c of children) {
    if (c === undefined || c === null || c === false) continue;
    if (Array.isArray(c)) append(el, c);
    else el.append(c instanceof Node ? c : document.createTextNode(String(c)));
  }
}

/** Replaces the children of `el` with `children`. */
export function fill(el, ...children) {
  el.replaceChildren();
  append(el, children);
  return el;
}

/**
 * A table. columns: [{label, value: row => cell content, num: true for right
 * aligned numbers, testid: column test id (set on each cell as data-col)}].
 * rowKey gives each row's data-key (the test finds rows by it).
 */
export function table(columns, rows, { testid, rowKey, empty = 'None.' } = {}) {
  if (!rows.length) return h('p', { class: 'empty', testid: testid && `${testid}-empty` }, empty);
  return h(
    'table',
    { testid },
    h('thead', {}, h('tr', {}, columns.map((c) => h('th', { class: c.num ? 'num' : null }, c.label)))),
    h(
      'tbody',
      {},
      rows.map((r) =>
        h(
          'tr',
          { dataset: rowKey ? { key: rowKey(r) } : {} },
          columns.map((c) => h('td', { class: c.num ? 'num' : null, dataset: c.col ? { col: c.col } : {} }, c.value(r))),
        ),
      ),
    ),
  );
}

/** A labelled figure: <div class="stat"><span>label</span><b data-testid>value</b></div>. */
export function stat(label, value, testid, rawValue) {
  return h(
    'div',
    { class: 'stat' },
    h('span', { class: 'label' }, label),
    h('b', { testid, dataset: rawValue !== undefined ? { value: String(rawValue) } : {} }, value),
  );
}

export function link(href, text, attrs = {}) {
  return h('a', { href, ...attrs }, text);
}

const numberFormat = new Intl.NumberFormat('en-US');

/** 1234567 -> "1,234,567"; null -> "–". */
export function num(n) {
  if (n === null || n === undefined) return '–';
  return numberFormat.format(n);
}

/** A count of bytes in binary units: 1536 -> "1.5 KiB". */
export function bytes(n) {
  if (n === null || n === undefined) return '–';
  const units = ['B', 'KiB', 'MiB', 'GiB', 'TiB', 'PiB'];
  let v = n;
  let i = 0;
  while (Math.abs(v) >= 1024 && i < units.length - 1) {
    v /= 1024;
    i++;
  }
  return i === 0 ? `${v} B` : `${v.toFixed(v < 10 ? 2 : v < 100 ? 1 : 0)} ${units[i]}`;
}

/** A rate of bytes per second, for chart axes. */
export function bytesRate(n) {
  return n === null || n === undefined ? '' : `${bytes(Math.round(n))}/s`;
}

/** Milliseconds as "3d 4h", "5m 12s". */
export function duration(ms) {
  if (ms === null || ms === undefined) return '–';
  let s = Math.floor(ms / 1000);
  const d = Math.floor(s / 86400);
  s -= d * 86400;
  const hh = Math.floor(s / 3600);
  s -= hh * 3600;
  const m = Math.floor(s / 60);
  s -= m * 60;
  if (d) return `${d}d ${hh}h`;
  if (hh) return `${hh}h ${m}m`;
  if (m) return `${m}m ${s}s`;
  return `${s}s`;
}

/** Epoch milliseconds as a local "YYYY-MM-DD HH:MM:SS.mmm". */
export function time(ms) {
  if (ms === null || ms === undefined || ms < 0) return '–';
  const d = new Date(ms);
  const p = (x, n = 2) => String(x).padStart(n, '0');
  return (
    `${d.getFullYear()}-${p(d.getMonth() + 1)}-${p(d.getDate())} ` +
    `${p(d.getHours())}:${p(d.getMinutes())}:${p(d.getSeconds())}.${p(d.getMilliseconds(), 3)}`
  );
}

/** A coloured badge: kind is ok, warn, bad or plain. */
export function badge(text, kind = 'plain', testid) {
  return h('span', { class: `badge ${kind}`, testid }, text);
}

export function list(items) {
  return items && items.length ? items.join(', ') : '–';
}

/** The page's error banner (data-testid="error"), e.g. when a poll fails. */
export function errorBanner(err) {
  return h('div', { class: 'banner bad', testid: 'error', role: 'alert' }, describeError(err));
}

export function describeError(err) {
  if (!err) return '';
  if (err.status) {
    const name = err.error ? `${err.error}: ` : '';
    return `${err.status} ${name}${err.message}`;
  }
  return String(err.message || err);
}

/**
 * Shows the result of a write action in `where` (an element kept on the page):
 * data-testid="action-error" with the API's message on failure, "action-ok" on success.
 */
export function actionResult(where, err, okText) {
  if (err) fill(where, h('div', { class: 'banner bad', testid: 'action-error', role: 'alert' }, describeError(err)));
  else fill(where, h('div', { class: 'banner ok', testid: 'action-ok' }, okText));
}

/**
 * Asks for confirmation with the page's <dialog>; resolves true when the user
 * pressed the OK button (data-testid="confirm-ok"), false on Cancel or Escape.
 * `body` may be a string or a node.
 */
export function confirmAction(title, body, okLabel = 'OK') {
  const dlg = document.getElementById('confirm');
  fill(document.getElementById('confirm-title'), title);
  fill(document.getElementById('confirm-body'), body);
  document.getElementById('confirm-ok').textContent = okLabel;
  dlg.returnValue = '';
  return new Promise((resolve) => {
    dlg.addEventListener('close', () => resolve(dlg.returnValue === 'ok'), { once: true });
    dlg.showModal();
  });
}

/** Parses "a=1\nb=2" (the configs text areas) into {a: "1", b: "2"}; throws on a bad line. */
export function parseKeyValues(text) {
  const out = {};
  for (const raw of text.split('\n')) {
    const line = raw.trim();
    if (!line || line.startsWith('#')) continue;
    const eq = line.indexOf('=');
    if (eq <= 0) throw new Error(`not name=value: ${line}`);
    out[line.slice(0, eq).trim()] = line.slice(eq + 1).trim();
  }
  return out;
}

// A message carried to the next page (e.g. "topic deleted" shown on the topic list).
let flashMessage = null;
export function setFlash(text) {
  flashMessage = text;
}
/** The carried message as an "action-ok" banner, once; null when there is none. */
export function takeFlash() {
  const m = flashMessage;
  flashMessage = null;
  return m ? h('div', { class: 'banner ok', testid: 'action-ok' }, m) : null;
}

/**
 * For an endpoint the broker does not serve yet (docs/admin-api.md, "Not
 * served yet": it answers 404): a note saying so and what shows the same.
 */
export function notServed(endpoint, instead) {
  return h(
    'div',
    { class: 'banner plain', testid: 'not-served' },
    `This broker does not serve ${endpoint} yet (docs/admin-api.md). `,
    instead ? ['Meanwhile ', h('code', {}, instead), ' shows the same through the Kafka listener.'] : null,
  );
}

/** Calls the API; a 404 gives `null` (an endpoint not served yet), any other error throws. */
export async function unlessNotServed(promise) {
  try {
    return await promise;
  } catch (e) {
    if (e.status === 404) return null;
    throw e;
  }
}
