// Rate limits of a budget policy (ADR 1309, issue 38) on a real `tollgate proxy` process against the fake
// upstreams: requests per minute, tokens per minute and calls in flight, per user, refused with 429 and
// Retry-After in the shape of the API called and never sent upstream; OpenAI's x-ratelimit-* headers on the
// answers. A team's limit (ADR 1313) counts all its members' calls together. The windows are a GCRA over 60 s: a limit of L spends 60 / L seconds per request or token.

import { request } from 'node:http';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { findSpan } from '../support/spans.ts';
import { waitFor } from '../support/wait-for.ts';
import { refusedConfigFile, startProxyProcess, type ProxyProcess } from './proxy-process.ts';
import { startUpstreamBed, type UpstreamBed } from './upstream-bed.ts';

let bed: UpstreamBed;
let proxy: ProxyProcess;

beforeAll(async () => {
  bed = await startUpstreamBed();
  proxy = await startProxyProcess({
    env: bed.env,
    configYaml: bed.configYaml(`
budgets:
  policies:
    - { name: three-a-minute, users: [rita, ruth], limitUsd: 100, rateLimits: { requestsPerMinute: 3 } }
    - { name: thousand-tokens, users: [tom], limitUsd: 100, rateLimits: { tokensPerMinute: 1000 } }
    - { name: two-at-once, users: [cora], limitUsd: 100, rateLimits: { concurrent: 2 } }
    - { name: one-at-once, users: [lea], limitUsd: 100, rateLimits: { concurrent: 1 } }
    - { name: eng, team: { name: eng, users: [ann, ben] }, limitUsd: 100, rateLimits: { requestsPerMinute: 3 } }
    - { name: ops, team: { name: ops, users: [olga] }, limitUsd: 100, rateLimits: { requestsPerMinute: 2 } }
`),
  });
});

afterAll(async () => {
  await proxy?.stop();
  await bed?.close();
});

function post(path: string, user: string, body: unknown): Promise<Response> {
  return fetch(`${proxy.url}${path}`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', 'x-tollgate-user': user, authorization: 'Bearer unused', 'anthropic-version': '2023-06-01' },
    body: typeof body === 'string' ? body : JSON.stringify(body),
  });
}

const chat = { model: 'gpt-4o-mini', max_tokens: 20, messages: [{ role: 'user', content: 'hi' }] };
const messages = { model: 'claude-sonnet-4', max_tokens: 20, messages: [{ role: 'user', content: 'hi' }] };

describe('requests per minute', () => {
  it('3 a minute on /v1/chat/completions: 3 calls answered with x-ratelimit-* headers, the 4th refused in the OpenAI shape and not sent', async () => {
    const sentBefore = bed.openai.requests.length;
    const answers = [];
    for (let i = 0; i < 3; i++) answers.push(await post('/v1/chat/completions', 'rita', chat));
    expect(answers.map((a) => a.status)).toEqual([200, 200, 200]);
    // The first call puts the window 60 / 3 = 20 s ahead: 2 left, full again in 20 s.
    expect(answers[0]!.headers.get('x-ratelimit-limit-requests')).toBe('3');
    expect(answers[0]!.headers.get('x-ratelimit-remaining-requests')).toBe('2');
    expect(answers[0]!.headers.get('x-ratelimit-reset-requests')).toBe('20s');
    expect(answers[2]!.headers.get('x-ratelimit-remaining-requests')).toBe('0');
    expect(answers[0]!.headers.get('x-ratelimit-limit-tokens')).toBeNull(); // no tokens limit on this policy
    const refused = await post('/v1/chat/completions', 'rita', chat);
    expect(refused.status).toBe(429);
    // The 4th would put the window 80 s ahead, 20 s past the minute, less the time the three calls took.
    const retryAfter = Number(refused.headers.get('retry-after'));
    expect(retryAfter).toBeGreaterThanOrEqual(18);
    expect(retryAfter).toBeLessThanOrEqual(20);
    expect(refused.headers.get('x-should-retry')).toBeNull();
    expect(refused.headers.get('x-ratelimit-remaining-requests')).toBe('0');
    expect(await refused.json()).toEqual({
      error: {
        message: `user "rita" has made the 3 requests per minute of policy "three-a-minute"; try again in ${retryAfter}s`,
        type: 'rate_limit_error',
        param: null,
        code: 'rate_limit_exceeded',
      },
    });
    expect(bed.openai.requests.length - sentBefore).toBe(3);
    const span = await findSpan(proxy.url, { spanId: refused.headers.get('x-proxy-span-id') });
    expect(span).toMatchObject({ status: 'rejected', user_id: 'rita', cost_usd: 0, error: expect.stringMatching(/^rate_limit_exceeded: user "rita" has made the 3 requests/) });
  });

  it('3 a minute on /v1/messages: the 4th refused in the Anthropic shape and not sent', async () => {
    const sentBefore = bed.anthropic.requests.length;
    for (let i = 0; i < 3; i++) expect((await post('/v1/messages', 'ruth', messages)).status).toBe(200);
    const refused = await post('/v1/messages', 'ruth', messages);
    expect(refused.status).toBe(429);
    const retryAfter = Number(refused.headers.get('retry-after'));
    expect(retryAfter).toBeGreaterThanOrEqual(18);
    expect(retryAfter).toBeLessThanOrEqual(20);
    expect(await refused.json()).toMatchObject({
      type: 'error',
      error: { type: 'rate_limit_error', message: `rate_limit_exceeded: user "ruth" has made the 3 requests per minute of policy "three-a-minute"; try again in ${retryAfter}s` },
    });
    expect(bed.anthropic.requests.length - sentBefore).toBe(3);
  });
});

