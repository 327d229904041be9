// A stand-in for es's admin listener, for working on the console without a
// broker: `npm run dev` serves the console through Vite (hot reload) and
// answers /api/v1/... with made-up data shaped as docs/admin-api.md says.
// A producer ticks every second (offsets, throughput and one group's lag grow).
// NOT used by the real test (tests/console.spec.mjs runs a live es-broker).
//
//   node dev/fixture-server.mjs              # http://127.0.0.1:5173/
//   node dev/fixture-server.mjs --dist       # serve the built dist/ instead of Vite
//   FIXTURE_READ_ONLY=1 node dev/...         # every write answers 403, as for a non-super user
//   PORT=8080 node dev/...
import http from 'node:http';
import fs from 'node:fs';
import path from 'node:path';
import { randomUUID } from 'node:crypto';
import { fileURLToPath } from 'node:url';

const here = path.dirname(fileURLToPath(import.meta.url));
const consoleDir = path.resolve(here, '..');
const port = Number(process.env.PORT || 5173);
const useDist = process.argv.includes('--dist');
const readOnly = process.env.FIXTURE_READ_ONLY === '1';
const startedMs = Date.now();

// ---- state -------------------------------------------------------------

const bytesPerRecord = 96;
const topics = new Map();
function addTopic(name, partitions, { internal = false, configs = {}, records = 0, mirror = null } = {}) {
  topics.set(name, {
    name,
    id: randomUUID(),
    internal,
    mirror,
    partitions: Array.from({ length: partitions }, (_, p) => ({ partition: p, start: 0, hw: records })),
    configs: { ...configs },
  });
}
addTopic('orders', 3, { records: 1200, configs: { 'retention.ms': '86400000' } });
addTopic('payments', 2, { records: 300 });
addTopic('orders-json-schema', 1, { records: 20 });
addTopic('audit', 1, { records: 42, mirror: { link: 'dc1', state: 'mirroring' } });
addTopic('__consumer_offsets', 50, { internal: true });

const groups = new Map([
  ['billing', { state: 'Stable', protocol: 'range', members: [
    { member_id: 'rdkafka-1b2c', client_id: 'billing-1', client_host: '/127.0.0.1', assignment: [{ topic: 'orders', partitions: [0, 1] }] },
    { member_id: 'rdkafka-9f8e', client_id: 'billing-2', client_host: '/127.0.0.1', assignment: [{ topic: 'orders', partitions: [2] }] },
  ], committed: { 'orders/0': 1195, 'orders/1': 1190, 'orders/2': 1180 } }],
  ['analytics', { state: 'Empty', protocol: '', members: [], committed: { 'orders/0': 400, 'orders/1': 350, 'orders/2': 100, 'payments/0': 250 } }],
]);

const defaults = {
  'cleanup.policy': 'delete', 'retention.ms': '604800000', 'retention.bytes': '-1', 'segment.bytes': '1073741824',
  'max.message.bytes': '1048588', 'min.insync.replicas': '1', 'compression.type': 'producer',
  'message.timestamp.type': 'CreateTime',
};

// One sample a second, kept for 10 minutes, as the broker does.
const samples = [];
let last = { records_in: 0 };
function tick() {
  const now = Date.now();
  const t = (now - startedMs) / 1000;
  const recIn = Math.round(40 + 25 * Math.sin(t / 20) + Math.random() * 10);
  const recOut = Math.round(recIn * (0.8 + 0.2 * Math.sin(t / 33)));
  const orders = topics.get('orders');
  if (orders) for (let i = 0; i < recIn; i++) orders.partitions[i % orders.partitions.length].hw++;
  const billing = groups.get('billing');
  for (const k of Object.keys(billing.committed)) {
    const p = orders?.partitions[Number(k.split('/')[1])];
    if (p) billing.committed[k] = Math.max(billing.committed[k], p.hw - Math.round(5 + 20 * Math.random()));
  }
  samples.push({ time_ms: now, bytes_in: recIn * bytesPerRecord, bytes_out: recOut * bytesPerRecord, records_in: recIn, records_out: recOut, requests: 20 + Math.random() * 5 });
  if (samples.length > 600) samples.shift();
  last = samples[samples.length - 1];
}
for (let i = 60; i > 0; i--) {
  tick();
  samples[samples.length - 1].time_ms = Date.now() - i * 1000;
}
setInterval(tick, 1000).unref();

// ---- records -----------------------------------------------------------

