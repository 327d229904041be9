// Consumer groups: the list (state, members, total lag) and one group's page:
// members and their assignment, committed offsets and lag per partition, a
// plot of the lag per partition over time (kept in the page from polling the
// group every 2 s; it starts empty when the page opens), and offset resets
// (super users; the group must have no active members, as Kafka's tool requires).
import { api, enc } from '../api.js';
import { makeChart } from '../chart.js';
import { h, fill, table, num, badge, link, stat, confirmAction, actionResult } from '../ui.js';

const groups_poll_ms = 5000;
const group_poll_ms = 2000;
const lag_history_points_max = 1800; // an hour at one point per 2 s
const lag_series_max = 12; // more partitions than this are plotted per topic

export function stateBadge(state) {
  const kind = state === 'Stable' ? 'ok' : state === 'Dead' ? 'bad' : state === 'Empty' ? 'plain' : 'warn';
  return badge(state, kind);
}

export function groupsPage(root, ctx) {
  const errors = h('div');
  const filter = h('input', { type: 'search', placeholder: 'Filter groups', testid: 'groups-filter', class: 'filter' });
  const box = h('div');
  let latest = [];
  root.append(h('h1', {}, 'Consumer groups'), errors, h('div', { class: 'toolbar' }, filter), box);

  function draw() {
    const q = filter.value.trim().toLowerCase();
    const rows = latest.filter((g) => !q || g.group_id.toLowerCase().includes(q)).sort((a, b) => a.group_id.localeCompare(b.group_id));
    fill(
      box,
      table(
        [
          { label: 'Group', value: (g) => link(`#/groups/${enc(g.group_id)}`, g.group_id), col: 'group' },
          { label: 'State', value: (g) => stateBadge(g.state), col: 'state' },
          { label: 'Protocol type', value: (g) => g.protocol_type || '–', col: 'protocol-type' },
          { label: 'Type', value: (g) => g.type || '–', col: 'type' },
          { label: 'Members', value: (g) => num(g.members), num: true, col: 'members' },
          { label: 'Lag', value: (g) => num(g.lag), num: true, col: 'lag' },
        ],
        rows,
        { testid: 'groups-table', rowKey: (g) => g.group_id, empty: latest.length ? 'No group matches.' : 'No consumer groups yet.' },
      ),
    );
  }
  filter.addEventListener('input', draw);
  ctx.poll(async () => {
    latest = await api('/groups');
    if (ctx.alive()) draw();
  }, groups_poll_ms, errors);
}

export function groupPage(root, ctx) {
  const [id] = ctx.params;
  const errors = h('div');
  const result = h('div');
  const head = h('div', { class: 'stats', testid: 'group-stats' });
  const members = h('div');
  const offsets = h('div');
  const chartBox = h('div', { class: 'chart-box' });
  const resetBox = h('div');

  root.append(
    h('p', { class: 'crumbs' }, link('#/groups', 'Consumer groups'), ' / ', id),
    h('h1', { testid: 'group-id' }, id),
    errors,
    result,
    head,
    h('h2', {}, 'Lag per partition ', h('small', {}, 'since this page opened, every 2 s')),
    chartBox,
    h('h2', {}, 'Members'),
    members,
    h('h2', {}, 'Committed offsets'),
    offsets,
    h('h2', {}, 'Reset offsets'),
    resetBox,
  );

  const chart = makeChart(chartBox, { testid: 'chart-lag', labels: [], yFormat: (v) => num(Math.round(v)) });
  ctx.onLeave(() => chart.destroy());

  // The lag history: xs (epoch seconds) and, per series key, one value per x.
  const xs = [];
  const series = new Map();
  let resetDrawn = false;

  function record(g) {
    const byPartition = (g.offsets || []).map((o) => [`${o.topic}/${o.partition}`, o.lag]);
    let points = byPartition;
    if (byPartition.length > lag_series_max) {
      const perTopic = new Map();
      for (const o of g.offsets) perTopic.set(o.topic, (perTopic.get(o.topic) || 0) + o.lag);
      points = [...perTopic].map(([t, lag]) => [`${t} (all)`, lag]);
    }
    const n = xs.length;
    xs.push(Date.now() / 1000);
    for (const [key, lag] of points) {
      if (!series.has(key)) series.set(key, new Array(n).fill(null));
    }
    const now = new Map(points);
    for (const [key, vals] of series) vals.push(now.has(key) ? now.get(key) : null);
    if (xs.length > lag_history_points_max) {
      xs.shift();
      for (const vals of series.values()) vals.shift();
    }
    const keys = [...series.keys()].sort();
    chart.setSeries(keys);
    chart.setData(xs.slice(), ...keys.map((k) => series.get(k).slice()));
  }

  async function refresh() {
    const g = await api(`/groups/${enc(id)}`);
    if (!ctx.alive()) return;
    const offs = g.offsets || [];
    const lag = offs.reduce((s, o) => s + o.lag, 0);
    fill(
      head,
      stat('State', stateBadge(g.state), 'group-state'),
      stat('Protocol', [g.protocol_type || '–', g.protocol ? ` / ${g.protocol}` : ''], 'group-protocol'),
      stat('Members', num((g.members || []).length), 'group-members', (g.members || []).length),
      stat('Partitions', num(offs.length), 'group-partitions', offs.length),
      stat('Total lag', num(lag), 'group-lag', lag),
    );
    fill(
      members,
      table(
        [
          { label: 'Member', value: (m) => h('span', { class: 'mono' }, m.member_id), col: 'member' },
          { label: 'Client id', value: (m) => m.client_id, col: 'client' },
          { label: 'Host', value: (m) => m.client_host, col: 'host' },
          { label: 'Assignment', value: (m) => (m.assignment || []).map((a) => `${a.topic}: ${a.partitions.join(', ')}`).join('; ') || '–', col: 'assignment' },
        ],
        g.members || [],
        { testid: 'members-table', rowKey: (m) => m.member_id, empty: 'No active members.' },
      ),
    );
    fill(
      offsets,
      table(
        [
          { label: 'Topic', value: (o) => link(`#/topics/${enc(o.topic)}`, o.topic), col: 'topic' },
          { label: 'Partition', value: (o) => String(o.partition), num: true, col: 'partition' },
          { label: 'Committed', value: (o) => num(o.committed_offset), num: true, col: 'committed' },
          { label: 'High watermark', value: (o) => num(o.high_watermark), num: true, col: 'high-watermark' },
          { label: 'Lag', value: (o) => num(o.lag), num: true, col: 'lag' },
          { label: '', value: (o) => link(`#/browse?topic=${enc(o.topic)}&partition=${o.partition}&offset=${o.committed_offset}`, 'browse from here') },
        ],
        [...offs].sort((a, b) => a.topic.localeCompare(b.topic) || a.partition - b.partition),
        { testid: 'offsets-table', rowKey: (o) => `${o.topic}/${o.partition}`, empty: 'No committed offsets.' },
      ),
    );
    record(g);
    if (!resetDrawn) {
      resetDrawn = true;
      const topics = [...new Set([...offs.map((o) => o.topic), ...(g.members || []).flatMap((m) => (m.assignment || []).map((a) => a.topic))])].sort();
      fill(resetBox, resetForm(id, topics, result, refresh));
    }
  }
  ctx.poll(refresh, group_poll_ms, errors);
}

