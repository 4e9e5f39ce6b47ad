// The operator's console in a real browser: Debian's headless chromium, driven by
// playwright-core, against a running daemon whose address the caller gives.
//
//   HG_URL=http://127.0.0.1:PORT HG_ADMIN_TOKEN=... HG_ARTEFACTS=dir node console.test.mjs
//
// tests/integration/test_console_browser.py starts private Redis + MariaDB and the daemon
// and runs this (make test). Each test leaves a screenshot of its view in HG_ARTEFACTS. Any
// console.error or uncaught page error fails the run, except the failed loads a test provokes
// on purpose (expectFailedLoad).
//
// Accessibility (WCAG 2.1 AA): every screenshot is also an axe-core audit of that view and
// state (wcag2a, wcag2aa, wcag21a, wcag21aa; zero violations, and no contrast left for
// review), axe injected with addScriptTag from a same-origin URL this test serves itself (the
// console's CSP allows scripts from its own origin only, and stays on). The keyboard tests
// tab through every view: each stop is a visible control with a name and a focus ring of at
// least 3:1; Enter and Space work the controls; the dialog takes focus, keeps it, gives it
// back, and Escape closes it.
import {test, before, after} from 'node:test';
import assert from 'node:assert/strict';
import {mkdirSync} from 'node:fs';
import {createRequire} from 'node:module';
import {join} from 'node:path';
import {chromium} from 'playwright-core';

const AXE_SOURCE = createRequire(import.meta.url).resolve('axe-core/axe.min.js');
const AXE_TAGS = ['wcag2a', 'wcag2aa', 'wcag21a', 'wcag21aa'];

const BASE = process.env.HG_URL;
const ADMIN = process.env.HG_ADMIN_TOKEN || '';
const OUT = process.env.HG_ARTEFACTS || 'artefacts';
const CHROMIUM = process.env.HG_CHROMIUM || '/usr/bin/chromium';
assert.ok(BASE, 'HG_URL (the daemon, e.g. http://127.0.0.1:8080) is required');

const P = 'console.'; // every topic of this run starts with it
const T = {orders: `${P}orders`, mail: `${P}mail`, rip: `${P}rip`, done: `${P}done`, pause: `${P}pause`,
  groups: `${P}groups`, gset: `${P}gset`};
// the groups of T.groups as before() leaves them: two of its groups have a job reserved
const GROUPS = [
  {group: 'g-a', delayed: 0, ready: 2, reserved: 1}, {group: 'g-b', delayed: 0, ready: 1, reserved: 1},
  {group: 'g-c', delayed: 0, ready: 1, reserved: 0}, {group: 'g-d', delayed: 0, ready: 1, reserved: 0},
  {group: 'g-e', delayed: 0, ready: 1, reserved: 0}, {group: 'g-f', delayed: 2, ready: 0, reserved: 0}];

let browser;
let page;
const consoleErrors = [];
const pageErrors = [];
const expectedFailures = []; // URL substrings whose failed loads a test provoked
const ids = {};
const audited = []; // the views and states axe checked, in order

// ---- helpers ---------------------------------------------------------------------------

async function call(method, path, body) {
  const headers = {};
  if (ADMIN) headers.Authorization = `Bearer ${ADMIN}`;
  if (body !== undefined) headers['Content-Type'] = 'application/json';
  const res = await fetch(BASE + path, {method, headers, body: body === undefined ? undefined : JSON.stringify(body)});
  const text = await res.text();
  return {status: res.status, json: text ? JSON.parse(text) : null};
}
async function ok(method, path, body) {
  const r = await call(method, path, body);
  assert.ok(r.status >= 200 && r.status < 300, `${method} ${path}: ${r.status} ${JSON.stringify(r.json)}`);
  return r.json;
}
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

async function eventually(what, fn, timeoutMs = 15000) {
  const deadline = Date.now() + timeoutMs;
  let last;
  for (;;) {
    try {
      const v = await fn();
      if (v) return v;
    } catch (e) {
      last = e;
    }
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}${last ? ': ' + last.message : ''}`);
    await sleep(200);
  }
}

// A screenshot of the page as it is, and an accessibility audit of the same state.
async function shot(name, auditOptions) {
  const path = join(OUT, `${name}.png`);
  await page.screenshot({path, fullPage: true});
  console.log(`# screenshot ${path}`);
  await audit(name, auditOptions);
}

// ---- accessibility ---------------------------------------------------------------------

// axe-core's audit of the page as it is now: no violation of WCAG 2.1 A/AA, and no colour
// contrast axe could not decide (it says "incomplete" when it cannot see the background) —
// except the plots' SVG text, whose background axe cannot see: plotColours() measures it;
// and, with {clipped: true} (a narrow screen), text cut by a table's scrolling box, which the
// same page's audits at full width have measured.
async function audit(name, {clipped = false} = {}) {
  await injectAxe();
  const res = await page.evaluate(async ([tags, clipped]) => {
    const r = await window.axe.run(document, {runOnly: {type: 'tag', values: tags}, resultTypes: ['violations', 'incomplete'],
      elementRef: true});
    const brief = (list) => list.map((v) => ({id: v.id, help: v.help,
      nodes: v.nodes.map((n) => `${n.target.join(' ')}: ${n.failureSummary || n.any.map((c) => c.message).join('; ')}`)}));
    const undecided = r.incomplete.filter((v) => v.id === 'color-contrast')
      .map((v) => ({...v, nodes: v.nodes.filter((n) => !(n.element && (n.element.closest('svg.plot') ||
        (clipped && n.element.closest('.scroller[tabindex]') && /partially obscured/.test(n.any.map((c) => c.message).join(' '))))))}))
      .filter((v) => v.nodes.length);
    return {violations: brief(r.violations), contrastUndecided: brief(undecided),
      plots: document.querySelectorAll('svg.plot').length};
  }, [AXE_TAGS, clipped]);
  assert.deepEqual(res.violations, [], `axe: WCAG 2.1 AA violations in "${name}"`);
  assert.deepEqual(res.contrastUndecided, [], `axe: contrast it could not check in "${name}"`);
  if (res.plots) await plotColours(name);
  audited.push(name);
}

// The plots' colours, which axe cannot measure in SVG: axis text at least 4.5:1 on the card,
// the lines, markers and bar outlines at least 3:1 (non-text contrast).
async function plotColours(name) {
  const bad = await page.evaluate(() => {
    const {contrast, behind} = window.__hg;
    const out = [];
    for (const svg of document.querySelectorAll('svg.plot')) {
      const bg = behind(svg);
      for (const t of svg.querySelectorAll('text')) {
        const c = contrast(getComputedStyle(t).fill, bg);
        if (c < 4.5) out.push(`text "${t.textContent}" ${c.toFixed(2)}:1`);
      }
      for (const g of svg.querySelectorAll('.series, .marker, .bar')) {
        const c = contrast(getComputedStyle(g).stroke, bg);
        if (c < 3) out.push(`${g.tagName} .${g.getAttribute('class')} stroke ${c.toFixed(2)}:1`);
      }
    }
    return out;
  });
  assert.deepEqual(bad, [], `plot colours too faint in "${name}"`);
}

// In the page (page.evaluate, the CSP forbids eval): WCAG contrast of two CSS colours, and
// the colour behind an element (its first ancestor with an opaque background).
function pageColours() {
  const lum = (c) => {
    const [r, g, b] = c.match(/[0-9.]+/g).slice(0, 3).map((v) => Number(v) / 255)
      .map((v) => (v <= 0.03928 ? v / 12.92 : ((v + 0.055) / 1.055) ** 2.4));
    return 0.2126 * r + 0.7152 * g + 0.0722 * b;
  };
  const contrast = (a, b) => {
    const [x, y] = [lum(a), lum(b)].sort((p, q) => q - p);
    return (x + 0.05) / (y + 0.05);
  };
  const behind = (el) => {
    for (let e = el.parentElement; e; e = e.parentElement) {
      const bg = getComputedStyle(e).backgroundColor;
      const alpha = bg.startsWith('rgba') ? Number(bg.match(/[0-9.]+/g)[3]) : 1;
      if (alpha === 1) return bg;
    }
    return 'rgb(255, 255, 255)';
  };
  return {contrast, behind};
}

