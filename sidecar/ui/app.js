// The management UI's script: four views over the engine's own /_local/api (traces, spend, pricing and config,
// health). Plain browser JavaScript, no build step. Everything a caller controls (models, users, errors) is put
// on the page as text, never as HTML.

const API = 'api';
const REFRESH_MS = { traces: 2000, health: 3000 };
const SPAN_FIELDS = [
  ['timestamp', 'Started'],
  ['trace_id', 'Trace id'],
  ['span_id', 'Span id'],
  ['parent_span_id', 'Parent span id'],
  ['request_id', 'Request id'],
  ['name', 'Name'],
  ['model', 'Model'],
  ['response_model', 'Response model'],
  ['provider', 'Provider'],
  ['route', 'Route'],
  ['user_id', 'User'],
  ['project_id', 'Project'],
  ['input_tokens', 'Input tokens'],
  ['output_tokens', 'Output tokens'],
  ['cached_tokens', 'Cached tokens'],
  ['cache_write_tokens', 'Cache write tokens'],
  ['reasoning_tokens', 'Reasoning tokens'],
  ['total_tokens', 'Total tokens'],
  ['cost_usd', 'Cost USD'],
  ['priced', 'Priced'],
  ['duration_ms', 'Duration ms'],
  ['status', 'Status'],
  ['status_code', 'Upstream status'],
  ['error', 'Error'],
  ['tool_calls', 'Tool calls'],
];
/** How a field that is not a plain value reads in the detail panel. */
const SPAN_FIELD_TEXT = {
  // Each tool call the answer asked for: its name and the start of its arguments' SHA-256 (ADR 1603).
  tool_calls: (calls) => (calls.length === 0 ? 'none' : calls.map((call) => `${call.name} ${call.arguments_sha256.slice(0, 12)}`).join(', ')),
};
const PALETTE = ['#0a58ca', '#d63384', '#198754', '#fd7e14', '#6f42c1', '#20c997', '#6c757d'];

// ---- small helpers ----

/** An element with attributes (`text` sets its text, `on<event>` a listener) and children. */
function el(tag, props = {}, ...children) {
  const node = document.createElement(tag);
  for (const [key, value] of Object.entries(props)) {
    if (value === undefined || value === null || value === false) continue;
    if (key === 'text') node.textContent = String(value);
    else if (key === 'class') node.className = value;
    else if (key.startsWith('on')) node.addEventListener(key.slice(2), value);
    else node.setAttribute(key, value === true ? '' : String(value));
  }
  for (const child of children) if (child !== null && child !== undefined) node.append(child);
  return node;
}

const $ = (selector, root = document) => root.querySelector(selector);

function formatUsd(value) {
  if (typeof value !== 'number') return '';
  return value.toLocaleString('en-US', { maximumFractionDigits: 10, useGrouping: false });
}

function formatCount(value) {
  return typeof value === 'number' ? value.toLocaleString('en-US') : '';
}

function formatTime(iso) {
  const time = new Date(iso);
  const today = new Date().toDateString() === time.toDateString();
  return today ? time.toLocaleTimeString() : time.toLocaleString();
}

function statusClass(status) {
  if (status === 'ok') return 'status-ok';
  if (status === 'client_aborted' || status === 'rejected') return 'status-warn';
  return 'status-bad';
}

class ApiError extends Error {
  constructor(status, code, message) {
    super(message);
    this.status = status;
    this.code = code;
  }
}

/** A JSON call to the management API; a refusal throws ApiError with the API's code and message. */
async function api(path, init = {}) {
  let response;
  try {
    response = await fetch(`${API}/${path}`, { cache: 'no-store', ...init });
  } catch (error) {
    setConnection(false, `The proxy does not answer (${error.message}).`);
    throw error;
  }
  setConnection(true);
  const body = await response.json().catch(() => null);
  if (!response.ok) {
    const error = body && body.error ? body.error : {};
    throw new ApiError(response.status, error.code ?? 'http_error', error.message ?? `HTTP ${response.status}`);
  }
  return body;
}

