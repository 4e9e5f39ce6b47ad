// The operator's console in a real browser: Debian's headless chromium, driven by
// playwright-core, against a running daemon whose address the caller gives.
//
//   HG_URL=http://127.0.0.1:PORT HG_ADMIN_TOKEN=... HG_ARTEFACTS=dir node console.test.mjs
//
// tests/integration/test_console_browser.py starts private Redis + MariaDB and the daemon
// and runs this (make test). Each test leaves a screenshot of its view in HG_ARTEFACTS. Any
// console.error or uncaught page error fails the run, except the failed loads a test provokes
// on purpose (expectFailedLoad).
import {test, before, after} from 'node:test';
import assert from 'node:assert/strict';
import {mkdirSync} from 'node:fs';
import {join} from 'node:path';
import {chromium} from 'playwright-core';

const BASE = process.env.HG_URL;
const ADMIN = process.env.HG_ADMIN_TOKEN || '';
const OUT = process.env.HG_ARTEFACTS || 'artefacts';
const CHROMIUM = process.env.HG_CHROMIUM || '/usr/bin/chromium';
assert.ok(BASE, 'HG_URL (the daemon, e.g. http://127.0.0.1:8080) is required');

const P = 'console.'; // every topic of this run starts with it
const T = {orders: `${P}orders`, mail: `${P}mail`, rip: `${P}rip`, done: `${P}done`, pause: `${P}pause`};

let browser;
let page;
const consoleErrors = [];
const pageErrors = [];
const expectedFailures = []; // URL substrings whose failed loads a test provoked
const ids = {};

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

async function shot(name) {
  const path = join(OUT, `${name}.png`);
  await page.screenshot({path, fullPage: true});
  console.log(`# screenshot ${path}`);
}

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

  browser = await chromium.launch({executablePath: CHROMIUM, headless: true});
  // the page itself is loaded with the browser's own login (HTTP Basic, the admin token as
  // password), as an operator's browser does when admin_token is set; its API calls carry the
  // token from the page's token field
  const context = await browser.newContext({
    viewport: {width: 1280, height: 900},
    httpCredentials: ADMIN ? {username: 'operator', password: ADMIN} : undefined,
  });
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

  // delete asks once more: the first click deletes nothing
  const del = rowTick.locator('[data-action="delete-schedule"]');
  await del.click();
  assert.match(await del.textContent(), /Really/);
  assert.equal((await call('GET', `/schedules/${tick.id}`)).status, 200);
  await del.click();
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
  const unexpected = consoleErrors.filter((e) =>
    !(e.text.startsWith('Failed to load resource') && expectedFailures.some((u) => e.url.includes(u))));
  assert.deepEqual(pageErrors, [], 'uncaught errors in the page');
  assert.deepEqual(unexpected, [], 'console errors');
});
