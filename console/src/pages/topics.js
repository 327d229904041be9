// Topics: the list (partitions, replication, size, records, health, mirror)
// with a create form, and one topic's page (partitions with leaders, replicas,
// ISR, offsets and sizes; configs with alter; delete). Writes are for super
// users: the broker answers 403 to anyone else and the console shows its message.
import { api, enc } from '../api.js';
import {
  h, fill, table, num, bytes, badge, list, link, stat, confirmAction, actionResult, parseKeyValues, setFlash, takeFlash,
} from '../ui.js';
import { healthBadge } from './overview.js';

const topics_poll_ms = 5000;
const topic_poll_ms = 5000;

export function topicsPage(root, ctx) {
  const errors = h('div');
  const result = h('div', {}, takeFlash());
  const filter = h('input', { type: 'search', placeholder: 'Filter topics', testid: 'topics-filter', class: 'filter' });
  const showInternal = h('input', { type: 'checkbox', testid: 'topics-internal' });
  const listBox = h('div');
  const form = createTopicForm(result, () => refresh());
  form.hidden = true;
  let latest = [];

  root.append(
    h('h1', {}, 'Topics'),
    errors,
    result,
    h(
      'div',
      { class: 'toolbar' },
      filter,
      h('label', {}, showInternal, ' internal topics'),
      h('span', { class: 'spacer' }),
      h('button', { testid: 'create-topic-open', onclick: () => { form.hidden = !form.hidden; } }, 'Create topic'),
    ),
    form,
    listBox,
  );

  function draw() {
    const q = filter.value.trim().toLowerCase();
    const rows = latest
      .filter((t) => (showInternal.checked || !t.internal) && (!q || t.name.toLowerCase().includes(q)))
      .sort((a, b) => a.name.localeCompare(b.name));
    fill(
      listBox,
      table(
        [
          { label: 'Name', value: (t) => [link(`#/topics/${enc(t.name)}`, t.name), t.internal ? badge('internal') : null], col: 'name' },
          { label: 'Partitions', value: (t) => num(t.partitions), num: true, col: 'partitions' },
          { label: 'Replication', value: (t) => num(t.replication_factor), num: true, col: 'replication' },
          { label: 'Size', value: (t) => h('span', { dataset: { value: t.log_bytes } }, bytes(t.log_bytes)), num: true, col: 'size' },
          { label: 'Records', value: (t) => num(t.records_estimate), num: true, col: 'records' },
          { label: 'Health', value: healthBadge, col: 'health' },
          { label: 'Mirror', value: (t) => (t.mirror ? `${t.mirror.state} from ${t.mirror.link}` : '–'), col: 'mirror' },
        ],
        rows,
        { testid: 'topics-table', rowKey: (t) => t.name, empty: latest.length ? 'No topic matches.' : 'No topics yet.' },
      ),
    );
  }
  filter.addEventListener('input', draw);
  showInternal.addEventListener('change', draw);

  async function refresh() {
    latest = await api('/topics');
    if (ctx.alive()) draw();
  }
  ctx.poll(refresh, topics_poll_ms, errors);
}

function createTopicForm(result, done) {
  const name = h('input', { required: true, testid: 'create-name', placeholder: 'orders', pattern: '[a-zA-Z0-9._\\-]+', maxlength: 249 });
  const partitions = h('input', { type: 'number', min: -1, value: '-1', testid: 'create-partitions' });
  const replication = h('input', { type: 'number', min: -1, value: '-1', testid: 'create-replication' });
  const configs = h('textarea', { rows: 3, testid: 'create-configs', placeholder: 'retention.ms=86400000\ncleanup.policy=compact' });
  const form = h(
    'form',
    { class: 'panel', testid: 'create-topic-form' },
    h('h3', {}, 'Create a topic'),
    h('div', { class: 'grid' },
      h('label', {}, 'Name', name),
      h('label', {}, 'Partitions (-1: broker default)', partitions),
      h('label', {}, 'Replication factor (-1: broker default)', replication),
      h('label', { class: 'wide' }, 'Configs, one name=value a line', configs)),
    h('button', { type: 'submit', testid: 'create-submit' }, 'Create'),
  );
  form.addEventListener('submit', async (ev) => {
    ev.preventDefault();
    let body;
    try {
      body = {
        name: name.value.trim(),
        partitions: Number(partitions.value || -1),
        replication_factor: Number(replication.value || -1),
        configs: parseKeyValues(configs.value),
      };
    } catch (e) {
      actionResult(result, e);
      return;
    }
    const ok = await confirmAction(
      'Create topic',
      h('p', {}, `Create topic "${body.name}" with ${body.partitions < 0 ? 'the default number of' : body.partitions} partitions?`),
      'Create',
    );
    if (!ok) return;
    try {
      await api('/topics', { method: 'POST', body });
      actionResult(result, null, `Topic ${body.name} created.`);
      form.reset();
      form.hidden = true;
      await done();
    } catch (e) {
      actionResult(result, e);
    }
  });
  return form;
}

