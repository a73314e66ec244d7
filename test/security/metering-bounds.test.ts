// Numbers that used to take the process down or poison the cost column. A price of 2e302 was accepted ("finite
// and ≥ 0"), and the first call costed with it threw a RangeError in a response listener: the process exited
// after answering 200. An upstream reporting 1.7e308 prompt tokens stored an infinite cost, so SUM(cost) was
// Inf; 1e20 tokens recorded $7.5e13. Prices are bounded wherever they enter, and implausible usage is
// refused and marked on the span, never costed.

import { join } from 'node:path';
import Database from 'better-sqlite3';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { startProxyProcess } from '../e2e/proxy-process.ts';
import { chat, chatCompletion, defaultReply, postJson, startSecurityBed, type SecurityBed } from './security-bed.ts';

let bed: SecurityBed;

beforeAll(async () => {
  bed = await startSecurityBed();
});

afterAll(async () => {
  await bed?.close();
});

afterEach(() => {
  bed.reply = defaultReply;
  bed.upstream.calls.length = 0;
});

async function alive(): Promise<void> {
  expect(bed.proxy.child.exitCode).toBeNull();
  expect((await fetch(`${bed.proxy.url}/healthz`)).status).toBe(200);
}

describe('prices are bounded wherever they enter', () => {
  it.each([
    ['input_per_million', { input_per_million: 2e302, output_per_million: 1 }],
    ['cache_write_per_million', { input_per_million: 1, output_per_million: 1, cache_write_per_million: 5e302 }],
    ['output_per_million', { input_per_million: 1, output_per_million: 100_001 }],
  ])('the config API refuses %s past 100000 USD per million, and a call afterwards is costed and answered', async (field, prices) => {
    const before = await (await fetch(`${bed.proxy.url}/_local/api/config`)).json();
    const res = await postJson(bed, '/_local/api/config', { pricing: { models: [{ provider: 'openai', model: 'gpt-4o-mini', ...prices }] } });
    expect(res.status).toBe(400);
    expect(((await res.json()) as { error: { message: string } }).error.message).toMatch(new RegExp(`^pricing\\.models\\[0\\]\\.${field} must be at most 100000`));
    expect(await (await fetch(`${bed.proxy.url}/_local/api/config`)).json()).toEqual(before);
    const call = await postJson(bed, '/proxy/beta/v1/chat/completions', chat);
    expect(call.status).toBe(200);
    expect(await bed.span(call.headers.get('x-proxy-span-id'))).toMatchObject({ status: 'ok', priced: true, cost_usd: 0.0000048 });
    await alive();
  });

  it('the config file with such a price stops start-up naming the field', async () => {
    const failure = await startProxyProcess({
      configYaml: 'pricing:\n  models: [ { provider: openai, model: gpt-4o-mini, input_per_million: 1, output_per_million: 1, cache_write_per_million: 5e302 } ]\n',
    }).then(
      async (proxy) => {
        await proxy.stop();
        return 'started';
      },
      (error: Error) => error.message,
    );
    expect(failure).toMatch(/exited with 2: .*pricing\.models\[0\]\.cache_write_per_million must be at most 100000 USD per million tokens/);
  });
});

describe('usage no call can have is refused and marked, never costed', () => {
  it.each([
    ['1.7e308 prompt tokens', { prompt_tokens: 1.7e308, completion_tokens: 5, total_tokens: 1.7e308 }],
    ['1e20 completion tokens', { prompt_tokens: 12, completion_tokens: 1e20, total_tokens: 1e20 }],
  ])('%s: the caller gets its answer, the span says why it has no usage, and costs stay finite', async (_what, usage) => {
    bed.reply = (_call, res) => res.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify(chatCompletion(usage)));
    const res = await postJson(bed, '/proxy/beta/v1/chat/completions', chat);
    expect(res.status).toBe(200);
    expect(((await res.json()) as { usage: unknown }).usage).toEqual(usage); // passed through untouched
    const span = await bed.span(res.headers.get('x-proxy-span-id'));
    expect(span).toMatchObject({ status: 'error', cost_usd: 0, input_tokens: 0, output_tokens: 0, total_tokens: 0 });
    expect(span!.error).toMatch(/^usage_implausible: upstream reported .* tokens, more than the 100000000 one call can use; usage not recorded$/);
    const db = new Database(join(bed.proxy.dir, 'spans.db'), { readonly: true });
    try {
      const { total } = db.prepare('SELECT SUM(gen_ai_cost_usd) AS total FROM spans').get() as { total: number };
      expect(Number.isFinite(total)).toBe(true);
      expect(total).toBeLessThan(1);
    } finally {
      db.close();
    }
    await alive();
  });

  it('a streamed answer reporting them is handled the same way', async () => {
    bed.reply = (_call, res) => {
      res.writeHead(200, { 'content-type': 'text/event-stream' });
      res.write('data: {"id":"c","object":"chat.completion.chunk","model":"gpt-4o-mini","choices":[{"index":0,"delta":{"content":"Hi"},"finish_reason":null}]}\n\n');
      res.write(
        'data: {"id":"c","object":"chat.completion.chunk","model":"gpt-4o-mini","choices":[],"usage":{"prompt_tokens":1e300,"completion_tokens":2,"total_tokens":1e300}}\n\n',
      );
      res.end('data: [DONE]\n\n');
    };
    const res = await postJson(bed, '/proxy/beta/v1/chat/completions', { ...chat, stream: true, stream_options: { include_usage: true } });
    expect(await res.text()).toContain('[DONE]');
    expect(await bed.span(res.headers.get('x-proxy-span-id'))).toMatchObject({ status: 'error', cost_usd: 0, error: expect.stringMatching(/^usage_implausible: /) });
    await alive();
  });
});
