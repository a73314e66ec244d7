// Model aliases and fallback as their users meet them: the official openai SDK (chat completions and the
// Responses API) and @anthropic-ai/sdk (Messages), streamed and not, call an alias whose first target fails on
// demand (429 with Retry-After, 500, a reset connection, a hang past its timeout, an open breaker). The answer
// must come from the next target, the spans must show every attempt under the call's span, and the call must be
// charged once, for the target that answered. A failure the alias does not fall back on (a 400), and a stream
// that has started, are never switched.

import Anthropic from '@anthropic-ai/sdk';
import OpenAI from 'openai';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import type { SpanJson } from '../../sidecar/src/spans/span-json.ts';
import { findSpan } from '../support/spans.ts';
import { waitFor } from '../support/wait-for.ts';
import { startProxyProcess, type ProxyProcess } from './proxy-process.ts';
import { startUpstreamBed, type UpstreamBed } from './upstream-bed.ts';

const SONNET_VERTEX = 'claude-sonnet-4-5@20250929';
const SONNET_BEDROCK = 'us.anthropic.claude-sonnet-4-5-20250929-v1:0';

/*
 * Costs worked out by hand for the fakes' 1000 input and 200 output tokens (USD per million):
 * claude-sonnet-4-5 (3 / 15): 3000 + 3000 = 6000 → 0.006; claude-haiku-4-5 (1 / 5): 1000 + 1000 → 0.002;
 * gpt-4o-mini (0.15 / 0.6): 150 + 120 = 270 → 0.00027.
 */
const SONNET_COST = 0.006;
const HAIKU_COST = 0.002;

let bed: UpstreamBed;
let proxy: ProxyProcess;
let openai: OpenAI;
let anthropic: Anthropic;

beforeAll(async () => {
  bed = await startUpstreamBed();
  proxy = await startProxyProcess({
    env: bed.env,
    configYaml: bed
      .configYaml(
        `
breaker: { consecutiveFailures: 3, failureRatio: 1, minimumRequests: 1000, windowMs: 60000, openMs: 60000 }
models:
  claude-sonnet:
    targets:
      - { route: gamma-direct, model: claude-sonnet-4-5 }
      - { route: gamma, model: "${SONNET_VERTEX}", priority: 1 }
      - { route: gamma-cloudb, model: "${SONNET_BEDROCK}", priority: 1 }
  sonnet-fast:
    targets:
      - { route: gamma-direct, model: claude-sonnet-4-5-20250929 }
      - { route: gamma-cloudb, model: "${SONNET_BEDROCK}", priority: 1 }
    timeoutMs: 20000
  haiku:
    targets:
      - { route: gamma-direct, model: claude-haiku-4-5 }
      - { route: gamma, model: claude-haiku-4-5@20251001, priority: 1 }
    fallbackOn: [rate_limited, server_error, unreachable, timeout]
  mini:
    targets:
      - { route: beta, model: gpt-4o-mini }
      - { route: gamma-direct, model: claude-haiku-4-5-20251001, priority: 1 }
  claude-first:
    targets:
      - { route: gamma-direct, model: claude-haiku-4-5 }
      - { route: beta, model: gpt-4o-mini, priority: 1 }
`,
      )
      .replace('gamma-direct: { baseUrl: "', 'gamma-direct: { timeoutMs: 1500, baseUrl: "'),
  });
  openai = new OpenAI({ baseURL: `${proxy.url}/v1`, apiKey: 'unused', maxRetries: 0, defaultHeaders: { 'x-tollgate-user': 'ada' } });
  anthropic = new Anthropic({ baseURL: proxy.url, apiKey: 'unused', maxRetries: 0, defaultHeaders: { 'x-tollgate-user': 'ada' } });
});

afterAll(async () => {
  await proxy?.stop();
  await bed?.close();
});

beforeEach(() => {
  bed.reset();
  for (const fake of [bed.openai, bed.anthropic, bed.vertex, bed.bedrock]) fake.behave({ usage: { input: 1000, output: 200 } });
});

async function spansOfTrace(traceId: string): Promise<SpanJson[]> {
  const all = ((await (await fetch(`${proxy.url}/_local/api/traces?limit=200`)).json()) as { spans: SpanJson[] }).spans;
  return all.filter((span) => span.trace_id === traceId);
}

