// The message browser: reads one partition from an offset, from a time
// (the first record at or after it) or its last N records, read_committed, and
// shows offsets, timestamps, keys, values and headers as text, pretty JSON or
// hex. A key or value written in the schema registry's wire format (magic byte 0
// and a schema id) is decoded by the broker with the registered schema (Avro,
// Protobuf or JSON Schema) and shown as JSON, with its subject, id and type.
// The reading position lives in the URL (#/browse?topic=..&partition=..&offset=..)
// so a view can be shared or reloaded.
import { api, enc } from '../api.js';
import { h, fill, table, num, time, badge, errorBanner, link } from '../ui.js';

const max_records_default = 50;
const max_records_limit = 500; // the API's own limit
const hex_bytes_per_line = 16;

export function browsePage(root, ctx) {
  const q = ctx.query;
  const state = {
    topic: q.get('topic') || '',
    partition: Number(q.get('partition') || 0),
    mode: q.has('timestamp') ? 'timestamp' : q.has('offset') ? 'offset' : q.get('mode') || 'offset',
    offset: q.get('offset') || '',
    timestamp: q.get('timestamp') || '',
    max: Number(q.get('max') || max_records_default),
    view: q.get('view') || 'text',
  };
  let lastAnswer = null;

  const errors = h('div');
  const topicSel = h('select', { testid: 'browse-topic' });
  const partSel = h('select', { testid: 'browse-partition' });
  const modeSel = h('select', { testid: 'browse-mode' },
    h('option', { value: 'offset' }, 'from offset'),
    h('option', { value: 'timestamp' }, 'from time'),
    h('option', { value: 'latest' }, 'last records'));
  const offsetIn = h('input', { type: 'number', min: 0, placeholder: 'log start', testid: 'browse-offset', value: state.offset });
  const tsIn = h('input', { placeholder: 'ms since epoch or 2026-01-31 12:00:00', testid: 'browse-timestamp', value: state.timestamp, size: 28 });
  const maxIn = h('input', { type: 'number', min: 1, max: max_records_limit, value: String(state.max), testid: 'browse-max', class: 'narrow' });
  const readBtn = h('button', { type: 'submit', testid: 'browse-read' }, 'Read');
  const nextBtn = h('button', { type: 'button', testid: 'browse-next', disabled: true }, 'Next page');
  const views = ['text', 'json', 'hex'].map((v) =>
    h('button', { type: 'button', class: 'toggle', testid: `view-${v}`, dataset: { view: v }, onclick: () => setView(v) }, v === 'json' ? 'JSON' : v));
  const info = h('div', { class: 'info', testid: 'browse-info' });
  const out = h('div', { testid: 'browse-records', class: 'scroll' });
  modeSel.value = state.mode;

  const form = h('form', { class: 'toolbar wrap', testid: 'browse-form' },
    h('label', {}, 'Topic ', topicSel),
    h('label', {}, 'Partition ', partSel),
    modeSel,
    h('span', { class: 'mode-offset' }, offsetIn),
    h('span', { class: 'mode-timestamp' }, tsIn),
    h('label', {}, 'Max ', maxIn),
    readBtn,
    nextBtn,
    h('span', { class: 'spacer' }),
    h('span', { class: 'toggles' }, 'Show as ', views));

  root.append(h('h1', {}, 'Messages'), errors, form, info, out);

  function showMode() {
    form.querySelector('.mode-offset').hidden = modeSel.value === 'timestamp';
    form.querySelector('.mode-timestamp').hidden = modeSel.value !== 'timestamp';
    offsetIn.placeholder = modeSel.value === 'latest' ? 'ignored' : 'log start';
    offsetIn.disabled = modeSel.value === 'latest';
  }
  modeSel.addEventListener('change', showMode);
  showMode();

  function setView(v) {
    state.view = v;
    for (const b of views) b.classList.toggle('active', b.dataset.view === v);
    saveUrl();
    if (lastAnswer) drawRecords(lastAnswer);
  }
  setView(state.view);

  function saveUrl() {
    const p = new URLSearchParams();
    if (state.topic) p.set('topic', state.topic);
    p.set('partition', String(state.partition));
    if (state.mode === 'timestamp' && state.timestamp) p.set('timestamp', state.timestamp);
    else if (state.mode === 'offset' && state.offset !== '') p.set('offset', state.offset);
    else if (state.mode === 'latest') p.set('mode', 'latest');
    if (state.max !== max_records_default) p.set('max', String(state.max));
    if (state.view !== 'text') p.set('view', state.view);
    history.replaceState(null, '', `#/browse?${p}`);
  }

  async function loadTopics() {
    const topics = await api('/topics');
    if (!ctx.alive()) return;
    topics.sort((a, b) => a.name.localeCompare(b.name));
    fill(topicSel, h('option', { value: '' }, '(choose a topic)'), topics.map((t) => h('option', { value: t.name }, t.name)));
    if (state.topic && !topics.some((t) => t.name === state.topic)) topicSel.append(h('option', { value: state.topic }, state.topic));
    topicSel.value = state.topic;
    await loadPartitions();
  }

  let partitions = [];
  async function loadPartitions() {
    fill(partSel);
    partitions = [];
    if (!topicSel.value) return;
    const t = await api(`/topics/${enc(topicSel.value)}`);
    if (!ctx.alive()) return;
    partitions = t.partitions || [];
    fill(partSel, partitions.map((p) => h('option', { value: String(p.partition) }, `${p.partition}  [${num(p.log_start_offset)}, ${num(p.high_watermark)})`)));
    if (partitions.some((p) => p.partition === state.partition)) partSel.value = String(state.partition);
  }
  topicSel.addEventListener('change', async () => {
    state.topic = topicSel.value;
    state.partition = 0;
    offsetIn.value = '';
    fill(out);
    fill(info);
    lastAnswer = null;
    try {
      await loadPartitions();
    } catch (e) {
      fill(errors, errorBanner(e));
    }
  });

  async function read(fromOffset) {
    state.topic = topicSel.value;
    state.partition = Number(partSel.value || 0);
    state.mode = modeSel.value;
    state.max = Math.min(max_records_limit, Math.max(1, Number(maxIn.value || max_records_default)));
    if (!state.topic) {
      fill(errors, errorBanner(new Error('Choose a topic first.')));
      return;
    }
    const query = { max: state.max };
    if (fromOffset !== undefined) {
      query.offset = fromOffset;
      state.mode = 'offset';
      modeSel.value = 'offset';
      showMode();
      offsetIn.value = String(fromOffset);
    } else if (state.mode === 'timestamp') {
      const ms = parseTime(tsIn.value);
      if (ms === null) {
        fill(errors, errorBanner(new Error(`Not a time: "${tsIn.value}". Give milliseconds since the epoch or a date such as 2026-01-31 12:00:00.`)));
        return;
      }
      query.timestamp = ms;
    } else if (state.mode === 'latest') {
      const p = partitions.find((x) => x.partition === state.partition);
      const t = await api(`/topics/${enc(state.topic)}`);
      const fresh = (t.partitions || []).find((x) => x.partition === state.partition) || p;
      query.offset = fresh ? Math.max(fresh.log_start_offset, fresh.high_watermark - state.max) : 0;
    } else if (offsetIn.value !== '') {
      query.offset = Number(offsetIn.value);
    }
    state.offset = offsetIn.value;
    state.timestamp = tsIn.value;
    saveUrl();
    const url = `/topics/${enc(state.topic)}/partitions/${state.partition}/records`;
    readBtn.disabled = true;
    try {
      const a = await api(url, { query });
      if (!ctx.alive()) return;
      fill(errors);
      lastAnswer = a;
      const next = nextOffset(a, query.max);
      drawRecords(a, next);
      nextBtn.disabled = next >= a.high_watermark;
      nextBtn.onclick = () => read(next);
    } catch (e) {
      fill(errors, errorBanner(e));
    } finally {
      readBtn.disabled = false;
    }
  }
  form.addEventListener('submit', (ev) => {
    ev.preventDefault();
    read();
  });

  function drawRecords(a, next = nextOffset(a, state.max)) {
    const rs = a.records || [];
    const first = rs.length ? rs[0].offset : null;
    const last = rs.length ? rs[rs.length - 1].offset : null;
    fill(
      info,
      rs.length
        ? `Offsets ${num(first)} to ${num(last)} (${num(rs.length)} records)`
        : 'No records there.',
      ` · partition holds [${num(a.log_start_offset)}, ${num(a.high_watermark)}) · next offset ${num(next)}`,
    );
    fill(
      out,
      table(
        [
          { label: 'Offset', value: (r) => String(r.offset), num: true, col: 'offset' },
          { label: 'Timestamp', value: (r) => h('span', { title: `${r.timestamp_type} ${r.timestamp_ms}`, dataset: { value: r.timestamp_ms } }, time(r.timestamp_ms)), col: 'timestamp' },
          { label: 'Key', value: (r) => showBytes(r.key, state.view, null, decodedOf(r, 'key')), col: 'key' },
          { label: 'Value', value: (r) => showBytes(r.value, state.view, r.schema, decodedOf(r, 'value')), col: 'value' },
          { label: 'Headers', value: (r) => showHeaders(r.headers || [], state.view), col: 'headers' },
          { label: 'Schema', value: (r) => (r.schema ? link(`#/schemas?subject=${enc(r.schema.subject)}`, `${r.schema.subject} #${r.schema.id} (${r.schema.type})`) : '–'), col: 'schema' },
        ],
        rs,
        { testid: 'records-table', rowKey: (r) => String(r.offset), empty: 'No records in this range.' },
      ),
    );
  }

  (async () => {
    try {
      await loadTopics();
      if (state.topic) await read();
    } catch (e) {
      fill(errors, errorBanner(e));
    }
  })();
}

