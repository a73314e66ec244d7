// Reading on after a caller leaves (ADR 1305) held an upstream connection for up to 10 s per call. One client
// opened 300 streams and hung up at the headers: the 256 connections of the upstream's pool stayed busy for
// 10 s, and another user's ordinary call waited 9 s. The reads are now bounded per caller (8) and in all (64):
// a call past the bound stops reading at once, gives its connection back and is charged an estimate.

import { createServer, request, type Server } from 'node:http';
import type { AddressInfo, Socket } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startProxyProcess, type ProxyProcess } from '../e2e/proxy-process.ts';
import { waitFor } from '../support/wait-for.ts';
import type { SpanJson } from '../../sidecar/src/spans/span-json.ts';
import { chatCompletion } from './security-bed.ts';

const HANG_UPS = 30;
const PER_CALLER = 8;

let upstream: Server;
const openStreams = new Set<Socket>();
let proxy: ProxyProcess;

beforeAll(async () => {
  // An OpenAI-like upstream whose streams send their first chunk and then never finish (a slow model), and
  // whose plain answers come at once.
  upstream = createServer((req, res) => {
    let body = '';
    req.on('data', (chunk: Buffer) => (body += chunk.toString()));
    req.on('end', () => {
      if (!body.includes('"stream":true')) {
        res.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify(chatCompletion()));
        return;
      }
      res.writeHead(200, { 'content-type': 'text/event-stream' });
      res.write(`data: ${JSON.stringify({ id: 'c', object: 'chat.completion.chunk', choices: [{ index: 0, delta: { content: 'Hel' } }] })}\n\n`);
      openStreams.add(req.socket);
      res.once('close', () => openStreams.delete(req.socket));
    });
  });
  await new Promise<void>((resolve) => upstream.listen(0, '127.0.0.1', resolve));
  proxy = await startProxyProcess({
    configYaml: `upstreams:\n  beta: { baseUrl: "http://127.0.0.1:${(upstream.address() as AddressInfo).port}" }\nstorage: { kind: sqlite, path: spans.db }\n`,
    env: { OPENAI_API_KEY: 'sk-proxy-own' },
  });
});

afterAll(async () => {
  // The held streams end first, so the proxy has no call to drain.
  upstream?.closeAllConnections();
  await proxy?.stop();
  await new Promise((resolve) => upstream?.close(resolve));
});

/**
 * A streamed call whose caller hangs up at the first bytes; resolves with the call's span id. Without a user the
 * caller is known by its address: `from` picks the loopback address it connects from.
 */
function hangUp(user: string | null, from?: string): Promise<string> {
  const payload = JSON.stringify({ model: 'gpt-4o-mini', stream: true, messages: [{ role: 'user', content: 'hi' }] });
  return new Promise<string>((resolve, reject) => {
    const req = request(`${proxy.url}/proxy/beta/v1/chat/completions`, {
      method: 'POST',
      agent: false,
      ...(from !== undefined ? { localAddress: from } : {}),
      headers: { 'content-type': 'application/json', 'content-length': Buffer.byteLength(payload), ...(user !== null ? { 'x-tollgate-user': user } : {}) },
    });
    req.once('response', (res) => {
      res.once('data', () => {
        req.destroy();
        resolve(String(res.headers['x-proxy-span-id']));
      });
    });
    req.once('error', (error) => {
      if (!req.destroyed) reject(error);
    });
    req.end(payload);
  });
}

async function spans(): Promise<SpanJson[]> {
  return ((await (await fetch(`${proxy.url}/_local/api/traces?limit=200`)).json()) as { spans: SpanJson[] }).spans;
}

describe('a client that hangs up on many streams at once', () => {
  it(`keeps at most ${PER_CALLER} upstream connections reading on; the rest are freed at once and charged an estimate`, async () => {
    const ids = await Promise.all(Array.from({ length: HANG_UPS }, () => hangUp('mallory')));
    const refusedMessage = `client went away; not read on for its usage: this caller already has ${PER_CALLER} calls read on after it left (at most ${PER_CALLER})`;
    const refusedHere = (span: SpanJson) => ids.includes(span.span_id) && (span.error ?? '').includes(refusedMessage);
    await waitFor(`${HANG_UPS - PER_CALLER} of the calls to stop reading at once`, async () => {
      const done = (await spans()).filter(refusedHere);
      return done.length === HANG_UPS - PER_CALLER;
    });
    await waitFor('the freed upstream connections to close', () => openStreams.size === PER_CALLER);
    const refused = (await spans()).filter(refusedHere);
    for (const span of refused) expect(span).toMatchObject({ status: 'client_aborted', user_id: 'mallory', usage_estimated: true });
    expect(refused.every((span) => span.cost_usd > 0)).toBe(true);
    const metrics = await (await fetch(`${proxy.url}/metrics`)).text();
    expect(metrics).toContain(`tollgate_leaving_reads_refused_total ${HANG_UPS - PER_CALLER}\n`);
    expect(metrics).toContain(`tollgate_leaving_reads ${PER_CALLER}\n`);
  });

  it("another user's calls are served meanwhile, and may still be read on for", async () => {
    const answer = await fetch(`${proxy.url}/proxy/beta/v1/chat/completions`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', 'x-tollgate-user': 'alice' },
      body: JSON.stringify({ model: 'gpt-4o-mini', messages: [{ role: 'user', content: 'hi' }] }),
    });
    expect(answer.status).toBe(200);
    await hangUp('alice');
    await waitFor("alice's stream to be read on for", () => openStreams.size === PER_CALLER + 1);
  });

  it('a caller without a user id is known by its address: another address still gets its calls read on', async () => {
    const before = openStreams.size;
    const ids = await Promise.all(Array.from({ length: PER_CALLER + 2 }, () => hangUp(null, '127.0.0.2')));
    const refusedHere = (span: SpanJson) => ids.includes(span.span_id) && (span.error ?? '').includes('this caller already has 8 calls read on after it left');
    await waitFor('two of the anonymous calls to stop reading at once', async () => (await spans()).filter(refusedHere).length === 2);
    await waitFor("the address's 8 streams to be read on", () => openStreams.size === before + PER_CALLER);
    await hangUp(null, '127.0.0.3');
    await waitFor("another address's stream to be read on as well", () => openStreams.size === before + PER_CALLER + 1);
  });
});