// axe-core, and pageColours() as window.__hg, in the page (once per document). An expression
// that playwright evaluates is not the page's eval, so the CSP leaves it be.
async function injectAxe() {
  if (!(await page.evaluate(() => typeof window.axe === 'object'))) {
    await page.addScriptTag({url: `${BASE}/console/__test__/axe.min.js`}); // answered by the route set in before()
  }
  await page.evaluate(`window.__hg = window.__hg || (${pageColours.toString()})()`);
}

// What has focus now: its role and accessible name (axe's computation), whether it shows a
// focus ring (outline or box-shadow) and that ring's contrast with what is behind it.
async function focused() {
  await injectAxe();
  return page.evaluate(() => {
    const {contrast, behind} = window.__hg;
    const el = document.activeElement;
    if (!el || el === document.body) return null;
    window.axe.setup(document);
    const name = window.axe.commons.text.accessibleText(el).trim();
    const role = window.axe.commons.aria.getRole(el);
    window.axe.teardown();
    const st = getComputedStyle(el);
    const outline = st.outlineStyle !== 'none' && parseFloat(st.outlineWidth) > 0;
    const r = el.getBoundingClientRect();
    return {
      tag: el.tagName.toLowerCase(), role, name,
      key: el.dataset.nav || el.dataset.action || el.dataset.tab || el.dataset.link || el.getAttribute('name') || '',
      inMain: !!el.closest('main'), inDialog: !!el.closest('dialog'), focusVisible: el.matches(':focus-visible'),
      outline: outline ? {width: parseFloat(st.outlineWidth), contrast: contrast(st.outlineColor, behind(el))} : null,
      shadow: st.boxShadow !== 'none' ? st.boxShadow : null,
      size: [Math.round(r.width), Math.round(r.height)],
    };
  });
}

// The checks every focused control must pass.
function assertFocusable(f, where) {
  assert.ok(f.name, `${where}: no accessible name`);
  assert.ok(f.role, `${where}: no role`);
  assert.ok(f.focusVisible, `${where}: does not match :focus-visible`);
  assert.ok(f.outline || f.shadow, `${where}: no focus ring (outline or box-shadow)`);
  if (f.outline) {
    assert.ok(f.outline.width >= 2, `${where}: focus outline ${f.outline.width}px, thinner than 2px`);
    assert.ok(f.outline.contrast >= 3, `${where}: focus outline contrast ${f.outline.contrast.toFixed(2)}:1 < 3:1`);
  }
  assert.ok(f.size[0] > 0 && f.size[1] > 0, `${where}: has focus but no size (${f.size})`);
}

// Put the sequential-focus starting point at the top of the page, so the next Tab goes to
// the first stop: a throwaway element before everything, focused, gone when focus leaves it
// (blur() alone leaves the starting point where focus was).
async function focusFromTop() {
  await page.evaluate(() => {
    const start = document.createElement('span');
    start.tabIndex = -1;
    document.body.prepend(start);
    start.focus();
    start.addEventListener('blur', () => start.remove(), {once: true});
    window.scrollTo(0, 0);
  });
}

// Tab from the top of the page through every stop until focus leaves the page (or comes
// round to the first stop again); each stop is checked as it is reached. Returns the stops.
async function tabThrough(label) {
  await focusFromTop();
  const stops = [];
  for (let i = 0; i < 300; i++) {
    await page.keyboard.press('Tab');
    const f = await focused();
    if (!f || (stops.length && f.key === 'skip')) break;
    assertFocusable(f, `${label}, stop ${stops.length + 1} (${f.tag} ${f.role} "${f.name}")`);
    stops.push(f);
  }
  assert.ok(stops.length > 0, `${label}: Tab reached nothing`);
  return stops;
}

// The names of the stops, for messages and order checks.
const names = (stops) => stops.map((f) => f.name);

function expectFailedLoad(urlPart) {
  expectedFailures.push(urlPart);
}

// the four counts the table shows ("delayed" includes the far ones /stats also counts apart)
async function statsCounts() {
  const topics = (await ok('GET', `/stats?prefix=${P}`)).topics;
  const out = {};
  for (const [name, c] of Object.entries(topics)) {
    out[name] = {delayed: c.delayed, ready: c.ready, reserved: c.reserved, dead: c.dead};
  }
  return out;
}

async function rowCounts(topic) {
  const row = page.locator(`[data-topic="${topic}"]`);
  const out = {};
  for (const k of ['delayed', 'ready', 'reserved', 'dead']) {
    out[k] = Number((await row.locator(`[data-count="${k}"]`).textContent()).replace(/[^0-9]/g, ''));
  }
  return out;
}

// the cells a schedule's row shows, by name
async function scheduleCells(row) {
  return row.evaluate((tr) => {
    const out = {};
    for (const td of tr.querySelectorAll('[data-field]')) out[td.dataset.field] = td.textContent.replace(/\s+/g, ' ').trim();
    for (const td of tr.querySelectorAll('[data-missed]')) out[`missed.${td.dataset.missed}`] = td.textContent.trim();
    out.nextMs = tr.querySelector('[data-field="next"]').dataset.next;
    return out;
  });
}

// the console's local time of a unix ms ("YYYY-MM-DD HH:MM:SS"; node and chromium share the zone)
function localTime(ms) {
  const d = new Date(ms);
  const p = (n) => String(n).padStart(2, '0');
  return `${d.getFullYear()}-${p(d.getMonth() + 1)}-${p(d.getDate())} ${p(d.getHours())}:${p(d.getMinutes())}:${p(d.getSeconds())}`;
}

// ---- the data, the browser ---------------------------------------------------------------

before(async () => {
  mkdirSync(OUT, {recursive: true});
  // A daemon without GET /topics (topic settings) answers 404 "no such endpoint" to the
  // console's one probe for it, and the console counts from /stats instead: that load fails
  // by design then. (The pause/resume test needs /topics all the same.)
  if ((await call('GET', '/topics?limit=1')).status === 404) expectFailedLoad('/topics?limit=1');
  // delayed, ready and reserved jobs on two topics; dead ones on a third; a finished one
  await ok('POST', '/push', Array.from({length: 7}, (_, i) => ({topic: T.orders, body: {order: i}, delay: 600000 + i})));
  await ok('POST', '/push', Array.from({length: 4}, (_, i) => ({topic: T.mail, body: {to: `u${i}@example.com`}})));
  await ok('POST', '/push', Array.from({length: 3}, (_, i) => ({topic: T.mail, body: {to: `r${i}@example.com`}, priority: 0, ttr: 600000})));
  const got = await ok('GET', `/get/${T.mail}?count=3&timeout=5`); // the three urgent ones: reserved
  assert.equal(got.length, 3);
  const dead = (await ok('POST', '/push', [{topic: T.rip, body: {n: 1}, tries: 1, ttr: 200},
    {topic: T.rip, body: {n: 2}, tries: 1, ttr: 200}])).ids;
  ids.dead = dead;
  let taken = 0;
  while (taken < 2) taken += (await call('GET', `/get/${T.rip}?count=2&timeout=5`)).json?.length || 0;
  await eventually('two dead jobs', async () => (await statsCounts())[T.rip]?.dead === 2);
  ids.done = (await ok('POST', '/push', {topic: T.done, body: {invoice: 42, lines: [{sku: 'A-1', qty: 2}]}})).id;
  const job = await ok('GET', `/get/${T.done}?timeout=5`);
  assert.equal(job.id, ids.done);
  await ok('GET', `/finish?id=${ids.done}`);
  await ok('POST', '/push', {topic: T.pause, body: 'keeps the topic listed', delay: 600000});
  // grouped jobs on a topic where a group has one job reserved at a time: g-a and g-b get one
  // reserved each (one per group per round), then more groups, delayed ones and an ungrouped job
  await ok('PUT', `/topics/${T.groups}`, {groupConcurrency: 1});
  const first = (await ok('POST', '/push', [...['g-a', 'g-a', 'g-a', 'g-b', 'g-b']].map((group, i) =>
    ({topic: T.groups, group, body: {n: i}, ttr: 600000})))).ids;
  ids.grouped = first[0];
  const reserved = await ok('GET', `/get/${T.groups}?count=2&timeout=5`);
  assert.deepEqual(reserved.map((j) => j.group).sort(), ['g-a', 'g-b']);
  await ok('POST', '/push', [{topic: T.groups, group: 'g-c', body: 1}, {topic: T.groups, group: 'g-d', body: 2},
    {topic: T.groups, group: 'g-e', body: 3}, {topic: T.groups, group: 'g-f', body: 4, delay: 600000},
    {topic: T.groups, group: 'g-f', body: 5, delay: 600000}, {topic: T.groups, body: 'no group'}]);

  browser = await chromium.launch({executablePath: CHROMIUM, headless: true});
  // the page itself is loaded with the browser's own login (HTTP Basic, the admin token as
  // password), as an operator's browser does when admin_token is set; its API calls carry the
  // token from the page's token field
  const context = await browser.newContext({
    viewport: {width: 1280, height: 900},
    httpCredentials: ADMIN ? {username: 'operator', password: ADMIN} : undefined,
  });
  // axe-core from this run's node_modules, at a URL of the console's own origin (not the
  // daemon's: the route answers it before any request leaves the browser)
  await context.route(`${BASE}/console/__test__/axe.min.js`, (route) =>
    route.fulfill({path: AXE_SOURCE, contentType: 'text/javascript; charset=utf-8'}));
  context.setDefaultTimeout(15000); // a failing wait fails the test well within the run's budget
  page = await context.newPage();
  page.on('console', (msg) => {
    if (msg.type() === 'error') consoleErrors.push({text: msg.text(), url: msg.location().url || ''});
  });
  page.on('pageerror', (err) => pageErrors.push(err.stack || err.message));
  await page.goto(`${BASE}/console/`);
  if (ADMIN) {
    await page.fill('[name="token"]', ADMIN);
    await page.press('[name="token"]', 'Enter');
  }
});