function b64(buf) {
  return Buffer.from(buf).toString('base64');
}
function bytesField(buf) {
  if (buf === null) return null;
  const out = { base64: b64(buf), text: null };
  const s = buf.toString('utf8');
  if (Buffer.from(s, 'utf8').equals(buf)) {
    out.text = s;
    try {
      out.json = JSON.parse(s);
    } catch {
      // not JSON: no json field
    }
  }
  return out;
}
function recordAt(topic, p, o) {
  const ts = startedMs - 3600_000 + o * 1000;
  let key = Buffer.from(`customer-${(o * 7 + p) % 50}`);
  let value;
  let schema = null;
  if (topic === 'orders-json-schema') {
    const header = Buffer.from([0, 0, 0, 0, 3]);
    value = Buffer.concat([header, Buffer.from(JSON.stringify({ id: o, sku: `SKU-${o}` }))]);
    schema = { id: 3, subject: 'orders-json-schema-value', type: 'JSON' };
  } else if (o % 10 === 7) {
    value = Buffer.from([0xde, 0xad, 0xbe, 0xef, 0x00, 0xff, o & 0xff, 0x10, 0x80]);
  } else if (o % 10 === 3) {
    value = Buffer.from(`plain text line ${o}`);
  } else {
    value = Buffer.from(JSON.stringify({ order: o, partition: p, amount: ((o * 37) % 1000) / 10, items: ['a', 'b'].slice(0, 1 + (o % 2)) }));
  }
  if (o % 13 === 0) key = null;
  return {
    offset: o, timestamp_ms: ts, timestamp_type: 'CreateTime',
    key: bytesField(key), value: bytesField(value),
    headers: o % 2 ? [{ key: 'trace-id', value: bytesField(Buffer.from(`t-${o}`)) }] : [],
    schema,
  };
}

// ---- answers -----------------------------------------------------------

class HttpError extends Error {
  constructor(status, error, message, code = -1) {
    super(message);
    this.status = status;
    this.error = error;
    this.code = code;
  }
}
const notFound = (what) => new HttpError(404, 'UNKNOWN_TOPIC_OR_PARTITION', `${what} does not exist`, 3);

function topicSummary(t) {
  return {
    name: t.name, id: t.id, internal: t.internal, partitions: t.partitions.length, replication_factor: 1,
    log_bytes: t.partitions.reduce((s, p) => s + (p.hw - p.start) * bytesPerRecord, 0),
    records_estimate: t.partitions.reduce((s, p) => s + p.hw - p.start, 0),
    under_replicated: 0, offline: 0, mirror: t.mirror,
  };
}
function topicDetail(t) {
  const configs = Object.entries({ ...defaults, ...t.configs }).map(([name, value]) => ({
    name, value, source: name in t.configs ? 'DYNAMIC_TOPIC_CONFIG' : 'DEFAULT_CONFIG', read_only: false, sensitive: false,
  }));
  return {
    name: t.name, id: t.id, internal: t.internal,
    partitions: t.partitions.map((p) => ({
      partition: p.partition, leader: 0, leader_epoch: 0, replicas: [0], isr: [0], offline_replicas: [],
      log_start_offset: p.start, high_watermark: p.hw, last_stable_offset: p.hw, log_bytes: (p.hw - p.start) * bytesPerRecord,
    })),
    configs,
  };
}
function groupDetail(id, g) {
  const offsets = Object.entries(g.committed).map(([k, c]) => {
    const [topic, ps] = k.split('/');
    const hw = topics.get(topic)?.partitions[Number(ps)]?.hw ?? c;
    return { topic, partition: Number(ps), committed_offset: c, high_watermark: hw, lag: Math.max(0, hw - c), metadata: '' };
  });
  return { group_id: id, state: g.state, protocol_type: 'consumer', protocol: g.protocol, members: g.members, offsets };
}

