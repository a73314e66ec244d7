// Results billed when they are known (ADR 0913) on a real `tollgate proxy` process, through the official SDKs:
// an Anthropic Message Batch and an OpenAI background response are admitted holding a reservation that
// outlives the submitting call, and are charged to the submitter, once, when their result is read.
//
// Prices for the whole file (overriding the defaults): claude-haiku-4-5 and gpt-4o-mini both at 100 USD per
// million input tokens and 2,000 per million output tokens. The fakes report 1,000 input and 200 output tokens
// for every request:
//   one request at full price: 1,000 × 100 / 10⁶ + 200 × 2,000 / 10⁶ = 0.10 + 0.40 = 0.50 USD
//   one batch request at Anthropic's batch price (half of both): 0.25 USD

import Anthropic from '@anthropic-ai/sdk';
import OpenAI, { toFile } from 'openai';
import { randomUUID } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { request } from 'node:http';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { findSpan, recentSpans } from '../support/spans.ts';
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
    - { provider: anthropic, model: claude-haiku-4-5, input_per_million: 100, output_per_million: 2000 }
    - { provider: openai, model: gpt-4o-mini, input_per_million: 100, output_per_million: 2000 }
budgets:
  policies:
    - { name: tight, users: ["tight"], limitUsd: 0.15, period: month, enforcement: block }
    - { name: roomy, users: ["*"], limitUsd: 1, period: month, enforcement: block }