after(async () => {
  if (browser) await browser.close();
});

// ---- the tests -----------------------------------------------------------------------------

test('the topics table shows the counts /stats reports', async () => {
  await page.goto(`${BASE}/console/#/topics?prefix=${P}`);
  for (const t of [T.orders, T.mail, T.rip]) await page.locator(`[data-topic="${t}"]`).waitFor();
  // the table refreshes itself; nothing moves in these topics, so it must agree with /stats
  await eventually('the table to show /stats counts', async () => {
    const stats = await statsCounts();
    for (const t of [T.orders, T.mail, T.rip, T.pause]) {
      assert.deepEqual(await rowCounts(t), stats[t], `row of ${t}`);
    }
    return true;
  });
  const stats = await statsCounts();
  assert.deepEqual(stats[T.orders], {delayed: 7, ready: 0, reserved: 0, dead: 0});
  assert.deepEqual(stats[T.mail], {delayed: 0, ready: 4, reserved: 3, dead: 0});
  assert.deepEqual(stats[T.rip], {delayed: 0, ready: 0, reserved: 0, dead: 2});
  await shot('topics');
});

test('a topic\'s scheduled, ready and reserved jobs are listed', async () => {
  await page.locator(`[data-topic="${T.mail}"] a`).first().click();
  await page.locator('[data-tab="ready"]').click();
  await eventually('4 ready jobs', async () => (await page.locator('tr[data-job]').count()) === 4);
  await page.locator('[data-tab="reserved"]').click();
  await eventually('3 reserved jobs with their lease', async () =>
    (await page.locator('tr[data-job] [data-until]').count()) === 3);
  await shot('topic-reserved');
  await page.goto(`${BASE}/console/#/topic/${T.orders}`);
  await eventually('7 scheduled jobs', async () => (await page.locator('tr[data-job]').count()) === 7);
  await shot('topic-scheduled');
});

// The groups of a topic, as the API walks them: every page, following `next` (a cursor).
async function apiGroups(topic, limit) {
  const pages = [];
  let after = '';
  do {
    const d = await ok('GET', `/topics/${encodeURIComponent(topic)}/groups?${after ? `after=${encodeURIComponent(after)}&` : ''}limit=${limit}`);
    pages.push(d.groups);
    after = d.next;
  } while (after);
  return pages;
}

// The group rows the page shows now, with the counts their cells hold.
const groupRows = () => page.locator('tr[data-group]').evaluateAll((trs) => trs.map((tr) => {
  const out = {group: tr.dataset.group};
  for (const td of tr.querySelectorAll('[data-count]')) out[td.dataset.count] = Number(td.textContent.replace(/[^0-9]/g, ''));
  return out;
}));
const byName = (a, b) => (a.group < b.group ? -1 : a.group > b.group ? 1 : 0);

test('a topic\'s groups are listed with their counts, a page at a time; a job shows its group', async () => {
  // what the API says, all at once: the groups before() made, with their counts
  assert.deepEqual((await apiGroups(T.groups, 1000)).flat().sort(byName), GROUPS);
  // the Groups tab of the topic view, by its link; its first page as the API answers it
  await page.goto(`${BASE}/console/#/topic/${T.groups}`);
  await page.locator('[data-tab="groups"]').click();
  await page.locator('tr[data-group]').first().waitFor();
  assert.match(await page.evaluate(() => location.hash), /[?&]tab=groups\b/);
  assert.equal(await page.locator('[data-tab="groups"]').getAttribute('aria-current'), 'page');
  assert.equal(await page.locator('[data-tab="delayed"]').getAttribute('aria-current'), null);
  // the group setting is shown beside the others
  assert.match(await page.locator('h1 ~ .badges').textContent(), /1 per group/);
  await shot('topic-groups');
  // every page, Next to the end: each as the API answers its cursor, every group exactly
  // once with its counts; by default, then two at a time (the limit from the URL)
  const walk = async (limit) => {
    const pages = [];
    for (let i = 0; i < 20; i++) {
      const table = page.locator('table.groups:not([data-seen])');
      await table.locator('tbody tr').first().waitFor();
      const after = new URLSearchParams((await page.evaluate(() => location.hash)).split('?')[1]).get('after') || '';
      const q = [after ? `after=${encodeURIComponent(after)}` : '', limit ? `limit=${limit}` : ''].filter(Boolean).join('&');
      const api = await ok('GET', `/topics/${T.groups}/groups${q ? '?' + q : ''}`);
      const rows = await groupRows();
      assert.deepEqual(rows, api.groups, `limit ${limit}: the page after "${after}"`);
      pages.push(rows);
      assert.equal(await page.locator('a.button', {hasText: 'First page'}).count(), after ? 1 : 0, `First page link after "${after}"`);
      const next = page.locator('[data-page="next"]');
      assert.equal(await next.count(), api.next ? 1 : 0, `Next link after "${after}"`);
      if (!api.next) break;
      if (limit && pages.length === 2) await shot('topic-groups-paged');
      await table.evaluate((t) => t.setAttribute('data-seen', ''));
      await next.click();
    }
    assert.deepEqual(pages.flat().sort(byName), GROUPS, `limit ${limit}: every group once, over the pages`);
    return pages;
  };
  await walk(0);
  await page.goto(`${BASE}/console/#/topic/${T.groups}?tab=groups&limit=2`);
  const pages = await walk(2);
  assert.ok(pages.length >= 2 && pages.every((p) => p.length < GROUPS.length), `pages of 2: ${JSON.stringify(pages)}`);
  await page.locator('a.button', {hasText: 'First page'}).click();
  await eventually('the first page again', async () => JSON.stringify(await groupRows()) === JSON.stringify(pages[0]));

  // a topic without groups
  await page.goto(`${BASE}/console/#/topic/${T.mail}?tab=groups`);
  await page.getByText('No groups with jobs.').waitFor();
  assert.equal(await page.locator('tr[data-group]').count(), 0);
  await shot('topic-groups-empty');

  // a job's group: in the job rows (the reserved ones are g-a's and g-b's) and in the job view
  await page.goto(`${BASE}/console/#/topic/${T.groups}?state=reserved`);
  await eventually('two reserved jobs', async () => (await page.locator('tr[data-job]').count()) === 2);
  assert.deepEqual((await page.locator('tr[data-job] [data-field="group"]').allTextContents()).sort(), ['g-a', 'g-b']);
  await page.goto(`${BASE}/console/#/topic/${T.groups}?state=ready`);
  await eventually('seven ready jobs', async () => (await page.locator('tr[data-job]').count()) === 7);
  const shown = await page.locator('tr[data-job]').evaluateAll((trs) => trs.map((tr) =>
    [tr.dataset.job, tr.querySelector('[data-field="group"]').textContent]));
  for (const [id, group] of shown) assert.equal(group, (await ok('GET', `/jobs/${id}`)).group ?? '', `job ${id}`);
  await page.goto(`${BASE}/console/#/job/${ids.grouped}`);
  await page.locator('dl.fields dt', {hasText: 'group'}).waitFor();
  const fields = await page.locator('dl.fields').evaluate((dl) => Object.fromEntries([...dl.querySelectorAll('dt')]
    .map((dt) => [dt.textContent, dt.nextElementSibling.textContent])));
  assert.equal(fields.group, 'g-a');
  assert.equal(fields.topic, T.groups);
});