function route(method, url, body) {
  const p = url.pathname.replace(/^\/api\/v1/, '');
  const seg = p.split('/').filter(Boolean).map(decodeURIComponent);
  if (method !== 'GET' && readOnly) throw new HttpError(403, 'CLUSTER_AUTHORIZATION_FAILED', 'only super users may change the cluster through the admin API', 31);

  if (method === 'GET' && p === '/overview') {
    const all = [...topics.values()];
    const parts = all.reduce((s, t) => s + t.partitions.length, 0);
    return [200, {
      cluster_id: 'fixture-cluster-7Qx', node_id: 0, version: '0.1.0-fixture', uptime_ms: Date.now() - startedMs, ready: true,
      controller: { leader_id: 0, term: 3, commit_index: 120 + Math.floor((Date.now() - startedMs) / 5000), voters: [0], learners: [] },
      brokers: [{ node_id: 0, host: '127.0.0.1', port: 9092, rack: null, fenced: false }],
      topics: all.length,
      partitions: { total: parts, leader_here: parts, offline: 0, under_replicated: 0, under_min_isr: 0 },
      storage: { log_bytes: all.reduce((s, t) => s + topicSummary(t).log_bytes, 0) },
      connections: 3, groups: groups.size,
      caller: { principal: readOnly ? 'User:reader' : 'User:ANONYMOUS', may_write: !readOnly },
    }];
  }
  if (method === 'GET' && p === '/throughput') {
    const seconds = Math.min(600, Number(url.searchParams.get('seconds') || 300));
    return [200, { interval_ms: 1000, samples: samples.filter((s) => s.time_ms >= Date.now() - seconds * 1000) }];
  }
  if (seg[0] === 'topics') {
    if (seg.length === 1 && method === 'GET') return [200, [...topics.values()].map(topicSummary)];
    if (seg.length === 1 && method === 'POST') {
      if (!body?.name || !/^[a-zA-Z0-9._-]{1,249}$/.test(body.name)) throw new HttpError(400, 'INVALID_TOPIC_EXCEPTION', `invalid topic name "${body?.name}"`, 17);
      if (topics.has(body.name)) throw new HttpError(409, 'TOPIC_ALREADY_EXISTS', `topic '${body.name}' already exists`, 36);
      const n = body.partitions > 0 ? body.partitions : 1;
      addTopic(body.name, n, { configs: body.configs || {} });
      return [201, topicDetail(topics.get(body.name))];
    }
    const t = topics.get(seg[1]);
    if (!t) throw notFound(`topic ${seg[1]}`);
    if (seg.length === 2 && method === 'GET') return [200, topicDetail(t)];
    if (seg.length === 2 && method === 'DELETE') {
      topics.delete(t.name);
      return [204, null];
    }
    if (seg[2] === 'configs' && method === 'PUT') {
      for (const [k, v] of Object.entries(body?.set || {})) {
        if (!(k in defaults)) throw new HttpError(400, 'INVALID_CONFIG', `unknown topic config ${k}`, 40);
        t.configs[k] = v;
      }
      for (const k of body?.delete || []) delete t.configs[k];
      return [204, null];
    }
    if (seg[2] === 'partitions' && seg[4] === 'records' && method === 'GET') {
      const part = t.partitions[Number(seg[3])];
      if (!part) throw notFound(`partition ${seg[3]} of ${t.name}`);
      const max = Math.min(500, Number(url.searchParams.get('max') || 50));
      let from = part.start;
      if (url.searchParams.has('offset')) from = Math.max(part.start, Number(url.searchParams.get('offset')));
      else if (url.searchParams.has('timestamp')) from = Math.max(part.start, Math.ceil((Number(url.searchParams.get('timestamp')) - (startedMs - 3600_000)) / 1000));
      const records = [];
      for (let o = from; o < part.hw && records.length < max; o++) records.push(recordAt(t.name, part.partition, o));
      return [200, { partition: part.partition, high_watermark: part.hw, log_start_offset: part.start, next_offset: from + records.length, records }];
    }
  }
  if (seg[0] === 'groups') {
    if (seg.length === 1 && method === 'GET') {
      return [200, [...groups].map(([id, g]) => {
        const d = groupDetail(id, g);
        return { group_id: id, state: g.state, protocol_type: 'consumer', type: 'classic', members: g.members.length, lag: d.offsets.reduce((s, o) => s + o.lag, 0) };
      })];
    }
    const g = groups.get(seg[1]);
    if (!g) throw new HttpError(404, 'GROUP_ID_NOT_FOUND', `group ${seg[1]} does not exist`, 69);
    if (seg.length === 2 && method === 'GET') return [200, groupDetail(seg[1], g)];
    if (seg[2] === 'reset-offsets' && method === 'POST') {
      if (g.members.length) throw new HttpError(409, 'NON_EMPTY_GROUP', `group ${seg[1]} has ${g.members.length} active members; stop them first`, 68);
      const t = topics.get(body?.topic);
      if (!t) throw notFound(`topic ${body?.topic}`);
      for (const p of t.partitions) {
        if (body.partitions && !body.partitions.includes(p.partition)) continue;
        let to;
        if (body.to === 'earliest') to = p.start;
        else if (body.to === 'latest') to = p.hw;
        else if (body.to?.offset !== undefined) to = Math.min(p.hw, Math.max(p.start, body.to.offset));
        else to = Math.max(p.start, Math.min(p.hw, Math.ceil((body.to.timestamp_ms - (startedMs - 3600_000)) / 1000)));
        g.committed[`${t.name}/${p.partition}`] = to;
      }
      return [200, groupDetail(seg[1], g)];
    }
  }
  if (method === 'GET' && p === '/producers') {
    return [200, [{ topic: 'orders', partition: 0, producers: [{ producer_id: 1000, producer_epoch: 0, last_sequence: 41, last_timestamp_ms: Date.now() - 800, coordinator_epoch: -1, current_txn_start_offset: -1 }] },
      { topic: 'payments', partition: 1, producers: [{ producer_id: 1001, producer_epoch: 2, last_sequence: 7, last_timestamp_ms: Date.now() - 5000, coordinator_epoch: 0, current_txn_start_offset: 290 }] }]];
  }
  if (method === 'GET' && p === '/transactions') {
    return [200, [{ transactional_id: 'payments-tx-1', producer_id: 1001, state: 'Ongoing', timeout_ms: 60000, start_time_ms: Date.now() - 5000, partitions: [{ topic: 'payments', partition: 1 }] }]];
  }
  if (method === 'GET' && p === '/acls') {
    return [200, [
      { resource_type: 'TOPIC', resource_name: 'orders', pattern_type: 'LITERAL', principal: 'User:alice', host: '*', operation: 'READ', permission: 'ALLOW' },
      { resource_type: 'GROUP', resource_name: 'billing', pattern_type: 'PREFIXED', principal: 'User:alice', host: '*', operation: 'READ', permission: 'ALLOW' },
      { resource_type: 'TOPIC', resource_name: 'payments', pattern_type: 'LITERAL', principal: 'User:mallory', host: '*', operation: 'ALL', permission: 'DENY' },
    ]];
  }
  if (method === 'GET' && p === '/users') {
    return [200, { scram: [{ user: 'alice', mechanisms: [{ mechanism: 'SCRAM-SHA-256', iterations: 8192 }, { mechanism: 'SCRAM-SHA-512', iterations: 4096 }] }],
      api_keys: [{ key: 'ESK4Q2Z7', principal: 'User:svc-billing', created_ms: startedMs - 86400_000 }], super_users: ['User:admin'] }];
  }
  if (method === 'GET' && p === '/schemas') {
    return [200, [
      { subject: 'orders-json-schema-value', versions: [1], latest: { version: 1, id: 3, type: 'JSON', schema: '{"type":"object","properties":{"id":{"type":"integer"},"sku":{"type":"string"}}}' }, compatibility: 'BACKWARD' },
      { subject: 'payments-value', versions: [1, 2], latest: { version: 2, id: 5, type: 'AVRO', schema: '{"type":"record","name":"Payment","fields":[{"name":"id","type":"long"},{"name":"amount","type":"double"}]}' }, compatibility: 'FULL' },
    ]];
  }
  if (method === 'GET' && p === '/mirrors') {
    return [200, [{ link: 'dc1', bootstrap: 'kafka1:9092', topics: [{ topic: 'audit', state: 'mirroring', lag: 3, partitions: 1 }], groups: ['analytics'] }]];
  }
  throw new HttpError(404, 'NOT_FOUND', `no endpoint ${method} ${p}`);
}