`),
  });
  bed.anthropic.behave({ usage: { input: 1000, output: 200 } });
  bed.openai.behave({ usage: { input: 1000, output: 200 } });
});

afterAll(async () => {
  await proxy?.stop();
  await bed?.close();
});

async function budgetOf(user: string): Promise<{ spent_usd: number }> {
  return (await (await fetch(`${proxy.url}/_local/api/budgets/${user}`)).json()) as { spent_usd: number };
}

async function reservingUsers(): Promise<number> {
  const health = (await (await fetch(`${proxy.url}/_local/api/health`)).json()) as { budgets: { reservingUsers: number } };
  return health.budgets.reservingUsers;
}

/** The spans of calls sent with this x-request-id, oldest first. */
async function spansOf(requestId: string) {
  return (await recentSpans(proxy.url)).filter((span) => span.request_id === requestId).reverse();
}

// 93 bytes as the proxy reads it: {"model":"claude-haiku-4-5","max_tokens":100,"messages":[{"role":"user","content":"Say hi"}]}
const params = { model: 'claude-haiku-4-5', max_tokens: 100, messages: [{ role: 'user' as const, content: 'Say hi' }] };

describe('Anthropic Message Batches through /proxy/gamma-direct', () => {
  const client = (user: string) => new Anthropic({ baseURL: `${proxy.url}/proxy/gamma-direct`, apiKey: 'unused', maxRetries: 0, defaultHeaders: { 'x-tollgate-user': user } });

  it('a batch the budget cannot hold is refused before it reaches Anthropic', async () => {
    const sent = bed.anthropic.requests.length;
    // Each request holds ceil(93 / 4) = 24 input tokens × 100 / 10⁶ = 0.0024 plus max_tokens 100 × 2,000 / 10⁶
    // = 0.20, at half price: 0.1012; two of them 0.2024, past the 0.15 limit.
    const refused = await client('tight')
      .messages.batches.create({
        requests: [
          { custom_id: 'a', params },
          { custom_id: 'b', params },
        ],
      })
      .catch((error: unknown) => error);
    expect(refused).toBeInstanceOf(Anthropic.RateLimitError);
    expect((refused as InstanceType<typeof Anthropic.RateLimitError>).message).toMatch(
      /has 0\.15 USD left of the 0\.15 USD monthly budget of policy \\"tight\\".*may cost up to 0\.2024 USD/,
    );
    expect(bed.anthropic.requests.length).toBe(sent);
    expect(await reservingUsers()).toBe(0);
  });

  it('holds the reservation until the results are read, charges them once at the batch price', async () => {
    const batcher = client('batcher');
    const batch = await batcher.messages.batches.create({
      requests: [
        { custom_id: 'first', params },
        { custom_id: 'second', params },
      ],
    });
    expect(batch).toMatchObject({ type: 'message_batch', processing_status: 'in_progress' });
    // The submission's answer has come, and its hold (0.2024) is still there: nothing charged yet.
    expect(await reservingUsers()).toBe(1);
    expect((await budgetOf('batcher')).spent_usd).toBe(0);
    expect((await batcher.messages.batches.retrieve(batch.id)).processing_status).toBe('in_progress');
    const ended = await batcher.messages.batches.retrieve(batch.id);
    // The SDK reads the results where results_url says: the proxy's route, not Anthropic (the fake).
    expect(ended.results_url).toBe(`${proxy.url}/proxy/gamma-direct/v1/messages/batches/${batch.id}/results`);

    const firstRead = randomUUID();
    const lines = [];
    for await (const line of await batcher.messages.batches.results(batch.id, {}, { headers: { 'x-request-id': firstRead } })) lines.push(line);
    expect(lines.map((line) => [line.custom_id, line.result.type])).toEqual([
      ['first', 'succeeded'],
      ['second', 'succeeded'],
    ]);
    // Two lines of 1,000 input and 200 output tokens, 0.25 each at the batch price: 0.50, charged to the submitter.
    const read = await waitFor('the results read span', async () => (await spansOf(firstRead)).find((span) => span.input_tokens > 0));
    expect(read).toMatchObject({ name: 'batch claude-haiku-4-5', model: 'claude-haiku-4-5', user_id: 'batcher', input_tokens: 2000, output_tokens: 400, status: 'ok' });
    expect(read.cost_usd).toBeCloseTo(0.5, 10);
    expect((await budgetOf('batcher')).spent_usd).toBeCloseTo(0.5, 10);
    expect(await reservingUsers()).toBe(0);

    // Read again: the same lines, nothing charged.
    const secondRead = randomUUID();
    const again = [];
    for await (const line of await batcher.messages.batches.results(batch.id, {}, { headers: { 'x-request-id': secondRead } })) again.push(line);
    expect(again).toHaveLength(2);
    const spans = await waitFor('the second read spans', async () => {
      const found = await spansOf(secondRead);
      return found.length === 2 ? found : undefined;
    });
    expect(spans.map((span) => span.cost_usd)).toEqual([0, 0]);
    expect((await budgetOf('batcher')).spent_usd).toBeCloseTo(0.5, 10);
  });

  it('a batch whose request names no model is refused with the request it is, and nothing is sent', async () => {
    const sent = bed.anthropic.requests.length;
    const res = await fetch(`${proxy.url}/proxy/gamma-direct/v1/messages/batches`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', 'x-api-key': 'unused', 'anthropic-version': '2023-06-01', 'x-tollgate-user': 'batcher' },
      body: JSON.stringify({
        requests: [
          { custom_id: 'a', params },
          { custom_id: 'b', params: { max_tokens: 10, messages: [] } },
        ],
      }),
    });
    expect(res.status).toBe(400);
    expect(await res.text()).toContain('requests[1].params must be a Messages request with a string \\"model\\"');
    expect(bed.anthropic.requests.length).toBe(sent);
  });
});

describe('OpenAI background responses through /proxy/beta', () => {
  const client = (user: string) => new OpenAI({ baseURL: `${proxy.url}/proxy/beta/v1`, apiKey: 'unused', maxRetries: 0, defaultHeaders: { 'x-tollgate-user': user } });
  // 82 bytes as the proxy reads it: {"model":"gpt-4o-mini","input":"Say hi","background":true,"max_output_tokens":100}
  const request = { model: 'gpt-4o-mini', input: 'Say hi', background: true, max_output_tokens: 100 };

  it('a background response the budget cannot hold is refused before it reaches OpenAI', async () => {
    const sent = bed.openai.requests.length;
    // ceil(82 / 4) = 21 input tokens × 100 / 10⁶ = 0.0021, plus 100 × 2,000 / 10⁶ = 0.20: 0.2021 > 0.15.
    const refused = await client('tight')
      .responses.create(request)
      .catch((error: unknown) => error);
    expect(refused).toBeInstanceOf(OpenAI.RateLimitError);
    expect((refused as InstanceType<typeof OpenAI.RateLimitError>).message).toMatch(/may cost up to 0\.2021 USD/);
    expect(bed.openai.requests.length).toBe(sent);
  });

  it('is charged once, at full price, when a read shows it completed', async () => {
    const poller = client('poller');
    const queued = await poller.responses.create(request);
    expect(queued.status).toBe('queued');
    expect(await reservingUsers()).toBe(1);
    expect((await poller.responses.retrieve(queued.id)).status).toBe('in_progress');
    expect((await budgetOf('poller')).spent_usd).toBe(0);
    const reads = [randomUUID(), randomUUID()];
    const done = await poller.responses.retrieve(queued.id, {}, { headers: { 'x-request-id': reads[0]! } });
    expect(done).toMatchObject({ status: 'completed', usage: { input_tokens: 1000, output_tokens: 200 } });
    // 1,000 × 100 / 10⁶ + 200 × 2,000 / 10⁶ = 0.50, charged to the submitter; the hold is given back.
    const [charged] = await waitFor('the completed read span', async () => {
      const found = await spansOf(reads[0]!);
      return found.length === 1 ? found : undefined;
    });
    expect(charged).toMatchObject({ user_id: 'poller', model: 'gpt-4o-mini', input_tokens: 1000, output_tokens: 200 });
    expect(charged!.cost_usd).toBeCloseTo(0.5, 10);
    expect((await budgetOf('poller')).spent_usd).toBeCloseTo(0.5, 10);
    expect(await reservingUsers()).toBe(0);
    // Read again: completed still, nothing charged.
    expect((await poller.responses.retrieve(queued.id, {}, { headers: { 'x-request-id': reads[1]! } })).status).toBe('completed');
    const [free] = await waitFor('the second read span', async () => {
      const found = await spansOf(reads[1]!);
      return found.length === 1 ? found : undefined;
    });
    expect(free).toMatchObject({ cost_usd: 0, input_tokens: 0 });
    expect((await budgetOf('poller')).spent_usd).toBeCloseTo(0.5, 10);
  });
});

/**
 * Submits a streamed background response as `user` and hangs up once the stream named the response's id (in
 * response.created); resolves with the id and the submission's span id once the proxy noticed the caller left.
 */
async function submitStreamAndHangUp(user: string, body: unknown): Promise<{ id: string; spanId: string }> {
  const payload = JSON.stringify(body);
  const left = await new Promise<{ id: string; spanId: string }>((resolve, reject) => {
    const req = request(`${proxy.url}/proxy/beta/v1/responses`, {
      method: 'POST',
      agent: false,
      headers: { 'content-type': 'application/json', 'content-length': Buffer.byteLength(payload), 'x-tollgate-user': user },
    });
    req.once('response', (res) => {
      let text = '';
      res.on('data', (chunk: Buffer) => {
        text += chunk.toString('utf8');
        const id = /"id":"(resp_[A-Za-z0-9]+)"/.exec(text)?.[1];
        if (id === undefined || req.destroyed) return;
        req.destroy();
        resolve({ id, spanId: String(res.headers['x-proxy-span-id']) });
      });
    });
    req.once('error', (error) => {
      if (!req.destroyed) reject(error);
    });
    req.end(payload);
  });
  await waitFor('the proxy to notice the caller left', () => proxy.logs.some((line) => line.span_id === left.spanId && String(line.msg).startsWith('caller left mid-answer')));
  return left;
}

describe('OpenAI background responses streamed (stream: true) through /proxy/beta', () => {
  const client = (user: string) => new OpenAI({ baseURL: `${proxy.url}/proxy/beta/v1`, apiKey: 'unused', maxRetries: 0, defaultHeaders: { 'x-tollgate-user': user } });
  const request = { model: 'gpt-4o-mini', input: 'Say hi', background: true, stream: true, max_output_tokens: 100 } as const;

  it('whose caller leaves before the usage: the submission charges nothing, the read charges it once', async () => {
    let release!: () => void;
    const tail = new Promise<void>((resolve) => (release = resolve));
    // 3 MB of text before the held usage: the proxy reads on 2 MiB after the caller left, then stops (ADR 1305).
    bed.openai.behave({ usage: { input: 1000, output: 200 }, bigBodyBytes: 3_000_000, holdTail: tail, forRequests: 1 });
    try {
      const { id, spanId } = await submitStreamAndHangUp('streamer', request);
      const submitted = await findSpan(proxy.url, { spanId }, 15_000);
      // Its cost is the response's, charged when read: an estimate here would be charged a second time then.
      expect(submitted).toMatchObject({ status: 'client_aborted', usage_estimated: false, cost_usd: 0, user_id: 'streamer' });
      expect((await budgetOf('streamer')).spent_usd).toBe(0);
      const reader = client('streamer');
      expect((await reader.responses.retrieve(id)).status).toBe('in_progress');
      const readId = randomUUID();
      expect((await reader.responses.retrieve(id, {}, { headers: { 'x-request-id': readId } })).status).toBe('completed');
      const read = await findSpan(proxy.url, { requestId: readId });
      // 1,000 × 100 / 10⁶ + 200 × 2,000 / 10⁶ = 0.50, once.
      expect(read).toMatchObject({ user_id: 'streamer', input_tokens: 1000, output_tokens: 200 });
      expect(read.cost_usd).toBeCloseTo(0.5, 10);
      expect((await budgetOf('streamer')).spent_usd).toBeCloseTo(0.5, 10);
    } finally {
      release();
      bed.openai.behave({ usage: { input: 1000, output: 200 } });
    }
  });

  it('read to its end: charged by its own stream, and a read by id charges nothing', async () => {
    const streamed = await client('streamer2').responses.create(request).withResponse();
    const types: string[] = [];
    let id = '';
    for await (const event of streamed.data) {
      types.push(event.type);
      if (event.type === 'response.created') id = event.response.id;
    }
    expect(types.slice(0, 3)).toEqual(['response.created', 'response.queued', 'response.in_progress']);
    expect(types.at(-1)).toBe('response.completed');
    const submitted = await findSpan(proxy.url, { spanId: streamed.response.headers.get('x-proxy-span-id') });
    expect(submitted).toMatchObject({ input_tokens: 1000, output_tokens: 200 });
    expect(submitted.cost_usd).toBeCloseTo(0.5, 10);
    // The fake shows it in_progress on the first read, then completed with its usage: neither charges again.
    const reader = client('streamer2');
    expect((await reader.responses.retrieve(id)).status).toBe('in_progress');
    const readId = randomUUID();
    expect(await reader.responses.retrieve(id, {}, { headers: { 'x-request-id': readId } })).toMatchObject({ status: 'completed', usage: { input_tokens: 1000 } });
    expect(await findSpan(proxy.url, { requestId: readId })).toMatchObject({ cost_usd: 0, input_tokens: 0 });
    expect((await budgetOf('streamer2')).spent_usd).toBeCloseTo(0.5, 10);
  });
});

describe('OpenAI batches through /proxy/beta', () => {
  const client = (user: string) => new OpenAI({ baseURL: `${proxy.url}/proxy/beta/v1`, apiKey: 'unused', maxRetries: 0, defaultHeaders: { 'x-tollgate-user': user } });
  // Each request's body is 88 bytes: {"model":"gpt-4o-mini","max_tokens":100,"messages":[{"role":"user","content":"Say hi"}]}
  const input = ['first', 'second']
    .map((id) =>
      JSON.stringify({
        custom_id: id,
        method: 'POST',
        url: '/v1/chat/completions',
        body: { model: 'gpt-4o-mini', max_tokens: 100, messages: [{ role: 'user', content: 'Say hi' }] },
      }),
    )
    .join('\n');
  const upload = async (openai: OpenAI) => openai.files.create({ file: await toFile(Buffer.from(input), 'requests.jsonl'), purpose: 'batch' });
  const created = () => bed.openai.requests.filter((request) => request.method === 'POST' && request.path === '/v1/batches').length;

  it('a batch the budget cannot hold is refused before it reaches OpenAI; the reservation is read from its input file', async () => {
    const tight = client('tight');
    const file = await upload(tight);
    const before = created();
    // Each request holds ceil(88 / 4) = 22 input tokens × 100 / 10⁶ = 0.0022 plus max_tokens 100 × 2,000 / 10⁶
    // = 0.20, at half price: 0.1011; two of them 0.2022, past the 0.15 limit.
    const refused = await tight.batches.create({ input_file_id: file.id, endpoint: '/v1/chat/completions', completion_window: '24h' }).catch((error: unknown) => error);
    expect(refused).toBeInstanceOf(OpenAI.RateLimitError);
    expect((refused as InstanceType<typeof OpenAI.RateLimitError>).message).toMatch(/may cost up to 0\.2022 USD/);
    expect(created()).toBe(before);
  });

  it('a batch naming a file the provider does not have is refused naming it, and not created', async () => {
    const before = created();
    const refused = await client('batcher')
      .batches.create({ input_file_id: 'file-missing', endpoint: '/v1/chat/completions', completion_window: '24h' })
      .catch((error: unknown) => error);
    expect(refused).toBeInstanceOf(OpenAI.BadRequestError);
    expect((refused as Error).message).toContain('input_file_id "file-missing" could not be read to reserve the batch\'s cost: the provider answered 404');
    expect(created()).toBe(before);
  });

  it('holds the reservation until the output file is read, charges it once at the batch price', async () => {
    const openai = client('filer');
    const file = await upload(openai);
    const batch = await openai.batches.create({ input_file_id: file.id, endpoint: '/v1/chat/completions', completion_window: '24h' });
    expect(batch.status).toBe('validating');
    expect(await reservingUsers()).toBe(1);
    expect((await openai.batches.retrieve(batch.id)).status).toBe('in_progress');
    const done = await openai.batches.retrieve(batch.id);
    expect(done.status).toBe('completed');

    const firstRead = randomUUID();
    const output = await (await openai.files.content(done.output_file_id!, { headers: { 'x-request-id': firstRead } })).text();
    expect(
      output
        .trim()
        .split('\n')
        .map((line) => (JSON.parse(line) as { custom_id: string }).custom_id),
    ).toEqual(['first', 'second']);
    // Two chat completions of 1,000 input and 200 output tokens, 0.25 each at the batch price: 0.50, to the submitter.
    const [read] = await waitFor('the output read span', async () => {
      const found = await spansOf(firstRead);
      return found.length === 1 ? found : undefined;
    });
    expect(read).toMatchObject({ name: 'batch gpt-4o-mini', user_id: 'filer', input_tokens: 2000, output_tokens: 400, status: 'ok' });
    expect(read!.cost_usd).toBeCloseTo(0.5, 10);
    expect((await budgetOf('filer')).spent_usd).toBeCloseTo(0.5, 10);
    expect(await reservingUsers()).toBe(0);

    const secondRead = randomUUID();
    expect(await (await openai.files.content(done.output_file_id!, { headers: { 'x-request-id': secondRead } })).text()).toBe(output);
    const [again] = await waitFor('the second read span', async () => {
      const found = await spansOf(secondRead);
      return found.length === 1 ? found : undefined;
    });
    expect(again!.cost_usd).toBe(0);
    expect((await budgetOf('filer')).spent_usd).toBeCloseTo(0.5, 10);
  });
});

describe('a proxy restarted over its files', () => {
  it('still charges a batch read after the restart to its submitter, and only once', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'tollgate-deferred-'));
    const config = bed.configYaml(`