function postJson(path, body) {
  return api(path, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify(body) });
}

function setConnection(ok, message = '') {
  const node = $('#connection');
  node.textContent = ok ? '' : message;
  node.classList.toggle('bad', !ok);
}

/** Runs `task` now and every `ms` while `active()` holds; calls never overlap. */
function poll(task, ms, active) {
  let timer = null;
  const run = async () => {
    timer = null;
    try {
      await task();
    } catch {
      // shown by api(); try again on the next round
    }
    if (active()) timer = setTimeout(run, ms);
  };
  return {
    start() {
      if (timer === null) void run();
    },
    stop() {
      if (timer !== null) clearTimeout(timer);
      timer = null;
    },
  };
}

// ---- tabs (WAI-ARIA tabs pattern: arrows, Home and End move between tabs) ----

const views = {};
let current = null;

function selectTab(name, { focus = false } = {}) {
  if (!views[name]) name = 'traces';
  for (const tab of document.querySelectorAll('[role="tab"]')) {
    const selected = tab.id === `tab-${name}`;
    tab.setAttribute('aria-selected', String(selected));
    tab.tabIndex = selected ? 0 : -1;
    if (selected && focus) tab.focus();
  }
  for (const panel of document.querySelectorAll('[role="tabpanel"]')) panel.hidden = panel.id !== `view-${name}`;
  if (current && current !== name) views[current].hide();
  current = name;
  if (location.hash !== `#${name}`) history.replaceState(null, '', `#${name}`);
  views[name].show();
}

function setupTabs() {
  const tabs = [...document.querySelectorAll('[role="tab"]')];
  const names = tabs.map((tab) => tab.id.slice('tab-'.length));
  tabs.forEach((tab, i) => {
    tab.addEventListener('click', () => selectTab(names[i]));
    tab.addEventListener('keydown', (event) => {
      const next = { ArrowRight: i + 1, ArrowLeft: i - 1, Home: 0, End: tabs.length - 1 }[event.key];
      if (next === undefined) return;
      event.preventDefault();
      selectTab(names[(next + tabs.length) % tabs.length], { focus: true });
    });
  });
  addEventListener('hashchange', () => selectTab(location.hash.slice(1)));
}

// ---- traces ----

