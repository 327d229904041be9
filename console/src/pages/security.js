// ACLs and users: every ACL binding, the SCRAM users with their mechanisms and
// iterations, API keys with their principals (never secrets), the super users.
import { api } from '../api.js';
import { h, fill, table, badge, time, notServed, unlessNotServed } from '../ui.js';

export function securityPage(root, ctx) {
  const errors = h('div');
  const aclBox = h('div');
  const usersBox = h('div', { testid: 'users' });
  const filter = h('input', { type: 'search', placeholder: 'Filter by principal or resource', testid: 'acls-filter', class: 'filter' });
  let acls = [];
  root.append(h('h1', {}, 'ACLs and users'), errors, h('h2', {}, 'Users'), usersBox, h('h2', {}, 'ACLs'), h('div', { class: 'toolbar' }, filter), aclBox);

  function drawAcls() {
    const q = filter.value.trim().toLowerCase();
    const rows = acls
      .filter((a) => !q || a.principal.toLowerCase().includes(q) || a.resource_name.toLowerCase().includes(q))
      .sort((a, b) => a.principal.localeCompare(b.principal) || a.resource_type.localeCompare(b.resource_type) || a.resource_name.localeCompare(b.resource_name));
    fill(
      aclBox,
      table(
        [
          { label: 'Principal', value: (a) => a.principal, col: 'principal' },
          { label: 'Resource', value: (a) => `${a.resource_type} ${a.resource_name}`, col: 'resource' },
          { label: 'Pattern', value: (a) => a.pattern_type, col: 'pattern' },
          { label: 'Host', value: (a) => a.host, col: 'host' },
          { label: 'Operation', value: (a) => a.operation, col: 'operation' },
          { label: 'Permission', value: (a) => badge(a.permission, a.permission === 'ALLOW' ? 'ok' : 'bad'), col: 'permission' },
        ],
        rows,
        { testid: 'acls-table', empty: acls.length ? 'No ACL matches.' : 'No ACLs.' },
      ),
    );
  }
  filter.addEventListener('input', drawAcls);

  ctx.poll(async () => {
    const [a, u] = await Promise.all([unlessNotServed(api('/acls')), unlessNotServed(api('/users'))]);
    if (!ctx.alive()) return;
    if (a === null) fill(aclBox, notServed('/api/v1/acls', 'kafka-acls --list'));
    else {
      acls = a;
      drawAcls();
    }
    if (u === null) {
      fill(usersBox, notServed('/api/v1/users', 'kafka-configs --describe --entity-type users'));
      return;
    }
    fill(
      usersBox,
      h('div', { class: 'stats' }, h('div', { class: 'stat wide' }, h('span', { class: 'label' }, 'Super users'),
        h('b', { testid: 'super-users' }, (u.super_users || []).length ? u.super_users.join(', ') : 'none'))),
      h('h3', {}, 'SCRAM users'),
      table(
        [
          { label: 'User', value: (s) => s.user, col: 'user' },
          { label: 'Mechanisms', value: (s) => (s.mechanisms || []).map((m) => `${m.mechanism} (${m.iterations} iterations)`).join(', '), col: 'mechanisms' },
        ],
        u.scram || [],
        { testid: 'scram-table', rowKey: (s) => s.user, empty: 'No SCRAM users.' },
      ),
      h('h3', {}, 'API keys'),
      table(
        [
          { label: 'Key', value: (k) => h('span', { class: 'mono' }, k.key), col: 'key' },
          { label: 'Principal', value: (k) => k.principal, col: 'principal' },
          { label: 'Created', value: (k) => (k.created_ms ? time(k.created_ms) : '–'), col: 'created' },
        ],
        u.api_keys || [],
        { testid: 'api-keys-table', rowKey: (k) => k.key, empty: 'No API keys.' },
      ),
    );
  }, 10000, errors);
}
