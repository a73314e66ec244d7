// HTTP/2 with prior knowledge (h2c) on the proxy port, beside HTTP/1.1: the AWS SDK's default Bedrock client
// speaks it to an http:// endpoint. Every route and the /v1 gateway, streaming included, over a real HTTP/2
// client; the AWS SDK's BedrockRuntimeClient exactly as a user creates it (no request handler given); the Host
// and Origin checks applied to `:authority`; and a connection that is not HTTP/2 after its preface.

import { connect, constants, type ClientHttp2Session, type IncomingHttpHeaders } from 'node:http2';
import { connect as tcpConnect } from 'node:net';
import { BedrockRuntimeClient, InvokeModelCommand, InvokeModelWithResponseStreamCommand } from '@aws-sdk/client-bedrock-runtime';
import { NodeHttp2Handler } from '@smithy/node-http-handler';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { startProxyProcess, type ProxyProcess } from './proxy-process.ts';
import { AWS, PROJECT, startUpstreamBed, type UpstreamBed } from './upstream-bed.ts';
import { findSpan } from '../support/spans.ts';
import { waitFor } from '../support/wait-for.ts';

const usage = { input: 1000, output: 200 };
const claudeBody = { max_tokens: 256, messages: [{ role: 'user', content: 'Say hello.' }] };
const chatBody = { messages: [{ role: 'user', content: 'Say hello.' }] };
const geminiBody = { contents: [{ role: 'user', parts: [{ text: 'Say hello.' }] }] };
const vertex = `/v1/projects/${PROJECT}/locations`;
const SONNET = 'anthropic.claude-sonnet-4-20250514-v1:0';

let bed: UpstreamBed;
let proxy: ProxyProcess;
let session: ClientHttp2Session;

interface H2Answer {
  status: number;
  headers: IncomingHttpHeaders;
  body: string;
}

function h2(path: string, opts: { method?: string; body?: unknown; raw?: string; headers?: Record<string, string>; on?: ClientHttp2Session } = {}): Promise<H2Answer> {
  const client = opts.on ?? session;
  return new Promise((resolve, reject) => {
    const stream = client.request({
      ':method': opts.method ?? 'POST',
      ':path': path,
      ...(opts.body !== undefined ? { 'content-type': 'application/json' } : {}),
      ...opts.headers,
    });
    let status = 0;
    let headers: IncomingHttpHeaders = {};
    const chunks: Buffer[] = [];
    stream.on('response', (h) => {
      headers = h;
      status = Number(h[':status']);
    });
    stream.on('data', (c: Buffer) => chunks.push(c));
    stream.on('end', () => resolve({ status, headers, body: Buffer.concat(chunks).toString('utf8') }));
    stream.on('error', reject);
    stream.end(opts.raw ?? (opts.body === undefined ? undefined : JSON.stringify(opts.body)));
  });
}

async function spanOf(answer: H2Answer) {
  const spanId = answer.headers['x-proxy-span-id'];
  expect(spanId).toMatch(/^[0-9a-f]{16}$/);
  return findSpan(proxy.url, { spanId: String(spanId) });
}

beforeAll(async () => {
  bed = await startUpstreamBed();
  proxy = await startProxyProcess({ configYaml: bed.configYaml(), env: bed.env });
  session = connect(proxy.url);
});

afterAll(async () => {
  session?.close();
  await proxy?.stop();
  await bed?.close();
});

beforeEach(() => {
  bed.reset();
  for (const fake of [bed.vertex, bed.openai, bed.anthropic, bed.bedrock]) fake.behave({ usage });
});