function tracesView() {
  const form = $('#trace-filters');
  const body = $('#traces tbody');
  let spans = [];
  const poller = poll(load, REFRESH_MS.traces, () => current === 'traces' && form.elements.live.checked);

  async function load() {
    const answer = await api('traces?limit=200');
    spans = answer.spans;
    render();
  }

  function render() {
    const model = form.elements.model.value.trim().toLowerCase();
    const user = form.elements.user.value.trim().toLowerCase();
    const status = form.elements.status.value;
    const shown = spans.filter(
      (span) => (!model || span.model.toLowerCase().includes(model)) && (!user || (span.user_id ?? '').toLowerCase().includes(user)) && (!status || span.status === status),
    );
    body.replaceChildren(
      ...shown.map((span) =>
        el(
          'tr',
          { 'data-span-id': span.span_id },
          el(
            'td',
            {},
            el('button', {
              type: 'button',
              class: 'link',
              text: formatTime(span.timestamp),
              'aria-label': `Details of the ${span.model} call at ${formatTime(span.timestamp)}`,
              onclick: () => showDetail(span),
            }),
          ),
          el('td', { text: span.model }),
          el('td', { text: span.provider }),
          el('td', { text: span.route }),
          el('td', { text: span.user_id ?? '—' }),
          el('td', { class: 'num', text: `${formatCount(span.input_tokens)} / ${formatCount(span.output_tokens)}` }),
          el('td', { class: 'num', text: span.priced ? formatUsd(span.cost_usd) : `${formatUsd(span.cost_usd)} (unpriced)` }),
          el('td', { class: 'num', text: `${Math.round(span.duration_ms)} ms` }),
          el('td', { class: statusClass(span.status), text: span.status }),
        ),
      ),
    );
    $('#trace-models').replaceChildren(...[...new Set(spans.map((span) => span.model))].map((value) => el('option', { value })));
    $('#traces-summary').textContent =
      spans.length === 0 ? 'No calls yet: send one through the proxy and it appears here.' : `${shown.length} of the ${spans.length} most recent calls shown.`;
  }

  function showDetail(span) {
    const panel = $('#span-detail');
    $('dl', panel).replaceChildren(
      ...SPAN_FIELDS.flatMap(([key, label]) => [
        el('dt', { text: label }),
        el('dd', { 'data-field': key, text: span[key] === null || span[key] === undefined ? '—' : (SPAN_FIELD_TEXT[key] ?? String)(span[key]) }),
      ]),
    );
    panel.hidden = false;
    $('#span-detail-title').focus();
    showTrail(span);
  }

  /** The call's causal trail (docs/provenance.md): what the caller's process tree did after the answer, as text. */
  async function showTrail(span) {
    const traceId = span.trace_id;
    const status = $('#span-trail-status');
    const tree = $('#span-trail');
    tree.textContent = '';
    tree.dataset.traceId = traceId;
    // Only a caller Tetragon named has a trail: nothing to ask for the others.
    if (!span.process || span.process.attribution !== 'tetragon') {
      status.textContent = 'No trail: the process that made this call was not named by Tetragon (provenance).';
      return;
    }
    status.textContent = 'Loading the trail…';
    let lines;
    try {
      lines = trailLines(await api(`trail/${encodeURIComponent(traceId)}`));
    } catch (error) {
      if (tree.dataset.traceId !== traceId) return;
      status.textContent =
        error instanceof ApiError && error.code === 'trail_not_found'
          ? 'No trail for this call: its caller was not named by Tetragon, the trail was forgotten (memory only), or provenance.trail is off.'
          : `The trail could not be read: ${error.message}`;
      return;
    }
    // Another call's details may have been opened meanwhile.
    if (tree.dataset.traceId !== traceId) return;
    status.textContent = '';
    tree.textContent = lines.join('\n');
  }

  $('#span-detail-close').addEventListener('click', () => {
    $('#span-detail').hidden = true;
    body.querySelector('button')?.focus();
  });
  form.addEventListener('input', () => {
    render();
    if (form.elements.live.checked) poller.start();
  });
  form.addEventListener('submit', (event) => event.preventDefault());
  return { show: () => poller.start(), hide: () => poller.stop() };
}

/** The trail as indented lines: call, caller, tool calls, then each action, times after the answer. */
function trailLines(trail) {
  const seconds = (endedMs, iso) => `+${((Date.parse(iso) - endedMs) / 1000).toFixed(3)}s`;
  const command = (binary, args) => (args && args.length > 0 ? args.map((a) => (/\s/.test(a) || a === '' ? `"${a}"` : a)).join(' ') : binary);
  const what = (action) => {
    if (action.kind === 'exec') return command(action.binary, action.arguments);
    if (action.kind === 'connect') return `${action.binary} -> ${action.destination}`;
    if (action.kind === 'file') return `${action.binary} wrote ${action.path}`;
    return `${action.binary} exit code ${action.exit_code}${action.signal ? ` (${action.signal})` : ''}`;
  };
  const actions = (list, endedMs, indent) =>
    list.flatMap((a) => [`${indent}${seconds(endedMs, a.time)} ${a.kind} pid ${a.pid ?? '?'} ${what(a)}`, ...actions(a.children, endedMs, `${indent}  `)]);
  return trail.calls.flatMap((call) => {
    const endedMs = Date.parse(call.ended);
    return [
      `call ${call.span_id}: ${call.model} on ${call.route}, answered ${call.ended}`,
      `  caller pid ${call.process.pid ?? '?'} ${command(call.process.executable_path ?? '?', call.process.command_args)}`,
      `  answer: ${call.tool_calls.length} tool call(s)`,
      ...call.tool_calls.map((tool) => `    tool call ${tool.name}${tool.id ? ` ${tool.id}` : ''}`),
      ...(call.actions.length === 0 ? [`  then: nothing seen within ${trail.window_ms / 1000}s`] : ['  then:', ...actions(call.actions, endedMs, '    ')]),
    ];
  });
}

