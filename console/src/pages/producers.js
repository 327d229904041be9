// Producers and transactions: the idempotent producers each partition knows
// (DescribeProducers) and the transactions of the cluster (ListTransactions,
// DescribeTransactions), refreshed every 5 s.
import { api, enc } from '../api.js';
import { h, fill, table, num, time, badge, link, notServed, unlessNotServed } from '../ui.js';

const producers_poll_ms = 5000;

export function producersPage(root, ctx) {
  const errors = h('div');
  const prodBox = h('div');
  const txBox = h('div');
  const filter = h('input', { type: 'search', placeholder: 'Filter by topic', testid: 'producers-filter', class: 'filter' });
  let latest = [];
  root.append(
    h('h1', {}, 'Producers and transactions'),
    errors,
    h('h2', {}, 'Transactions'),
    txBox,
    h('h2', {}, 'Producers per partition'),
    h('div', { class: 'toolbar' }, filter),
    prodBox,
  );

  function drawProducers() {
    if (latest === null) return;
    const q = filter.value.trim().toLowerCase();
    const rows = latest
      .filter((p) => !q || p.topic.toLowerCase().includes(q))
      .flatMap((p) => (p.producers || []).map((pr) => ({ topic: p.topic, partition: p.partition, ...pr })))
      .sort((a, b) => a.topic.localeCompare(b.topic) || a.partition - b.partition || a.producer_id - b.producer_id);
    fill(
      prodBox,
      table(
        [
          { label: 'Topic', value: (r) => link(`#/topics/${enc(r.topic)}`, r.topic), col: 'topic' },
          { label: 'Partition', value: (r) => String(r.partition), num: true, col: 'partition' },
          { label: 'Producer id', value: (r) => String(r.producer_id), num: true, col: 'producer-id' },
          { label: 'Epoch', value: (r) => String(r.producer_epoch), num: true, col: 'epoch' },
          { label: 'Last sequence', value: (r) => num(r.last_sequence), num: true, col: 'last-sequence' },
          { label: 'Last write', value: (r) => time(r.last_timestamp_ms), col: 'last-write' },
          { label: 'Open transaction from', value: (r) => (r.current_txn_start_offset >= 0 ? num(r.current_txn_start_offset) : '–'), num: true, col: 'txn-start' },
        ],
        rows,
        { testid: 'producers-table', rowKey: (r) => `${r.topic}/${r.partition}/${r.producer_id}`, empty: 'No active producers.' },
      ),
    );
  }
  filter.addEventListener('input', drawProducers);

  ctx.poll(async () => {
    const [producers, txs] = await Promise.all([unlessNotServed(api('/producers')), unlessNotServed(api('/transactions'))]);
    if (!ctx.alive()) return;
    if (producers === null) {
      latest = null;
      fill(prodBox, notServed('/api/v1/producers', 'kafka-transactions describe-producers'));
    }
    else {
      latest = producers;
      drawProducers();
    }
    if (txs === null) {
      fill(txBox, notServed('/api/v1/transactions', 'kafka-transactions list'));
      return;
    }
    const txState = (s) => badge(s, s === 'Ongoing' ? 'warn' : s === 'CompleteCommit' || s === 'Empty' ? 'ok' : s.includes('Abort') ? 'bad' : 'plain');
    fill(
      txBox,
      table(
        [
          { label: 'Transactional id', value: (t) => t.transactional_id, col: 'transactional-id' },
          { label: 'Producer id', value: (t) => String(t.producer_id), num: true, col: 'producer-id' },
          { label: 'State', value: (t) => txState(t.state), col: 'state' },
          { label: 'Started', value: (t) => time(t.start_time_ms), col: 'started' },
          { label: 'Timeout', value: (t) => `${num(t.timeout_ms)} ms`, num: true, col: 'timeout' },
          { label: 'Partitions', value: (t) => (t.partitions || []).map((p) => `${p.topic}-${p.partition}`).join(', ') || '–', col: 'partitions' },
        ],
        [...txs].sort((a, b) => a.transactional_id.localeCompare(b.transactional_id)),
        { testid: 'transactions-table', rowKey: (t) => t.transactional_id, empty: 'No transactions.' },
      ),
    );
  }, producers_poll_ms, errors);
}