test('the group settings are shown, saved from the form, and a bad value is refused with a message', async () => {
  const settings = () => ok('GET', `/topics/${T.gset}`);
  const keep = ({groupConcurrency, groupOrder, groupRate, rate}) => ({groupConcurrency, groupOrder, groupRate, rate});
  await ok('POST', '/push', {topic: T.gset, group: 'one', body: 'keeps the topic listed', delay: 600000});
  await page.goto(`${BASE}/console/#/topic/${T.gset}`);
  const form = page.locator('[data-form="settings"]');
  const open = async () => {
    await page.locator('details > summary', {hasText: 'Settings'}).focus();
    await page.keyboard.press('Enter');
    await form.locator('[name="groupConcurrency"]').waitFor();
  };
  await open();
  // the defaults, shown
  assert.equal(await form.locator('[name="groupConcurrency"]').inputValue(), '0');
  assert.equal(await form.locator('[name="groupOrder"]').inputValue(), 'any');
  assert.equal(await form.locator('[name="groupRate"]').inputValue(), '0');
  // reached by keyboard, each with its name
  const n = names(await tabThrough('topic settings'));
  for (const want of ['groupConcurrency (jobs of one group at once, 0 = no limit)', 'groupOrder',
    'groupRate (deliveries/s per group, 0 = none)', 'Save settings', 'Groups']) {
    assert.ok(n.includes(want), `Tab does not reach "${want}": ${JSON.stringify(n)}`);
  }

  // saved: only what changed is sent, the API has it, the page says so and shows it
  await form.locator('[name="groupConcurrency"]').fill('3');
  await form.locator('[name="groupRate"]').fill('20');
  await form.locator('[data-action="save-settings"]').click();
  await eventually('the settings saved', async () => (await settings()).groupRate === 20);
  assert.deepEqual(keep(await settings()), {groupConcurrency: 3, groupOrder: 'any', groupRate: 20, rate: 0});
  await eventually('the save said', async () => (await page.locator('#status').textContent()) === `Settings of ${T.gset} saved.`);
  const badges = page.locator('h1 ~ .badges');
  await eventually('the badges', async () => /3 per group/.test(await badges.textContent()) &&
    /20\/s per group/.test(await badges.textContent()));
  await open();
  assert.equal(await form.locator('[name="groupConcurrency"]').inputValue(), '3');
  assert.equal(await form.locator('[name="groupRate"]').inputValue(), '20');

  // a negative limit, a fraction: the browser refuses them, the form says which and sends nothing
  const problem = form.locator('[data-error="settings"]');
  for (const [name, value] of [['groupConcurrency', '-1'], ['groupRate', '2.5'], ['groupRate', '-4']]) {
    await form.locator(`[name="${name}"]`).fill(value);
    await form.locator('[data-action="save-settings"]').click();
    await problem.waitFor({state: 'visible'});
    assert.match(await problem.textContent(), new RegExp(`^${name}: \\S`), `${name} ${value}`);
    assert.equal(await form.locator(`[name="${name}"]`).getAttribute('aria-invalid'), 'true');
    assert.equal(await form.locator(`[name="${name}"]`).getAttribute('aria-describedby'), await problem.getAttribute('id'));
    if (name === 'groupConcurrency') await shot('topic-settings-invalid');
    await form.locator(`[name="${name}"]`).fill(name === 'groupRate' ? '20' : '3');
  }
  assert.deepEqual(keep(await settings()), {groupConcurrency: 3, groupOrder: 'any', groupRate: 20, rate: 0});

  // fifo with a limit above 1: the daemon's 400, word for word, under the form; nothing changed
  const refused = await call('PUT', `/topics/${T.gset}`, {groupConcurrency: 2, groupOrder: 'fifo'});
  assert.equal(refused.status, 400);
  expectFailedLoad(`/topics/${T.gset}`);
  await form.locator('[name="groupConcurrency"]').fill('2');
  await form.locator('[name="groupOrder"]').selectOption('fifo');
  await form.locator('[data-action="save-settings"]').click();
  await eventually('the refusal shown', async () => (await problem.textContent()) === refused.json.message);
  assert.equal(await form.locator('[name="groupOrder"]').getAttribute('aria-invalid'), 'true');
  assert.equal(await form.locator('[name="groupConcurrency"]').inputValue(), '2', 'the form keeps what was refused');
  assert.deepEqual(keep(await settings()), {groupConcurrency: 3, groupOrder: 'any', groupRate: 20, rate: 0});
  await shot('topic-settings-refused');

  // fifo alone: one at a time, shown as such, the limit 1 in the form
  await form.locator('[name="groupConcurrency"]').fill('3');
  await form.locator('[data-action="save-settings"]').click();
  await eventually('fifo saved', async () => (await settings()).groupOrder === 'fifo');
  assert.deepEqual(keep(await settings()), {groupConcurrency: 1, groupOrder: 'fifo', groupRate: 20, rate: 0});
  await eventually('the fifo badge', async () => /fifo groups/.test(await badges.textContent()));
  await open();
  assert.equal(await form.locator('[name="groupConcurrency"]').inputValue(), '1');
  assert.equal(await form.locator('[name="groupOrder"]').inputValue(), 'fifo');
  assert.equal(await problem.isVisible(), false);
});

test('a dead job is found and requeued with a click, and its state changes', async () => {
  await page.goto(`${BASE}/console/#/topics?prefix=${P}`);
  await page.locator(`[data-topic="${T.rip}"] a`).first().click();
  await page.locator('[data-tab="dead"]').click();
  const row = page.locator(`tr[data-job="${ids.dead[0]}"]`);
  await row.waitFor();
  assert.equal(await page.locator('tr[data-job]').count(), 2);
  await shot('topic-dead');
  await row.locator('[data-action="requeue"]').click();
  await row.waitFor({state: 'detached'}); // the list is read again, without it
  assert.equal((await ok('GET', `/jobs/${ids.dead[0]}`)).state, 'ready');
  // the page says so too
  await page.goto(`${BASE}/console/#/job/${ids.dead[0]}`);
  await page.locator('dl.fields [data-state="ready"]').waitFor();
  assert.equal((await statsCounts())[T.rip].dead, 1);
});

test('pause and resume from the page change delivery', async () => {
  await page.goto(`${BASE}/console/#/topics?prefix=${T.pause}`);
  const row = page.locator(`[data-topic="${T.pause}"]`);
  const pause = row.locator('[data-action="pause"]');
  await pause.waitFor();
  assert.ok(await pause.isEnabled(), `the Pause button is disabled: ${await pause.getAttribute('title')}`);
  await pause.click();
  await row.locator('[data-action="resume"]').waitFor();
  assert.equal((await ok('GET', `/topics/${T.pause}`)).paused, true);
  await sleep(1500); // settings reach every instance within 1 s
  const id = (await ok('POST', '/push', {topic: T.pause, body: 'due now'})).id;
  const held = await call('GET', `/get/${T.pause}?timeout=2`);
  assert.equal(held.status, 204, `a paused topic delivered ${JSON.stringify(held.json)}`);
  await shot('topics-paused');
  await row.locator('[data-action="resume"]').click();
  await row.locator('[data-action="pause"]').waitFor();
  const got = await call('GET', `/get/${T.pause}?timeout=10`);
  assert.equal(got.status, 200);
  assert.equal(got.json.id, id);
});

