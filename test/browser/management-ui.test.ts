// The management UI in a real browser (Debian's Chromium through playwright-core) against a real
// `tollgate proxy` with a fake OpenAI behind it and a fake Ollama it runs itself (`ollama serve` found first on
// PATH): calls made through the proxy appear in the Traces view, the Spend view totals them, a price changed in
// the Pricing form costs the next call, a bad value is shown next to its field, the Health view stops and starts
// the runtime and pulls a model, and the page logs no error.
// Each view's screenshot goes to test-results/screenshots/ (docs/images/ with TOLLGATE_UPDATE_SCREENSHOTS=1,
// which is how the README's pictures are made).

import { mkdirSync, rmSync } from 'node:fs';
import { join, resolve } from 'node:path';
import type { Browser, Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { freePort, startProxyProcess, type ProxyProcess } from '../e2e/proxy-process.ts';
import { fakeOllamaBinDir } from '../fakes/ollama-cli.ts';
import { startFakeUpstream, type FakeUpstream } from '../fakes/llm-upstream.ts';
import { findSpan } from '../support/spans.ts';
import { launchChromium } from './chromium.ts';

const OPENAI_KEY = 'sk-browser-test';
const ROOT = resolve(import.meta.dirname, '../..');
const SHOTS = process.env.TOLLGATE_UPDATE_SCREENSHOTS === '1' ? join(ROOT, 'docs/images') : join(ROOT, 'test-results/screenshots');

let openai: FakeUpstream;
let binDir: string;
let proxy: ProxyProcess;
let browser: Browser;
let page: Page;
const consoleProblems: string[] = [];
/** Answers of 400 and above the page received: Chromium logs each as "Failed to load resource", which is no script error. */
const refusedRequests: string[] = [];

/** One chat call through the proxy's /v1, as a tool would make it; returns its span id. */
async function chat(model: string, user: string): Promise<string> {
  const res = await fetch(`${proxy.url}/v1/chat/completions`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', 'x-tollgate-user': user },
    body: JSON.stringify({ model, messages: [{ role: 'user', content: 'Say hello' }] }),
  });
  expect(res.status, await res.clone().text()).toBe(200);
  await res.arrayBuffer();
  return res.headers.get('x-proxy-span-id')!;
}

async function screenshot(name: string): Promise<void> {
  await page.screenshot({ path: join(SHOTS, `ui-${name}.png`), fullPage: true });
}

function row(spanId: string) {
  return page.locator(`#traces tbody tr[data-span-id="${spanId}"]`);
}

beforeAll(async () => {
  mkdirSync(SHOTS, { recursive: true });
  openai = await startFakeUpstream('openai', { expectApiKey: OPENAI_KEY });
  binDir = fakeOllamaBinDir();
  proxy = await startProxyProcess({
    configYaml: `
upstreams:
  beta: { baseUrl: "${openai.url}" }
routes:
  - { name: llama, format: openai-chat, baseUrl: "http://127.0.0.1:${await freePort()}", credential: { kind: none } }
local:
  runtime: { baseUrl: "http://127.0.0.1:${await freePort()}" }
storage: { kind: sqlite, path: spans.db }
budgets:
  policies:
    - { name: interns, users: [intern], limitUsd: 5, period: month, timeZone: UTC, alertThresholds: [80], enforcement: block }
`,
    env: { OPENAI_API_KEY: OPENAI_KEY, TOLLGATE_LMSTUDIO_PORT: String(await freePort()), PATH: `${binDir}:${process.env.PATH}`, FAKE_OLLAMA_MODELS: 'llama3.2:latest' },
  });
  const started = await fetch(`${proxy.url}/_local/api/start`, { method: 'POST' });
  expect(started.status, await started.clone().text()).toBe(200);
  browser = await launchChromium();
  page = await browser.newPage({ viewport: { width: 1360, height: 900 } });
  page.on('console', (message) => {
    if (message.type() === 'error' || message.type() === 'warning') consoleProblems.push(`${message.type()}: ${message.text()}`);
  });
  page.on('pageerror', (error) => consoleProblems.push(`page error: ${error.message}`));
  page.on('response', (response) => {
    if (response.status() >= 400) refusedRequests.push(`${response.request().method()} ${new URL(response.url()).pathname} ${response.status()}`);
  });
});

afterAll(async () => {
  await browser?.close();
  await proxy?.stop();
  await openai?.close();
  rmSync(binDir, { recursive: true, force: true });
});