// ---- spend ----

function spendView() {
  const form = $('#spend-controls');
  let chart = null;

  async function load() {
    const since = form.elements.since.value;
    const groupBy = form.elements.groupBy.value;
    const bucket = form.elements.bucket.value;
    const [totals, series] = await Promise.all([api(`spend?since=${since}&groupBy=${groupBy}`), api(`spend?since=${since}&groupBy=${groupBy}&bucket=${bucket}`)]);
    renderTotals(totals.rows, groupBy);
    renderChart(series.rows, totals.rows, { since, groupBy, bucket });
  }

  function renderTotals(rows, groupBy) {
    const sum = (key) => rows.reduce((total, row) => total + row[key], 0);
    const card = (label, value) => el('div', { class: 'card' }, el('div', { text: label }), el('div', { class: 'big', text: value }));
    $('#spend-totals').replaceChildren(
      card('Total cost (USD)', formatUsd(sum('cost_usd'))),
      card('Calls', formatCount(sum('calls'))),
      card('Tokens', formatCount(sum('total_tokens'))),
    );
    $('#spend-key-header').textContent = groupBy[0].toUpperCase() + groupBy.slice(1);
    $('#spend-table tbody').replaceChildren(
      ...rows.map((row) =>
        el(
          'tr',
          {},
          el('th', { scope: 'row', text: row.key ?? '(none)' }),
          el('td', { class: 'num', text: formatUsd(row.cost_usd) }),
          el('td', { class: 'num', text: formatCount(row.calls) }),
          el('td', { class: 'num', text: formatCount(row.total_tokens) }),
        ),
      ),
    );
  }

  function renderChart(rows, totals, { since, groupBy, bucket }) {
    const container = $('#spend-chart');
    chart?.destroy();
    chart = null;
    container.replaceChildren();
    const top = totals.slice(0, PALETTE.length - 1).map((row) => row.key ?? '(none)');
    const keys = totals.length > top.length ? [...top, 'other'] : top;
    const buckets = bucketsOf(since, bucket);
    const span = { '24h': 'the last 24 hours', '7d': 'the last 7 days', '30d': 'the last 30 days' }[since];
    const caption = `Cost in USD per ${bucket} by ${groupBy}, ${span}.`;
    $('#spend-caption').textContent = rows.length === 0 ? `${caption} No calls in this window.` : `${caption} The table below has the totals.`;
    container.setAttribute('aria-label', `${caption} ${totals.map((row) => `${row.key ?? '(none)'}: ${formatUsd(row.cost_usd)} USD`).join('; ')}`);
    if (rows.length === 0 || !window.uPlot) return;
    const index = new Map(buckets.map((b, i) => [b, i]));
    const series = keys.map(() => buckets.map(() => 0));
    for (const row of rows) {
      const name = row.key ?? '(none)';
      const k = top.includes(name) ? top.indexOf(name) : keys.length - 1;
      const i = index.get(Date.parse(row.bucket));
      if (i !== undefined) series[k][i] += row.cost_usd;
    }
    const x = buckets.map((b) => b / 1000);
    chart = new window.uPlot(
      {
        width: Math.max(320, container.clientWidth || 800),
        height: 300,
        scales: { x: { time: true } },
        axes: [{}, { label: 'USD', size: 80, values: (_u, ticks) => ticks.map((v) => formatUsd(v)) }],
        series: [
          {},
          ...keys.map((key, i) => ({
            label: key,
            stroke: PALETTE[i % PALETTE.length],
            width: 2,
            points: { show: true, size: 6 },
            value: (_u, v) => (v === null ? '' : formatUsd(v)),
          })),
        ],
      },
      [x, ...series],
      container,
    );
  }

  /** Every hour or day of the window, oldest first (ms since the epoch, UTC), so quiet ones show as zero. */
  function bucketsOf(since, bucket) {
    const step = bucket === 'hour' ? 3_600_000 : 86_400_000;
    const span = { '24h': 86_400_000, '7d': 7 * 86_400_000, '30d': 30 * 86_400_000 }[since];
    const now = Date.now();
    const out = [];
    for (let t = Math.floor((now - span) / step) * step; t <= now; t += step) out.push(t);
    return out;
  }

  form.addEventListener('change', () => void load().catch(() => undefined));
  addEventListener('resize', () => {
    if (current === 'spend') void load().catch(() => undefined);
  });
  return { show: () => void load().catch(() => undefined), hide: () => undefined };
}