function resetForm(id, topics, result, refresh) {
  if (!topics.length) return h('p', { class: 'empty' }, 'The group has no topics to reset.');
  const topic = h('select', { testid: 'reset-topic' }, topics.map((t) => h('option', { value: t }, t)));
  const parts = h('input', { placeholder: 'all, or 0,1,2', testid: 'reset-partitions', size: 12 });
  const to = h('select', { testid: 'reset-to' },
    h('option', { value: 'earliest' }, 'earliest'),
    h('option', { value: 'latest' }, 'latest'),
    h('option', { value: 'offset' }, 'offset'),
    h('option', { value: 'timestamp' }, 'time (ms since epoch)'));
  const value = h('input', { type: 'number', min: 0, testid: 'reset-value', placeholder: 'offset or ms', hidden: true });
  to.addEventListener('change', () => {
    value.hidden = to.value === 'earliest' || to.value === 'latest';
  });
  const form = h('form', { class: 'toolbar wrap', testid: 'reset-form' },
    h('label', {}, 'Topic ', topic),
    h('label', {}, 'Partitions ', parts),
    h('label', {}, 'To ', to),
    value,
    h('button', { type: 'submit', class: 'danger', testid: 'reset-submit' }, 'Reset offsets'),
    h('small', {}, 'Only when the group has no active members.'));
  form.addEventListener('submit', async (ev) => {
    ev.preventDefault();
    const body = { topic: topic.value };
    const ps = parts.value.trim();
    if (ps && ps !== 'all') {
      const list = ps.split(',').map((s) => s.trim()).filter(Boolean).map(Number);
      if (list.some((n) => !Number.isInteger(n) || n < 0)) {
        actionResult(result, new Error(`Partitions must be numbers separated by commas: ${ps}`));
        return;
      }
      body.partitions = list;
    }
    if (to.value === 'offset') body.to = { offset: Number(value.value) };
    else if (to.value === 'timestamp') body.to = { timestamp_ms: Number(value.value) };
    else body.to = to.value;
    const where = body.partitions ? `partitions ${body.partitions.join(', ')}` : 'every partition';
    const target = typeof body.to === 'string' ? body.to : body.to.offset !== undefined ? `offset ${body.to.offset}` : `time ${body.to.timestamp_ms}`;
    const ok = await confirmAction('Reset offsets', h('p', {}, `Reset group "${id}" on ${body.topic}, ${where}, to ${target}?`), 'Reset');
    if (!ok) return;
    try {
      await api(`/groups/${enc(id)}/reset-offsets`, { method: 'POST', body });
      actionResult(result, null, `Offsets of ${id} on ${body.topic} reset to ${target}.`);
      await refresh();
    } catch (e) {
      actionResult(result, e);
    }
  });
  return form;
}