test('a job looked up by id shows its fields, body and history', async () => {
  await page.goto(`${BASE}/console/#/topics`);
  await page.fill('[name="job"]', ids.done);
  await page.press('[name="job"]', 'Enter');
  await page.locator('ol.timeline li[data-state="finished"]').waitFor();
  const states = await page.locator('ol.timeline li').evaluateAll((lis) => lis.map((li) => li.dataset.state));
  assert.deepEqual(states, ['ready', 'reserved', 'finished']);
  assert.equal(await page.locator('dl.fields [data-state]').textContent(), 'finished');
  const body = JSON.parse(await page.locator('pre.json').textContent());
  assert.deepEqual(body, {invoice: 42, lines: [{sku: 'A-1', qty: 2}]});
  await shot('job');
});

test('an error the API answers is shown in the page', async () => {
  expectFailedLoad('/jobs/1');
  await page.fill('[name="job"]', '1');
  await page.press('[name="job"]', 'Enter');
  const banner = page.locator('#error');
  await banner.waitFor({state: 'visible'});
  assert.match(await banner.textContent(), /404 not_found: no job with this id/);
  await shot('error');
  await page.locator('.error-close').click();
  await banner.waitFor({state: 'hidden'});
});

test('the fleet view shows this instance, its health and the plots', async () => {
  await page.goto(`${BASE}/console/#/fleet`);
  const fleet = await ok('GET', '/fleet');
  await page.locator(`[data-instance="${fleet.health.instance}"]`).waitFor();
  assert.match(await page.locator('.tiles').textContent(), /Redis\s*up/);
  await page.locator('[data-plot="throughput"] svg path.series').first().waitFor({state: 'attached'});
  await page.locator('[data-plot="lateness"] svg').waitFor();
  // a bar per bucket, and the deliveries of this run in some of them
  const heights = await page.locator('[data-plot="lateness"] svg rect').evaluateAll((rs) => rs.map((r) => Number(r.getAttribute('height'))));
  assert.equal(heights.length, (await ok('GET', '/fleet')).latenessBounds.length + 1);
  assert.ok(heights.some((v) => v > 0), `lateness bars: ${heights}`);
  await shot('fleet');
});

test('a restore runs from the page and shows its result', async () => {
  await page.goto(`${BASE}/console/#/restore`);
  await page.locator('[data-action="restore"]').click();
  const result = page.locator('[data-result="restore"]');
  await result.waitFor();
  const scanned = Number((await result.locator('[data-field="scanned"] td').first().textContent()).replace(/[^0-9]/g, ''));
  assert.ok(scanned >= 1, `scanned ${scanned}`);
  await shot('restore');
});

test('schedules are listed, paused, resumed, deleted and created from the page', async () => {
  // none yet: the empty table
  await page.goto(`${BASE}/console/#/schedules`);
  await page.getByText('No schedules yet.').waitFor();
  await shot('schedules-empty');
  // 04:30 is on every day of Berlin's calendar (02:30 is not on the day clocks go forward)
  const cron = await ok('POST', '/schedules', {topic: `${P}nightly`, cron: '30 4 * * *', tz: 'Europe/Berlin',
    job: {body: {report: 'nightly'}, priority: 3}, catchUp: 'one'});
  const tick = await ok('POST', '/schedules', {topic: `${P}tick`, every: 3600000, job: {body: {tick: 1}}, catchUp: 'skip'});
  await ok('PUT', `/schedules/${tick.id}`, {paused: true});
  // the next fire of a daily 04:30 in Berlin is 04:30 Berlin time within a day
  const berlin = new Intl.DateTimeFormat('en-GB', {timeZone: 'Europe/Berlin', hour: '2-digit', minute: '2-digit', second: '2-digit'});
  assert.equal(berlin.format(new Date(cron.next)), '04:30:00');
  assert.ok(cron.next > Date.now() && cron.next <= Date.now() + 25 * 3600e3, `next ${cron.next}`);

  await page.goto(`${BASE}/console/#/topics`);
  await page.locator('[data-nav="schedules"]').click();
  const rowCron = page.locator(`[data-schedule="${cron.id}"]`);
  const rowTick = page.locator(`[data-schedule="${tick.id}"]`);
  await rowCron.waitFor();
  await rowTick.waitFor();
  // each row against what the API answers now (a refresh may land in between: eventually)
  const matches = async (row, id, expect) => {
    const api = await ok('GET', `/schedules/${id}`);
    const c = await scheduleCells(row);
    assert.equal(c.topic, api.topic);
    assert.equal(c.catchUp, api.catchUp);
    assert.equal(c['missed.made'], String(api.missed.made));
    assert.equal(c['missed.skipped'], String(api.missed.skipped));
    assert.equal(c.nextMs, String(api.next));
    assert.ok(c.next.includes(localTime(api.next)), `next: ${c.next} lacks ${localTime(api.next)}`);
    for (const [k, v] of Object.entries(expect)) assert.equal(c[k], v, `${k} of ${id}`);
    return true;
  };
  await eventually('the cron schedule\'s row', () => matches(rowCron, cron.id,
    {when: '30 4 * * * Europe/Berlin', state: 'active', catchUp: 'one', job: '{"report":"nightly"}'}));
  await eventually('the interval schedule\'s row', () => matches(rowTick, tick.id,
    {when: 'every 3600 s', state: 'paused', catchUp: 'skip', job: '{"tick":1}'}));
  await shot('schedules');

  // pause one, resume the other, with the row's buttons
  await rowCron.locator('[data-action="pause"]').click();
  await rowCron.locator('[data-action="resume"]').waitFor();
  assert.equal((await ok('GET', `/schedules/${cron.id}`)).paused, true);
  assert.equal(await rowCron.locator('[data-field="state"]').textContent(), 'paused');
  await rowTick.locator('[data-action="resume"]').click();
  await rowTick.locator('[data-action="pause"]').waitFor();
  assert.equal((await ok('GET', `/schedules/${tick.id}`)).paused, false);
  assert.equal(await rowTick.locator('[data-field="state"]').textContent(), 'active');
  await rowCron.locator('[data-action="resume"]').click();
  await rowCron.locator('[data-action="pause"]').waitFor();
  assert.equal((await ok('GET', `/schedules/${cron.id}`)).paused, false);

  // delete asks in a dialog first: Cancel deletes nothing, Delete does
  const del = rowTick.locator('[data-action="delete-schedule"]');
  const dialog = page.locator('dialog#confirm');
  await del.click();
  await dialog.waitFor({state: 'visible'});
  assert.match(await dialog.locator('#confirm-title').textContent(), new RegExp(`Delete the schedule of ${P}tick`));
  await shot('schedules-confirm');
  await dialog.locator('[data-action="cancel"]').click();
  await dialog.waitFor({state: 'hidden'});
  assert.equal((await call('GET', `/schedules/${tick.id}`)).status, 200);
  await del.click();
  await dialog.locator('[data-action="confirm"]').click();
  await rowTick.waitFor({state: 'detached'});
  assert.equal((await call('GET', `/schedules/${tick.id}`)).status, 404);
  assert.ok(!(await ok('GET', '/schedules')).schedules.some((s) => s.id === tick.id));
  assert.equal(await rowCron.count(), 1);

  // one made with the form
  const form = page.locator('[data-form="schedule"]');
  await form.locator('[name="topic"]').fill(`${P}form`);
  await form.locator('[name="cron"]').fill('15 */6 * * 1-5');
  await form.locator('[name="tz"]').fill('America/New_York');
  await form.locator('[name="body"]').fill('{"from": "the form", "n": [1, 2]}');
  await form.locator('[name="catchUp"]').selectOption('all');
  await form.locator('[data-action="create-schedule"]').click();
  const made = await eventually('the form\'s schedule in the API', async () =>
    (await ok('GET', '/schedules')).schedules.find((s) => s.topic === `${P}form`));
  assert.equal(made.cron, '15 */6 * * 1-5');
  assert.equal(made.tz, 'America/New_York');
  assert.equal(made.catchUp, 'all');
  assert.equal(made.paused, false);
  assert.deepEqual(made.job, {body: {from: 'the form', n: [1, 2]}});
  await page.locator(`[data-schedule="${made.id}"]`).waitFor();
  assert.equal(await page.locator('[data-error="schedule"]').isVisible(), false);

  // a bad cron: the API's 400 message, word for word, under the form; nothing is made
  const bad = {topic: `${P}bad`, cron: '61 2 * * *', job: {}, catchUp: 'skip'};
  const refused = await call('POST', '/schedules', bad);
  assert.equal(refused.status, 400);
  assert.match(refused.json.message, /^cron: minute: /);
  expectFailedLoad(`${BASE}/schedules`);
  await form.locator('[name="topic"]').fill(bad.topic);
  await form.locator('[name="cron"]').fill(bad.cron);
  await form.locator('[data-action="create-schedule"]').click();
  const problem = page.locator('[data-error="schedule"]');
  await problem.waitFor({state: 'visible'});
  assert.equal(await problem.textContent(), refused.json.message);
  assert.equal(await form.locator('[name="cron"]').inputValue(), bad.cron, 'the form keeps what was refused');
  await shot('schedules-refused');
  const names = (await ok('GET', '/schedules')).schedules.map((s) => s.topic).sort();
  assert.deepEqual(names, [`${P}form`, `${P}nightly`]);
});