// ---- pricing and config ----

function pricingView() {
  const priceForm = $('#price-form');
  const cacheForm = $('#cache-form');
  let config = null;

  async function load() {
    const answer = await api('config');
    config = answer.config;
    $('#config-revision').textContent = `Config revision ${answer.revision}. Changes apply to the next call and last until the proxy restarts.`;
    const overrides = new Set(config.pricing.overrides.map((entry) => `${entry.provider}/${entry.model.toLowerCase()}`));
    const models = [...config.pricing.models].sort((a, b) => a.provider.localeCompare(b.provider) || a.model.localeCompare(b.model));
    $('#prices tbody').replaceChildren(
      ...models.map((entry) =>
        el(
          'tr',
          { 'data-model': entry.model },
          el('td', { text: entry.provider }),
          el('th', { scope: 'row', text: entry.model }),
          el('td', { class: 'num', text: formatUsd(entry.input_per_million) }),
          el('td', { class: 'num', text: entry.cached_input_per_million === undefined ? '—' : formatUsd(entry.cached_input_per_million) }),
          el('td', { class: 'num', text: formatUsd(entry.output_per_million) }),
          el('td', { text: overrides.has(`${entry.provider}/${entry.model.toLowerCase()}`) ? 'override' : 'built-in' }),
          el('td', {}, el('button', { type: 'button', text: 'Edit', 'aria-label': `Edit the price of ${entry.model}`, onclick: () => editPrice(entry) })),
        ),
      ),
    );
    $('#price-models').replaceChildren(...models.map((entry) => el('option', { value: entry.model })));
    // Prices may also be set for the providers of routes added in the config.
    const providers = [...new Set(['openai', 'anthropic', 'google', 'local', ...answer.routes.map((route) => route.provider)])];
    const select = priceForm.elements.provider;
    const chosen = select.value;
    select.replaceChildren(...providers.map((provider) => el('option', { text: provider })));
    select.value = providers.includes(chosen) ? chosen : 'openai';
    $('#routes tbody').replaceChildren(
      ...answer.routes.map((route) =>
        el(
          'tr',
          { 'data-route': route.name },
          el('th', { scope: 'row', text: route.name }),
          el('td', { text: route.format }),
          el('td', { text: route.provider }),
          el('td', { text: route.baseUrl }),
          el('td', { text: route.credential }),
          el('td', { text: route.configured ? 'config' : 'built-in' }),
        ),
      ),
    );
    fillCache();
  }

  function editPrice(entry) {
    clearErrors(priceForm);
    priceForm.elements.provider.value = entry.provider;
    priceForm.elements.model.value = entry.model;
    priceForm.elements.input_per_million.value = String(entry.input_per_million);
    priceForm.elements.output_per_million.value = String(entry.output_per_million);
    priceForm.elements.cached_input_per_million.value = entry.cached_input_per_million === undefined ? '' : String(entry.cached_input_per_million);
    priceForm.elements.input_per_million.focus();
  }

  function fillCache() {
    const settings = config?.cache[cacheForm.elements.provider.value];
    if (!settings) return;
    cacheForm.elements.ttl_seconds.value = String(settings.ttl_seconds);
    cacheForm.elements.cached_multiplier.value = String(settings.cached_multiplier);
  }

  /** What the user typed: a number when it is one, else the text itself, so the API names what is wrong with it. */
  function typed(input) {
    const text = input.value.trim();
    if (text === '') return undefined;
    const number = Number(text);
    return Number.isFinite(number) ? number : text;
  }

  function clearErrors(form) {
    for (const node of form.querySelectorAll('.error')) node.textContent = '';
    for (const input of form.querySelectorAll('[aria-invalid]')) input.removeAttribute('aria-invalid');
    $('.outcome', form).textContent = '';
  }

  /** Puts the API's message next to the field it names (`pricing.models[0].output_per_million must …`). */
  function showError(form, error) {
    const match = /^(?:pricing\.models\[0\]|cache\.[a-z]+)\.([a-z_]+)\b/.exec(error.message);
    const input = match ? form.elements[match[1]] : null;
    if (input && input.getAttribute('aria-describedby')) {
      input.setAttribute('aria-invalid', 'true');
      document.getElementById(input.getAttribute('aria-describedby')).textContent = error.message;
      input.focus();
    } else {
      $('.outcome', form).textContent = `Not saved: ${error.message}`;
    }
  }

  priceForm.addEventListener('submit', async (event) => {
    event.preventDefault();
    clearErrors(priceForm);
    const provider = priceForm.elements.provider.value;
    const model = priceForm.elements.model.value.trim();
    // Keep the model's other prices (cache writes, the long-context tier): an override replaces them all.
    const existing = config?.pricing.models.find((entry) => entry.provider === provider && entry.model.toLowerCase() === model.toLowerCase());
    const entry = { provider, model };
    for (const key of ['cache_write_per_million', 'cache_write_1h_per_million', 'long_context']) if (existing && existing[key] !== undefined) entry[key] = existing[key];
    for (const key of ['input_per_million', 'output_per_million', 'cached_input_per_million']) {
      const value = typed(priceForm.elements[key]);
      if (value !== undefined) entry[key] = value;
    }
    try {
      const answer = await postJson('config', { pricing: { models: [entry] } });
      await load();
      $('.outcome', priceForm).textContent = `Saved ${model} (config revision ${answer.revision}): the next call is costed at this price.`;
    } catch (error) {
      if (error instanceof ApiError) showError(priceForm, error);
    }
  });

  cacheForm.elements.provider.addEventListener('change', () => {
    clearErrors(cacheForm);
    fillCache();
  });
  cacheForm.addEventListener('submit', async (event) => {
    event.preventDefault();
    clearErrors(cacheForm);
    const provider = cacheForm.elements.provider.value;
    const settings = {};
    for (const key of ['ttl_seconds', 'cached_multiplier']) {
      const value = typed(cacheForm.elements[key]);
      if (value !== undefined) settings[key] = value;
    }
    try {
      const answer = await postJson('config', { cache: { [provider]: settings } });
      await load();
      $('.outcome', cacheForm).textContent = `Saved the ${provider} cache settings (config revision ${answer.revision}).`;
    } catch (error) {
      if (error instanceof ApiError) showError(cacheForm, error);
    }
  });
  return { show: () => void load().catch(() => undefined), hide: () => undefined };
}

