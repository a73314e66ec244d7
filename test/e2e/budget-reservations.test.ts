// Reservations (ADR 1308, issue 38) on a real `tollgate proxy` process: a call holds its estimated cost (input
// estimated from the body, output at the request's max_tokens) from admission until it finishes, so a caller
// who hangs up and calls again, or fifty callers at once, cannot run a one-call budget up as they did when
// only spend already charged was counted (20 answers for one; 1.00 USD taken to 2.50).
//
// Prices for the whole file: gpt-4o-mini at 100 USD per million input tokens and 2,000 per million output
// tokens, and the fake reports 1,000 input and 200 output tokens for every call:
//   1,000 × 100 / 10⁶ + 200 × 2,000 / 10⁶ = 0.10 + 0.40 = 0.50 USD a call; the limit, 0.50 USD, is one call.

import { request } from 'node:http';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { findSpan } from '../support/spans.ts';
import { waitFor } from '../support/wait-for.ts';
import { startProxyProcess, type ProxyProcess } from './proxy-process.ts';
import { startUpstreamBed, type UpstreamBed } from './upstream-bed.ts';

let bed: UpstreamBed;
let proxy: ProxyProcess;

beforeAll(async () => {
  bed = await startUpstreamBed();
  proxy = await startProxyProcess({
    env: bed.env,
    configYaml: bed.configYaml(`
pricing:
  models:
    - { provider: openai, model: gpt-4o-mini, input_per_million: 100, output_per_million: 2000 }
budgets:
  policies:
    - { name: one-call, users: ["*"], limitUsd: 0.5, period: month, enforcement: block }
models:
  dropped:
    targets:
      - { route: beta, model: gpt-4o-mini }
    fallbackOn: [unreachable]
`),
  });
});

afterAll(async () => {
  await proxy?.stop();
  await bed?.close();
});

function held(): { promise: Promise<void>; release: () => void } {
  let release!: () => void;
  const promise = new Promise<void>((resolve) => (release = resolve));
  return { promise, release };
}

async function budgetOf(user: string): Promise<{ spent_usd: number; state: string }> {
  return (await (await fetch(`${proxy.url}/_local/api/budgets/${user}`)).json()) as { spent_usd: number; state: string };
}

async function reservingUsers(): Promise<number> {
  const health = (await (await fetch(`${proxy.url}/_local/api/health`)).json()) as { budgets: { reservingUsers: number } };
  return health.budgets.reservingUsers;
}

/** A streamed /v1 call that hangs up at its first bytes; resolves with its status and span id (null when refused). */
function callAndHangUp(user: string, body: string): Promise<{ status: number; spanId: string | null; error?: string }> {
  return new Promise((resolve, reject) => {
    const req = request(`${proxy.url}/v1/chat/completions`, {
      method: 'POST',
      agent: false,
      headers: { 'content-type': 'application/json', 'content-length': Buffer.byteLength(body), 'x-tollgate-user': user },
    });
    req.once('response', (res) => {
      if (res.statusCode !== 200) {
        let text = '';
        res.setEncoding('utf8');
        res.on('data', (chunk: string) => (text += chunk));
        res.once('end', () => resolve({ status: res.statusCode!, spanId: null, error: text }));
        return;
      }
      res.once('data', () => {
        req.destroy(); // the answer's text has started: the caller hangs up before its usage
        resolve({ status: 200, spanId: String(res.headers['x-proxy-span-id']) });
      });
    });
    req.once('error', (error) => {
      if (!req.destroyed) reject(error);
    });
    req.end(body);
  });
}

