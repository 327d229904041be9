// Overview: the broker and its cluster (brokers, the Raft metadata quorum),
// live throughput plots (bytes and records in and out per second, from
// /api/v1/throughput, polled every 2 s), storage, connections, and the
// partitions with their health per topic.
import { api } from '../api.js';
import { makeChart } from '../chart.js';
import { h, fill, stat, table, num, bytes, bytesRate, duration, badge, list, link } from '../ui.js';

const throughput_poll_ms = 2000;
const throughput_window_s = 300;
const overview_poll_ms = 2000;
const topics_poll_ms = 5000;

export function overviewPage(root, ctx) {
  const errors = h('div');
  const stats = h('div', { class: 'stats', testid: 'overview-stats' });
  const quorum = h('div', { testid: 'overview-quorum' });
  const brokers = h('div', { testid: 'overview-brokers' });
  const health = h('div', { testid: 'overview-health' });
  const bytesBox = h('div', { class: 'chart-box' });
  const recordsBox = h('div', { class: 'chart-box' });
  const rateNow = h('div', { class: 'stats', testid: 'overview-rates' });

  root.append(
    h('h1', {}, 'Overview'),
    errors,
    stats,
    h('h2', {}, 'Throughput ', h('small', {}, `last ${throughput_window_s / 60} minutes, per second`)),
    rateNow,
    h('div', { class: 'charts' }, h('div', {}, h('h3', {}, 'Bytes'), bytesBox), h('div', {}, h('h3', {}, 'Records'), recordsBox)),
    h('div', { class: 'cols' }, h('section', {}, h('h2', {}, 'Brokers'), brokers), h('section', {}, h('h2', {}, 'Metadata quorum (Raft)'), quorum)),
    h('h2', {}, 'Partitions and their health'),
    health,
  );

  const bytesChart = makeChart(bytesBox, { testid: 'chart-bytes', labels: ['bytes in', 'bytes out'], yFormat: bytesRate });
  const recordsChart = makeChart(recordsBox, {
    testid: 'chart-records',
    labels: ['records in', 'records out'],
    yFormat: (v) => num(Math.round(v * 10) / 10),
  });
  ctx.onLeave(() => {
    bytesChart.destroy();
    recordsChart.destroy();
  });

  ctx.poll(
    async () => {
      const o = await api('/overview');
      if (!ctx.alive()) return;
      const p = o.partitions || {};
      fill(
        stats,
        stat('Status', o.ready ? badge('ready', 'ok') : badge('not ready', 'bad'), 'overview-ready'),
        stat('Uptime', duration(o.uptime_ms), 'overview-uptime', o.uptime_ms),
        stat('Brokers', num(o.brokers.length), 'overview-broker-count', o.brokers.length),
        stat('Topics', num(o.topics), 'overview-topics', o.topics),
        stat('Partitions', num(p.total), 'overview-partitions', p.total),
        stat('Led here', num(p.leader_here), 'overview-leader-here', p.leader_here),
        stat('Under-replicated', num(p.under_replicated), 'overview-under-replicated', p.under_replicated),
        stat('Under min ISR', num(p.under_min_isr), 'overview-under-min-isr', p.under_min_isr),
        stat('Offline', num(p.offline), 'overview-offline', p.offline),
        stat('Storage used', bytes(o.storage?.log_bytes), 'overview-storage', o.storage?.log_bytes),
        stat('Connections', num(o.connections), 'overview-connections', o.connections),
        stat('Consumer groups', num(o.groups), 'overview-groups', o.groups),
      );
      const c = o.controller || {};
      fill(
        quorum,
        h(
          'div',
          { class: 'stats' },
          stat('Leader', c.leader_id === -1 || c.leader_id == null ? 'none' : `node ${c.leader_id}`, 'quorum-leader', c.leader_id),
          stat('Term', num(c.term), 'quorum-term', c.term),
          stat('Commit index', num(c.commit_index), 'quorum-commit-index', c.commit_index),
          stat('Voters', list(c.voters), 'quorum-voters'),
          stat('Learners', list(c.learners), 'quorum-learners'),
        ),
      );
      fill(
        brokers,
        table(
          [
            { label: 'Node', value: (b) => [String(b.node_id), b.node_id === o.node_id ? badge('this', 'plain') : null, b.node_id === c.leader_id ? badge('controller', 'ok') : null], col: 'node' },
            { label: 'Host', value: (b) => `${b.host}:${b.port}`, col: 'address' },
            { label: 'Rack', value: (b) => b.rack ?? '–' },
            { label: 'State', value: (b) => (b.fenced ? badge('fenced', 'bad') : badge('active', 'ok')), col: 'state' },
          ],
          o.brokers,
          { testid: 'brokers-table', rowKey: (b) => String(b.node_id) },
        ),
      );
    },
    overview_poll_ms,
    errors,
  );

  ctx.poll(
    async () => {
      const t = await api('/throughput', { query: { seconds: throughput_window_s } });
      if (!ctx.alive()) return;
      const s = t.samples || [];
      const xs = s.map((x) => x.time_ms / 1000);
      bytesChart.setData(xs, s.map((x) => x.bytes_in), s.map((x) => x.bytes_out));
      recordsChart.setData(xs, s.map((x) => x.records_in), s.map((x) => x.records_out));
      const last = s[s.length - 1];
      fill(
        rateNow,
        stat('Bytes in', last ? bytesRate(last.bytes_in) : '–', 'rate-bytes-in'),
        stat('Bytes out', last ? bytesRate(last.bytes_out) : '–', 'rate-bytes-out'),
        stat('Records in', last ? `${num(Math.round(last.records_in))}/s` : '–', 'rate-records-in'),
        stat('Records out', last ? `${num(Math.round(last.records_out))}/s` : '–', 'rate-records-out'),
        stat('Requests', last ? `${num(Math.round(last.requests))}/s` : '–', 'rate-requests'),
      );
    },
    throughput_poll_ms,
    errors,
  );

  ctx.poll(
    async () => {
      const topics = await api('/topics');
      if (!ctx.alive()) return;
      // The unhealthy first, then user topics before internal ones, by name.
      const rows = [...topics].sort((a, b) => b.offline - a.offline || b.under_replicated - a.under_replicated || a.internal - b.internal || a.name.localeCompare(b.name));
      fill(
        health,
        table(
          [
            { label: 'Topic', value: (t) => [link(`#/topics/${encodeURIComponent(t.name)}`, t.name), t.internal ? [' ', badge('internal')] : null] },
            { label: 'Partitions', value: (t) => num(t.partitions), num: true, col: 'partitions' },
            { label: 'Replication', value: (t) => num(t.replication_factor), num: true },
            { label: 'Under-replicated', value: (t) => num(t.under_replicated), num: true, col: 'under-replicated' },
            { label: 'Offline', value: (t) => num(t.offline), num: true, col: 'offline' },
            { label: 'Health', value: healthBadge, col: 'health' },
          ],
          rows,
          { testid: 'health-table', rowKey: (t) => t.name, empty: 'No topics yet.' },
        ),
      );
    },
    topics_poll_ms,
    errors,
  );
}

export function healthBadge(t) {
  if (t.offline > 0) return badge(`${t.offline} offline`, 'bad');
  if (t.under_replicated > 0) return badge(`${t.under_replicated} under-replicated`, 'warn');
  return badge('healthy', 'ok');
}
