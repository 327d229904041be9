// The console's entry: a hash router (#/topics, #/topics/NAME, #/groups/ID,
// #/browse?topic=..., ...) and the life cycle of a page. A page is a function
// (root, ctx) that builds its DOM in root; ctx.poll() runs a refresh now and
// then every N ms until the user leaves the page, and ctx.onLeave() registers
// clean-up (charts). Leaving a page stops all of its timers, so only the page
// on screen polls the broker.
import './style.css';
import { api } from './api.js';
import { h, fill, errorBanner } from './ui.js';
import { overviewPage } from './pages/overview.js';
import { topicsPage, topicPage } from './pages/topics.js';
import { browsePage } from './pages/browse.js';
import { groupsPage, groupPage } from './pages/groups.js';
import { producersPage } from './pages/producers.js';
import { schemasPage } from './pages/schemas.js';
import { securityPage } from './pages/security.js';
import { mirrorsPage } from './pages/mirrors.js';

const nav = [
  ['#/', 'Overview', 'overview'],
  ['#/topics', 'Topics', 'topics'],
  ['#/browse', 'Messages', 'browse'],
  ['#/groups', 'Consumer groups', 'groups'],
  ['#/producers', 'Producers', 'producers'],
  ['#/schemas', 'Schemas', 'schemas'],
  ['#/security', 'ACLs & users', 'security'],
  ['#/mirrors', 'Mirrors', 'mirrors'],
];

const routes = [
  [/^\/?$/, overviewPage, 'overview'],
  [/^\/topics$/, topicsPage, 'topics'],
  [/^\/topics\/([^/]+)$/, topicPage, 'topics'],
  [/^\/browse$/, browsePage, 'browse'],
  [/^\/groups$/, groupsPage, 'groups'],
  [/^\/groups\/([^/]+)$/, groupPage, 'groups'],
  [/^\/producers$/, producersPage, 'producers'],
  [/^\/schemas$/, schemasPage, 'schemas'],
  [/^\/security$/, securityPage, 'security'],
  [/^\/mirrors$/, mirrorsPage, 'mirrors'],
];

let leaving = [];
let generation = 0;

function parseHash() {
  const raw = location.hash.replace(/^#/, '') || '/';
  const qi = raw.indexOf('?');
  const path = qi < 0 ? raw : raw.slice(0, qi);
  const query = new URLSearchParams(qi < 0 ? '' : raw.slice(qi + 1));
  return { path, query };
}

function render() {
  for (const f of leaving) {
    try {
      f();
    } catch (e) {
      console.error(e);
    }
  }
  leaving = [];
  const gen = ++generation;
  const { path, query } = parseHash();
  const root = document.getElementById('app');
  fill(root);
  for (const a of document.querySelectorAll('#nav a')) a.classList.remove('active');

  const found = routes.find(([re]) => re.test(path));
  if (!found) {
    root.append(h('h1', {}, 'Not found'), h('p', {}, `No page at ${path}. `, h('a', { href: '#/' }, 'Overview')));
    return;
  }
  const [re, page, section] = found;
  document.querySelector(`#nav a[data-section="${section}"]`)?.classList.add('active');
  const params = path.match(re).slice(1).map(decodeURIComponent);

  const ctx = {
    params,
    query,
    alive: () => gen === generation,
    onLeave: (f) => leaving.push(f),
    /**
     * Calls `fn` now and every `ms` after the previous call finished (never two
     * at once), until the page is left. An error is shown in `errorSlot` (and
     * cleared by the next success) instead of stopping the polling.
     */
    poll(fn, ms, errorSlot) {
      let timer = null;
      const tick = async () => {
        if (gen !== generation) return;
        try {
          await fn();
          if (errorSlot) fill(errorSlot);
        } catch (e) {
          if (gen !== generation) return;
          if (errorSlot) fill(errorSlot, errorBanner(e));
          else console.error(e);
        }
        if (gen === generation) timer = setTimeout(tick, ms);
      };
      leaving.push(() => clearTimeout(timer));
      return tick();
    },
  };
  try {
    page(root, ctx);
  } catch (e) {
    root.append(errorBanner(e));
  }
}

function start() {
  fill(
    document.getElementById('nav'),
    nav.map(([href, label, section]) => h('a', { href, dataset: { section }, testid: `nav-${section}` }, label)),
  );
  window.addEventListener('hashchange', render);
  render();
  // The header's cluster line; a failure here is shown by the page itself.
  api('/overview')
    .then((o) => {
      // `caller` (who the broker thinks we are, and whether it lets us change
      // things) is told by brokers that have it; writes stay the broker's
      // decision either way (a 403 is shown where it happens).
      const who = o.caller
        ? [` · ${o.caller.principal}`, o.caller.may_write === false ? h('span', { class: 'badge warn', testid: 'read-only', title: 'Only super users may create, alter, delete or reset' }, 'read-only') : null]
        : null;
      fill(document.getElementById('cluster'), `cluster ${o.cluster_id} · node ${o.node_id} · es ${o.version}`, who);
    })
    .catch(() => {});
}

start();
