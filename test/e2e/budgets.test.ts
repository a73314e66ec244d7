// Budgets as a new user meets them, on real `tollgate proxy` processes. First the walkthrough of
// docs/budgets.md (where the README's Budgets section leads), with the steps read from the page and run as
// written: a fake OpenAI API, a $0.01 monthly budget in the config file, the official openai SDK calling until
// a call is refused with 429 budget_exceeded, `budget alert` at 80, 90 and 100 % once each, a grant through
// the management API, and a restart that keeps the spend. Then the refusal shape as the official Anthropic SDK
// and a Gemini caller see it.

import Anthropic from '@anthropic-ai/sdk';
import OpenAI from 'openai';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { findSpan, recentSpans } from '../support/spans.ts';
import { waitFor } from '../support/wait-for.ts';
import { ROOT, runToEnd, startFakeProvider, walkthrough, type RunningCommand } from './budgets-walkthrough.ts';
import { startProxyProcess, type ProxyProcess } from './proxy-process.ts';
import { startUpstreamBed, type UpstreamBed } from './upstream-bed.ts';

let bed: UpstreamBed;
const dirs: string[] = [];

beforeAll(async () => {
  bed = await startUpstreamBed();
  // Each call reports 1000 input tokens; at 1 USD per million input tokens that is exactly 0.001 USD.
  for (const fake of [bed.openai, bed.anthropic, bed.vertex]) fake.behave({ usage: { input: 1000, output: 0 } });
});

afterAll(async () => {
  await bed?.close();
  for (const dir of dirs) rmSync(dir, { recursive: true, force: true });
});

function configYaml(limitUsd: string): string {
  return bed.configYaml(`
pricing:
  models:
    - { provider: openai, model: gpt-4o-mini, input_per_million: 1, output_per_million: 0 }
    - { provider: anthropic, model: claude-sonnet-4, input_per_million: 1, output_per_million: 0 }
    - { provider: google, model: gemini-2.5-flash, input_per_million: 1, output_per_million: 0 }
budgets:
  policies:
    - name: default
      users: ["*"]
      limitUsd: ${limitUsd}
      period: month
      timeZone: UTC
      alertThresholds: [80, 90, 100]
      enforcement: block
`);
}

function startOfNextMonthUtc(): number {
  const now = new Date();
  return Date.UTC(now.getUTCFullYear(), now.getUTCMonth() + 1, 1);
}

const alerts = (proxy: ProxyProcess) => proxy.logs.filter((l) => typeof l.msg === 'string' && l.msg.includes('budget alert'));