export function topicPage(root, ctx) {
  const [name] = ctx.params;
  const errors = h('div');
  const result = h('div');
  const head = h('div', { class: 'stats', testid: 'topic-stats' });
  const parts = h('div');
  const configs = h('div');
  const title = h('h1', { testid: 'topic-name' }, name);

  root.append(
    h('p', { class: 'crumbs' }, link('#/topics', 'Topics'), ' / ', name),
    h('div', { class: 'toolbar' }, title, h('span', { class: 'spacer' }),
      link(`#/browse?topic=${enc(name)}`, 'Browse messages', { class: 'button', testid: 'topic-browse' }),
      h('button', { class: 'danger', testid: 'delete-topic', onclick: del }, 'Delete topic')),
    errors,
    result,
    head,
    h('h2', {}, 'Partitions'),
    parts,
    h('h2', {}, 'Configs'),
    configs,
  );

  async function del() {
    const ok = await confirmAction(
      'Delete topic',
      h('p', {}, `Delete topic "${name}" and all of its records? This cannot be undone.`),
      'Delete',
    );
    if (!ok) return;
    try {
      await api(`/topics/${enc(name)}`, { method: 'DELETE' });
      setFlash(`Topic ${name} deleted.`);
      location.hash = '#/topics';
    } catch (e) {
      actionResult(result, e);
    }
  }

  let configsDrawn = false;
  async function refresh(redrawConfigs) {
    const t = await api(`/topics/${enc(name)}`);
    if (!ctx.alive()) return;
    const ps = t.partitions || [];
    const sumBytes = ps.reduce((s, p) => s + (p.log_bytes || 0), 0);
    const records = ps.reduce((s, p) => s + Math.max(0, p.high_watermark - p.log_start_offset), 0);
    const replicas = ps.length ? ps[0].replicas.length : 0;
    fill(
      head,
      stat('Topic id', t.id, 'topic-id'),
      stat('Partitions', num(ps.length), 'topic-partitions', ps.length),
      stat('Replication', num(replicas), 'topic-replication', replicas),
      stat('Size', bytes(sumBytes), 'topic-size', sumBytes),
      stat('Records', num(records), 'topic-records', records),
      t.internal ? stat('Kind', badge('internal'), 'topic-internal') : null,
    );
    fill(
      parts,
      table(
        [
          { label: 'Partition', value: (p) => String(p.partition), num: true, col: 'partition' },
          { label: 'Leader', value: (p) => (p.leader < 0 ? badge('none', 'bad') : String(p.leader)), num: true, col: 'leader' },
          { label: 'Epoch', value: (p) => String(p.leader_epoch), num: true, col: 'epoch' },
          { label: 'Replicas', value: (p) => list(p.replicas), col: 'replicas' },
          { label: 'ISR', value: (p) => [list(p.isr), ' ', p.isr.length < p.replicas.length ? badge('under-replicated', 'warn') : null], col: 'isr' },
          { label: 'Offline', value: (p) => list(p.offline_replicas), col: 'offline' },
          { label: 'Log start', value: (p) => num(p.log_start_offset), num: true, col: 'log-start' },
          { label: 'High watermark', value: (p) => num(p.high_watermark), num: true, col: 'high-watermark' },
          { label: 'Last stable', value: (p) => num(p.last_stable_offset), num: true, col: 'last-stable' },
          { label: 'Size', value: (p) => h('span', { dataset: { value: p.log_bytes } }, bytes(p.log_bytes)), num: true, col: 'size' },
          { label: '', value: (p) => link(`#/browse?topic=${enc(name)}&partition=${p.partition}`, 'browse') },
        ],
        ps,
        { testid: 'partitions-table', rowKey: (p) => String(p.partition) },
      ),
    );
    if (!configsDrawn || redrawConfigs) {
      configsDrawn = true;
      fill(configs, configTable(name, t.configs || [], result, () => refresh(true)));
    }
  }
  ctx.poll(() => refresh(false), topic_poll_ms, errors);
}