/** The call's span and its attempts' spans (ordered by attempt), once all are stored. */
async function callAndAttempts(spanId: string, attempts: number): Promise<{ call: SpanJson; attempts: SpanJson[] }> {
  const call = await findSpan(proxy.url, { spanId });
  let children: SpanJson[] = [];
  await waitFor(`${attempts} attempt spans under ${spanId}`, async () => {
    children = (await spansOfTrace(call.trace_id)).filter((span) => span.parent_span_id === spanId && span.attempt !== null);
    return children.length === attempts;
  });
  return { call, attempts: children.sort((a, b) => a.attempt! - b.attempt!) };
}

describe('an alias falls back to its next target, and the caller gets one answer', () => {
  it('chat completions: a 429 with Retry-After moves the call to priority 1, cools the target down, and charges the call once', async () => {
    bed.anthropic.behave({ status: 429, errorHeaders: { 'retry-after': '30' }, forRequests: 1 });
    const { data, response } = await openai.chat.completions.create({ model: 'claude-sonnet', messages: [{ role: 'user', content: 'hi' }] }).withResponse();
    expect(data.choices[0]!.message.content).toBeTruthy();
    expect(data.usage).toMatchObject({ prompt_tokens: 1000, completion_tokens: 200 });
    const { call, attempts } = await callAndAttempts(response.headers.get('x-proxy-span-id')!, 2);
    expect(['gamma', 'gamma-cloudb']).toContain(call.route);
    expect(call).toMatchObject({ alias: 'claude-sonnet', status: 'ok', attempt: null, input_tokens: 1000, output_tokens: 200, user_id: 'ada' });
    expect(call.cost_usd).toBeCloseTo(SONNET_COST, 12);
    expect(attempts[0]).toMatchObject({ attempt: 1, route: 'gamma-direct', model: 'claude-sonnet-4-5', status: 'upstream_error', status_code: 429, cost_usd: 0, input_tokens: 0 });
    expect(attempts[1]).toMatchObject({ attempt: 2, route: call.route, status: 'ok', cost_usd: 0 });
    // Charged once: the whole trace costs what the call's span says.
    const trace = await spansOfTrace(call.trace_id);
    expect(trace.reduce((sum, span) => sum + span.cost_usd, 0)).toBeCloseTo(SONNET_COST, 12);

    // gamma-direct is cooling down for 30 s: the next call goes straight to priority 1, in one attempt.
    const before = bed.anthropic.requests.length;
    const next = await openai.chat.completions.create({ model: 'claude-sonnet', messages: [{ role: 'user', content: 'again' }] }).withResponse();
    expect(bed.anthropic.requests.length).toBe(before);
    const again = await findSpan(proxy.url, { spanId: next.response.headers.get('x-proxy-span-id')! });
    expect(['gamma', 'gamma-cloudb']).toContain(again.route);
    const health = (await (await fetch(`${proxy.url}/_local/api/health`)).json()) as {
      aliases: { alias: string; targets: { route: string; state: string }[]; degradedSince: string | null }[];
    };
    const sonnet = health.aliases.find((entry) => entry.alias === 'claude-sonnet')!;
    expect(sonnet.targets[0]).toMatchObject({ route: 'gamma-direct', state: 'cooling_down' });
    expect(sonnet.degradedSince).not.toBeNull();
  });

  it('a streamed chat completion whose first target answers 500 streams whole from the next, with its usage', async () => {
    bed.anthropic.behave({ status: 500, forRequests: 1 });
    const stream = await openai.chat.completions.create({ model: 'haiku', stream: true, stream_options: { include_usage: true }, messages: [{ role: 'user', content: 'hi' }] });
    let text = '';
    let usage: unknown;
    for await (const chunk of stream) {
      text += chunk.choices[0]?.delta.content ?? '';
      if (chunk.usage) usage = chunk.usage;
    }
    expect(text.length).toBeGreaterThan(0);
    expect(usage).toMatchObject({ prompt_tokens: 1000, completion_tokens: 200 });
    expect(bed.vertex.requests.at(-1)!.path).toContain('claude-haiku-4-5@20251001:streamRawPredict');
  });

  it('the Responses API: a reset connection on the first target is answered by the next', async () => {
    bed.openai.behave({ destroySocket: true, forRequests: 1 });
    const { data, response } = await openai.responses.create({ model: 'mini', input: 'hi' }).withResponse();
    expect(data.output_text.length).toBeGreaterThan(0);
    const { call, attempts } = await callAndAttempts(response.headers.get('x-proxy-span-id')!, 2);
    expect(call).toMatchObject({ route: 'gamma-direct', model: 'claude-haiku-4-5-20251001', alias: 'mini' });
    expect(call.cost_usd).toBeCloseTo(HAIKU_COST, 12);
    expect(attempts[0]).toMatchObject({ route: 'beta', status: 'error', status_code: null });
    expect(attempts[0]!.error).toMatch(/^upstream_unreachable: /);
    const metrics = await (await fetch(`${proxy.url}/metrics`)).text();
    expect(metrics).toMatch(/tollgate_fallbacks_total\{alias="mini",from="beta",to="gamma-direct",reason="unreachable"\} 1\n/);
  });

  it('Messages, streamed: a first target that hangs past its timeout gives way to the next', async () => {
    bed.anthropic.behave({ delayMs: 5000, forRequests: 1 });
    const stream = anthropic.messages.stream({ model: 'sonnet-fast', max_tokens: 64, messages: [{ role: 'user', content: 'hi' }] });
    const message = await stream.finalMessage();
    expect(message.usage).toMatchObject({ input_tokens: 1000, output_tokens: 200 });
    expect(bed.bedrock.requests.at(-1)!.path).toBe(`/model/${encodeURIComponent(SONNET_BEDROCK)}/invoke-with-response-stream`);
  });
});