describe('the walkthrough of docs/budgets.md, run as written: a $0.01 monthly budget on the local proxy', () => {
  const steps = walkthrough();
  let dir: string;
  let fake: RunningCommand;
  let proxy: ProxyProcess;
  const startProxy = async () => {
    proxy = await startProxyProcess({ dir, configYaml: steps.configYaml.replaceAll(steps.fakeUrl, fake.url), env: steps.proxyEnv });
  };
  /** The SDK script of the walkthrough against this proxy: the lines it prints. */
  const runSdkScript = async () => {
    const script = steps.sdkScript.replaceAll('127.0.0.1:8181', `127.0.0.1:${proxy.port}`);
    const { code, stdout, stderr } = await runToEnd(process.execPath, ['--input-type=module', '-e', script], { cwd: ROOT });
    expect(code, stderr).toBe(0);
    return stdout.trimEnd().split('\n');
  };
  const oks = (n: number) => Array.from({ length: n }, (_, i) => `call ${i + 1}: ok`);

  beforeAll(async () => {
    dir = mkdtempSync(join(tmpdir(), 'tollgate-budgets-e2e-'));
    dirs.push(dir);
    fake = await startFakeProvider(steps.fakeArgs);
    await startProxy();
  });

  afterAll(async () => {
    await proxy?.stop();
    await fake?.stop();
  });

  it('the openai SDK calls until one is refused with 429 budget_exceeded, with budget alert at 80, 90 and 100 % once each', async () => {
    const periodEnd = new Date(startOfNextMonthUtc()).toISOString();
    const refusal = `429 user "alice" has spent the 0.01 USD monthly budget of policy "default"; it renews at ${periodEnd} (budget_exceeded)`;
    // Ten calls of 0.001 USD spend the 0.01 USD budget exactly; the eleventh is refused, and not retried.
    expect(await runSdkScript()).toEqual([...oks(10), `call 11: ${refusal}`]);

    // Log lines arrive through the process's stdout in their own time.
    const lines = await waitFor('three budget alert lines', () => (alerts(proxy).length >= 3 ? alerts(proxy) : undefined), 5_000);
    expect(lines.map((l) => l.threshold)).toEqual([80, 90, 100]);
    expect(lines[2]).toMatchObject({
      level: 40,
      user_id: 'alice',
      policy: 'default',
      threshold: 100,
      spent_usd: 0.01,
      limit_usd: 0.01,
      period_start: new Date(startOfNextMonthUtc() - 1).toISOString().slice(0, 8) + '01T00:00:00.000Z',
    });

    // Run again: refused at once, the SDK's default retries stopped by x-should-retry: false, no new alert.
    const client = new OpenAI({ baseURL: `${proxy.url}/v1`, apiKey: 'unused', defaultHeaders: { 'x-tollgate-user': 'alice' } });
    const error = await client.chat.completions.create({ model: 'gpt-4o-mini', messages: [{ role: 'user', content: 'hi' }] }).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(OpenAI.RateLimitError);
    const again = error as InstanceType<typeof OpenAI.RateLimitError>;
    expect(again).toMatchObject({ status: 429, code: 'budget_exceeded', type: 'rate_limit_error' });
    const retryAfter = Number(again.headers.get('retry-after'));
    expect(Math.abs(retryAfter - (startOfNextMonthUtc() - Date.now()) / 1000)).toBeLessThan(30);

    // No refused call reached the provider: their spans carry no upstream status; one span per refusal.
    const span = await findSpan(proxy.url, { spanId: again.headers.get('x-proxy-span-id') });
    expect(span).toMatchObject({ status: 'rejected', user_id: 'alice', route: 'beta', status_code: null, cost_usd: 0 });
    expect(span.error).toMatch(/^budget_exceeded: user "alice"/);
    const spans = await recentSpans(proxy.url);
    expect(spans.filter((s) => s.status === 'rejected')).toHaveLength(2);
    expect(spans.filter((s) => s.status === 'ok' && s.status_code === 200)).toHaveLength(10);
    expect(alerts(proxy)).toHaveLength(3);

    const budget = await (await fetch(`${proxy.url}/_local/api/budgets/alice`)).json();
    expect(budget).toMatchObject({ user_id: 'alice', policy: 'default', limit_usd: 0.01, spent_usd: 0.01, remaining_usd: 0, state: 'exhausted', period_end: periodEnd });
  });

  it('the grant through the API lets alice call five more times, and other users were never limited by her spend', async () => {
    const created = await fetch(`${proxy.url}/_local/api/budgets/alice/grants`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: steps.grantBody,
    });
    expect(created.status).toBe(201);
    expect(await created.json()).toMatchObject({ amount_usd: 0.005, remaining_usd: 0.005, reason: 'demo day', expires_at: null });
    const lines = await runSdkScript();
    expect(lines.slice(0, 5)).toEqual(oks(5));
    expect(lines.slice(5)).toEqual([expect.stringMatching(/^call 6: 429 user "alice" has spent .* \(budget_exceeded\)$/)]);

    const bob = new OpenAI({ baseURL: `${proxy.url}/v1`, apiKey: 'unused', maxRetries: 0 });
    await bob.chat.completions.create({ model: 'gpt-4o-mini', messages: [{ role: 'user', content: 'hi' }], user: 'bob' });
    const list = (await (await fetch(`${proxy.url}/_local/api/budgets`)).json()) as {
      count: number;
      budgets: { user_id: string; spent_usd: number; granted_usd: number; remaining_usd: number }[];
    };
    expect(list.count).toBe(2);
    expect(list.budgets.map((b) => [b.user_id, b.spent_usd, b.granted_usd, b.remaining_usd])).toEqual([
      ['alice', 0.015, 0.005, 0],
      ['bob', 0.001, 0, 0.009],
    ]);
    // No new alert: the grant absorbed the calls.
    expect(alerts(proxy)).toHaveLength(3);
  });

  it('the proxy started again with the same command finds the same spend and grant, refuses alice, and does not alert again', async () => {
    expect(await proxy.stop()).toBe(0);
    await startProxy();
    const budget = (await (await fetch(`${proxy.url}/_local/api/budgets/alice`)).json()) as { grants: unknown[] };
    expect(budget).toMatchObject({ spent_usd: 0.015, granted_usd: 0.005, remaining_usd: 0, state: 'exhausted' });
    expect(budget.grants).toEqual([expect.objectContaining({ amount_usd: 0.005, remaining_usd: 0, reason: 'demo day' })]);
    expect(await runSdkScript()).toEqual([expect.stringMatching(/^call 1: 429 user "alice" has spent .* \(budget_exceeded\)$/)]);
    const bob = (await (await fetch(`${proxy.url}/_local/api/budgets/bob`)).json()) as { spent_usd: number };
    expect(bob.spent_usd).toBe(0.001);
    expect(alerts(proxy)).toHaveLength(0);
  });
});

