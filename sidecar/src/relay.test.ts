// A call is charged before its caller can hold the whole answer: a sidecar killed the moment the caller has it
// must already have the charge (the cluster budgets test kills one right after its calls and lost one).

import { createServer, request, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { Readable } from 'node:stream';
import pino from 'pino';
import { afterEach, describe, expect, it } from 'vitest';
import { CallMeter, type SpendSink } from './metering/call-meter.ts';
import { DEFAULT_CACHE_SETTINGS } from './pricing/default-cache.ts';
import { DEFAULT_PRICES } from './pricing/default-prices.ts';
import { PriceTable } from './pricing/price-table.ts';
import { relayStream, responseExtractor } from './relay.ts';
import { openMemorySpanStore } from './spans/memory-span-store.ts';
import { SpanWriter } from './spans/span-writer.ts';
import { startSpanContext } from './spans/trace-context.ts';
import type { UpstreamResponse } from './upstream/upstream-client.ts';

const logger = pino({ level: 'silent' });
const prices = new PriceTable([...DEFAULT_PRICES], { ...DEFAULT_CACHE_SETTINGS });
const completion = Buffer.from(
  JSON.stringify({
    id: 'chatcmpl-1',
    object: 'chat.completion',
    model: 'gpt-4o-mini',
    choices: [{ index: 0, message: { role: 'assistant', content: 'Hello.' }, finish_reason: 'stop' }],
    usage: { prompt_tokens: 1000, completion_tokens: 10, total_tokens: 1010 },
  }),
);

interface Charge {
  userId: string;
  /** Body bytes the relay had handed the caller's connection when the charge was made. */
  bodyBytesSent: number;
  answerEnded: boolean;
}

const closers: (() => Promise<void>)[] = [];
afterEach(async () => {
  for (const close of closers.splice(0)) await close();
});

/** A server whose one route relays `chunks` as an upstream answer with `headers`; charges are recorded with what the caller had been sent. */
async function relayServer(chunks: Buffer[], headers: Record<string, string>): Promise<{ server: Server; charges: Charge[] }> {
  const charges: Charge[] = [];
  const writer = new SpanWriter(openMemorySpanStore(10), { bufferSize: 10, batchSize: 10, flushIntervalMs: 1000 }, logger);
  let current: { sent: number; res: ServerResponse } | undefined;
  const spend: SpendSink = {
    defaultUser: null,
    charge(userId) {
      charges.push({ userId, bodyBytesSent: current!.sent, answerEnded: current!.res.writableEnded });
    },
  };
  const meter = new CallMeter(writer, logger, { cutting: false }, spend);
  const server = createServer((_req: IncomingMessage, res: ServerResponse) => {
    const watched = { sent: 0, res };
    current = watched;
    const write = res.write.bind(res) as (chunk: Buffer | string) => boolean;
    const end = res.end.bind(res) as (chunk?: Buffer | string) => ServerResponse;
    res.write = ((chunk: Buffer | string) => {
      watched.sent += Buffer.byteLength(chunk);
      return write(chunk);
    }) as typeof res.write;
    res.end = ((chunk?: Buffer | string) => {
      if (chunk !== undefined && typeof chunk !== 'function') watched.sent += Buffer.byteLength(chunk);
      return end(chunk);
    }) as typeof res.end;
    const upstream: UpstreamResponse = {
      statusCode: 200,
      headers,
      body: Readable.from(chunks, { objectMode: false }),
      settle() {},
      timing: { startedAt: performance.now(), headersAt: performance.now(), endedAt: Number.NaN },
    };
    const call = meter.start({
      route: 'beta',
      provider: 'openai',
      model: 'gpt-4o-mini',
      operation: 'chat',
      userId: 'carol',
      projectId: null,
      requestId: 'r1',
      trace: startSpanContext(undefined, undefined),
    });
    void relayStream({ res, upstream, call, prices, extractor: responseExtractor('openai', upstream, false, undefined), headers: { ...headers } });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  closers.push(async () => {
    await new Promise<void>((resolve) => server.close(() => resolve()));
    await writer.close();
  });
  return { server, charges };
}

function fetchBody(server: Server): Promise<Buffer> {
  const { port } = server.address() as AddressInfo;
  return new Promise((resolve, reject) => {
    request({ host: '127.0.0.1', port, path: '/', agent: false }, (res) => {
      const parts: Buffer[] = [];
      res.on('data', (part: Buffer) => parts.push(part));
      res.on('end', () => resolve(Buffer.concat(parts)));
      res.on('error', reject);
    })
      .on('error', reject)
      .end();
  });
}

describe('the relay charges a call before its caller can hold the whole answer', () => {
  const halves = [completion.subarray(0, 100), completion.subarray(100)];

  it('with a declared length, before the last bytes are handed to the caller', async () => {
    const { server, charges } = await relayServer(halves, { 'content-type': 'application/json', 'content-length': String(completion.length) });
    expect(await fetchBody(server)).toEqual(completion);
    expect(charges).toEqual([{ userId: 'carol', bodyBytesSent: 100, answerEnded: false }]);
  });

  it('without one (chunked), before the answer is ended', async () => {
    const { server, charges } = await relayServer(halves, { 'content-type': 'application/json' });
    expect(await fetchBody(server)).toEqual(completion);
    expect(charges).toHaveLength(1);
    expect(charges[0]).toMatchObject({ userId: 'carol', answerEnded: false });
  });
});