// ---- health ----

function healthView() {
  const poller = poll(load, REFRESH_MS.health, () => current === 'health');
  const outcome = $('#runtime-outcome');

  async function load() {
    const health = await api('health');
    const status = health.status ?? {};
    $('#health-status').textContent = status.status === 'ok' ? 'The proxy is serving.' : `The proxy is not healthy: ${status.detail ?? 'unknown'}`;
    const cards = [];
    if (health.proxy) {
      cards.push(
        card('Proxy', [
          ['Mode', health.proxy.mode],
          ['Up for', `${health.proxy.uptimeSeconds} s`],
          ['Calls in flight', health.proxy.inFlight],
          ['Draining', health.proxy.draining ? 'yes' : 'no'],
          ['Credential problems', health.proxy.credentialProblems?.length ? health.proxy.credentialProblems.join('; ') : 'none'],
        ]),
      );
    }
    if (health.spans) {
      cards.push(
        card('Span store', [
          ['Kind', health.spans.kind],
          ['Location', health.spans.location ?? '—'],
          ['Written', health.spans.written],
          ['Dropped', health.spans.dropped],
          ['Waiting', health.spans.buffered],
          ['Write errors', health.spans.writeErrors],
          ['Last write error', health.spans.lastWriteError ? `${health.spans.lastWriteError.message} (${health.spans.lastWriteError.at})` : 'none'],
        ]),
      );
    }
    if (health.breakers) cards.push(card('Upstream breakers', Object.entries(health.breakers)));
    // Budgets are there when a policy is: a ledger with no policy enforces nothing.
    const budgets = health.budgets;
    const budgetsShown = typeof budgets?.policies === 'number' && budgets.policies > 0;
    if (budgetsShown) {
      cards.push(
        card('Budgets', [
          ['Ledger', budgets.ledger],
          ['Policies', budgets.policies],
          ['Charges pending', budgets.pendingDeductions],
          ['Failed writes', budgets.failedWrites],
          ['Last error', budgets.lastError ?? 'none'],
        ]),
      );
    }
    $('#health-cards').replaceChildren(...cards);
    renderRuntime(health.local);
    // Sections of other parts (audit, auth, budgets) as they come; one that is switched off is named, not shown.
    const known = new Set(['status', 'proxy', 'spans', 'breakers', 'local', ...(budgetsShown ? ['budgets'] : [])]);
    const others = Object.entries(health).filter(([name]) => !known.has(name));
    const off = others.filter(([name, value]) => value?.enabled === false || (name === 'budgets' && value?.policies === 0)).map(([name]) => name);
    $('#health-sections').replaceChildren(
      ...others
        .filter(([name]) => !off.includes(name))
        .map(([name, value]) =>
          el('section', { class: 'card', 'aria-label': name }, el('h3', { text: name[0].toUpperCase() + name.slice(1) }), el('pre', { text: JSON.stringify(value, null, 2) })),
        ),
      ...(off.length > 0 ? [el('p', { class: 'summary', id: 'health-off', text: `Not configured: ${off.join(', ')}.` })] : []),
    );
  }

  function card(title, entries) {
    return el(
      'section',
      { class: 'card', 'aria-label': title },
      el('h3', { text: title }),
      el('dl', {}, ...entries.flatMap(([key, value]) => [el('dt', { text: key }), el('dd', { text: String(value) })])),
    );
  }

  function renderRuntime(local) {
    const state = $('#runtime-state');
    const enabled = local && local.enabled;
    for (const node of [$('#runtime-start'), $('#runtime-stop'), $('#pull-form')]) node.hidden = !enabled;
    if (!enabled) {
      state.replaceChildren(el('p', { text: 'The local runtime is off here (local.enabled is false).' }));
      return;
    }
    const process = local.process;
    const entries = [
      ['Address', local.baseUrl],
      ['Answers', local.reachable ? `yes, version ${local.version}` : `no: ${local.problem}`],
      ['Models', local.models.length ? local.models.join(', ') : 'none'],
      ['Loaded', local.loaded.length ? local.loaded.join(', ') : 'none'],
      ['Started by Tollgate', process.state === 'running' ? `yes, pid ${process.pid}` : process.state.replace('_', ' ')],
      [
        'LM Studio port',
        local.lmstudio.port === 0
          ? 'off'
          : local.lmstudio.listening
            ? `${local.lmstudio.port} (listening)`
            : `${local.lmstudio.port}: ${local.lmstudio.problem ?? 'not listening'}`,
      ],
    ];
    const parts = [el('dl', {}, ...entries.flatMap(([key, value]) => [el('dt', { text: key }), el('dd', { text: value })]))];
    if (process.logTail.length) parts.push(el('pre', { 'aria-label': 'Last lines of the runtime', text: process.logTail.join('\n') }));
    state.replaceChildren(...parts);
  }

  async function control(action) {
    outcome.textContent = action === 'start' ? 'Starting the runtime…' : 'Stopping the runtime…';
    try {
      const answer = await postJson(action, {});
      outcome.textContent =
        {
          started: `Started (pid ${answer.pid}, version ${answer.version}).`,
          already_running: answer.managed
            ? `Already running (pid ${answer.pid}).`
            : `A runtime already answers at ${answer.baseUrl} (version ${answer.version}); it was started outside Tollgate.`,
          stopped: `Stopped (pid ${answer.pid}).`,
          not_running: 'The runtime is not running.',
        }[answer.status] ?? answer.status;
    } catch (error) {
      outcome.textContent = error.message;
    }
    await load().catch(() => undefined);
  }

  $('#runtime-start').addEventListener('click', () => void control('start'));
  $('#runtime-stop').addEventListener('click', () => void control('stop'));

  $('#pull-form').addEventListener('submit', async (event) => {
    event.preventDefault();
    const form = event.currentTarget;
    const input = form.elements.model;
    const progress = $('#pull-progress');
    $('#pull-model-error').textContent = '';
    input.removeAttribute('aria-invalid');
    outcome.textContent = `Pulling ${input.value.trim()}…`;
    let response;
    try {
      response = await fetch(`${API}/pull`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ model: input.value.trim() }) });
    } catch (error) {
      outcome.textContent = `The proxy does not answer (${error.message}).`;
      return;
    }
    if (!response.ok) {
      const body = await response.json().catch(() => ({}));
      const message = body.error?.message ?? `HTTP ${response.status}`;
      if (body.error?.code === 'invalid_request') {
        input.setAttribute('aria-invalid', 'true');
        $('#pull-model-error').textContent = message;
        input.focus();
        outcome.textContent = '';
      } else {
        outcome.textContent = message;
      }
      return;
    }
    progress.hidden = false;
    const reader = response.body.pipeThrough(new TextDecoderStream()).getReader();
    let pending = '';
    let last = null;
    for (;;) {
      const { value, done } = await reader.read();
      if (done) break;
      pending += value;
      let nl;
      while ((nl = pending.indexOf('\n')) !== -1) {
        const line = pending.slice(0, nl).trim();
        pending = pending.slice(nl + 1);
        if (line === '') continue;
        try {
          last = JSON.parse(line);
        } catch {
          continue;
        }
        if (last.error) outcome.textContent = `The runtime could not pull it: ${last.error}`;
        else outcome.textContent = last.status;
        if (typeof last.total === 'number' && last.total > 0) progress.value = (last.completed ?? 0) / last.total;
      }
    }
    progress.hidden = true;
    if (last && last.status === 'success') outcome.textContent = `Pulled ${input.value.trim()}.`;
    await load().catch(() => undefined);
  });

  return { show: () => poller.start(), hide: () => poller.stop() };
}

// ---- start ----

views.traces = tracesView();
views.spend = spendView();
views.pricing = pricingView();
views.health = healthView();
setupTabs();
selectTab(location.hash.slice(1) || 'traces');