describe('the refusal in each SDK family’s own shape', () => {
  let proxy: ProxyProcess;

  beforeAll(async () => {
    const dir = mkdtempSync(join(tmpdir(), 'tollgate-budgets-shapes-'));
    dirs.push(dir);
    // A budget of one call: the second call of a user is refused.
    proxy = await startProxyProcess({ dir, configYaml: configYaml('0.001'), env: bed.env });
  });

  afterAll(() => proxy?.stop());

  it('the official Anthropic SDK on /proxy/gamma-direct raises RateLimitError with the reason and no retry', async () => {
    bed.anthropic.reset();
    bed.anthropic.behave({ usage: { input: 1000, output: 0 } });
    const client = new Anthropic({ baseURL: `${proxy.url}/proxy/gamma-direct`, apiKey: 'unused', defaultHeaders: { 'x-tollgate-user': 'carol' } });
    const ask = () => client.messages.create({ model: 'claude-sonnet-4-20250514', max_tokens: 16, messages: [{ role: 'user', content: 'hi' }] });
    await ask();
    const error = await ask().then(
      () => undefined,
      (e: unknown) => e,
    );
    expect(error).toBeInstanceOf(Anthropic.RateLimitError);
    const refusal = error as InstanceType<typeof Anthropic.RateLimitError>;
    expect(refusal.status).toBe(429);
    expect(refusal.error).toMatchObject({
      type: 'error',
      error: {
        type: 'rate_limit_error',
        message: expect.stringMatching(/^budget_exceeded: user "carol" has spent the 0.001 USD monthly budget of policy "default"; it renews at /),
      },
    });
    expect(Number(refusal.headers?.get('retry-after'))).toBeGreaterThan(0);
    expect(bed.anthropic.requests).toHaveLength(1);
  });

  it('a stream the caller aborts is charged what its usage had cost by then, so the next call is refused', async () => {
    bed.anthropic.reset();
    // The input usage comes in message_start; the text after it is so long that the caller leaves first.
    bed.anthropic.behave({ usage: { input: 1000, output: 0 }, bigBodyBytes: 256 * 1024 * 1024 });
    const caller = new AbortController();
    const res = await fetch(`${proxy.url}/proxy/gamma-direct/v1/messages`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', 'anthropic-version': '2023-06-01', 'x-tollgate-user': 'frank' },
      body: JSON.stringify({ model: 'claude-sonnet-4-20250514', max_tokens: 16, stream: true, messages: [{ role: 'user', content: 'hi' }] }),
      signal: caller.signal,
    });
    expect(res.status).toBe(200);
    const first = await res.body!.getReader().read();
    expect(new TextDecoder().decode(first.value)).toContain('message_start');
    caller.abort();
    const span = await waitFor('the aborted call’s span', async () => (await recentSpans(proxy.url)).find((s) => s.user_id === 'frank'));
    expect(span).toMatchObject({ status: 'client_aborted', status_code: 200, cost_usd: 0.001 });
    const budget = await waitFor(
      'frank to be charged',
      async () => {
        const record = (await (await fetch(`${proxy.url}/_local/api/budgets/frank`)).json()) as { spent_usd: number; state: string };
        return record.spent_usd > 0 ? record : undefined;
      },
      10_000,
    );
    expect(budget).toMatchObject({ spent_usd: 0.001, state: 'exhausted' });

    bed.anthropic.reset();
    const client = new Anthropic({ baseURL: `${proxy.url}/proxy/gamma-direct`, apiKey: 'unused', defaultHeaders: { 'x-tollgate-user': 'frank' }, maxRetries: 0 });
    const refused = await client.messages.create({ model: 'claude-sonnet-4-20250514', max_tokens: 16, messages: [{ role: 'user', content: 'hi' }] }).catch((e: unknown) => e);
    expect(refused).toBeInstanceOf(Anthropic.RateLimitError);
    expect(bed.anthropic.requests).toHaveLength(0);
  });

  it('concurrent calls near the limit: those in flight when it is reached overshoot it, by their cost at most; none after', async () => {
    bed.openai.reset();
    let release!: () => void;
    bed.openai.behave({ usage: { input: 1000, output: 0 }, hold: new Promise<void>((resolve) => (release = resolve)) });
    const client = new OpenAI({ baseURL: `${proxy.url}/v1`, apiKey: 'unused', defaultHeaders: { 'x-tollgate-user': 'gina' }, maxRetries: 0 });
    const ask = () => client.chat.completions.create({ model: 'gpt-4o-mini', messages: [{ role: 'user', content: 'hi' }] });
    // Four calls admitted while gina has spent nothing, all at the provider at once; one would have spent her budget.
    const inFlight = [ask(), ask(), ask(), ask()];
    await waitFor('four calls at the provider at once', () => bed.openai.requests.length === 4);
    release();
    await Promise.all(inFlight);
    const budget = await waitFor('the four calls to be charged', async () => {
      const record = (await (await fetch(`${proxy.url}/_local/api/budgets/gina`)).json()) as { spent_usd: number; limit_usd: number; state: string };
      return record.spent_usd >= 0.004 ? record : undefined;
    });
    // The overshoot is the three calls beyond the first, exactly what they cost: nothing lost, nothing doubled.
    expect(budget).toMatchObject({ spent_usd: 0.004, limit_usd: 0.001, state: 'exhausted' });
    const spans = await waitFor('the four spans', async () => {
      const list = (await recentSpans(proxy.url)).filter((s) => s.user_id === 'gina');
      return list.length >= 4 ? list : undefined;
    });
    expect(spans.map((s) => [s.status, s.cost_usd])).toEqual(Array.from({ length: 4 }, () => ['ok', 0.001]));
    await expect(ask()).rejects.toBeInstanceOf(OpenAI.RateLimitError);
    expect(bed.openai.requests).toHaveLength(4);
  });

  it('the openai SDK on the native /proxy/beta route gets OpenAI’s shape, code budget_exceeded', async () => {
    const client = new OpenAI({ baseURL: `${proxy.url}/proxy/beta/v1`, apiKey: 'unused', maxRetries: 0 });
    await client.chat.completions.create({ model: 'gpt-4o-mini', messages: [{ role: 'user', content: 'hi' }], user: 'dave' });
    const error = await client.chat.completions.create({ model: 'gpt-4o-mini', messages: [{ role: 'user', content: 'hi' }], user: 'dave' }).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(OpenAI.RateLimitError);
    expect(error).toMatchObject({ status: 429, code: 'budget_exceeded', type: 'rate_limit_error' });
  });

  it('a Gemini caller on /proxy/alpha gets Google’s error shape with RESOURCE_EXHAUSTED', async () => {
    const url = `${proxy.url}/proxy/alpha/v1/projects/tollgate-test-project/locations/us-central1/publishers/google/models/gemini-2.5-flash:generateContent`;
    const call = () =>
      fetch(url, {
        method: 'POST',
        headers: { 'content-type': 'application/json', 'x-tollgate-user': 'erin' },
        body: JSON.stringify({ contents: [{ role: 'user', parts: [{ text: 'hi' }] }] }),
      });
    const first = await call();
    expect(first.status).toBe(200);
    await first.arrayBuffer();
    await waitFor('erin’s first call to be charged', async () => ((await (await fetch(`${proxy.url}/_local/api/budgets/erin`)).json()) as { state: string }).state === 'exhausted');
    const refused = await call();
    expect(refused.status).toBe(429);
    expect(Number(refused.headers.get('retry-after'))).toBeGreaterThan(0);
    expect(await refused.json()).toEqual({
      error: { code: 429, status: 'RESOURCE_EXHAUSTED', message: expect.stringMatching(/^budget_exceeded: user "erin" has spent the 0.001 USD monthly budget/) },
    });
  });
});