describe('a caller who leaves an alias call', () => {
  it('while its first target hangs ends the call there: no other target is tried, and the span says the caller left', async () => {
    // gamma-direct's timeout is 1.5 s: had the call gone on, Bedrock would have answered it after that.
    bed.anthropic.behave({ delayMs: 5000, forRequests: 1 });
    const traceId = '4bf92f3577b34da6a3ce929d0e0e4736';
    const caller = new AbortController();
    const call = fetch(`${proxy.url}/v1/chat/completions`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', 'x-tollgate-user': 'ada', traceparent: `00-${traceId}-00f067aa0ba902b7-01` },
      body: JSON.stringify({ model: 'sonnet-fast', messages: [{ role: 'user', content: 'hi' }] }),
      signal: caller.signal,
    }).catch((e: unknown) => e);
    await waitFor('the first target to be asked', () => bed.anthropic.requests.length === 1);
    caller.abort();
    expect(await call).toBeInstanceOf(Error);
    let spans: SpanJson[] = [];
    await waitFor('the call span', async () => (spans = await spansOfTrace(traceId)).length > 0);
    expect(spans).toHaveLength(1);
    expect(spans[0]).toMatchObject({ alias: 'sonnet-fast', route: 'gamma-direct', status: 'client_aborted', cost_usd: 0, user_id: 'ada', attempt: null });
    expect(spans[0]!.error).toMatch(/^client_aborted: /);
    expect(bed.bedrock.requests).toHaveLength(0);
  });
});

describe('a target that cannot take the request', () => {
  it('is passed over: n: 2 is refused by the Claude translation and answered by OpenAI', async () => {
    const { data, response } = await openai.chat.completions.create({ model: 'claude-first', n: 2, messages: [{ role: 'user', content: 'hi' }] }).withResponse();
    expect(data.choices.length).toBeGreaterThan(0);
    expect(bed.anthropic.requests).toHaveLength(0);
    const call = await findSpan(proxy.url, { spanId: response.headers.get('x-proxy-span-id')! });
    expect(call).toMatchObject({ route: 'beta', alias: 'claude-first', status: 'ok' });
  });
});