pricing:
  models:
    - { provider: anthropic, model: claude-haiku-4-5, input_per_million: 100, output_per_million: 2000 }
budgets:
  policies:
    - { name: roomy, users: ["*"], limitUsd: 1, period: month, enforcement: block }
`);
    let first: ProxyProcess | undefined = await startProxyProcess({ env: bed.env, configYaml: config, dir });
    let second: ProxyProcess | undefined;
    try {
      const submitter = new Anthropic({ baseURL: `${first.url}/proxy/gamma-direct`, apiKey: 'unused', maxRetries: 0, defaultHeaders: { 'x-tollgate-user': 'restarter' } });
      const batch = await submitter.messages.batches.create({ requests: [{ custom_id: 'only', params }] });
      await submitter.messages.batches.retrieve(batch.id);
      await first.stop();
      first = undefined;

      second = await startProxyProcess({ env: bed.env, configYaml: config, dir });
      const url = second.url;
      const reader = new Anthropic({ baseURL: `${url}/proxy/gamma-direct`, apiKey: 'unused', maxRetries: 0, defaultHeaders: { 'x-tollgate-user': 'reader' } });
      const read = async () => {
        const requestId = randomUUID();
        for await (const line of await reader.messages.batches.results(batch.id, {}, { headers: { 'x-request-id': requestId } })) expect(line.result.type).toBe('succeeded');
        return waitFor('the results read span', async () => (await recentSpans(url)).find((span) => span.request_id === requestId && span.name.startsWith('batch')));
      };
      // One line of 1,000 input and 200 output tokens at the batch price: 0.25, to the user who submitted it.
      const charged = await read();
      expect(charged).toMatchObject({ user_id: 'restarter', input_tokens: 1000, output_tokens: 200 });
      expect(charged.cost_usd).toBeCloseTo(0.25, 10);
      expect((await read()).cost_usd).toBe(0);
      const budgets = async (user: string) => (await (await fetch(`${url}/_local/api/budgets/${user}`)).json()) as { spent_usd: number };
      expect((await budgets('restarter')).spent_usd).toBeCloseTo(0.25, 10);
      expect((await budgets('reader')).spent_usd).toBe(0);
    } finally {
      await first?.stop();
      await second?.stop();
      rmSync(dir, { recursive: true, force: true });
    }
  });
});