const sourceNames = {
  DYNAMIC_TOPIC_CONFIG: 'set on the topic',
  DYNAMIC_BROKER_CONFIG: 'broker (dynamic)',
  DYNAMIC_DEFAULT_BROKER_CONFIG: 'cluster default (dynamic)',
  STATIC_BROKER_CONFIG: 'broker config',
  DEFAULT_CONFIG: 'default',
};

function configTable(topic, configs, result, reload) {
  async function alter(body, what) {
    const ok = await confirmAction('Alter config', h('p', {}, `${what} on topic "${topic}"?`), 'Apply');
    if (!ok) return;
    try {
      await api(`/topics/${enc(topic)}/configs`, { method: 'PUT', body });
      actionResult(result, null, `${what}: done.`);
      await reload();
    } catch (e) {
      actionResult(result, e);
    }
  }

  const rows = [...configs].sort((a, b) => a.name.localeCompare(b.name));
  const valueCell = (c) => {
    const cell = h('span', { class: 'mono' }, c.sensitive ? '(hidden)' : c.value ?? '(none)');
    if (c.read_only || c.sensitive) return cell;
    const edit = h('button', { class: 'small', testid: 'config-edit' }, 'edit');
    const wrap = h('span', {}, cell, ' ', edit);
    edit.addEventListener('click', () => {
      const input = h('input', { value: c.value ?? '', testid: 'config-input', class: 'mono' });
      const save = h('button', { class: 'small', testid: 'config-save', type: 'submit' }, 'save');
      const cancel = h('button', { class: 'small', type: 'button', onclick: () => fill(wrap, cell, ' ', edit) }, 'cancel');
      const f = h('form', { class: 'inline' }, input, save, cancel);
      f.addEventListener('submit', (ev) => {
        ev.preventDefault();
        alter({ set: { [c.name]: input.value }, delete: [] }, `Set ${c.name}=${input.value}`);
      });
      fill(wrap, f);
      input.focus();
    });
    return wrap;
  };

  const newName = h('input', { placeholder: 'name', testid: 'config-new-name', required: true });
  const newValue = h('input', { placeholder: 'value', testid: 'config-new-value' });
  const add = h('form', { class: 'inline', testid: 'config-new-form' }, 'Set a config: ', newName, ' = ', newValue,
    h('button', { type: 'submit', testid: 'config-new-submit' }, 'Set'));
  add.addEventListener('submit', (ev) => {
    ev.preventDefault();
    const n = newName.value.trim();
    alter({ set: { [n]: newValue.value }, delete: [] }, `Set ${n}=${newValue.value}`);
  });

  return h(
    'div',
    {},
    table(
      [
        { label: 'Name', value: (c) => h('span', { class: 'mono' }, c.name), col: 'name' },
        { label: 'Value', value: valueCell, col: 'value' },
        { label: 'Source', value: (c) => [sourceNames[c.source] || c.source, c.read_only ? [' ', badge('read-only')] : null], col: 'source' },
        {
          label: '',
          value: (c) =>
            c.source === 'DYNAMIC_TOPIC_CONFIG' && !c.read_only
              ? h('button', { class: 'small', testid: 'config-reset', onclick: () => alter({ set: {}, delete: [c.name] }, `Reset ${c.name} to its default`) }, 'reset')
              : null,
        },
      ],
      rows,
      { testid: 'configs-table', rowKey: (c) => c.name, empty: 'No configs reported.' },
    ),
    add,
  );
}