describe('what never falls back', () => {
  it('a 400 from the first target reaches the caller as it is, and nothing else is called', async () => {
    bed.openai.behave({ status: 400, forRequests: 1 });
    const error = await openai.chat.completions.create({ model: 'mini', messages: [{ role: 'user', content: 'hi' }] }).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(OpenAI.BadRequestError);
    expect(bed.anthropic.requests).toHaveLength(0);
  });

  it('a stream that has started is not switched when it breaks', async () => {
    bed.openai.behave({ abortStream: true, forRequests: 1 });
    const stream = await openai.chat.completions.create({ model: 'mini', stream: true, messages: [{ role: 'user', content: 'hi' }] });
    const failure = await (async () => {
      for await (const chunk of stream) void chunk;
    })().catch((e: unknown) => e);
    expect(failure).toBeInstanceOf(Error);
    expect(bed.anthropic.requests).toHaveLength(0);
  });

  it('when every target fails, the caller gets the last failure and the spans show each attempt', async () => {
    bed.openai.behave({ status: 503 });
    bed.anthropic.behave({ status: 529 });
    const { response } = await openai.chat.completions
      .create({ model: 'mini', messages: [{ role: 'user', content: 'hi' }] })
      .withResponse()
      .catch((e: { status: number; headers: Headers }) => ({ response: { status: e.status, headers: e.headers } }));
    expect(response.status).toBe(529);
    const { call, attempts } = await callAndAttempts(response.headers.get('x-proxy-span-id')!, 2);
    expect(call).toMatchObject({ status: 'upstream_error', route: 'gamma-direct', cost_usd: 0 });
    expect(attempts.map((span) => [span.route, span.status_code])).toEqual([
      ['beta', 503],
      ['gamma-direct', 529],
    ]);
  });
});

describe('aliases are listed and checked', () => {
  it('GET /v1/models lists each alias', async () => {
    const ids = (await openai.models.list()).data.map((model) => model.id);
    expect(ids).toEqual(expect.arrayContaining(['claude-sonnet', 'sonnet-fast', 'haiku', 'mini', 'claude-first']));
  });

  it.each([
    [{ models: { x: { targets: [{ route: 'nowhere', model: 'm' }] } } }, 'models.x.targets[0].route names no route (got "nowhere")'],
    [{ models: { x: { targets: [] } } }, 'models.x.targets must name at least one target'],
    [{ models: { x: { targets: [{ route: 'beta', model: 'gpt-4o', weight: 0 }] } } }, 'models.x.targets[0].weight must be a number greater than 0'],
    [{ models: { x: { targets: [{ route: 'gamma-cloud', model: 'm' }] } } }, 'models.x.targets[0].route gamma-cloud is served on /proxy only'],
    [{ models: { x: { targets: [{ route: 'beta', model: 'mini' }] } } }, 'models.x.targets[0].model is the alias mini: aliases do not chain'],
    [{ models: { x: { targets: [{ route: 'beta', model: 'gpt-4o' }], fallbackOn: ['bad_request'] } } }, 'models.x.fallbackOn[0] must be one of rate_limited'],
  ])('the config API refuses %j naming the field, and nothing changes', async (body, message) => {
    const before = await (await fetch(`${proxy.url}/_local/api/config`)).json();
    const res = await fetch(`${proxy.url}/_local/api/config`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify(body) });
    expect(res.status).toBe(400);
    expect(((await res.json()) as { error: { code: string; message: string } }).error).toMatchObject({ code: 'invalid_config', message: expect.stringContaining(message) });
    expect(await (await fetch(`${proxy.url}/_local/api/config`)).json()).toEqual(before);
  });

  it('a config file with an alias to an unknown route stops start-up with exit 2, naming the field', async () => {
    const failure = await startProxyProcess({ configYaml: 'models:\n  x:\n    targets: [{ route: nowhere, model: m }]\n' }).then(
      async (started) => {
        await started.stop();
        return 'started';
      },
      (error: Error) => error.message,
    );
    expect(failure).toMatch(/exited with 2: .*models\.x\.targets\[0\]\.route names no route \(got "nowhere"\)/);
  });
});

// Last: the breaker it opens stays open for the rest of this file.
describe('an open breaker', () => {
  it('an open breaker on the first route sends the call on without waiting for it', async () => {
    // Three 500s in a row open gamma-direct's breaker (consecutiveFailures: 3), each answered from Vertex.
    bed.anthropic.behave({ status: 500 });
    for (let i = 0; i < 3; i++) await anthropic.messages.create({ model: 'haiku', max_tokens: 16, messages: [{ role: 'user', content: 'hi' }] });
    const before = bed.anthropic.requests.length;
    const message = await anthropic.messages.create({ model: 'haiku', max_tokens: 16, messages: [{ role: 'user', content: 'hi' }] });
    expect(message.usage.output_tokens).toBe(200);
    expect(bed.anthropic.requests.length).toBe(before);
    const metrics = await (await fetch(`${proxy.url}/metrics`)).text();
    expect(metrics).toMatch(/tollgate_fallbacks_total\{alias="haiku",from="gamma-direct",to="gamma",reason="server_error"\} [1-9]/);
  });
});