describe('the management UI at /_local/', () => {
  it('shows calls as they happen, newest first, with their details and filters (Traces)', async () => {
    await page.goto(`${proxy.url}/_local/`);
    await expect.poll(() => page.locator('#traces-summary').textContent()).toContain('No calls yet');

    const cloud = await chat('gpt-4o-mini', 'alice');
    const local = await chat('llama3.2', 'bob');
    // The view refreshes itself: both rows appear without a reload.
    await row(local).waitFor();
    await row(cloud).waitFor();
    const cells = async (spanId: string) => (await row(spanId).locator('td').allTextContents()).slice(1);
    // 21 prompt and 9 completion tokens at gpt-4o-mini's built-in 0.15 / 0.6 USD per million: 0.00000855.
    expect(await cells(cloud)).toEqual(['gpt-4o-mini', 'openai', 'beta', 'alice', '21 / 9', '0.00000855', expect.stringMatching(/ ms$/), 'ok']);
    expect(await cells(local)).toEqual(['llama3.2', 'local', 'local', 'bob', '26 / 9', '0', expect.stringMatching(/ ms$/), 'ok']);
    expect(await page.locator('#traces tbody tr').first().getAttribute('data-span-id')).toBe(local);

    await page.getByLabel('Model').first().fill('llama');
    await expect.poll(() => page.locator('#traces tbody tr').count()).toBe(1);
    expect(await page.locator('#traces tbody tr').getAttribute('data-span-id')).toBe(local);
    await page.getByLabel('Model').first().fill('');
    await page.getByLabel('Status').selectOption('ok');
    await expect.poll(() => page.locator('#traces tbody tr').count()).toBe(2);

    await row(cloud).getByRole('button').click();
    const detail = page.locator('#span-detail');
    await expect.poll(() => detail.isVisible()).toBe(true);
    const span = await findSpan(proxy.url, { spanId: cloud });
    expect(await detail.locator('dd[data-field="trace_id"]').textContent()).toBe(span.trace_id);
    expect(await detail.locator('dd[data-field="request_id"]').textContent()).toBe(span.request_id);
    // Keyboard: focus moved to the details, which a screen reader announces by their heading.
    expect(await page.evaluate('document.activeElement?.id')).toBe('span-detail-title');
    await screenshot('traces');
    await page.locator('#span-detail-close').click();
  });

  it('totals spend by model over time (Spend)', async () => {
    // Keyboard navigation between the views: the arrow keys move along the tabs.
    await page.locator('#tab-traces').focus();
    await page.keyboard.press('ArrowRight');
    await expect.poll(() => page.locator('#view-spend').isVisible()).toBe(true);
    expect(await page.locator('#tab-spend').getAttribute('aria-selected')).toBe('true');
    await page.locator('#spend-controls select[name="groupBy"]').selectOption('model');
    const rowOf = (key: string) => page.locator('#spend-table tbody tr', { has: page.locator(`th:text-is("${key}")`) });
    await expect.poll(async () => rowOf('gpt-4o-mini').locator('td').allTextContents()).toEqual(['0.00000855', '1', '30']);
    expect(await rowOf('llama3.2').locator('td').allTextContents()).toEqual(['0', '1', '35']);
    await page.locator('#spend-chart canvas').first().waitFor();
    expect(await page.locator('#spend-chart').getAttribute('aria-label')).toContain('gpt-4o-mini: 0.00000855 USD');
    await screenshot('spend');
  });

  it('saves a price from the form, shows a bad value next to its field, and costs the next call at the new price (Pricing)', async () => {
    await page.locator('#tab-pricing').click();
    await page.getByRole('button', { name: 'Edit the price of gpt-4o-mini', exact: true }).click();
    expect(await page.locator('#price-input').inputValue()).toBe('0.15');

    await page.locator('#price-output').fill('-1');
    await page.getByRole('button', { name: 'Save price' }).click();
    await expect.poll(() => page.locator('#price-output-error').textContent()).toBe('pricing.models[0].output_per_million must be a non-negative number');
    expect(await page.locator('#price-output').getAttribute('aria-invalid')).toBe('true');
    expect(await page.evaluate('document.activeElement?.id')).toBe('price-output');

    await page.locator('#price-input').fill('10');
    await page.locator('#price-output').fill('20');
    await page.locator('#price-cached').fill('');
    await page.getByRole('button', { name: 'Save price' }).click();
    await expect.poll(() => page.locator('#price-form .outcome').textContent()).toContain('Saved gpt-4o-mini');
    expect(await page.locator('#price-output-error').textContent()).toBe('');
    const priceRow = page.locator('#prices tbody tr[data-model="gpt-4o-mini"] td');
    expect(await priceRow.allTextContents()).toEqual(['openai', '10', '—', '20', 'override', 'Edit']);

    // Every route, the configured one too, with where it goes and how it authenticates; its provider can be priced.
    const routeCells = await page.locator('#routes tbody tr[data-route="llama"] > *').allTextContents();
    expect(routeCells).toEqual(['llama', 'openai-chat', 'llama', expect.stringMatching(/^http:\/\/127\.0\.0\.1:\d+$/), 'none', 'config']);
    expect(await page.locator('#routes tbody tr[data-route="beta"] > *').allTextContents()).toEqual(['beta', 'openai', 'openai', openai.url, 'api-key', 'built-in']);
    expect(await page.locator('#price-provider option').allTextContents()).toEqual(['openai', 'anthropic', 'google', 'local', 'llama']);

    // The cache form: a TTL that is not a number is named next to its field, and nothing changes.
    await page.locator('#cache-provider').selectOption('anthropic');
    expect(await page.locator('#cache-ttl').inputValue()).toBe('300');
    await page.locator('#cache-ttl').fill('five minutes');
    await page.getByRole('button', { name: 'Save cache settings' }).click();
    await expect.poll(() => page.locator('#cache-ttl-error').textContent()).toContain('cache.anthropic.ttl_seconds must be an integer');
    await screenshot('pricing');

    // 21 and 9 tokens at 10 and 20 USD per million: 0.00021 + 0.00018.
    const next = await chat('gpt-4o-mini', 'alice');
    expect((await findSpan(proxy.url, { spanId: next })).cost_usd).toBe(0.00039);
    await page.locator('#tab-traces').click();
    await row(next).waitFor();
    expect((await row(next).locator('td').allTextContents())[6]).toBe('0.00039');
  });

  it('shows the proxy, the span store, the breakers and the local runtime; stops, starts and pulls (Health)', async () => {
    await page.locator('#tab-health').click();
    await expect.poll(() => page.locator('#health-status').textContent()).toBe('The proxy is serving.');
    const runtime = page.locator('#runtime-state');
    const outcome = page.locator('#runtime-outcome');
    await expect.poll(() => runtime.textContent()).toContain('yes, version 0.12.6');
    expect(await runtime.textContent()).toContain('(listening)');

    await page.getByRole('button', { name: 'Stop runtime' }).click();
    await expect.poll(() => outcome.textContent()).toMatch(/^Stopped \(pid \d+\)\.$/);
    await expect.poll(() => runtime.textContent()).toContain('Answersno:');
    await page.getByRole('button', { name: 'Start runtime' }).click();
    await expect.poll(() => outcome.textContent(), { timeout: 20_000 }).toMatch(/^Started \(pid \d+, version 0\.12\.6\)\.$/);
    await expect.poll(() => runtime.textContent()).toMatch(/Started by Tollgateyes, pid \d+/);
    expect(await page.locator('#health-cards').textContent()).toContain('Upstream breakers');
    expect(await page.locator('#health-cards').textContent()).toContain('gamma-cloudb');
    expect(await page.locator('#health-cards section[aria-label="Budgets"]').textContent()).toBe('BudgetsLedgersqlitePolicies1Charges pending0Failed writes0Last errornone');
    expect(await page.locator('#health-off').textContent()).toBe('Not configured: audit, provenance.');

    await page.getByLabel('Model name').fill('not a model!');
    await page.getByRole('button', { name: 'Pull' }).click();
    await expect.poll(() => page.locator('#pull-model-error').textContent()).toContain('model must be a model name');

    await page.getByLabel('Model name').fill('qwen2.5-coder:7b');
    await page.getByRole('button', { name: 'Pull' }).click();
    await expect.poll(() => outcome.textContent()).toBe('Pulled qwen2.5-coder:7b.');
    await expect.poll(() => runtime.textContent()).toContain('llama3.2:latest, qwen2.5-coder:7b');
    await screenshot('health');
  });

  it('logged no error or warning in the browser console but the refusals the tests asked for', () => {
    // The three values the tests typed wrong were refused by the API (400), and the page showed why; Chromium
    // logs a line for each refused request. Anything else (a script error, a missing file, a CSP violation) fails.
    expect(refusedRequests).toEqual(['POST /_local/api/config 400', 'POST /_local/api/config 400', 'POST /_local/api/pull 400']);
    const resourceLines: string[] = consoleProblems.filter((line) => line === 'error: Failed to load resource: the server responded with a status of 400 (Bad Request)');
    expect(resourceLines).toHaveLength(refusedRequests.length);
    expect(consoleProblems.filter((line) => !resourceLines.includes(line))).toEqual([]);
  });
});