/**
 * Where the next page starts. A page cut at `max` records goes on right after
 * its last record, whatever next_offset says (a broker may report the end of
 * the last batch it read, past records it did not return); a shorter page
 * goes on from next_offset, which skips what the read passed over (compacted
 * gaps, transaction markers).
 */
export function nextOffset(a, max) {
  const rs = a.records || [];
  if (!rs.length) return a.next_offset;
  const afterLast = rs[rs.length - 1].offset + 1;
  return rs.length >= max ? afterLast : Math.max(afterLast, a.next_offset);
}

/** Epoch ms from "1733472000000" or a date the browser can parse (local time); null if neither. */
export function parseTime(s) {
  const t = s.trim();
  if (/^\d+$/.test(t)) return Number(t);
  const ms = Date.parse(t.replace(' ', 'T'));
  return Number.isNaN(ms) ? null : ms;
}

export function base64Bytes(b64) {
  const bin = atob(b64 || '');
  const out = new Uint8Array(bin.length);
  for (let i = 0; i < bin.length; i++) out[i] = bin.charCodeAt(i);
  return out;
}

export function hexDump(data) {
  const lines = [];
  for (let i = 0; i < data.length; i += hex_bytes_per_line) {
    const chunk = data.subarray(i, i + hex_bytes_per_line);
    const hex = Array.from(chunk, (b) => b.toString(16).padStart(2, '0')).join(' ');
    const ascii = Array.from(chunk, (b) => (b >= 0x20 && b < 0x7f ? String.fromCharCode(b) : '.')).join('');
    // Pad the hex column only when there are several lines, so that short keys stay narrow.
    const width = data.length > hex_bytes_per_line ? hex_bytes_per_line * 3 - 1 : hex.length;
    lines.push(`${i.toString(16).padStart(4, '0')}  ${hex.padEnd(width)}  ${ascii}`);
  }
  return lines.join('\n');
}