describe('a team’s requests per minute (ADR 1313)', () => {
  it('3 a minute for ann and ben together: the 4th call, by either, is refused naming the team, and not sent', async () => {
    const sentBefore = bed.openai.requests.length;
    const answers = [];
    for (const user of ['ann', 'ben', 'ann']) answers.push(await post('/v1/chat/completions', user, chat));
    expect(answers.map((a) => a.status)).toEqual([200, 200, 200]);
    // The team's window, one request 20 s: after the 2nd call (ben's) 1 of 3 is left, 40 s to full (less the
    // milliseconds since ann's first call).
    expect(answers[1]!.headers.get('x-ratelimit-limit-requests')).toBe('3');
    expect(answers[1]!.headers.get('x-ratelimit-remaining-requests')).toBe('1');
    expect(answers[1]!.headers.get('x-ratelimit-reset-requests')).toMatch(/^(39\.\d+|40)s$/);
    const refused = await post('/v1/chat/completions', 'ben', chat);
    expect(refused.status).toBe(429);
    const retryAfter = Number(refused.headers.get('retry-after'));
    expect(retryAfter).toBeGreaterThanOrEqual(18);
    expect(retryAfter).toBeLessThanOrEqual(20);
    expect(refused.headers.get('x-ratelimit-remaining-requests')).toBe('0');
    expect(await refused.json()).toEqual({
      error: {
        message: `rate limit of team "eng" (user "ben"): the team has made the 3 requests per minute of policy "eng"; try again in ${retryAfter}s`,
        type: 'rate_limit_error',
        param: null,
        code: 'rate_limit_exceeded',
      },
    });
    expect(bed.openai.requests.length - sentBefore).toBe(3);
    const metrics = await (await fetch(`${proxy.url}/metrics`)).text();
    expect(metrics).toMatch(/tollgate_rate_limited_total\{limit="requests",level="team"\} 1\n/);
  });
});

describe('a user id that names a team (ADR 1312)', () => {
  it('x-tollgate-user: @team:ops is refused 400 naming the id, not sent, and counts nothing against team ops', async () => {
    const sentBefore = bed.openai.requests.length;
    const refused = await post('/v1/chat/completions', '@team:ops', chat);
    expect(refused.status).toBe(400);
    expect(await refused.json()).toEqual({
      error: {
        message:
          'user id "@team:ops" is reserved: ids starting with @team:, @workload: or @namespace: name the budgets above the user; the credential, x-tollgate-user or the request\'s user must name a user',
        type: 'invalid_request_error',
        param: null,
        code: 'reserved_user_id',
      },
    });
    expect(bed.openai.requests.length).toBe(sentBefore);
    // Team ops may make 2 calls a minute: olga's first leaves 1, her second 0; had the refused call been counted
    // as the team's, her second would be refused.
    const first = await post('/v1/chat/completions', 'olga', chat);
    expect(first.status).toBe(200);
    expect(first.headers.get('x-ratelimit-remaining-requests')).toBe('1');
    const second = await post('/v1/chat/completions', 'olga', chat);
    expect(second.status).toBe(200);
    expect(second.headers.get('x-ratelimit-remaining-requests')).toBe('0');
    expect(bed.openai.requests.length - sentBefore).toBe(2);
  });
});

