// hourglass console — one page, plain DOM, no framework and nothing from other origins.
//
// Hash routes (#/topics, #/topic/NAME, #/topic/NAME?tab=groups, #/job/ID, #/schedules, #/fleet,
// #/restore) each render
// into <main> from the daemon's HTTP API (docs/api.md); every list that can grow large is paged
// by the server (schedules are few: GET /schedules answers all of them). Errors the API
// answers ({"error","message"}) are shown in the banner at the top, never only in the JS
// console. The token field is kept in sessionStorage and sent as Authorization: Bearer.
//
// Accessibility (WCAG 2.1 AA, checked by tests/browser with axe-core and by keyboard): each
// view has one h1 and is announced by the document title; a navigation that removed the
// focused element puts focus on the new view's h1; a refresh that rebuilds a cell keeps focus
// on its control. Refreshes are silent: only what a user did (paused, requeued, deleted,
// created, restored) is said, through the one polite status region; errors through the
// banner's alert. "Pause updates" stops every automatic refresh (WCAG 2.2.2). Irreversible
// actions ask in a modal dialog (focus in, Escape closes, focus back). Plots have dash
// patterns, markers or hatching besides colour, a legend, a summary and a data table.
'use strict';

(() => {
  // ---- small helpers -------------------------------------------------------------------

  const $ = (sel, root = document) => root.querySelector(sel);
  const SVG = 'http://www.w3.org/2000/svg';
  const STATES = ['delayed', 'ready', 'reserved', 'dead'];
  const TOKEN_KEY = 'hourglass.token';

  // An element: h('a', {href: '#/', class: 'x', onclick: fn}, 'text', child, ...).
  function h(tag, attrs, ...children) {
    return build(document.createElement(tag), attrs, children);
  }
  function s(tag, attrs, ...children) {
    return build(document.createElementNS(SVG, tag), attrs, children);
  }
  function build(el, attrs, children) {
    for (const [k, v] of Object.entries(attrs || {})) {
      if (v == null || v === false) continue;
      if (k.startsWith('on')) el.addEventListener(k.slice(2), v);
      else if (k === 'class') el.setAttribute('class', v);
      else el.setAttribute(k, v === true ? '' : v);
    }
    for (const c of children.flat(Infinity)) {
      if (c != null && c !== false) el.append(c instanceof Node ? c : String(c));
    }
    return el;
  }

  const enc = encodeURIComponent;
  function qs(params) {
    const parts = Object.entries(params)
      .filter(([, v]) => v !== undefined && v !== null && v !== '')
      .map(([k, v]) => `${enc(k)}=${enc(v)}`);
    return parts.length ? '?' + parts.join('&') : '';
  }

  const fmtInt = (n) => (n == null ? '—' : Number(n).toLocaleString('en-US'));
  function fmtDur(ms) {
    const a = Math.abs(ms);
    if (a < 1000) return `${Math.round(a)} ms`;
    if (a < 60e3) return `${(a / 1000).toFixed(a < 10e3 ? 1 : 0)} s`;
    if (a < 3600e3) return `${Math.floor(a / 60e3)}m ${Math.floor((a % 60e3) / 1000)}s`;
    if (a < 86400e3) return `${Math.floor(a / 3600e3)}h ${Math.floor((a % 3600e3) / 60e3)}m`;
    return `${Math.floor(a / 86400e3)}d ${Math.floor((a % 86400e3) / 3600e3)}h`;
  }
  const fmtRel = (at) => (at > Date.now() ? `in ${fmtDur(at - Date.now())}` : `${fmtDur(Date.now() - at)} ago`);
  function fmtTime(ms) {
    if (!ms) return '—';
    const d = new Date(ms);
    const p = (n, w = 2) => String(n).padStart(w, '0');
    return `${d.getFullYear()}-${p(d.getMonth() + 1)}-${p(d.getDate())} ` +
      `${p(d.getHours())}:${p(d.getMinutes())}:${p(d.getSeconds())}.${p(d.getMilliseconds(), 3)}`;
  }
  function fmtRate(x) {
    if (x == null || !isFinite(x)) return '—';
    return x < 10 ? x.toFixed(1) : Math.round(x).toLocaleString('en-US');
  }
  const fmtAxis = (v) => (Number.isInteger(v) ? fmtInt(v) : fmtRate(v));
  // A point in time: its relative form, the exact time on hover; kept fresh by the ticker.
  const when = (ms) => (ms ? h('time', {'data-at': ms, datetime: new Date(ms).toISOString(), title: fmtTime(ms)}, fmtRel(ms)) : '—');

  // ---- what a screen reader is told --------------------------------------------------------

  // Say `text` once through the polite status region (cleared first, so the same words twice
  // are said twice). Only for what a user's action did: refreshes never call this.
  function announce(text) {
    const box = $('#status');
    box.textContent = '';
    setTimeout(() => { box.textContent = text; }, 50);
  }

  // The view's h1 (hidden when the view's look starts with something else), and the
  // document's title after it.
  function heading(text, visible = true, ...children) {
    document.title = `${text} · hourglass console`;
    return h('h1', {tabindex: -1, class: visible ? null : 'vh'}, children.length ? children : text);
  }

  // ---- the API -------------------------------------------------------------------------

  class ApiError extends Error {
    constructor(status, code, message, path) {
      super(message);
      Object.assign(this, {status, code, path});
    }
  }

  async function api(path, {method = 'GET', body} = {}) {
    const headers = {Accept: 'application/json'};
    const token = sessionStorage.getItem(TOKEN_KEY);
    if (token) headers.Authorization = `Bearer ${token}`;
    if (body !== undefined) headers['Content-Type'] = 'application/json';
    let res;
    try {
      res = await fetch(path, {method, headers, cache: 'no-store',
        body: body === undefined ? undefined : JSON.stringify(body)});
    } catch (e) {
      throw new ApiError(0, 'unreachable', `the daemon did not answer (${e.message})`, path);
    }
    const text = await res.text();
    let data = null;
    try {
      data = text ? JSON.parse(text) : null;
    } catch {
      if (res.ok) throw new ApiError(res.status, 'bad_answer', 'the answer is not JSON', path);
    }
    if (!res.ok) {
      throw new ApiError(res.status, (data && data.error) || `http_${res.status}`,
        (data && data.message) || text.slice(0, 200) || res.statusText, path);
    }
    return data;
  }

  // ---- the error banner ------------------------------------------------------------------

  function showError(err) {
    const box = $('#error');
    const text = err instanceof ApiError
      ? `${err.status ? err.status + ' ' : ''}${err.code}: ${err.message} (${err.path.split('?')[0]})`
      : `unexpected: ${err && err.message ? err.message : err}`;
    // the same error again (a refresh that keeps failing) is not said again
    if (!box.hidden && $('.error-text', box).textContent === text) return;
    $('.error-text', box).textContent = text;
    box.hidden = false;
  }
  function clearError() {
    const box = $('#error');
    if (box.hidden) return;
    const hadFocus = box.contains(document.activeElement);
    box.hidden = true;
    if (hadFocus) focusView();
  }

  // Focus the view's heading (after a navigation, or when the focused control went away).
  function focusView() {
    const target = $('#view h1') || $('#view');
    target.focus({preventScroll: false});
  }
  // Was focus lost (on body, or on an element no longer in the page)?
  const focusLost = () => !document.activeElement || document.activeElement === document.body ||
    !document.activeElement.isConnected;

  // ---- routing ---------------------------------------------------------------------------

  let generation = 0; // bumped on every navigation: answers for an older view are dropped
  let timers = [];    // the current view's refresh timers

  function parseHash() {
    const raw = location.hash.replace(/^#\/?/, '');
    const [path, query = ''] = raw.split('?');
    const parts = path.split('/').map(decodeURIComponent);
    return {name: parts[0] || 'topics', arg: parts.slice(1).join('/'), params: new URLSearchParams(query)};
  }

  function go(hash) {
    if (location.hash === hash) route();
    else location.hash = hash;
  }

  const views = {topics: viewTopics, topic: viewTopic, job: viewJob, schedules: viewSchedules, fleet: viewFleet,
    restore: viewRestore};

  let firstRoute = true;

  async function route() {
    generation++;
    timers.forEach(clearInterval);
    timers = [];
    sampler.listeners.clear(); // a view with plots adds its own
    clearError();
    const r = parseHash();
    const view = views[r.name] || viewTopics;
    for (const a of document.querySelectorAll('[data-nav]')) {
      const on = a.dataset.nav === r.name || (r.name === 'topic' && a.dataset.nav === 'topics');
      if (on) a.setAttribute('aria-current', 'page');
      else a.removeAttribute('aria-current');
    }
    $('[name="job"]').value = r.name === 'job' ? r.arg : '';
    const main = $('#view');
    // where focus was: in the old view (gone with it), or nowhere, it goes to the new view's
    // heading; on a header control (the nav, the lookup) it stays there. A control marked
    // data-focus-key (a tab, the next-page link) that the new view has too gets it back.
    const moveFocus = !firstRoute && (focusLost() || main.contains(document.activeElement));
    const key = moveFocus && document.activeElement ? document.activeElement.getAttribute('data-focus-key') : null;
    firstRoute = false;
    const gen = generation;
    try {
      await view(main, r, () => gen === generation);
    } catch (e) {
      if (gen === generation) showError(e);
    } finally {
      if (moveFocus && gen === generation && focusLost()) {
        const same = key && main.querySelector(`[data-focus-key="${CSS.escape(key)}"]`);
        if (same) same.focus();
        else focusView();
      }
    }
  }

  // Automatic refreshes stop while the user has paused them ("Pause updates").
  let updatesPaused = false;

  // Run `fn` now and every `ms` while the view stays (and updates are not paused); errors go
  // to the banner.
  function every(ms, live, fn) {
    let first = true;
    const tick = async () => {
      if (!live() || (updatesPaused && !first)) return;
      first = false;
      try {
        await fn();
      } catch (e) {
        if (live()) showError(e);
      }
    };
    timers.push(setInterval(tick, ms));
    return tick();
  }

  function replaceView(main, ...children) {
    main.replaceChildren(...children);
  }

  // Put `rows` (elements) into `parent` in this order, touching the DOM only where the order
  // changed: a refresh must not swap a button from under a click.
  function placeRows(parent, rows) {
    if (rows.length === parent.children.length && rows.every((r, i) => parent.children[i] === r)) return;
    parent.replaceChildren(...rows);
  }

  // A control whose action is under way: aria-disabled, not disabled, so it keeps focus (a
  // disabled button drops it to <body>). Returns false when it was busy already.
  function busy(el, on) {
    if (on && el.getAttribute('aria-disabled') === 'true') return false;
    if (on) el.setAttribute('aria-disabled', 'true');
    else el.removeAttribute('aria-disabled');
    return true;
  }

  // Replace `el`'s children when `sig` differs from what they were built from. A control of
  // theirs that had focus hands it to the first control of the new ones (a Pause button that
  // became Resume keeps the keyboard's place).
  function refill(el, sig, build) {
    if (el.dataset.sig === sig) return;
    el.dataset.sig = sig;
    const hadFocus = el.contains(document.activeElement);
    el.replaceChildren(...[build()].flat());
    if (hadFocus) {
      const next = el.querySelector('a[href], button:not(:disabled), input, select, textarea');
      if (next) next.focus();
    }
  }

  // ---- topics: /topics when the daemon has it, else /stats (counts only) -------------------

  let topicsApi = null;            // does GET /topics exist? (null: not asked yet)
  const prevTally = new Map();     // topic -> the last /throughput answer for it, for rates

  function normTopic(t, name) {
    const counts = t.counts || t;
    return {
      topic: t.topic || name,
      counts: Object.fromEntries(STATES.map((k) => [k, Number(counts[k] || 0)])),
      settings: 'paused' in t ? t : null,
    };
  }

  // GET /topics came with topic settings; a daemon without it answers 404 "no such endpoint".
  async function hasTopicsApi() {
    if (topicsApi === null) {
      try {
        await api('/topics' + qs({limit: 1}));
        topicsApi = true;
      } catch (e) {
        if (e.status !== 404) throw e;
        topicsApi = false; // counts from /stats, no settings
      }
    }
    return topicsApi;
  }

  async function listTopics(q) {
    if (await hasTopicsApi()) {
      const d = await api('/topics' + qs(q));
      const list = Array.isArray(d.topics) ? d.topics.map((t) => normTopic(t))
        : Object.entries(d.topics || {}).map(([n, t]) => normTopic(t, n));
      return {topics: list, next: d.next, total: d.topicCount};
    }
    const d = await api('/stats' + qs(q));
    return {topics: Object.entries(d.topics).map(([n, c]) => normTopic(c, n)), next: d.next, total: d.topicCount};
  }

  async function oneTopic(name) {
    if (await hasTopicsApi()) return normTopic(await api(`/topics/${enc(name)}`), name);
    const d = await api('/stats' + qs({prefix: name, limit: 1}));
    return normTopic(d.topics[name] || {}, name);
  }

  // Rates from the running totals of /throughput: the difference since the last look.
  async function rates(names) {
    const out = new Map();
    if (!names.length) return out;
    const d = await api('/throughput' + qs({topics: names.join(',')}));
    for (const [name, t] of Object.entries(d.topics)) {
      const prev = prevTally.get(name);
      const r = {push: null, deliver: null, late: null};
      if (prev && d.at > prev.at) {
        const secs = (d.at - prev.at) / 1000;
        r.push = (t.pushed - prev.pushed) / secs;
        r.deliver = (t.delivered - prev.delivered) / secs;
        const firsts = t.firstDelivered - prev.firstDelivered;
        r.late = firsts > 0 ? (t.latenessMsSum - prev.latenessMsSum) / firsts : null;
        if (r.late == null && prev.rate) r.late = prev.rate.late; // keep the last known
      }
      prevTally.set(name, {...t, at: d.at, rate: r});
      out.set(name, r);
    }
    return out;
  }

  async function setPaused(name, paused) {
    await api(`/topics/${enc(name)}`, {method: 'PUT', body: {paused}});
  }

  function badges(t) {
    const st = t.settings;
    if (!st) return [];
    const out = [];
    if (st.paused) out.push(h('span', {class: 'badge paused', title: 'delivers nothing until resumed'}, 'paused'));
    const d = st.deliver;
    if (d && d.webhook) out.push(h('span', {class: 'badge route', title: d.webhook}, 'webhook'));
    else if (d && d.amqp) out.push(h('span', {class: 'badge route', title: `${d.amqp.exchange} / ${d.amqp.routingKey}`}, 'amqp'));
    if (st.rate) out.push(h('span', {class: 'badge', title: 'deliveries per second, fleet-wide'}, `${st.rate}/s`));
    // flow control by key: fifo says one at a time itself; otherwise the limit, if any
    if (st.groupOrder === 'fifo') {
      out.push(h('span', {class: 'badge', title: 'a group\'s jobs one at a time, in order (groupOrder fifo)'}, 'fifo groups'));
    } else if (st.groupConcurrency) {
      out.push(h('span', {class: 'badge', title: 'at most this many jobs of one group reserved at once, fleet-wide (groupConcurrency)'},
        `${st.groupConcurrency} per group`));
    }
    if (st.groupRate) {
      out.push(h('span', {class: 'badge', title: 'deliveries per second per group, fleet-wide (groupRate)'}, `${st.groupRate}/s per group`));
    }
    return out;
  }

  function pauseButton(t, after) {
    const paused = t.settings && t.settings.paused;
    const action = paused ? 'resume' : 'pause';
    const label = paused ? 'Resume' : 'Pause';
    return h('button', {
      type: 'button', 'data-action': action, class: 'small',
      'aria-label': `${label} ${t.topic}`,
      disabled: topicsApi === false,
      title: topicsApi === false ? 'this daemon has no /topics endpoint (topic settings)' : `${action} deliveries`,
      onclick: async (ev) => {
        const b = ev.currentTarget;
        if (!busy(b, true)) return;
        try {
          await setPaused(t.topic, !paused);
          announce(paused ? `${t.topic} resumed: delivering again.` : `${t.topic} paused: delivers nothing until resumed.`);
          await after();
        } catch (e) {
          showError(e);
          busy(b, false);
        }
      },
    }, label);
  }

  // A form field: its label above it, tied by for/id (a label wrapped round a text field
  // would lend the field's placeholder or value to its name).
  function field(id, label, control, cls) {
    control.id = id;
    return h('div', {class: `field ${cls || ''}`.trim()}, h('label', {for: id}, label), control);
  }

  // A wide table in a box that scrolls sideways on a narrow screen, so the page itself does not
  // (WCAG 1.4.10). While it overflows, the box is a named region in the Tab order, so a
  // keyboard can scroll it too; otherwise it is no stop at all.
  const overflowWatch = new ResizeObserver((entries) => {
    for (const e of entries) {
      const box = e.target.closest('.scroller');
      if (!box || !box.isConnected) {
        overflowWatch.unobserve(e.target);
        continue;
      }
      const over = box.scrollWidth > box.clientWidth + 1;
      if (over) {
        box.setAttribute('role', 'region');
        box.setAttribute('aria-label', box.dataset.label);
        box.tabIndex = 0;
      } else {
        for (const a of ['role', 'aria-label', 'tabindex']) box.removeAttribute(a);
      }
    }
  });
  function scroller(label, table) {
    const box = h('div', {class: 'scroller', 'data-label': label}, table);
    overflowWatch.observe(box);
    overflowWatch.observe(table);
    return box;
  }

  // A table header cell for a column (scope="col"); an empty one gets a name all the same.
  const th = (text, attrs = {}) => h('th', {scope: 'col', ...attrs}, text || h('span', {class: 'vh'}, 'Actions'));

  async function viewTopics(main, r, live) {
    const prefix = r.params.get('prefix') || '';
    const after = r.params.get('after') || '';
    const limit = Number(r.params.get('limit')) || 50;
    const link = (p) => '#/topics' + qs({prefix, limit: limit === 50 ? '' : limit, ...p});

    const filter = h('form', {class: 'filter', role: 'search', 'aria-label': 'Topics', onsubmit: (ev) => {
      ev.preventDefault();
      go(link({prefix: ev.target.prefix.value.trim(), after: ''}));
    }},
    h('input', {name: 'prefix', type: 'search', placeholder: 'topic prefix', value: prefix, 'aria-label': 'Topic prefix'}),
    h('button', {type: 'submit'}, 'Filter'),
    h('select', {name: 'limit', 'aria-label': 'Topics per page', onchange: (ev) => go('#/topics' + qs({prefix, limit: ev.target.value}))},
      [25, 50, 100, 200].map((n) => h('option', {value: n, selected: n === limit}, `${n} per page`))));

    const tbody = h('tbody');
    const summary = h('span', {class: 'muted'});
    const pager = h('div', {class: 'pager'});
    const table = h('table', {class: 'grid topics', 'aria-labelledby': 'topics-title'},
      h('thead', {}, h('tr', {},
        th('Topic'), STATES.map((k) => th(k, {class: 'num'})),
        th('push/s', {class: 'num', title: 'new jobs per second, fleet-wide'}),
        th('deliver/s', {class: 'num', title: 'deliveries per second (redeliveries included)'}),
        th('lateness', {class: 'num', title: 'mean time from due to first delivery, since the last refresh'}),
        th(''))),
      tbody);
    replaceView(main, heading('Topics', false), plotsPanel(), h('section', {class: 'card', 'aria-labelledby': 'topics-title'},
      h('div', {class: 'bar'}, h('h2', {id: 'topics-title'}, 'Topics'), summary, filter), scroller('Topics table', table), pager));

    const rows = new Map(); // topic -> its row, kept across refreshes
    function row(t) {
      let tr = rows.get(t.topic);
      if (!tr) {
        tr = h('tr', {'data-topic': t.topic},
          h('td', {}, h('a', {href: `#/topic/${enc(t.topic)}`}, t.topic), h('span', {class: 'badges'})),
          STATES.map((k) => h('td', {class: `num count-${k}`, 'data-count': k})),
          h('td', {class: 'num', 'data-rate': 'push'}), h('td', {class: 'num', 'data-rate': 'deliver'}),
          h('td', {class: 'num', 'data-rate': 'late'}), h('td', {class: 'actions'}));
        rows.set(t.topic, tr);
      }
      return tr;
    }
    function fill(tr, t, rt) {
      for (const k of STATES) {
        const td = $(`[data-count="${k}"]`, tr);
        td.dataset.value = t.counts[k];
        td.textContent = fmtInt(t.counts[k]);
      }
      $('[data-rate="push"]', tr).textContent = fmtRate(rt.push);
      $('[data-rate="deliver"]', tr).textContent = fmtRate(rt.deliver);
      $('[data-rate="late"]', tr).textContent = rt.late == null ? '—' : fmtDur(rt.late);
      refill($('.badges', tr), JSON.stringify(t.settings), () => badges(t));
      refill($('.actions', tr), `${topicsApi} ${t.settings && t.settings.paused}`, () => pauseButton(t, refresh));
    }

    async function refresh() {
      const page = await listTopics({prefix, after, limit});
      const rate = await rates(page.topics.map((t) => t.topic));
      if (!live()) return;
      for (const t of page.topics) fill(row(t), t, rate.get(t.topic) || {});
      const shown = page.topics.map((t) => rows.get(t.topic));
      placeRows(tbody, shown.length ? shown
        : [h('tr', {}, h('td', {colspan: 9, class: 'muted'}, prefix ? `No topic starts with “${prefix}”.` : 'No topics yet.'))]);
      summary.textContent = page.total != null ? `${fmtInt(page.total)} topics in all` : '';
      refill(pager, `${after} ${page.next}`, () => [
        after ? h('a', {href: link({after: ''}), class: 'button', 'data-focus-key': 'first-page'}, '⇤ First page') : '',
        page.next ? h('a', {href: link({after: page.next}), class: 'button', 'data-page': 'next', 'data-focus-key': 'next-page'}, 'Next page →') : '']);
    }
    await every(4000, live, refresh);
  }

  // ---- one topic: its counts, settings and jobs -------------------------------------------

  const TABS = [['delayed', 'Scheduled'], ['ready', 'Ready'], ['reserved', 'Reserved'], ['dead', 'Dead']];

  // A page of jobs, following `next` until the page is full: delayed and reserved jobs share
  // their shard's index with other topics, so one call may look at entries and find none.
  async function jobsPage(topic, state, after, limit) {
    let jobs = [];
    let next = after;
    let scanned = 0;
    for (let calls = 0; calls < 10; calls++) {
      const d = await api(`/topics/${enc(topic)}/jobs` + qs({state, after: next, limit: limit - jobs.length}));
      jobs = jobs.concat(d.jobs);
      scanned += d.scanned;
      next = d.next;
      if (!next || jobs.length >= limit) break;
    }
    return {jobs, next, scanned};
  }

  function bodyPreview(body) {
    const text = JSON.stringify(body);
    return h('code', {class: 'preview', title: text.length > 80 ? text.slice(0, 2000) : null},
      text.length > 80 ? text.slice(0, 80) + '…' : text);
  }

  // Ask in the modal dialog: resolves true when the user confirms. Focus goes to Cancel (the
  // safe answer); Cancel, Escape or the confirm button close it, and focus goes back to what
  // had it (or the view's heading when that is gone).
  // The answer is taken from the dialog's close event, which the browser may deliver late:
  // Chromium fires it at its next rendering opportunity, so under load the close of one
  // question (Escape) arrived after the next question was open, and answered that one "no" —
  // its real "yes" then went unheard (seen in the browser test). So a close event counts only
  // while the dialog is closed, for the question asked last (settleDialog, one at a time).
  let settleDialog = null;
  function confirmDialog({title, text, confirm}) {
    const dlg = $('#confirm');
    const opener = document.activeElement;
    // an earlier question whose close event has not come yet: its answer is the dialog's now
    if (settleDialog) settleDialog(!dlg.open && dlg.returnValue === 'ok');
    $('#confirm-title').textContent = title;
    $('#confirm-text').textContent = text;
    $('[data-action="confirm"]', dlg).textContent = confirm;
    dlg.returnValue = '';
    return new Promise((resolve) => {
      settleDialog = (answer) => {
        settleDialog = null;
        if (!dlg.open) { // (an earlier question superseded by an open one leaves focus alone)
          if (opener && opener.isConnected) opener.focus();
          else focusView();
        }
        resolve(answer);
      };
      dlg.showModal();
      $('[data-action="cancel"]', dlg).focus();
    });
  }
  function onDialogClose() {
    const dlg = $('#confirm');
    if (dlg.open || !settleDialog) return; // a late close of an earlier question: the dialog is open again
    settleDialog(dlg.returnValue === 'ok');
  }

  // A button that asks in the dialog before it acts (for what cannot be undone).
  function confirmButton(label, attrs, question, act) {
    const b = h('button', {type: 'button', class: 'small danger', ...attrs, onclick: async () => {
      if (!(await confirmDialog({confirm: label, ...question}))) return;
      if (!busy(b, true)) return;
      await act();
      if (focusLost()) focusView();
    }}, label);
    return b;
  }

  // A dead job's Requeue and a job's Delete (asked in the dialog), as a row of a topic's jobs
  // and the job's own view show them; `then` follows a success (the list reloaded, or the view),
  // `attrs` what the place adds (a row's buttons name their job: the view's heading does there).
  function requeueButton(j, then, attrs = {}) {
    return h('button', {type: 'button', 'data-action': 'requeue', ...attrs, onclick: async (ev) => {
      const b = ev.currentTarget;
      if (!busy(b, true)) return;
      try {
        await requeue(j.id);
        announce(`Job ${j.id} requeued: ready now.`);
        then();
      } catch (e) {
        showError(e);
        busy(b, false);
      }
    }}, 'Requeue');
  }
  function deleteButton(j, topic, then, attrs = {}) {
    return confirmButton('Delete', {'data-action': 'delete', ...attrs}, {
      title: `Delete job ${j.id}?`,
      text: `It leaves ${topic} for good and is journaled as deleted. This cannot be undone.`,
    }, async () => {
      try {
        await deleteJob(j.id);
        announce(`Job ${j.id} deleted.`);
        then();
      } catch (e) {
        showError(e);
      }
    });
  }

  async function requeue(id) {
    return api(`/reStore/${enc(id)}`);
  }
  async function deleteJob(id) {
    return api('/delete' + qs({id}));
  }

  async function viewTopic(main, r, live) {
    const topic = r.arg;
    // the part shown: the jobs in one state (?state=), or the groups (?tab=groups)
    const groupsTab = r.params.get('tab') === 'groups';
    const state = groupsTab ? null : STATES.includes(r.params.get('state')) ? r.params.get('state') : 'delayed';
    const after = r.params.get('after') || '';
    const limit = r.params.get('limit') || '';
    const link = (p) => `#/topic/${enc(topic)}` + qs(groupsTab ? {tab: 'groups', limit, after, ...p} : {state, after, ...p});

    const badgeBox = h('span', {class: 'badges'});
    const pauseBox = h('span');
    const head = h('div', {class: 'bar'}, heading(topic, true, h('a', {href: '#/topics'}, 'Topics'), ' / ', topic),
      badgeBox, h('span', {class: 'spacer'}), pauseBox);
    const tabs = h('nav', {class: 'tabs', 'aria-label': 'Jobs by state, and groups'});
    const list = h('div');
    const settings = h('div');
    replaceView(main, h('section', {class: 'card'}, head, settings),
      h('section', {class: 'card', 'aria-label': groupsTab ? 'Groups' : 'Jobs'}, tabs, list));

    const reload = () => route();

    tabs.append(...TABS.map(([k, label]) => h('a', {
      href: `#/topic/${enc(topic)}` + qs({state: k}), 'aria-current': k === state ? 'page' : null, 'data-tab': k,
      'data-focus-key': `tab-${k}`,
    }, label, ' ', h('span', {class: `pill count-${k}`}, '…'))),
    h('a', {href: `#/topic/${enc(topic)}` + qs({tab: 'groups'}), 'aria-current': groupsTab ? 'page' : null, 'data-tab': 'groups',
      'data-focus-key': 'tab-groups', title: 'the groups of this topic that have jobs (flow control by key)'}, 'Groups'));

    async function refreshHead() {
      const t = await oneTopic(topic);
      if (!live()) return;
      refill(badgeBox, JSON.stringify(t.settings), () => badges(t));
      refill(pauseBox, `${topicsApi} ${t.settings && t.settings.paused}`, () => pauseButton(t, refreshHead));
      for (const [k] of TABS) $(`[data-tab="${k}"] .pill`, tabs).textContent = fmtInt(t.counts[k]);
      if (!settings.firstChild) settings.append(settingsForm(t));
    }

    function settingsForm(t) {
      if (topicsApi === false || !t.settings) {
        return h('p', {class: 'muted'}, 'Topic settings (pause, rate, backoff, delivery) need GET /topics, which this daemon does not have.');
      }
      const st = t.settings;
      const deliverText = st.deliver ? JSON.stringify(st.deliver) : '';
      // what is wrong with the form, under it: a field the browser's checks refuse (a
      // negative number, a fraction), the deliver JSON, or the daemon's 400 in its words
      const problem = h('p', {id: 'settings-problem', class: 'form-error', role: 'alert', 'data-error': 'settings', hidden: true});
      const say = (text, control) => {
        problem.textContent = text;
        problem.hidden = !text;
        for (const c of form.querySelectorAll('[aria-invalid]')) {
          c.removeAttribute('aria-invalid');
          c.removeAttribute('aria-describedby');
        }
        if (text && control) {
          control.setAttribute('aria-invalid', 'true');
          control.setAttribute('aria-describedby', problem.id);
        }
      };
      const number = (name, label, value, hint) => field(`setting-${name}`, label,
        h('input', {name, type: 'number', min: 0, step: 1, value: value ?? '', placeholder: hint}));
      const NUMBERS = ['rate', 'backoff', 'maxBackoff', 'groupConcurrency', 'groupRate'];
      const form = h('form', {class: 'settings', 'data-form': 'settings', onsubmit: async (ev) => {
        ev.preventDefault();
        const f = ev.target;
        // only what was changed: a setting the form shows but did not touch (a webhook's
        // secret the daemon does not echo, say) is left as it is
        const body = {};
        for (const k of NUMBERS) {
          if (f[k].value !== '' && Number(f[k].value) !== st[k]) body[k] = Number(f[k].value);
        }
        if (f.groupOrder.value !== st.groupOrder) body.groupOrder = f.groupOrder.value;
        if (f.deliver.value.trim() !== deliverText) {
          try {
            body.deliver = f.deliver.value.trim() ? JSON.parse(f.deliver.value) : null;
          } catch (e) {
            say(`deliver is not JSON: ${e.message}`, f.deliver);
            return;
          }
        }
        say('');
        if (!Object.keys(body).length) return;
        const submit = $('button[type="submit"]', f);
        if (!busy(submit, true)) return;
        try {
          await api(`/topics/${enc(topic)}`, {method: 'PUT', body});
          clearError();
          announce(`Settings of ${topic} saved.`);
          reload();
        } catch (e) {
          // the daemon names the field it refuses: that field is the one marked
          if (e instanceof ApiError && e.status === 400) {
            const named = Object.keys(body).find((k) => new RegExp(`^${k}\\b`).test(e.message));
            say(e.message, named ? f[named] : null);
          } else {
            showError(e);
          }
          busy(submit, false);
        }
      }},
      number('rate', 'rate (deliveries/s, 0 = no limit)', st.rate, '0'),
      number('backoff', 'backoff (ms)', st.backoff),
      number('maxBackoff', 'max backoff (ms)', st.maxBackoff),
      number('groupConcurrency', 'groupConcurrency (jobs of one group at once, 0 = no limit)', st.groupConcurrency, '0'),
      field('setting-groupOrder', 'groupOrder', h('select', {name: 'groupOrder'},
        [['any', 'any — groups take turns'], ['fifo', 'fifo — one at a time, in order']]
          .map(([k, text]) => h('option', {value: k, selected: k === (st.groupOrder || 'any')}, text)))),
      number('groupRate', 'groupRate (deliveries/s per group, 0 = none)', st.groupRate, '0'),
      field('setting-deliver', 'deliver (JSON: null, {"webhook": URL, …} or {"amqp": {…}})',
        h('textarea', {name: 'deliver', rows: 2, spellcheck: 'false'}, deliverText), 'wide'),
      problem,
      h('div', {class: 'buttons'},
        h('button', {type: 'submit', 'data-action': 'save-settings'}, 'Save settings'),
        confirmButton('Reset to defaults', {'data-action': 'reset-settings'}, {
          title: `Reset the settings of ${topic}?`,
          text: 'Pause, rate, backoff, the group settings and delivery go back to the defaults.',
        }, async () => {
          try {
            await api(`/topics/${enc(topic)}`, {method: 'DELETE'});
            announce(`Settings of ${topic} reset to the defaults.`);
            reload();
          } catch (e) {
            showError(e);
          }
        })));
      // a value the browser's checks refuse (the form is not sent): said under the form too,
      // where it stays, for the first field refused ('invalid' does not bubble: captured)
      form.addEventListener('invalid', () => {
        const bad = form.querySelector(':invalid');
        if (bad) say(`${bad.name}: ${bad.validationMessage}`, bad);
      }, true);
      // a field marked wrong that is being changed is no longer known to be wrong
      form.addEventListener('input', (ev) => {
        if (ev.target.getAttribute('aria-invalid')) say('');
      });
      return h('details', {}, h('summary', {}, 'Settings'), form);
    }

    async function refreshList() {
      const page = await jobsPage(topic, state, after, 50);
      if (!live()) return;
      const selected = new Set();
      const bulk = h('button', {type: 'button', 'data-action': 'requeue-selected', disabled: true, onclick: async () => {
        if (!busy(bulk, true)) return;
        const ids = [...selected];
        let done = 0;
        const failed = [];
        for (const id of ids) { // one at a time: each is its own restore on the daemon
          try {
            await requeue(id);
            done++;
          } catch (e) {
            failed.push(e);
          }
          bulk.textContent = `Requeued ${done} of ${ids.length}…`;
        }
        if (failed.length) showError(failed[0]);
        announce(`Requeued ${done} of ${ids.length} jobs.`);
        reload();
      }}, 'Requeue selected');
      const all = h('input', {type: 'checkbox', 'aria-label': 'Select all jobs on this page', onchange: (ev) => {
        for (const c of list.querySelectorAll('input[data-id]')) {
          c.checked = ev.target.checked;
          c.dispatchEvent(new Event('change'));
        }
      }});
      const cols = {
        delayed: ['due', (j) => when(j.runAt)],
        ready: ['due', (j) => when(j.runAt)],
        reserved: ['lease left', (j) => h('span', {'data-until': j.leaseUntil}, fmtDur(j.leaseUntil - Date.now()))],
        dead: ['died', (j) => when(j.diedAt)],
      }[state];
      const rows = page.jobs.map((j) => h('tr', {'data-job': j.id},
        state === 'dead' ? h('td', {}, h('input', {type: 'checkbox', 'data-id': j.id, 'aria-label': `Select job ${j.id}`,
          onchange: (ev) => {
            if (ev.target.checked) selected.add(j.id); else selected.delete(j.id);
            bulk.disabled = selected.size === 0;
            bulk.textContent = selected.size ? `Requeue ${selected.size} selected` : 'Requeue selected';
          }})) : null,
        h('td', {}, h('a', {href: `#/job/${j.id}`, class: 'mono'}, j.id)),
        h('td', {}, cols[1](j)),
        h('td', {class: 'num'}, j.priority),
        h('td', {class: 'num'}, `${j.attempt}/${j.tries}`),
        h('td', {}, j.bizKey || ''),
        h('td', {'data-field': 'group'}, j.group ?? ''),
        h('td', {}, bodyPreview(j.body)),
        h('td', {class: 'actions'},
          state === 'dead' ? requeueButton(j, reload, {class: 'small', 'aria-label': `Requeue job ${j.id}`}) : null,
          deleteButton(j, topic, reload, {'aria-label': `Delete job ${j.id}`}))));
      list.replaceChildren(scroller('Jobs table',
        h('table', {class: 'grid jobs'},
          h('caption', {class: 'vh'}, `${(TABS.find(([k]) => k === state) || [])[1]} jobs of ${topic}`),
          h('thead', {}, h('tr', {}, state === 'dead' ? th(all) : null,
            th('id'), th(cols[0]), th('prio', {class: 'num'}),
            th('attempt', {class: 'num'}), th('bizKey'), th('group'), th('body'), th(''))),
          h('tbody', {}, rows.length ? rows
            : h('tr', {}, h('td', {colspan: 9, class: 'muted'}, page.next ? `Nothing found among ${fmtInt(page.scanned)} entries looked at; go on with the next page.` : `No ${state} jobs${after ? ' after this point' : ''}.`))))),
        h('div', {class: 'pager'},
          state === 'dead' && rows.length ? bulk : null,
          after ? h('a', {class: 'button', href: link({after: ''}), 'data-focus-key': 'first-page'}, '⇤ First page') : null,
          page.next ? h('a', {class: 'button', href: link({after: page.next}), 'data-page': 'next', 'data-focus-key': 'next-page'}, 'Next page →') : null,
          h('span', {class: 'muted'}, `${rows.length} shown · ${fmtInt(page.scanned)} index entries looked at`)));
    }

    // The groups tab: the topic's groups that have jobs, with their counts, a page at a time
    // (GET /topics/{topic}/groups; `next` is an opaque cursor), refreshed in place like the
    // topics table: rows kept by group, so a refresh moves no focus and says nothing.
    const groupRows = new Map();
    let groupsBody = null;
    let groupsPager = null;
    function groupRow(g) {
      let tr = groupRows.get(g.group);
      if (!tr) {
        tr = h('tr', {'data-group': g.group}, h('th', {scope: 'row', class: 'group'}, g.group),
          ['delayed', 'ready', 'reserved'].map((k) => h('td', {class: `num count-${k}`, 'data-count': k})));
        groupRows.set(g.group, tr);
      }
      for (const k of ['delayed', 'ready', 'reserved']) {
        const td = $(`[data-count="${k}"]`, tr);
        td.dataset.value = g[k];
        td.textContent = fmtInt(g[k]);
      }
      return tr;
    }
    async function refreshGroups() {
      const d = await api(`/topics/${enc(topic)}/groups` + qs({after, limit}));
      if (!live()) return;
      if (!groupsBody) {
        groupsBody = h('tbody');
        groupsPager = h('div', {class: 'pager'});
        list.replaceChildren(
          h('p', {class: 'muted'}, 'Groups with jobs delayed, ready or reserved (a group with none is not kept). ',
            'The group settings are under Settings above.'),
          scroller('Groups table', h('table', {class: 'grid groups'},
            h('caption', {class: 'vh'}, `Groups of ${topic}`),
            h('thead', {}, h('tr', {}, th('group'), th('delayed', {class: 'num'}), th('ready', {class: 'num'}),
              th('reserved', {class: 'num'}))),
            groupsBody)),
          groupsPager);
      }
      const groups = d.groups || [];
      const shown = groups.map(groupRow);
      const names = new Set(groups.map((g) => g.group));
      for (const g of [...groupRows.keys()]) if (!names.has(g)) groupRows.delete(g);
      placeRows(groupsBody, shown.length ? shown : [h('tr', {}, h('td', {colspan: 4, class: 'muted'},
        !after ? 'No groups with jobs.' : d.next ? 'None on this page; go on with the next page.' : 'No more groups.'))]);
      refill(groupsPager, `${after} ${d.next} ${groups.length}`, () => [
        after ? h('a', {class: 'button', href: link({after: ''}), 'data-focus-key': 'first-page'}, '⇤ First page') : null,
        d.next ? h('a', {class: 'button', href: link({after: d.next}), 'data-page': 'next', 'data-focus-key': 'next-page'}, 'Next page →') : null,
        h('span', {class: 'muted'}, `${groups.length} shown`)].filter(Boolean));
    }

    await Promise.all([every(5000, live, refreshHead), groupsTab ? every(5000, live, refreshGroups) : refreshList()]);
  }

  // ---- one job: fields, body, history --------------------------------------------------------

  async function viewJob(main, r, live) {
    const id = r.arg.trim();
    if (!/^[0-9]{1,20}$/.test(id)) {
      replaceView(main, h('section', {class: 'card'}, heading('Job'), h('p', {}, 'A job id is a decimal number.')));
      throw new ApiError(400, 'bad_request', 'a job id is a decimal number of up to 19 digits', `/jobs/${id}`);
    }
    replaceView(main, h('section', {class: 'card'}, heading(`Job ${id}`), h('p', {class: 'muted'}, `Looking up ${id}…`)));
    let j;
    try {
      j = await api(`/jobs/${id}`);
    } catch (e) {
      replaceView(main, h('section', {class: 'card'}, heading(`Job ${id}`), h('p', {class: 'muted'}, e.message)));
      throw e;
    }
    if (!live()) return;
    const fields = [
      ['topic', h('a', {href: `#/topic/${enc(j.topic)}`}, j.topic)],
      ['state', h('span', {class: `state ${j.state}`, 'data-state': j.state}, j.state)],
      ['priority', j.priority], ['ttr', fmtDur(j.ttr)], ['attempt', `${j.attempt} of ${j.tries}`],
      ['runAt', [fmtTime(j.runAt), ' (', when(j.runAt), ')']],
      ['createdAt', j.createdAt ? fmtTime(j.createdAt) : null],
      ['leaseUntil', j.leaseUntil ? [fmtTime(j.leaseUntil), ' (', when(j.leaseUntil), ')'] : null],
      ['bizKey', j.bizKey],
      ['group', j.group],
    ].filter(([, v]) => v != null && v !== '');
    const live_ = ['delayed', 'ready', 'reserved', 'dead'].includes(j.state);
    const actions = h('div', {class: 'buttons'},
      j.state === 'dead' ? requeueButton(j, route) : null,
      live_ ? deleteButton(j, j.topic, route) : null);
    const history = j.history || [];
    const timeline = h('ol', {class: 'timeline', 'data-history': history.length},
      history.map((t, i) => h('li', {'data-state': t.state},
        h('span', {class: `state ${t.state}`}, t.state),
        h('span', {class: 'at', title: fmtTime(t.at)}, fmtTime(t.at)),
        i ? h('span', {class: 'muted'}, `+${fmtDur(t.at - history[i - 1].at)}`) : null,
        h('span', {class: 'muted'}, t.from ? `from ${t.from}` : 'created'),
        t.attempt ? h('span', {class: 'muted'}, `attempt ${t.attempt}`) : null,
        h('div', {class: 'by'}, [t.by, t.instance, t.host].filter(Boolean).join(' · ')))));
    replaceView(main,
      h('section', {class: 'card'},
        h('div', {class: 'bar'}, heading(`Job ${j.id}`, true, 'Job ', h('span', {class: 'mono'}, j.id)), h('span', {class: 'spacer'}), actions),
        h('dl', {class: 'fields'}, fields.map(([k, v]) => [h('dt', {}, k), h('dd', {}, v)]))),
      h('div', {class: 'columns'},
        h('section', {class: 'card', 'aria-labelledby': 'job-body'}, h('h2', {id: 'job-body'}, 'Body'),
          // it may scroll: focusable, so a keyboard can scroll it too
          h('pre', {class: 'json', tabindex: 0, role: 'region', 'aria-label': 'Body (JSON)'}, JSON.stringify(j.body, null, 2))),
        h('section', {class: 'card', 'aria-labelledby': 'job-history'}, h('h2', {id: 'job-history'}, 'History'),
          j.historyError ? h('p', {class: 'muted'}, j.historyError) : null,
          history.length ? timeline : h('p', {class: 'muted'}, 'No transitions journaled yet.'))));
  }

  // ---- schedules: a job pushed at each fire of a cron expression or an interval ---------------

  // catchUp: what fires missed while no instance ran become
  const CATCH_UP = [
    ['skip', 'drop them', 'missed fires are dropped (counted as skipped)'],
    ['one', 'one job', 'missed fires make one job, for the last of them'],
    ['all', 'a job each', 'every missed fire makes its job'],
  ];

  function scheduleExpr(sc) {
    if (sc.cron != null) return [h('code', {}, sc.cron), ' ', h('span', {class: 'muted'}, sc.tz || 'UTC')];
    return h('span', {title: fmtDur(sc.every)}, `every ${+(sc.every / 1000).toFixed(3)} s`);
  }

  async function viewSchedules(main, r, live) {
    const tbody = h('tbody');
    const summary = h('span', {class: 'muted'});
    const table = h('table', {class: 'grid schedules'},
      h('caption', {class: 'vh'}, 'Schedules'),
      h('thead', {}, h('tr', {},
        th('Topic'), th('When'), th('Job'),
        th('catch-up', {title: 'what a fire missed while no instance ran becomes'}), th('State'),
        th('Next fire'),
        th('missed made', {class: 'num', title: 'fires missed while no instance ran, made into jobs (catchUp one or all)'}),
        th('skipped', {class: 'num', title: 'fires missed while no instance ran, dropped'}),
        th(''))),
      tbody);
    replaceView(main,
      h('section', {class: 'card'}, h('div', {class: 'bar'}, heading('Schedules'), summary), scroller('Schedules table', table)),
      h('section', {class: 'card', 'aria-labelledby': 'new-schedule'}, h('h2', {id: 'new-schedule'}, 'New schedule'), createForm()));

    const rows = new Map(); // schedule id -> its row, kept across refreshes
    function row(sc) {
      let tr = rows.get(sc.id);
      if (!tr) {
        tr = h('tr', {'data-schedule': sc.id},
          h('td', {'data-field': 'topic'}), h('td', {'data-field': 'when'}), h('td', {'data-field': 'job'}),
          h('td', {'data-field': 'catchUp'}), h('td', {'data-field': 'state'}), h('td', {'data-field': 'next'}),
          h('td', {class: 'num', 'data-missed': 'made'}), h('td', {class: 'num', 'data-missed': 'skipped'}),
          h('td', {class: 'actions'}));
        rows.set(sc.id, tr);
      }
      return tr;
    }
    function fill(tr, sc) {
      const cell = (k) => $(`[data-field="${k}"]`, tr);
      refill(cell('topic'), sc.topic, () => h('a', {href: `#/topic/${enc(sc.topic)}`}, sc.topic));
      refill(cell('when'), JSON.stringify([sc.cron, sc.tz, sc.every]), () => scheduleExpr(sc));
      const job = sc.job || {};
      refill(cell('job'), JSON.stringify(job), () => bodyPreview('body' in job ? job.body : job));
      cell('catchUp').textContent = sc.catchUp;
      cell('catchUp').title = (CATCH_UP.find(([k]) => k === sc.catchUp) || ['', '', ''])[2];
      refill(cell('state'), String(sc.paused), () => (sc.paused
        ? h('span', {class: 'badge paused', title: 'fires nothing until resumed'}, 'paused')
        : h('span', {class: 'good'}, 'active')));
      const next = cell('next');
      next.dataset.next = sc.next == null ? '' : sc.next;
      refill(next, `${sc.next} ${sc.paused}`, () => (sc.next == null ? h('span', {class: 'muted'}, 'never')
        : [h('span', {class: sc.paused ? 'muted' : null, title: sc.paused ? 'when resumed; nothing fires while paused' : null},
          fmtTime(sc.next)), ' ', h('span', {class: 'muted'}, '(', when(sc.next), ')')]));
      for (const k of ['made', 'skipped']) {
        const td = $(`[data-missed="${k}"]`, tr);
        td.dataset.value = sc.missed ? sc.missed[k] : '';
        td.textContent = fmtInt(sc.missed ? sc.missed[k] : null);
      }
      refill($('.actions', tr), String(sc.paused), () => [
        h('button', {type: 'button', class: 'small', 'data-action': sc.paused ? 'resume' : 'pause',
          'aria-label': `${sc.paused ? 'Resume' : 'Pause'} the schedule of ${sc.topic}`,
          title: sc.paused ? 'fire again from the next fire time' : 'fire nothing until resumed',
          onclick: async (ev) => {
            const b = ev.currentTarget;
            if (!busy(b, true)) return;
            try {
              await api(`/schedules/${enc(sc.id)}`, {method: 'PUT', body: {paused: !sc.paused}});
              announce(sc.paused ? `The schedule of ${sc.topic} resumed.` : `The schedule of ${sc.topic} paused: it fires nothing until resumed.`);
              await refresh();
            } catch (e) {
              showError(e);
              busy(b, false);
            }
          }}, sc.paused ? 'Resume' : 'Pause'),
        confirmButton('Delete', {'data-action': 'delete-schedule', 'aria-label': `Delete the schedule of ${sc.topic}`,
          title: 'delete the schedule (jobs it pushed stay)'}, {
          title: `Delete the schedule of ${sc.topic}?`,
          text: `${sc.cron != null ? `Cron ${sc.cron} (${sc.tz || 'UTC'})` : `Every ${+(sc.every / 1000).toFixed(3)} s`}: it fires no more. Jobs it pushed stay.`,
        }, async () => {
          try {
            await api(`/schedules/${enc(sc.id)}`, {method: 'DELETE'});
            announce(`The schedule of ${sc.topic} deleted.`);
          } catch (e) {
            showError(e);
            delete $('.actions', tr).dataset.sig; // the next refresh gives the row its buttons back
          }
          await refresh();
        })]);
    }

    // An action refreshes at once, beside the timer's refreshes: an answer older than the one
    // shown is dropped (it would put back a pause button just clicked).
    let asked = 0;
    let shown = 0;
    async function refresh() {
      const mine = ++asked;
      let d;
      try {
        d = await api('/schedules');
      } catch (e) {
        if (e.status !== 404 || e.path !== '/schedules') throw e;
        if (!live()) return;
        placeRows(tbody, [h('tr', {}, h('td', {colspan: 9, class: 'muted'}, 'This daemon has no /schedules endpoint.'))]);
        return;
      }
      if (!live() || mine < shown) return;
      shown = mine;
      const list = d.schedules || [];
      for (const sc of list) fill(row(sc), sc);
      const ids = new Set(list.map((sc) => sc.id));
      for (const id of [...rows.keys()]) if (!ids.has(id)) rows.delete(id);
      placeRows(tbody, list.length ? list.map((sc) => rows.get(sc.id))
        : [h('tr', {}, h('td', {colspan: 9, class: 'muted'}, 'No schedules yet.'))]);
      const paused = list.filter((sc) => sc.paused).length;
      summary.textContent = `${fmtInt(list.length)} schedules${paused ? `, ${fmtInt(paused)} paused` : ''}`;
    }

    // POST /schedules from the form; what the API refuses is shown under it, in its words.
    function createForm() {
      const problem = h('p', {class: 'form-error', role: 'alert', 'data-error': 'schedule', hidden: true});
      const say = (text) => {
        problem.textContent = text;
        problem.hidden = !text;
      };
      const input = (name, label, attrs) => field(`schedule-${name}`, label, h('input', {name, autocomplete: 'off', ...attrs}));
      return h('form', {class: 'settings', 'data-form': 'schedule', onsubmit: async (ev) => {
        ev.preventDefault();
        const f = ev.target;
        const spec = {topic: f.topic.value.trim()};
        // what is filled in is sent as it is: the daemon says what is wrong or missing
        if (f.cron.value.trim()) spec.cron = f.cron.value.trim();
        if (f.every.value.trim()) spec.every = Number(f.every.value);
        if (f.tz.value.trim()) spec.tz = f.tz.value.trim();
        spec.job = {};
        if (f.body.value.trim()) {
          try {
            spec.job.body = JSON.parse(f.body.value);
          } catch (e) {
            say(`job body is not JSON: ${e.message}`);
            return;
          }
        }
        spec.catchUp = f.catchUp.value;
        const submit = $('button[type="submit"]', f);
        if (!busy(submit, true)) return;
        try {
          await api('/schedules', {method: 'POST', body: spec});
          say('');
          f.reset();
          await refresh();
        } catch (e) {
          if (e instanceof ApiError && e.status === 400) say(e.message);
          else showError(e);
        } finally {
          busy(submit, false);
        }
      }},
      input('topic', 'topic', {required: true, placeholder: 'reports.nightly'}),
      input('cron', 'cron (minute hour day-of-month month day-of-week)', {placeholder: '30 2 * * *', spellcheck: 'false'}),
      input('tz', 'tz (cron only; default UTC)', {placeholder: 'Europe/Berlin', spellcheck: 'false'}),
      input('every', 'or every (ms, instead of cron)', {type: 'number', min: 1000, step: 1, placeholder: '60000'}),
      field('schedule-catchUp', 'catchUp', h('select', {name: 'catchUp'},
        CATCH_UP.map(([k, short, what]) => h('option', {value: k, title: what}, `${k} — ${short}`)))),
      field('schedule-body', 'job body (JSON, pushed as the body of each fire’s job)',
        h('textarea', {name: 'body', rows: 2, spellcheck: 'false', placeholder: '{"report": "nightly"}'}), 'wide'),
      problem,
      h('div', {class: 'buttons'}, h('button', {type: 'submit', 'data-action': 'create-schedule'}, 'Create schedule')));
    }

    await every(4000, live, refresh);
  }

  // ---- fleet: this instance's health, the instances, the plots -------------------------------

  async function viewFleet(main, r, live) {
    const health = h('dl', {class: 'tiles'});
    const tbody = h('tbody');
    replaceView(main, heading('Fleet', false),
      h('section', {class: 'card', 'aria-labelledby': 'fleet-health'}, h('h2', {id: 'fleet-health'}, 'Health'), health),
      plotsPanel(),
      h('section', {class: 'card', 'aria-labelledby': 'fleet-instances'}, h('h2', {id: 'fleet-instances'}, 'Instances'),
        scroller('Instances table', h('table', {class: 'grid', 'aria-labelledby': 'fleet-instances'}, h('thead', {}, h('tr', {},
          ['instance', 'worker', 'owned shards', 'parked', 'connections', 'journal backlog', 'MySQL', 'up for',
            'pushed', 'delivered', 'heartbeat'].map((c, i) => th(c, {class: i > 0 && i !== 6 ? 'num' : null})))), tbody))));
    // a label and its value (a <dl>'s group); the value's words say what its colour does
    const tile = (label, value, cls) => h('div', {class: `tile ${cls || ''}`}, h('dt', {class: 'label'}, label), h('dd', {class: 'value'}, value));
    await every(2000, live, async () => {
      const f = await sampler.now();
      if (!live()) return;
      const hl = f.health;
      const tiles = [
        tile('status', hl.status, hl.status === 'ok' ? 'good' : 'bad'),
        tile('Redis', hl.redis, hl.redis === 'up' ? 'good' : 'bad'),
        tile('MySQL', hl.mysql, hl.mysql === 'up' ? 'good' : 'bad'),
        tile('journal backlog', fmtInt(f.journal.backlog), f.journal.backlog > 10000 ? 'warn' : ''),
        tile('in doubt', fmtInt(f.journal.inDoubt), f.journal.inDoubt ? 'warn' : ''),
        tile('shards owned here', `${f.mover ? f.mover.owned : '—'} of ${f.shards}`),
        tile('this instance', hl.instance),
      ];
      if (hl.redisLoss) tiles.push(tile('Redis loss', hl.redisLoss.message, 'bad'));
      if (hl.redisError) tiles.push(tile(`Redis refuses (${hl.redisError.cause})`, hl.redisError.message, 'bad'));
      health.replaceChildren(...tiles);
      const instances = (f.fleet && f.fleet.instances) || [];
      tbody.replaceChildren(...instances.map((i) => h('tr', {'data-instance': i.instance},
        h('td', {}, i.instance, i.draining ? h('span', {class: 'badge paused'}, 'draining') : null),
        h('td', {class: 'num'}, i.workerId), h('td', {class: 'num'}, i.ownedShards), h('td', {class: 'num'}, fmtInt(i.parked)),
        h('td', {class: 'num'}, fmtInt(i.connections)), h('td', {class: 'num'}, fmtInt(i.journalBacklog)),
        h('td', {class: i.mysql === 'up' ? 'good' : 'bad'}, i.mysql),
        h('td', {class: 'num'}, fmtDur(f.at - i.startedAt)), h('td', {class: 'num'}, fmtInt(i.pushed)),
        h('td', {class: 'num'}, fmtInt(i.delivered)), h('td', {class: 'num'}, i.at ? fmtDur(f.at - i.at) + ' ago' : '—'))));
      if (!instances.length) tbody.append(h('tr', {}, h('td', {colspan: 11, class: 'muted'}, 'No heartbeat seen yet (they come every second).')));
    });
  }

  // ---- restore --------------------------------------------------------------------------------

  const RESTORE_FIELDS = [
    ['scanned', 'messages of MySQL looked at'], ['restored', 'put back into Redis'], ['present', 'already in Redis'],
    ['expiredSkipped', 'left in MySQL: due in the past (expire=false)'], ['gone', 'finished or deleted meanwhile'],
    ['bizHeld', 'bizKey held by another live job'], ['misplaced', 'written under another shard count'],
    ['checked', 'jobs in Redis compared with MySQL'], ['aligned', 'took MySQL’s newer state'],
    ['removed', 'left Redis: finished, deleted or aborted in MySQL'], ['ms', 'milliseconds taken'],
  ];

  async function viewRestore(main) {
    const result = h('div', {class: 'result'});
    const expire = h('input', {type: 'checkbox', name: 'expire'});
    const run = h('button', {type: 'button', 'data-action': 'restore', onclick: async () => {
      if (!busy(run, true)) return;
      result.replaceChildren(h('p', {class: 'muted'}, 'Restoring… (a large queue takes a while)'));
      announce('Restoring…');
      const t0 = Date.now();
      try {
        const d = await api('/reStore' + qs({expire: expire.checked ? 'true' : 'false'}));
        const took = fmtDur(Date.now() - t0);
        result.replaceChildren(h('h2', {id: 'restore-result'}, `Done in ${took}`),
          scroller('Restore result table', h('table', {class: 'grid kv', 'data-result': 'restore', 'aria-labelledby': 'restore-result'}, h('tbody', {},
            RESTORE_FIELDS.filter(([k]) => k in d).map(([k, what]) => h('tr', {'data-field': k},
              h('th', {scope: 'row'}, k), h('td', {class: 'num'}, fmtInt(d[k])), h('td', {class: 'muted'}, what)))))));
        announce(`Restore done in ${took}: ${fmtInt(d.scanned)} scanned, ${fmtInt(d.restored)} restored.`);
      } catch (e) {
        result.replaceChildren(h('p', {class: 'muted'}, 'The restore did not run to the end.'));
        showError(e);
      } finally {
        busy(run, false);
      }
    }}, 'Run restore');
    replaceView(main, h('section', {class: 'card'},
      heading('Restore Redis from MySQL'),
      h('p', {}, 'Puts back every job MySQL has that Redis lacks (after Redis lost data), and brings jobs Redis holds ',
        'at an older version in line with MySQL. Idempotent and safe beside live traffic; one restore at a time per instance.'),
      h('div', {class: 'buttons'}, h('label', {}, expire, ' expire: also put back jobs whose due time has passed, as ready'), run),
      result));
  }

  // ---- samples of /fleet, for the plots -------------------------------------------------------
  //
  // Every instance's heartbeat carries its running totals (pushed, delivered, the lateness
  // histogram) and when it read them; /fleet answers all of them from any instance. Samples
  // are taken every 2 s while the page is open and kept 10 minutes (and across reloads of
  // this tab), so the plots are fleet-wide whichever instance answers.

  const WINDOW_MS = 10 * 60e3;
  const BIN_MS = 5e3;
  const SAMPLES_KEY = 'hourglass.samples';

  const sampler = {
    samples: [],
    bounds: null,
    status: null,
    listeners: new Set(),
    last: null,
    load() {
      try {
        const saved = JSON.parse(sessionStorage.getItem(SAMPLES_KEY) || 'null');
        if (saved && Array.isArray(saved.samples)) Object.assign(this, {samples: saved.samples, bounds: saved.bounds});
      } catch { /* a damaged copy is dropped */ }
    },
    async now() {
      if (this.last && Date.now() - this.last.t < 1500) return this.last.f;
      return this.take();
    },
    asked: 0,   // /fleet calls made, and the latest of them whose answer was taken: the fleet
    applied: 0, // view's and the timer's samples overlap, and an older answer must not follow a newer one
    async take() {
      const mine = ++this.asked;
      const f = await api('/fleet');
      if (mine < this.applied) return this.last.f;
      this.applied = mine;
      const t = Date.now();
      this.bounds = f.latenessBounds;
      const inst = ((f.fleet && f.fleet.instances) || []).filter((i) => i.at).map((i) => ({
        k: `${i.instance}@${i.startedAt}`, at: i.at, p: i.pushed, d: i.delivered, l: i.lateness || [],
      }));
      this.samples.push({t, inst});
      while (this.samples.length && this.samples[0].t < t - WINDOW_MS) this.samples.shift();
      try {
        sessionStorage.setItem(SAMPLES_KEY, JSON.stringify({samples: this.samples, bounds: this.bounds}));
      } catch { /* full: the plots still work for this page */ }
      this.last = {t, f};
      $('#instance').textContent = `answered by ${f.health.instance}`;
      // a change of health matters enough to be said, on whatever view is open (once)
      if (this.status && f.health.status !== this.status) announce(`This instance's health is now ${f.health.status}.`);
      this.status = f.health.status;
      this.listeners.forEach((fn) => fn());
      return f;
    },
    // Jobs per second in BIN_MS bins over the window. Each instance's change between two of
    // its heartbeats is spread over the bins that interval covers, in proportion; a bin's rate
    // is what it got over the time it was covered (per instance, then summed), so sampling
    // that does not line up with the bins neither zigzags nor dips.
    throughput() {
      const nb = WINDOW_MS / BIN_MS;
      const start = Math.floor(Date.now() / BIN_MS) * BIN_MS - nb * BIN_MS; // the current bin is unfinished
      const pushed = new Array(nb).fill(null);
      const delivered = new Array(nb).fill(null);
      const per = new Map(); // instance -> {p, d, ms}: per bin, counts and time covered
      const lastBy = new Map();
      for (const smp of this.samples) {
        for (const i of smp.inst) {
          const prev = lastBy.get(i.k);
          if (prev && i.at > prev.at) {
            let acc = per.get(i.k);
            if (!acc) per.set(i.k, acc = {p: new Array(nb).fill(0), d: new Array(nb).fill(0), ms: new Array(nb).fill(0)});
            const span = i.at - prev.at;
            for (let b = Math.max(0, Math.floor((prev.at - start) / BIN_MS)); b < nb && start + b * BIN_MS < i.at; b++) {
              const lo = Math.max(prev.at, start + b * BIN_MS);
              const hi = Math.min(i.at, start + (b + 1) * BIN_MS);
              if (hi <= lo) continue;
              acc.p[b] += (i.p - prev.p) * (hi - lo) / span;
              acc.d[b] += (i.d - prev.d) * (hi - lo) / span;
              acc.ms[b] += hi - lo;
            }
          }
          if (!prev || i.at > prev.at) lastBy.set(i.k, i);
        }
      }
      for (const acc of per.values()) {
        for (let b = 0; b < nb; b++) {
          if (acc.ms[b] < BIN_MS / 5) continue; // too little of the bin seen to say
          pushed[b] = (pushed[b] || 0) + acc.p[b] * 1000 / acc.ms[b];
          delivered[b] = (delivered[b] || 0) + acc.d[b] * 1000 / acc.ms[b];
        }
      }
      return {start, pushed, delivered};
    },
    // The lateness histogram over the window (or since each instance started, when the window
    // saw no delivery yet).
    lateness() {
      if (!this.samples.length) return null;
      const last = this.samples[this.samples.length - 1];
      const first = new Map();
      for (const smp of this.samples) for (const i of smp.inst) if (!first.has(i.k)) first.set(i.k, i);
      const total = [];
      const windowed = [];
      for (const i of last.inst) {
        const f = first.get(i.k);
        i.l.forEach((v, b) => {
          total[b] = (total[b] || 0) + v;
          windowed[b] = (windowed[b] || 0) + v - (f && f !== i ? f.l[b] || 0 : v);
        });
      }
      const sum = (a) => a.reduce((x, y) => x + (y || 0), 0);
      const span = Date.now() - this.samples[0].t;
      return sum(windowed) > 0 ? {counts: windowed, label: `last ${fmtDur(span)}`}
        : {counts: total, label: 'since each instance started'};
    },
  };

  // ---- plots (SVG drawn here) -----------------------------------------------------------------

  function niceMax(v) {
    if (!(v > 0)) return 1;
    const p = 10 ** Math.floor(Math.log10(v));
    return [1, 2, 2.5, 5, 10].map((m) => m * p).find((m) => m >= v);
  }

  // Drawn at the box's own width (560 before it is laid out), so the axis text stays at its
  // font size on a narrow screen instead of shrinking with the picture.
  let W = 560;
  const H = 170;
  const PAD = {l: 44, r: 10, t: 10, b: 24};

  // A series' look besides its colour: pushed is a solid line with filled circles, delivered
  // a dashed line with hollow squares (markers once a minute, staggered by half a minute so
  // they never sit on each other).
  const MARK_EVERY = 60e3 / BIN_MS;
  function marker(cls, cx, cy) {
    return cls === 'pushed' ? s('circle', {cx, cy, r: 3.2, class: `marker ${cls}`})
      : s('rect', {x: cx - 3, y: cy - 3, width: 6, height: 6, class: `marker ${cls}`});
  }
  // The legend's sample of a series: its line and its marker.
  const seriesKey = (cls) => s('svg', {viewBox: '0 0 30 10', width: 30, height: 10, 'aria-hidden': 'true', focusable: 'false'},
    s('path', {d: 'M1,5L29,5', class: `series ${cls}`}), marker(cls, 15, 5));
  // ... and of a lateness class: its fill (solid, hatched, cross-hatched).
  const classKey = (cls) => s('svg', {viewBox: '0 0 14 12', width: 14, height: 12, 'aria-hidden': 'true', focusable: 'false'},
    s('rect', {x: 1, y: 1, width: 12, height: 10, class: `swatch ${cls}`, fill: HATCH[cls]}));

  function throughputSvg(tp, label) {
    const n = tp.pushed.length;
    const max = niceMax(Math.max(0, ...tp.pushed.filter((v) => v != null), ...tp.delivered.filter((v) => v != null)));
    const x = (b) => PAD.l + (b + 0.5) * (W - PAD.l - PAD.r) / n;
    const y = (v) => H - PAD.b - v / max * (H - PAD.t - PAD.b);
    const line = (vals, cls, offset) => {
      let d = '';
      let pen = false;
      const marks = [];
      vals.forEach((v, b) => {
        if (v == null) { pen = false; return; }
        d += `${pen ? 'L' : 'M'}${x(b).toFixed(1)},${y(v).toFixed(1)}`;
        pen = true;
        if ((b + offset) % MARK_EVERY === 0) marks.push(marker(cls, x(b), y(v)));
      });
      return [s('path', {d, class: `series ${cls}`}), marks];
    };
    const grid = [0, 0.5, 1].map((f) => [
      s('line', {x1: PAD.l, x2: W - PAD.r, y1: y(max * f), y2: y(max * f), class: f ? 'gridline' : 'baseline'}),
      s('text', {x: PAD.l - 6, y: y(max * f) + 4, class: 'axis', 'text-anchor': 'end'}, fmtAxis(max * f))]);
    const ticks = [0, n / 2, n].map((b) => s('text', {
      x: PAD.l + b * (W - PAD.l - PAD.r) / n, y: H - 6, class: 'axis',
      'text-anchor': b === 0 ? 'start' : b === n ? 'end' : 'middle',
    }, b === n ? 'now' : `−${Math.round((n - b) * BIN_MS / 60e3)} min`));
    return s('svg', {viewBox: `0 0 ${W} ${H}`, class: 'plot', role: 'img', 'aria-label': label},
      grid, ticks, line(tp.pushed, 'pushed', 0), line(tp.delivered, 'delivered', MARK_EVERY / 2));
  }

  // The fill of a lateness class that is not solid: a hatching pattern of index.html (as an
  // attribute: console.css names nothing by url()).
  const HATCH = {warn: 'url(#hatch-warn)', bad: 'url(#hatch-bad)'};
  // A lateness bucket's class: ≤ 100 ms, ≤ 1 s, later.
  const LATE_CLASSES = [['good', '≤ 100 ms'], ['warn', '100 ms – 1 s'], ['bad', '> 1 s']];
  const lateClass = (bounds, b) => (b < bounds.length && bounds[b] <= 0.1 ? 'good' : b < bounds.length && bounds[b] <= 1 ? 'warn' : 'bad');
  // A bucket's range in words: "≤ 100µs", "1ms – 2.5ms", "> 10s".
  function bucketLabel(bounds, b) {
    if (b >= bounds.length) return `> ${fmtSecs(bounds[bounds.length - 1])}`;
    return b ? `${fmtSecs(bounds[b - 1])} – ${fmtSecs(bounds[b])}` : `≤ ${fmtSecs(bounds[b])}`;
  }

  function latenessSvg(hist, bounds, label) {
    const counts = hist.counts;
    const n = counts.length;
    const max = niceMax(Math.max(...counts.map((v) => v || 0)));
    const bw = (W - PAD.l - PAD.r) / n;
    const y = (v) => H - PAD.b - v / max * (H - PAD.t - PAD.b);
    const tick = (b) => (b >= bounds.length ? `>${fmtSecs(bounds[bounds.length - 1])}` : `≤${fmtSecs(bounds[b])}`);
    const bars = counts.map((v, b) => s('rect', {
      x: PAD.l + b * bw + 1, width: Math.max(1, bw - 2), y: y(v || 0), height: Math.max(0, H - PAD.b - y(v || 0)),
      class: `bar ${lateClass(bounds, b)}`, fill: HATCH[lateClass(bounds, b)],
    }, s('title', {}, `${bucketLabel(bounds, b)}: ${fmtInt(v || 0)} deliveries`)));
    const grid = [0, 0.5, 1].map((f) => [
      s('line', {x1: PAD.l, x2: W - PAD.r, y1: y(max * f), y2: y(max * f), class: f ? 'gridline' : 'baseline'}),
      s('text', {x: PAD.l - 6, y: y(max * f) + 4, class: 'axis', 'text-anchor': 'end'}, fmtAxis(max * f))]);
    const step = W < 420 ? 5 : 3; // room for "≤100ms" under every step-th bar
    const ticks = counts.map((_, b) => ((b % step === 0 && b < n - 2) || b === n - 1
      ? s('text', {x: PAD.l + (b + 0.5) * bw, y: H - 6, class: 'axis', 'text-anchor': 'middle'}, tick(b))
      : null));
    return s('svg', {viewBox: `0 0 ${W} ${H}`, class: 'plot', role: 'img', 'aria-label': label}, grid, bars, ticks);
  }

  function fmtSecs(sec) {
    return sec < 1 ? `${+(sec * 1000).toPrecision(3)}ms` : `${sec}s`;
  }

  // The p-th percentile's bucket bound (an upper estimate).
  function percentile(counts, bounds, p) {
    const total = counts.reduce((a, b) => a + (b || 0), 0);
    if (!total) return null;
    let acc = 0;
    for (let b = 0; b < counts.length; b++) {
      acc += counts[b] || 0;
      if (acc >= p * total) return b < bounds.length ? `≤ ${fmtSecs(bounds[b])}` : `> ${fmtSecs(bounds[bounds.length - 1])}`;
    }
    return null;
  }

  // Throughput per minute (the mean of the minute's bins that have a value), newest last:
  // the rows of the plot's data table.
  function throughputByMinute(tp) {
    const rows = [];
    const n = tp.pushed.length;
    for (let m = 0; m * MARK_EVERY < n; m++) {
      const mean = (vals) => {
        const got = vals.slice(m * MARK_EVERY, (m + 1) * MARK_EVERY).filter((v) => v != null);
        return got.length ? got.reduce((a, b) => a + b, 0) / got.length : null;
      };
      const p = mean(tp.pushed);
      const d = mean(tp.delivered);
      if (p == null && d == null) continue;
      const ago = n / MARK_EVERY - m;
      rows.push([`${ago - 1}–${ago} min ago`, fmtRate(p), fmtRate(d)]);
    }
    return rows;
  }

  // A small data table (the plots' text alternative), its header row first.
  function dataTable(caption, head, rows, empty) {
    if (!rows.length) return h('p', {class: 'muted'}, empty);
    return scroller(caption, h('table', {class: 'grid'}, h('caption', {class: 'vh'}, caption),
      h('thead', {}, h('tr', {}, head.map((c, i) => th(c, {class: i ? 'num' : null})))),
      h('tbody', {}, rows.map((r) => h('tr', {}, r.map((c, i) => (i ? h('td', {class: 'num'}, c) : h('th', {scope: 'row'}, c))))))));
  }

  // The plots beside the topics and the fleet: each a figure with a legend that shows its
  // patterns, a summary in words and a data table (closed by default) as its text alternative.
  // Redrawn with every sample; the summary is not a live region (it changes every 2 s).
  function plotsPanel() {
    const tp = h('div', {class: 'plotbox', 'data-plot': 'throughput'});
    const lt = h('div', {class: 'plotbox', 'data-plot': 'lateness'});
    const tpNote = h('figcaption', {class: 'summary', 'data-summary': 'throughput'});
    const ltNote = h('figcaption', {class: 'summary', 'data-summary': 'lateness'});
    const tpData = h('div');
    const ltData = h('div');
    const draw = () => {
      W = Math.max(280, Math.round(tp.clientWidth)) || 560;
      const t = sampler.throughput();
      const vals = (a) => a.filter((v) => v != null);
      const lastP = vals(t.pushed).pop();
      const lastD = vals(t.delivered).pop();
      tpNote.textContent = lastP == null ? 'Collecting samples: the plot fills as they come (one every 2 s).'
        : `Now ${fmtRate(lastP)} pushed/s and ${fmtRate(lastD)} delivered/s; the last 10 minutes' peak ` +
          `${fmtRate(Math.max(...vals(t.pushed)))} pushed/s and ${fmtRate(Math.max(0, ...vals(t.delivered)))} delivered/s.`;
      tp.replaceChildren(throughputSvg(t, 'Line chart of jobs pushed (solid line, circles) and delivered (dashed line, squares) per second, over the last 10 minutes'));
      const byMinute = throughputByMinute(t);
      refill(tpData, JSON.stringify(byMinute), () => dataTable('Jobs per second by minute',
        ['minute', 'pushed/s', 'delivered/s'], byMinute, 'No samples yet.'));
      const hist = sampler.lateness();
      if (hist && sampler.bounds) {
        const bounds = sampler.bounds;
        lt.replaceChildren(latenessSvg(hist, bounds, `Bar chart of deliveries by lateness, ${hist.label}: ` +
          'solid bars up to 100 ms, hatched up to 1 s, cross-hatched later'));
        const total = hist.counts.reduce((a, b) => a + (b || 0), 0);
        const p50 = percentile(hist.counts, bounds, 0.5);
        const p99 = percentile(hist.counts, bounds, 0.99);
        ltNote.textContent = p50 ? `${fmtInt(total)} ${total === 1 ? 'delivery' : 'deliveries'}, ${hist.label}: p50 ${p50}, p99 ${p99}.`
          : `${hist.label}: no delivery yet.`;
        const rows = hist.counts.map((v, b) => [bucketLabel(bounds, b), fmtInt(v || 0),
          total ? `${(100 * (v || 0) / total).toFixed(1)} %` : '—']);
        refill(ltData, JSON.stringify(rows), () => dataTable(`Deliveries by lateness, ${hist.label}`,
          ['lateness', 'deliveries', 'share'], rows, ''));
      } else {
        ltNote.textContent = 'Waiting for the first sample.';
      }
    };
    const card = (id, title, legend, box, note, data) => h('section', {class: 'card', 'aria-labelledby': id},
      h('h2', {id}, title), h('div', {class: 'legends'}, legend),
      h('figure', {class: 'plotfig'}, box, note),
      h('details', {class: 'data'}, h('summary', {}, 'Data table'), data));
    const panel = h('div', {class: 'columns plots'},
      card('plot-throughput', 'Throughput, jobs per second', [
        h('span', {class: 'legend', 'data-legend': 'pushed'}, seriesKey('pushed'), 'pushed'),
        h('span', {class: 'legend', 'data-legend': 'delivered'}, seriesKey('delivered'), 'delivered')], tp, tpNote, tpData),
      card('plot-lateness', 'Lateness, due → first delivery',
        LATE_CLASSES.map(([cls, text]) => h('span', {class: 'legend', 'data-legend': cls}, classKey(cls), text)), lt, ltNote, ltData));
    sampler.listeners.clear(); // one panel on the page at a time
    sampler.listeners.add(draw);
    draw();
    return panel;
  }

  // ---- start ------------------------------------------------------------------------------

  function start() {
    const tokenInput = $('[name="token"]');
    tokenInput.value = sessionStorage.getItem(TOKEN_KEY) || '';
    tokenInput.addEventListener('change', () => {
      if (tokenInput.value) sessionStorage.setItem(TOKEN_KEY, tokenInput.value);
      else sessionStorage.removeItem(TOKEN_KEY);
      route();
    });
    $('#lookup').addEventListener('submit', (ev) => {
      ev.preventDefault();
      const id = ev.target.job.value.trim();
      if (id) go(`#/job/${id}`);
    });
    $('.error-close').addEventListener('click', clearError);
    $('.skip').addEventListener('click', (ev) => {
      ev.preventDefault(); // #view is not a route
      focusView();
    });
    const dlg = $('#confirm');
    $('[data-action="cancel"]', dlg).addEventListener('click', () => dlg.close('cancel'));
    $('[data-action="confirm"]', dlg).addEventListener('click', () => dlg.close('ok'));
    dlg.addEventListener('close', onDialogClose);
    // "Pause updates": every refresh, the plots' sampling and the ticking times stop until
    // pressed again (WCAG 2.2.2: what updates by itself can be paused)
    const liveButton = $('#live');
    liveButton.addEventListener('click', () => {
      updatesPaused = !updatesPaused;
      liveButton.setAttribute('aria-pressed', String(updatesPaused));
      announce(updatesPaused ? 'Automatic updates paused.' : 'Automatic updates resumed.');
      if (!updatesPaused) sample();
    });
    // whatever slips through is shown too, not left for the JS console
    window.addEventListener('unhandledrejection', (ev) => {
      ev.preventDefault();
      showError(ev.reason);
    });
    window.addEventListener('hashchange', route);
    // relative times and lease countdowns stay current
    setInterval(() => {
      if (updatesPaused) return;
      for (const t of document.querySelectorAll('time[data-at]')) t.textContent = fmtRel(Number(t.dataset.at));
      for (const t of document.querySelectorAll('[data-until]')) t.textContent = fmtDur(Math.max(0, Number(t.dataset.until) - Date.now()));
      $('#clock').textContent = fmtTime(Date.now());
    }, 1000);
    sampler.load();
    function sample() {
      if (document.visibilityState !== 'visible' || updatesPaused) return;
      sampler.take().catch((e) => {
        if ($('#error').hidden) showError(e);
      });
    }
    setInterval(sample, 2000);
    sample();
    if (!location.hash) location.replace('#/topics');
    else route();
  }

  start();
})();