// ---- accessibility: keyboard, dialog, live regions, motion ---------------------------------

const HEADER = ['Skip to content', 'hourglass', 'Topics', 'Schedules', 'Fleet', 'Restore', 'API description (OpenAPI, JSON)',
  'Job id', 'Look up', 'Admin token', 'Pause updates'];

// Each view, and what its Tab order must reach besides the header.
const VIEWS = () => [
  ['topics', `#/topics?prefix=${P}`, `[data-topic="${T.orders}"]`, (n) => [
    'Topic prefix', T.mail, T.orders, `Pause ${T.orders}`, T.pause, `Pause ${T.pause}`, 'Filter', 'Topics per page', 'Data table']
    .every((x) => n.includes(x))],
  ['topic, ready jobs', `#/topic/${T.mail}?state=ready`, 'tr[data-job]', (n) => [
    'Topics', `Pause ${T.mail}`, 'Settings', 'Scheduled 0', 'Ready 4', 'Reserved 3', 'Dead 0'].every((x) => n.includes(x)) &&
    n.filter((x) => /^Delete job \d+$/.test(x)).length === 4],
  ['topic, dead jobs', `#/topic/${T.rip}?state=dead`, 'table.jobs', (n) => [
    'Select all jobs on this page', `Select job ${ids.dead[1]}`, `Requeue job ${ids.dead[1]}`, `Delete job ${ids.dead[1]}`]
    .every((x) => n.includes(x))],
  ['topic, groups', `#/topic/${T.groups}?tab=groups&limit=2`, 'tr[data-group]', (n) => [
    'Topics', 'Settings', 'Scheduled 2', 'Ready 7', 'Reserved 2', 'Groups', 'Next page →'].every((x) => n.includes(x))],
  ['job', `#/job/${ids.done}`, 'ol.timeline', (n) => [T.done, 'Body (JSON)'].every((x) => n.includes(x))],
  ['schedules', '#/schedules', 'tr[data-schedule]', (n) => [
    'topic', 'cron (minute hour day-of-month month day-of-week)', 'tz (cron only; default UTC)', 'or every (ms, instead of cron)',
    'catchUp', 'job body (JSON, pushed as the body of each fire’s job)', 'Create schedule', `Pause the schedule of ${P}nightly`,
    `Delete the schedule of ${P}nightly`].every((x) => n.includes(x))],
  ['fleet', '#/fleet', '[data-instance]', (n) => n.filter((x) => x === 'Data table').length === 2],
  ['restore', '#/restore', '[data-action="restore"]', (n) => [
    'expire: also put back jobs whose due time has passed, as ready', 'Run restore'].every((x) => n.includes(x))],
];

test('every view works by keyboard alone: each Tab stop is named, visible and ringed at 3:1', async () => {
  const positive = [];
  for (const [label, hash, ready, reaches] of VIEWS()) {
    await page.goto(`${BASE}/console/${hash}`);
    await page.locator(ready).first().waitFor();
    const stops = await tabThrough(label);
    const n = names(stops);
    // the header first, in its visual order, then the view: Tab order is the reading order
    assert.deepEqual(n.slice(0, HEADER.length), HEADER, `${label}: the header's Tab order`);
    assert.ok(stops.slice(HEADER.length).every((f) => f.inMain), `${label}: after the header only the view: ${n}`);
    assert.ok(reaches(n), `${label}: Tab does not reach every control: ${JSON.stringify(n)}`);
    positive.push(...await page.evaluate(() => [...document.querySelectorAll('[tabindex]')]
      .filter((e) => e.tabIndex > 0).map((e) => e.outerHTML.slice(0, 80))));
  }
  assert.deepEqual(positive, [], 'a positive tabindex reorders the Tab order');
});

test('Enter and Space work the controls, and focus stays where the keyboard is', async () => {
  await page.goto(`${BASE}/console/#/topics?prefix=${P}`);
  await page.locator(`[data-topic="${T.orders}"]`).waitFor();
  const active = () => page.evaluate(() => {
    const e = document.activeElement;
    return {tag: e.tagName.toLowerCase(), text: e.textContent.trim(), label: e.getAttribute('aria-label'),
      action: e.dataset.action || null, current: e.getAttribute('aria-current'), inMain: !!e.closest('main')};
  });

  // the skip link puts focus on the view's heading
  await focusFromTop();
  await page.keyboard.press('Tab');
  assert.equal((await active()).text, 'Skip to content');
  await page.keyboard.press('Enter');
  assert.deepEqual(await active(), {tag: 'h1', text: 'Topics', label: null, action: null, current: null, inMain: true});

  // a nav link: Enter opens its view, marked current, and focus stays on it
  await page.locator('[data-nav="schedules"]').focus();
  await page.keyboard.press('Enter');
  await page.locator('tr[data-schedule]').first().waitFor();
  assert.equal(await page.locator('[data-nav="schedules"]').getAttribute('aria-current'), 'page');
  assert.equal(await page.locator('[data-nav="topics"]').getAttribute('aria-current'), null);
  assert.equal((await active()).text, 'Schedules');

  // a topic's Pause button: Enter pauses, focus moves to the Resume button that replaces it,
  // and the status region says so; Space resumes
  await page.goto(`${BASE}/console/#/topics?prefix=${T.pause}`);
  const row = page.locator(`[data-topic="${T.pause}"]`);
  await row.locator('[data-action="pause"]').focus();
  await page.keyboard.press('Enter');
  await row.locator('[data-action="resume"]').waitFor();
  await eventually('focus on Resume', async () => (await active()).action === 'resume');
  assert.equal((await active()).label, `Resume ${T.pause}`);
  assert.equal((await ok('GET', `/topics/${T.pause}`)).paused, true);
  await eventually('the pause said', async () => /paused/.test(await page.locator('#status').textContent()));
  await page.keyboard.press('Space');
  await row.locator('[data-action="pause"]').waitFor();
  await eventually('focus on Pause', async () => (await active()).action === 'pause');
  assert.equal((await ok('GET', `/topics/${T.pause}`)).paused, false);
  await eventually('the resume said', async () => /resumed/.test(await page.locator('#status').textContent()));

  // "Pause updates" (Space): pressed, said, and the clock stops until pressed again
  const live = page.locator('#live');
  await live.focus();
  await page.keyboard.press('Space');
  assert.equal(await live.getAttribute('aria-pressed'), 'true');
  await eventually('updates paused said', async () => /paused/.test(await page.locator('#status').textContent()));
  const clock = await page.locator('#clock').textContent();
  await sleep(2200);
  assert.equal(await page.locator('#clock').textContent(), clock, 'the clock ticked while updates were paused');
  await page.keyboard.press('Space');
  assert.equal(await live.getAttribute('aria-pressed'), 'false');
  await eventually('the clock ticking again', async () => (await page.locator('#clock').textContent()) !== clock);

  // a topic's state tabs: Enter switches, and focus is on the tab now current
  await page.goto(`${BASE}/console/#/topic/${T.mail}`);
  await page.locator('[data-tab="ready"]').focus();
  await page.keyboard.press('Enter');
  await eventually('4 ready jobs', async () => (await page.locator('tr[data-job]').count()) === 4);
  assert.deepEqual(await active(), {tag: 'a', text: 'Ready 4', label: null, action: null, current: 'page', inMain: true});
  // its settings open with Enter on their summary
  await page.locator('details > summary', {hasText: 'Settings'}).focus();
  await page.keyboard.press('Enter');
  await page.locator('[name="rate"]').waitFor();
  await shot('topic-settings');

  // a plot's data table opens with Enter on its summary; its rows are the bars' numbers
  await page.goto(`${BASE}/console/#/fleet`);
  await page.locator('[data-plot="lateness"] svg rect').first().waitFor({state: 'attached'});
  const bounds = (await ok('GET', '/fleet')).latenessBounds;
  for (const summary of await page.locator('details.data summary').all()) {
    await summary.focus();
    await page.keyboard.press('Enter');
  }
  const table = page.locator('[aria-labelledby="plot-lateness"] details.data table');
  await table.waitFor();
  await eventually('the data table and the bars to agree', async () => {
    const fromTable = await table.locator('tbody tr').evaluateAll((trs) => trs.map((tr) =>
      Number(tr.querySelector('td').textContent.replace(/[^0-9]/g, ''))));
    const fromBars = await page.locator('[data-plot="lateness"] svg rect title').evaluateAll((ts) => ts.map((t) =>
      Number(t.textContent.split(': ')[1].replace(/[^0-9]/g, ''))));
    assert.equal(fromTable.length, bounds.length + 1);
    assert.deepEqual(fromTable, fromBars);
    return fromTable.some((v) => v > 0);
  });
  assert.ok(await page.locator('[aria-labelledby="plot-throughput"] details.data table tbody tr').count() >= 1);
  await shot('fleet-data-tables');

  // a dead job's checkbox with Space, then the bulk button with Enter
  await page.goto(`${BASE}/console/#/topic/${T.rip}?state=dead`);
  const box = page.locator(`input[data-id="${ids.dead[1]}"]`);
  await box.focus();
  await page.keyboard.press('Space');
  assert.equal(await box.isChecked(), true);
  const bulk = page.locator('[data-action="requeue-selected"]');
  assert.equal(await bulk.textContent(), 'Requeue 1 selected');
  await bulk.focus();
  await page.keyboard.press('Enter');
  await eventually('the job requeued', async () => (await ok('GET', `/jobs/${ids.dead[1]}`)).state === 'ready');
  await eventually('the requeue said', async () => /Requeued 1 of 1/.test(await page.locator('#status').textContent()));
  await page.getByText('No dead jobs.').waitFor();
  await shot('topic-empty');
});

