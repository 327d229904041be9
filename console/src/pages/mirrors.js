// Mirror links (docs/migration.md): each link's source cluster, its mirror
// topics with their state and lag, and the groups whose offsets it copies.
import { api, enc } from '../api.js';
import { h, fill, table, num, badge, link } from '../ui.js';

export function mirrorsPage(root, ctx) {
  const errors = h('div');
  const box = h('div', { testid: 'mirrors' });
  root.append(h('h1', {}, 'Mirror links'), errors, box);

  ctx.poll(async () => {
    const links = await api('/mirrors');
    if (!ctx.alive()) return;
    if (!links.length) {
      fill(box, h('p', { class: 'empty', testid: 'mirrors-empty' }, 'No mirror links. docs/migration.md tells how to mirror topics from another Kafka cluster.'));
      return;
    }
    fill(
      box,
      links.map((l) =>
        h(
          'section',
          { class: 'panel', testid: 'mirror-link', dataset: { key: l.link } },
          h('h2', {}, `${l.link} `, h('small', {}, `from ${l.bootstrap}`)),
          table(
            [
              { label: 'Topic', value: (t) => link(`#/topics/${enc(t.topic)}`, t.topic), col: 'topic' },
              { label: 'State', value: (t) => badge(t.state, t.state === 'mirroring' ? 'ok' : t.state === 'promoted' ? 'plain' : 'warn'), col: 'state' },
              { label: 'Partitions', value: (t) => num(t.partitions), num: true, col: 'partitions' },
              { label: 'Lag (records)', value: (t) => num(t.lag), num: true, col: 'lag' },
            ],
            l.topics || [],
            { testid: 'mirror-topics-table', rowKey: (t) => t.topic, empty: 'No topics on this link.' },
          ),
          h('p', {}, 'Groups whose offsets it copies: ', (l.groups || []).length ? l.groups.map((g, i) => [i ? ', ' : '', link(`#/groups/${enc(g)}`, g)]) : 'none'),
        ),
      ),
    );
  }, 5000, errors);
}