describe('tokens per minute', () => {
  it('holds input + max output at admission, counts the real tokens after, and refuses once the window is spent', async () => {
    // Every answer reports 300 input + 100 output = 400 tokens.
    bed.openai.behave({ usage: { input: 300, output: 100 } });
    const body = '{"model":"gpt-4o-mini","max_tokens":100,"messages":[{"role":"user","content":"hi"}]}';
    expect(Buffer.byteLength(body)).toBe(84);
    const sentBefore = bed.openai.requests.length;
    // Each call holds ceil(84 / 4) = 21 input + 100 output = 121 tokens: 60 ms each at 1,000 a minute.
    const first = await post('/proxy/beta/v1/chat/completions', 'tom', body);
    expect(first.status).toBe(200);
    // 121 held of 1,000: 879 left; full again in 121 × 60 ms = 7.26 s.
    expect(first.headers.get('x-ratelimit-limit-tokens')).toBe('1000');
    expect(first.headers.get('x-ratelimit-remaining-tokens')).toBe('879');
    expect(first.headers.get('x-ratelimit-reset-tokens')).toBe('7.26s');
    // Settled at 400: then 400 + 121 = 521 fits, settled at 800; 800 + 121 = 921 fits, settled at 1,200.
    expect((await post('/proxy/beta/v1/chat/completions', 'tom', body)).status).toBe(200);
    expect((await post('/proxy/beta/v1/chat/completions', 'tom', body)).status).toBe(200);
    // 1,200 counted: the window is 72 s ahead and 121 more would be 79.26 s: refused for about 19.26 s.
    const refused = await post('/proxy/beta/v1/chat/completions', 'tom', body);
    expect(refused.status).toBe(429);
    const retryAfter = Number(refused.headers.get('retry-after'));
    expect(retryAfter).toBeGreaterThanOrEqual(18);
    expect(retryAfter).toBeLessThanOrEqual(20);
    expect(refused.headers.get('x-ratelimit-remaining-tokens')).toBe('0');
    expect(await refused.json()).toMatchObject({
      error: {
        code: 'rate_limit_exceeded',
        message: `user "tom" has 0 of the 1000 tokens per minute of policy "thousand-tokens" left and this call may use up to 121 tokens (its input and its max output tokens); try again in ${retryAfter}s`,
      },
    });
    expect(bed.openai.requests.length - sentBefore).toBe(3);
    bed.openai.behave({});
  });
});

describe('concurrent calls', () => {
  it('concurrent: 2 with 5 streamed calls at once: 2 go upstream, 3 are refused, and a slot comes back when a call ends', async () => {
    let release!: () => void;
    bed.openai.behave({ hold: new Promise<void>((resolve) => (release = resolve)) });
    const sentBefore = bed.openai.requests.length;
    const body = { ...chat, stream: true };
    let refusals = 0;
    const calls = Array.from({ length: 5 }, () =>
      post('/v1/chat/completions', 'cora', body).then(async (res) => {
        const text = await res.text();
        if (res.status === 429) refusals++;
        return { status: res.status, text };
      }),
    );
    // While both admitted replies are held, the three others are refused.
    await waitFor('two calls upstream and three refused', () => bed.openai.requests.length - sentBefore === 2 && refusals === 3);
    release();
    const results = await Promise.all(calls);
    expect(results.filter((r) => r.status === 200)).toHaveLength(2);
    const refused = results.filter((r) => r.status === 429);
    expect(refused).toHaveLength(3);
    for (const r of refused) {
      expect(JSON.parse(r.text)).toMatchObject({
        error: { code: 'rate_limit_exceeded', message: 'user "cora" has 2 calls in flight, the concurrent limit of policy "two-at-once"; try again in 1s' },
      });
    }
    for (const r of results.filter((r) => r.status === 200)) expect(r.text).toContain('data: [DONE]');
    expect(bed.openai.requests.length - sentBefore).toBe(2);
    // Both ended: both slots are free again.
    const again = await Promise.all([post('/v1/chat/completions', 'cora', body), post('/v1/chat/completions', 'cora', body)]);
    expect(again.map((r) => r.status)).toEqual([200, 200]);
    await Promise.all(again.map((r) => r.text()));
    bed.openai.behave({});
  });
});