test('the confirm dialog takes focus, keeps it, gives it back, and Escape closes it', async () => {
  const topic = `${P}kbd`;
  const id = (await ok('POST', '/push', {topic, body: {kept: 'until deleted'}, delay: 600000})).id;
  await page.goto(`${BASE}/console/#/topic/${topic}`);
  const del = page.locator(`tr[data-job="${id}"] [data-action="delete"]`);
  await del.waitFor();
  const dialog = page.locator('dialog#confirm');
  const where = () => page.evaluate(() => ({inDialog: !!document.activeElement.closest('dialog[open]'),
    action: document.activeElement.dataset.action || null, body: document.activeElement === document.body}));

  await del.focus();
  await page.keyboard.press('Enter');
  await dialog.waitFor({state: 'visible'});
  assert.deepEqual(await where(), {inDialog: true, action: 'cancel', body: false}, 'focus on Cancel, the safe answer');
  assert.equal(await dialog.locator('#confirm-title').textContent(), `Delete job ${id}?`);
  await shot('dialog-open');
  // Tab and Shift+Tab stay in the dialog (or leave for the browser's own UI, never the page behind)
  for (const key of ['Tab', 'Tab', 'Tab', 'Shift+Tab', 'Shift+Tab', 'Shift+Tab']) {
    await page.keyboard.press(key);
    const w = await where();
    assert.ok(w.inDialog || w.body, `${key} left the modal dialog for the page behind it`);
  }
  // Escape closes it: nothing deleted, focus back on the Delete button
  await page.keyboard.press('Escape');
  await dialog.waitFor({state: 'hidden'});
  assert.deepEqual(await where(), {inDialog: false, action: 'delete', body: false});
  assert.equal((await ok('GET', `/jobs/${id}`)).state, 'delayed');

  // again, and confirm by keyboard: deleted, said, and focus on the view's heading
  await page.keyboard.press('Space');
  await dialog.waitFor({state: 'visible'});
  // a close event that comes late, from the question Escape closed (Chromium fires it at its next
  // rendering opportunity: under load, after this question was open): it must not answer this one
  await page.evaluate(() => document.querySelector('dialog#confirm').dispatchEvent(new Event('close')));
  assert.ok(await dialog.isVisible(), 'the dialog stays open');
  await dialog.locator('[data-action="confirm"]').focus();
  const asked = []; // what the page asked of the API from here on, and what it printed
  const onRequest = (r) => asked.push(`${r.method()} ${r.url().replace(BASE, '')}`);
  const onConsole = (m) => asked.push(`console.${m.type()}: ${m.text()}`);
  const onError = (err) => asked.push(`pageerror: ${err.message}`);
  page.on('request', onRequest);
  page.on('console', onConsole);
  page.on('pageerror', onError);
  await page.keyboard.press('Enter');
  try {
    await page.locator(`tr[data-job="${id}"]`).waitFor({state: 'detached', timeout: 10000});
  } catch (e) {
    // (say what the page did and what the API had)
    const seen = await page.evaluate(() => ({banner: document.querySelector('#error').textContent.trim(),
      dialogOpen: document.querySelector('dialog').open, returnValue: document.querySelector('dialog').returnValue,
      focus: document.activeElement.outerHTML.slice(0, 160), status: document.querySelector('#status').textContent}));
    throw new Error(`${e.message}\nthe job: ${JSON.stringify(await ok('GET', `/jobs/${id}`)).slice(0, 200)}\nthe page: ${JSON.stringify(seen)}\nwhat it did: ${JSON.stringify(asked.slice(0, 40))}`);
  } finally {
    page.off('request', onRequest);
    page.off('console', onConsole);
    page.off('pageerror', onError);
  }
  assert.equal((await ok('GET', `/jobs/${id}`)).state, 'deleted');
  await eventually('the deletion said', async () => (await page.locator('#status').textContent()) === `Job ${id} deleted.`);
  await eventually('focus on the heading', async () =>
    page.evaluate(() => document.activeElement.tagName === 'H1' && document.activeElement.closest('main') !== null));
});

test('refreshes are not announced; what a user does is', async () => {
  const topic = `${P}live`;
  await ok('POST', '/push', {topic, body: 1, delay: 600000});
  await page.goto(`${BASE}/console/#/topics?prefix=${P}`);
  const cell = page.locator(`[data-topic="${topic}"] [data-count="delayed"]`);
  await eventually('the first count', async () => (await cell.textContent()) === '1');
  // the live regions: the status region and the alerts, none of them around what refreshes
  const regions = await page.evaluate(() => {
    const sel = '[aria-live], [role="status"], [role="alert"], [role="log"], [role="timer"], [role="marquee"]';
    window.__said = [];
    const obs = new MutationObserver((ms) => ms.forEach((m) => window.__said.push(m.target.textContent)));
    for (const r of document.querySelectorAll(sel)) obs.observe(r, {childList: true, characterData: true, subtree: true});
    window.__redraws = 0;
    new MutationObserver(() => window.__redraws++).observe(document.querySelector('[data-plot="throughput"]'), {childList: true});
    return {ids: [...document.querySelectorAll(sel)].map((r) => r.id || r.dataset.error || r.tagName),
      aroundMain: !!document.querySelector('main').closest(sel)};
  });
  assert.deepEqual(regions.ids.sort(), ['error', 'status'].sort());
  assert.equal(regions.aroundMain, false);
  // counts and plots change underneath: nothing said
  await ok('POST', '/push', Array.from({length: 3}, () => ({topic, body: 2, delay: 600000})));
  await eventually('the count to follow', async () => (await cell.textContent()) === '4');
  await eventually('a plot redrawn', () => page.evaluate(() => window.__redraws >= 2));
  assert.deepEqual(await page.evaluate(() => window.__said), [], 'a refresh spoke through a live region');
  // a user's action is said once
  await page.locator(`[data-topic="${topic}"] [data-action="pause"]`).click();
  await eventually('the pause said', async () => (await page.evaluate(() => window.__said)).includes(`${topic} paused: delivers nothing until resumed.`));
  await page.locator(`[data-topic="${topic}"] [data-action="resume"]`).click();
  await page.locator(`[data-topic="${topic}"] [data-action="pause"]`).waitFor();
  // an empty filter result, audited
  await page.fill('[name="prefix"]', `${P}nothing-starts-so`);
  await page.press('[name="prefix"]', 'Enter');
  await page.getByText(`No topic starts with “${P}nothing-starts-so”.`).waitFor();
  await shot('topics-empty');
});