describe('h2c: HTTP/2 with prior knowledge on the proxy port', () => {
  const calls: Array<{ name: string; path: string; body: unknown; streamed: string }> = [
    { name: 'alpha', path: `/proxy/alpha${vertex}/us-central1/publishers/google/models/gemini-2.5-flash:generateContent`, body: geminiBody, streamed: '' },
    {
      name: 'alpha streamed',
      path: `/proxy/alpha${vertex}/us-central1/publishers/google/models/gemini-2.5-flash:streamGenerateContent?alt=sse`,
      body: geminiBody,
      streamed: 'data: ',
    },
    {
      name: 'alpha-compat',
      path: `/proxy/alpha-compat${vertex}/us-central1/endpoints/openapi/chat/completions`,
      body: { model: 'google/gemini-2.5-flash', ...chatBody },
      streamed: '',
    },
    { name: 'beta', path: '/proxy/beta/v1/chat/completions', body: { model: 'gpt-4o-mini', ...chatBody }, streamed: '' },
    { name: 'beta streamed', path: '/proxy/beta/v1/chat/completions', body: { model: 'gpt-4o-mini', stream: true, ...chatBody }, streamed: 'data: [DONE]' },
    { name: 'gamma', path: '/proxy/gamma/v1/messages', body: { model: 'claude-sonnet-4@20250514', ...claudeBody }, streamed: '' },
    { name: 'gamma streamed', path: '/proxy/gamma/v1/messages', body: { model: 'claude-sonnet-4@20250514', stream: true, ...claudeBody }, streamed: 'event: message_stop' },
    {
      name: 'gamma-cloud',
      path: `/proxy/gamma-cloud${vertex}/us-east5/publishers/anthropic/models/claude-sonnet-4@20250514:rawPredict`,
      body: { anthropic_version: 'vertex-2023-10-16', ...claudeBody },
      streamed: '',
    },
    { name: 'gamma-direct', path: '/proxy/gamma-direct/v1/messages', body: { model: 'claude-sonnet-4-20250514', ...claudeBody }, streamed: '' },
    {
      name: 'gamma-direct streamed',
      path: '/proxy/gamma-direct/v1/messages',
      body: { model: 'claude-sonnet-4-20250514', stream: true, ...claudeBody },
      streamed: 'event: message_stop',
    },
    { name: 'gamma-cloudb', path: `/proxy/gamma-cloudb/model/${SONNET}/invoke`, body: { anthropic_version: 'bedrock-2023-05-31', ...claudeBody }, streamed: '' },
    { name: '/v1 gateway', path: '/v1/chat/completions', body: { model: 'gpt-4o-mini', ...chatBody }, streamed: '' },
    { name: '/v1 gateway streamed', path: '/v1/chat/completions', body: { model: 'claude-sonnet-4-20250514', stream: true, ...chatBody }, streamed: 'data: [DONE]' },
  ];

  it.each(calls)('$name is answered and metered as over HTTP/1.1', async ({ path, body, streamed }) => {
    const answer = await h2(path, { body });
    expect(answer.status, answer.body).toBe(200);
    if (streamed) expect(answer.body).toContain(streamed);
    const span = await spanOf(answer);
    expect(span.status).toBe('ok');
    expect(span.input_tokens).toBeGreaterThan(0);
    expect(span.cost_usd).toBeGreaterThan(0);
  });

  it('a body the route streams through unread (gamma-cloud) arrives whole, without a content-length', async () => {
    const payload = { anthropic_version: 'vertex-2023-10-16', ...claudeBody, system: 'x'.repeat(200_000) };
    const answer = await h2(`/proxy/gamma-cloud${vertex}/us-east5/publishers/anthropic/models/claude-sonnet-4@20250514:rawPredict`, { body: payload });
    expect(answer.status, answer.body).toBe(200);
    expect(bed.vertex.requests.at(-1)!.body.length).toBe(JSON.stringify(payload).length);
  });

  it('the management API and /healthz answer too', async () => {
    expect((await h2('/healthz', { method: 'GET' })).status).toBe(200);
    const config = await h2('/_local/api/config', { method: 'GET' });
    expect(config.status).toBe(200);
    expect(JSON.parse(config.body)).toHaveProperty('config.upstreams.beta.baseUrl', bed.openai.url);
    // fastify asks to close the connection after a body it cannot parse: over HTTP/2 that header is dropped
    const bad = await h2('/_local/api/config', { headers: { 'content-type': 'application/json' }, raw: '{not json' });
    expect(bad.status).toBe(400);
    expect(JSON.parse(bad.body)).toMatchObject({ error: { code: 'invalid_request' } });
    expect((await h2('/healthz', { method: 'GET' })).status).toBe(200);
  });

  it("the AWS SDK's default BedrockRuntimeClient (HTTP/2, no handler given) invokes and streams through gamma-cloudb", async () => {
    const client = new BedrockRuntimeClient({
      region: AWS.region,
      endpoint: `${proxy.url}/proxy/gamma-cloudb`,
      // the caller's own signature: the proxy drops it and signs with its credentials
      credentials: { accessKeyId: 'AKIDCALLER', secretAccessKey: 'caller-secret' },
    });
    try {
      // The client as users create it: its default handler speaks HTTP/2 to an http:// endpoint.
      expect(client.config.requestHandler).toBeInstanceOf(NodeHttp2Handler);
      const body = new TextEncoder().encode(JSON.stringify({ anthropic_version: 'bedrock-2023-05-31', ...claudeBody }));
      const invoked = await client.send(new InvokeModelCommand({ modelId: SONNET, contentType: 'application/json', body }));
      const answer = JSON.parse(new TextDecoder().decode(invoked.body)) as { usage: { input_tokens: number } };
      expect(answer.usage.input_tokens).toBe(usage.input);
      const seen = bed.bedrock.requests.at(-1)!;
      expect(String(seen.headers.authorization)).toMatch(new RegExp(`^AWS4-HMAC-SHA256 Credential=${AWS.accessKeyId}/`));

      const streamed = await client.send(new InvokeModelWithResponseStreamCommand({ modelId: SONNET, contentType: 'application/json', body }));
      const events: string[] = [];
      for await (const event of streamed.body!) {
        if (event.chunk?.bytes) events.push((JSON.parse(new TextDecoder().decode(event.chunk.bytes)) as { type: string }).type);
      }
      expect(events[0]).toBe('message_start');
      expect(events.at(-1)).toBe('message_stop');
      const spans = (await (await fetch(`${proxy.url}/_local/api/traces?limit=2`)).json()) as { spans: Array<{ route: string; status: string; cost_usd: number }> };
      expect(spans.spans.map((s) => [s.route, s.status])).toEqual([
        ['gamma-cloudb', 'ok'],
        ['gamma-cloudb', 'ok'],
      ]);
      expect(spans.spans[0]!.cost_usd).toBeGreaterThan(0);
    } finally {
      client.destroy();
    }
  });

  it('a caller that resets its stream mid-way is recorded as having left, and the session keeps serving', async () => {
    bed.anthropic.behave({ bigBodyBytes: 20_000_000 });
    const stream = session.request({ ':method': 'POST', ':path': '/proxy/gamma-direct/v1/messages', 'content-type': 'application/json' });
    stream.end(JSON.stringify({ model: 'claude-sonnet-4-20250514', stream: true, ...claudeBody }));
    const spanId = await new Promise<string>((resolve) => stream.once('response', (h) => resolve(String(h['x-proxy-span-id']))));
    await new Promise((resolve) => stream.once('data', resolve));
    stream.close(constants.NGHTTP2_CANCEL);
    await waitFor('the cancelled call to be recorded', async () => (await findSpan(proxy.url, { spanId })).status === 'client_aborted');
    bed.anthropic.behave({ usage });
    expect((await h2('/proxy/beta/v1/chat/completions', { body: { model: 'gpt-4o-mini', ...chatBody } })).status).toBe(200);
  });
});