/** A streamed /v1 call whose caller hangs up at the first bytes; resolves with the call's span id. */
function streamAndLeave(user: string): Promise<string> {
  return new Promise((resolve, reject) => {
    const body = JSON.stringify({ ...chat, stream: true });
    const req = request(`${proxy.url}/v1/chat/completions`, {
      method: 'POST',
      agent: false,
      headers: { 'content-type': 'application/json', 'content-length': Buffer.byteLength(body), 'x-tollgate-user': user },
    });
    req.once('response', (res) => {
      if (res.statusCode !== 200) return reject(new Error(`status ${res.statusCode}`));
      res.once('data', () => {
        req.destroy();
        resolve(String(res.headers['x-proxy-span-id']));
      });
    });
    req.once('error', (error) => {
      if (!req.destroyed) reject(error);
    });
    req.end(body);
  });
}

describe('a caller who leaves', () => {
  it('keeps its slot while the proxy reads on for the usage, and frees it once, when the call ends', async () => {
    let releaseTail!: () => void;
    // The stream's last events (finish, usage) are held: the call goes on after its caller has left.
    bed.openai.behave({ holdTail: new Promise<void>((resolve) => (releaseTail = resolve)) });
    const spanId = await streamAndLeave('lea');
    await waitFor('the proxy to notice the caller left', () => proxy.logs.some((line) => line.span_id === spanId && String(line.msg).startsWith('caller left mid-answer')));
    const during = await post('/v1/chat/completions', 'lea', chat);
    expect(during.status).toBe(429);
    expect(((await during.json()) as { error: { message: string } }).error.message).toContain('has 1 calls in flight');
    releaseTail();
    await findSpan(proxy.url, { spanId });
    // One slot again, not two: of two calls at once (their answers held), one goes upstream and one is refused.
    let releaseReplies!: () => void;
    bed.openai.behave({ hold: new Promise<void>((resolve) => (releaseReplies = resolve)) });
    const sentBefore = bed.openai.requests.length;
    const both = [post('/v1/chat/completions', 'lea', chat), post('/v1/chat/completions', 'lea', chat)];
    const refused = await Promise.race(both);
    expect(refused.status).toBe(429);
    await waitFor('the admitted one upstream', () => bed.openai.requests.length - sentBefore === 1);
    releaseReplies();
    expect((await Promise.all(both)).map((r) => r.status).sort()).toEqual([200, 429]);
    expect(bed.openai.requests.length - sentBefore).toBe(1);
    bed.openai.behave({});
  });
});

describe('bad rate limits', () => {
  it('the config API refuses them with 400 naming the field, and changes nothing', async () => {
    const res = await fetch(`${proxy.url}/_local/api/config`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ budgets: { policies: [{ name: 'p', limitUsd: 1, rateLimits: { concurrent: 0 } }] } }),
    });
    expect(res.status).toBe(400);
    expect(await res.text()).toContain('budgets.policies[0].rateLimits.concurrent must be a whole number from 1 to 10000 (got 0)');
    // The policies in force are the file's: rita is still limited.
    expect((await post('/v1/chat/completions', 'rita', chat)).status).toBe(429);
  });

  it('a config file with one stops the proxy at start with exit code 2, naming the field', async () => {
    const { code, stderr } = await refusedConfigFile('budgets:\n  policies:\n    - { name: p, limitUsd: 1, rateLimits: { requestsPerMinute: 1000001 } }\n');
    expect(code).toBe(2);
    expect(stderr).toContain('budgets.policies[0].rateLimits.requestsPerMinute must be a whole number from 1 to 1000000 (got 1000001)');
  });
});