describe('reservations bound what a one-call budget can be run up to', () => {
  it('a caller who hangs up as soon as the text starts and calls again at once gets one answer of twenty', async () => {
    const tail = held();
    // Every stream's usage is held back until the test releases it, as a provider's last event comes after a
    // caller who stops at the text has gone.
    bed.openai.behave({ usage: { input: 1000, output: 200 }, holdTail: tail.promise });
    const sentBefore = bed.openai.requests.length;
    const body = JSON.stringify({ model: 'gpt-4o-mini', stream: true, max_tokens: 200, messages: [{ role: 'user', content: 'Tell me a story' }] });
    // The first call holds its input estimate (the body sent upstream, ~150 bytes at four a token: ~38 tokens
    // × 100 / 10⁶ ≈ 0.004) plus max_tokens 200 × 2,000 / 10⁶ = 0.40: about 0.404 of the 0.50 limit.
    const first = await callAndHangUp('quitter', body);
    expect(first.status).toBe(200);
    await waitFor('the proxy to notice the caller left', () => proxy.logs.some((line) => line.span_id === first.spanId && String(line.msg).startsWith('caller left mid-answer')));
    // The second, at once, while the first's usage has not arrived: 0 spent + 0.404 held + 0.404 > 0.50.
    const second = await callAndHangUp('quitter', body);
    expect(second.status).toBe(429);
    expect(JSON.parse(second.error!)).toMatchObject({ error: { code: 'budget_exceeded', type: 'rate_limit_error' } });
    expect(JSON.parse(second.error!).error.message).toMatch(/has 0\.09\d* USD left of the 0\.5 USD monthly budget of policy "one-call" beyond the calls in flight/);
    // The usage arrives: the first call settles at 0.50, its hold released.
    tail.release();
    const span = await findSpan(proxy.url, { spanId: first.spanId! });
    expect(span).toMatchObject({ status: 'client_aborted', output_tokens: 200, user_id: 'quitter' });
    expect(span.cost_usd).toBeCloseTo(0.5, 10);
    // Eighteen more calls, each at once after the last: spent 0.50 of 0.50, every one refused.
    const statuses = [first.status, second.status];
    for (let call = 3; call <= 20; call++) statuses.push((await callAndHangUp('quitter', body)).status);
    const answered = statuses.filter((status) => status === 200).length;
    expect(answered).toBeLessThanOrEqual(2); // the bound the issue asks for
    expect(answered).toBe(1); // and with the usage held back, exactly one
    expect(bed.openai.requests.length - sentBefore).toBe(1);
    expect(await budgetOf('quitter')).toMatchObject({ spent_usd: 0.5, state: 'exhausted' });
    expect(await reservingUsers()).toBe(0);
  });

  it('fifty calls at once: two are admitted and the spend stays within the stated bound', async () => {
    const reply = held();
    // Every reply is held until the test releases it, so the admitted calls are all in flight together. The
    // fake reports 200 output tokens though each request asks for at most 100: the actual cost passes the
    // reservation, as it does when the input estimate (four bytes a token) is low.
    bed.openai.behave({ usage: { input: 1000, output: 200 }, hold: reply.promise });
    const sentBefore = bed.openai.requests.length;
    const body = '{"model":"gpt-4o-mini","max_tokens":100,"messages":[{"role":"user","content":"hi"}]}';
    expect(Buffer.byteLength(body)).toBe(84);
    // Each call's reservation on /proxy/beta: ceil(84 / 4) = 21 input tokens × 100 / 10⁶ = 0.0021, plus
    // 100 output tokens × 2,000 / 10⁶ = 0.20: 0.2021. Two fit (0.4042 ≤ 0.50); a third would hold 0.6063.
    const calls = Array.from({ length: 50 }, () =>
      fetch(`${proxy.url}/proxy/beta/v1/chat/completions`, {
        method: 'POST',
        headers: { 'content-type': 'application/json', 'x-tollgate-user': 'crowd', authorization: 'Bearer unused' },
        body,
      }).then(async (res) => ({ status: res.status, body: await res.text() })),
    );
    await waitFor('two calls upstream', () => bed.openai.requests.length - sentBefore === 2);
    reply.release();
    const results = await Promise.all(calls);
    const answered = results.filter((r) => r.status === 200);
    const refused = results.filter((r) => r.status === 429);
    expect(answered).toHaveLength(2);
    expect(refused).toHaveLength(48);
    for (const r of refused) expect(JSON.parse(r.body)).toMatchObject({ error: { code: 'budget_exceeded' } });
    expect(bed.openai.requests.length - sentBefore).toBe(2);
    // Spent: 2 × 0.50 = 1.00. The stated bound: the limit plus, for each call admitted while others were in
    // flight, its actual cost minus its reservation: 0.50 + 2 × (0.50 − 0.2021) = 1.0958. Without reservations
    // all fifty were admitted: 25.00.
    await waitFor('both calls charged', async () => (await budgetOf('crowd')).spent_usd === 1);
    expect((await budgetOf('crowd')).spent_usd).toBeLessThanOrEqual(1.0958);
    expect(await reservingUsers()).toBe(0);
  });

  it('an alias call whose every attempt fails releases its reservation: the next call has the whole budget', async () => {
    bed.openai.behave({ destroySocket: true, forRequests: 1 });
    const failed = await fetch(`${proxy.url}/v1/chat/completions`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', 'x-tollgate-user': 'dropper' },
      body: JSON.stringify({ model: 'dropped', max_tokens: 100, messages: [{ role: 'user', content: 'hi' }] }),
    });
    expect(failed.status).toBeGreaterThanOrEqual(500);
    await failed.arrayBuffer();
    expect(await reservingUsers()).toBe(0);
    // Had the failed call kept its hold (about 0.20: 100 × 2,000 / 10⁶ and its input), this one's (0.40 for
    // max_tokens 200, and its input) would pass 0.50. It is answered and charged 0.50.
    bed.openai.behave({ usage: { input: 1000, output: 200 } });
    const answered = await fetch(`${proxy.url}/v1/chat/completions`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', 'x-tollgate-user': 'dropper' },
      body: JSON.stringify({ model: 'gpt-4o-mini', max_tokens: 200, messages: [{ role: 'user', content: 'hi' }] }),
    });
    expect(answered.status).toBe(200);
    await answered.arrayBuffer();
    await waitFor('the call charged', async () => (await budgetOf('dropper')).spent_usd === 0.5);
    expect(await reservingUsers()).toBe(0);
  });
});