test('a change of health is said once, on any view; a degraded fleet passes the audit', async () => {
  await page.goto(`${BASE}/console/#/fleet`);
  await page.locator('.tiles').getByText('ok', {exact: true}).waitFor();
  await page.evaluate(() => {
    window.__saidHealth = [];
    new MutationObserver(() => {
      const text = document.querySelector('#status').textContent;
      if (text) window.__saidHealth.push(text); // (each announcement empties the region first)
    })
      .observe(document.querySelector('#status'), {childList: true, characterData: true, subtree: true});
  });
  // the daemon's /fleet as it is, but for a degraded status (as when a duty is stuck)
  let served = 0;
  const degrade = async (route) => {
    served++;
    const res = await route.fetch();
    const json = await res.json();
    json.health.status = 'degraded';
    await route.fulfill({response: res, json});
  };
  await page.route(`${BASE}/fleet`, degrade);
  try {
    await page.locator('.tiles .tile.bad').getByText('degraded').waitFor();
    await eventually('the change said', async () =>
      (await page.evaluate(() => window.__saidHealth)).includes('This instance\'s health is now degraded.'));
    await shot('fleet-degraded');
    await page.locator('[data-nav="restore"]').click(); // another view: still sampled, nothing new said
    const after = served;
    await eventually('another sample', () => served >= after + 1);
    assert.deepEqual((await page.evaluate(() => window.__saidHealth)).filter((t) => /health/.test(t)),
      ['This instance\'s health is now degraded.'], 'said once, not on every sample');
  } finally {
    await page.unroute(`${BASE}/fleet`, degrade);
  }
  await eventually('the recovery said', async () =>
    (await page.evaluate(() => window.__saidHealth)).includes('This instance\'s health is now ok.'));
});

test('at 320 px wide (1280 px at 400 %) only wide tables scroll sideways, and a keyboard can scroll them', async () => {
  try {
    await page.setViewportSize({width: 320, height: 640});
    for (const [label, hash, ready] of VIEWS()) {
      await page.goto(`${BASE}/console/${hash}`);
      await page.locator(ready).first().waitFor({state: 'attached'});
      await eventually(`${label}: no sideways scrolling of the page`, () =>
        page.evaluate(() => document.documentElement.scrollWidth <= window.innerWidth));
    }
    // the schedules table is wider than the screen: its box scrolls, is a named Tab stop, and
    // the arrow keys scroll it
    await page.goto(`${BASE}/console/#/schedules`);
    await page.locator('tr[data-schedule]').first().waitFor();
    const box = page.locator('.scroller', {has: page.locator('table.schedules')});
    await eventually('the table box marked scrollable', async () => (await box.getAttribute('tabindex')) === '0');
    const stops = await tabThrough('schedules at 320 px');
    assert.ok(names(stops).includes('Schedules table'), `no Tab stop for the scrolling table: ${names(stops)}`);
    await box.focus();
    await page.keyboard.press('ArrowRight');
    await eventually('the arrow key to scroll it', () => box.evaluate((b) => b.scrollLeft > 0));
    await shot('schedules-narrow', {clipped: true});
  } finally {
    await page.setViewportSize({width: 1280, height: 900});
  }
});

test('who prefers reduced motion gets no transitions; others get them', async () => {
  await page.goto(`${BASE}/console/#/restore`);
  const button = page.locator('[data-action="restore"]');
  await button.waitFor();
  const motion = () => button.evaluate((b) => getComputedStyle(b).transitionDuration);
  try {
    await page.emulateMedia({reducedMotion: 'reduce'});
    assert.equal(await motion(), '0s');
    await page.emulateMedia({reducedMotion: 'no-preference'});
    assert.notEqual(await motion(), '0s');
  } finally {
    await page.emulateMedia({reducedMotion: null});
  }
});

test('the header links the API description, and the link is labelled', async () => {
  const api = page.locator('header a[data-link="api"]');
  assert.equal(await api.count(), 1);
  assert.equal(await api.evaluate((a) => a.href), `${BASE}/openapi.json`);
  assert.match((await api.textContent()).trim(), /^API\b/); // its visible label starts its name
  await injectAxe();
  const name = await api.evaluate((a) => {
    window.axe.setup(document);
    const n = window.axe.commons.text.accessibleText(a).trim();
    window.axe.teardown();
    return n;
  });
  assert.equal(name, 'API description (OpenAPI, JSON)');
});

test('with 50,000 topics the table shows a page, and pages and filters on the server', async () => {
  const N = 50000;
  const name = (i) => `scale.${String(i).padStart(5, '0')}`;
  for (let s = 0; s < N; s += 1000) {
    await ok('POST', '/push', Array.from({length: 1000}, (_, i) => ({topic: name(s + i), delay: 3600000})));
  }
  const rows = page.locator('tr[data-topic]');
  const t0 = Date.now();
  await page.goto(`${BASE}/console/#/topics?prefix=scale.`);
  await page.locator(`[data-topic="${name(49)}"]`).waitFor();
  const ms = Date.now() - t0;
  assert.equal(await rows.count(), 50, 'one page of 50');
  assert.ok(ms < 10000, `the first page took ${ms} ms`);
  await shot('topics-50000');
  await page.locator('[data-page="next"]').click();
  await page.locator(`[data-topic="${name(50)}"]`).waitFor();
  assert.equal(await rows.count(), 50);
  assert.equal(await rows.first().getAttribute('data-topic'), name(50));
  await page.fill('[name="prefix"]', 'scale.4999');
  await page.press('[name="prefix"]', 'Enter');
  await page.locator(`[data-topic="${name(49990)}"]`).waitFor();
  await eventually('the filtered page', async () => (await rows.count()) === 10);
  assert.equal(await rows.last().getAttribute('data-topic'), name(N - 1));
});

test('no console errors and no page errors', async () => {
  // the overview again, last, with the plots filled by the run so far
  await page.goto(`${BASE}/console/#/topics?prefix=${P}`);
  await page.locator(`[data-topic="${T.orders}"]`).waitFor();
  await shot('overview');
  // every view and state was audited by axe: with data, empty, the error, the dialog open
  const want = ['topics', 'topic-reserved', 'topic-scheduled', 'topic-dead', 'topic-empty', 'topics-paused', 'topics-empty',
    'topic-settings', 'topic-groups', 'topic-groups-paged', 'topic-groups-empty', 'topic-settings-invalid',
    'topic-settings-refused', 'job', 'error', 'fleet', 'fleet-degraded', 'fleet-data-tables', 'restore', 'schedules-empty', 'schedules', 'schedules-confirm',
    'schedules-refused', 'schedules-narrow', 'dialog-open', 'topics-50000', 'overview'];
  assert.deepEqual(want.filter((w) => !audited.includes(w)), [], `audited: ${audited}`);
  const unexpected = consoleErrors.filter((e) =>
    !(e.text.startsWith('Failed to load resource') && expectedFailures.some((u) => e.url.includes(u))));
  assert.deepEqual(pageErrors, [], 'uncaught errors in the page');
  assert.deepEqual(unexpected, [], 'console errors');
});