const utf8 = new TextDecoder('utf-8', { fatal: true });

/** The broker's decoding of a record's key or value: {json} or {error}, or null. */
export function decodedOf(r, side) {
  if (r[`${side}_decoded`] !== undefined) return { json: r[`${side}_decoded`] };
  if (r[`${side}_decode_error`] !== undefined) return { error: r[`${side}_decode_error`] };
  return null;
}

/**
 * A key or value as the chosen view shows it. v is the API's {text, base64, json}
 * or null. What the broker decoded with the registry's schema is shown as JSON
 * (compact as text, indented as JSON). Otherwise, with a registry schema the 5-byte
 * header (magic 0, schema id) is skipped for the text and JSON views, and a JSON
 * Schema payload is parsed.
 */
export function showBytes(v, view, schema, decoded = null) {
  if (v === null || v === undefined) return h('span', { class: 'null' }, 'null');
  const raw = base64Bytes(v.base64);
  if (view === 'hex') return h('pre', { class: 'hex' }, hexDump(raw));
  if (decoded && decoded.json !== undefined) {
    return view === 'json'
      ? h('pre', { class: 'json', testid: 'decoded' }, JSON.stringify(decoded.json, null, 2))
      : h('span', { class: 'text', testid: 'decoded' }, JSON.stringify(decoded.json));
  }
  let text = v.text;
  // Parsed here rather than taken from v.json, so that the JSON view keeps the
  // keys in the order they were written (the broker's parse may sort them).
  let json = v.json;
  if (text !== null && text !== undefined && json !== undefined) {
    try {
      json = JSON.parse(text);
    } catch {
      // keep the broker's
    }
  }
  if (schema && raw.length >= 5 && raw[0] === 0) {
    const payload = raw.subarray(5);
    try {
      text = utf8.decode(payload);
    } catch {
      text = null;
    }
    json = undefined;
    if (text !== null && schema.type === 'JSON') {
      try {
        json = JSON.parse(text);
      } catch {
        json = undefined;
      }
    }
    if (text === null) {
      const why = decoded && decoded.error ? `, not decoded: ${decoded.error}` : '';
      return h('span', {}, badge(`${schema.type}, ${raw.length - 5} bytes${why}`), h('pre', { class: 'hex' }, hexDump(payload)));
    }
  }
  if (view === 'json' && json !== undefined) return h('pre', { class: 'json' }, JSON.stringify(json, null, 2));
  if (text === null || text === undefined) {
    return h('span', {}, badge(`binary, ${raw.length} bytes`), h('pre', { class: 'hex' }, hexDump(raw)));
  }
  return h('span', { class: 'text' }, text);
}

function showHeaders(headers, view) {
  if (!headers.length) return '–';
  return h(
    'dl',
    { class: 'headers' },
    headers.map((hd) => [h('dt', {}, hd.key), h('dd', {}, showBytes(hd.value, view === 'json' ? 'text' : view, null))]),
  );
}