async function handleApi(req, res) {
  const url = new URL(req.url, 'http://localhost');
  let raw = '';
  for await (const chunk of req) raw += chunk;
  let status;
  let answer;
  try {
    let body;
    if (raw) {
      try {
        body = JSON.parse(raw);
      } catch {
        throw new HttpError(400, 'INVALID_REQUEST', 'the body is not JSON');
      }
    }
    [status, answer] = route(req.method, url, body);
  } catch (e) {
    if (!(e instanceof HttpError)) console.error(e);
    status = e.status || 500;
    answer = { error_code: e.code ?? -1, error: e.error || 'UNKNOWN_SERVER_ERROR', message: e.message };
  }
  if (status === 204) {
    res.writeHead(204).end();
    return;
  }
  const text = JSON.stringify(answer);
  res.writeHead(status, { 'Content-Type': 'application/json' }).end(text);
}

const mime = { '.html': 'text/html', '.js': 'text/javascript', '.css': 'text/css', '.svg': 'image/svg+xml', '.png': 'image/png' };
function serveDist(req, res) {
  const rel = new URL(req.url, 'http://localhost').pathname.replace(/^\/+/, '') || 'index.html';
  const file = path.resolve(consoleDir, 'dist', rel);
  if (!file.startsWith(path.resolve(consoleDir, 'dist')) || !fs.existsSync(file) || fs.statSync(file).isDirectory()) {
    res.writeHead(404, { 'Content-Type': 'text/plain' }).end('not found');
    return;
  }
  res.writeHead(200, { 'Content-Type': mime[path.extname(file)] || 'application/octet-stream' });
  fs.createReadStream(file).pipe(res);
}

let vite = null;
if (!useDist) {
  const { createServer } = await import('vite');
  vite = await createServer({ root: consoleDir, server: { middlewareMode: true }, appType: 'spa' });
}
const server = http.createServer((req, res) => {
  if (req.url.startsWith('/api/v1/')) {
    handleApi(req, res);
    return;
  }
  if (req.url === '/healthz') {
    res.writeHead(200).end('ok');
    return;
  }
  if (vite) vite.middlewares(req, res);
  else serveDist(req, res);
});
server.listen(port, '127.0.0.1', () => {
  console.log(`es console fixture: http://127.0.0.1:${port}/ (${useDist ? 'dist/' : 'vite dev'}${readOnly ? ', read-only' : ''})`);
});