describe('h2c: Host and Origin checks apply to HTTP/2', () => {
  it('a foreign :authority is refused before anything is forwarded', async () => {
    const answer = await h2('/proxy/beta/v1/chat/completions', { body: { model: 'gpt-4o-mini', ...chatBody }, headers: { ':authority': 'evil.example' } });
    expect(answer.status).toBe(403);
    expect(JSON.parse(answer.body)).toMatchObject({ error: { code: 'host_not_allowed' } });
    expect(bed.openai.requests).toHaveLength(0);
  });

  it('a Host header that differs from :authority is refused', async () => {
    const answer = await h2('/proxy/beta/v1/chat/completions', { body: { model: 'gpt-4o-mini', ...chatBody }, headers: { host: 'evil.example' } });
    expect(answer.status).toBe(403);
    expect(JSON.parse(answer.body)).toMatchObject({ error: { code: 'host_not_allowed' } });
    expect(bed.openai.requests).toHaveLength(0);
  });

  it('a web page is refused as over HTTP/1.1', async () => {
    const answer = await h2('/proxy/beta/v1/chat/completions', { body: { model: 'gpt-4o-mini', ...chatBody }, headers: { origin: 'https://evil.example' } });
    expect(answer.status).toBe(403);
    expect(JSON.parse(answer.body)).toMatchObject({ error: { code: 'origin_not_allowed' } });
    expect(bed.openai.requests).toHaveLength(0);
  });

  it('a connection that sends the preface and then garbage is closed, and the port keeps serving both protocols', async () => {
    const { port } = new URL(proxy.url);
    const closed = await new Promise<boolean>((resolve) => {
      const socket = tcpConnect(Number(port), '127.0.0.1', () => socket.write('PRI * HTTP/2.0\r\n\r\nSM\r\n\r\nthis is not an HTTP/2 frame at all'));
      socket.on('data', () => undefined);
      socket.on('close', () => resolve(true));
      socket.on('error', () => undefined);
    });
    expect(closed).toBe(true);
    expect((await fetch(`${proxy.url}/healthz`)).status).toBe(200);
    expect((await h2('/healthz', { method: 'GET' })).status).toBe(200);
  });
});
