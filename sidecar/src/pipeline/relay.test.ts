// A call is charged before its caller can hold the whole answer: a sidecar killed the moment the caller has it
// must already have the charge (the cluster budgets test kills one right after its calls and lost one).

import { createServer, request, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { PassThrough, Readable } from 'node:stream';
import pino from 'pino';
import { afterEach, describe, expect, it, vi } from 'vitest';
import { CallMeter, type SpendSink } from '../metering/call-meter.ts';
import { DEFAULT_CACHE_SETTINGS } from '../pricing/default-cache.ts';
import { DEFAULT_PRICES } from '../pricing/default-prices.ts';
import { PriceTable } from '../pricing/price-table.ts';
import { READ_AFTER_LEAVING_BYTES, READ_AFTER_LEAVING_MS } from './answer-bounds.ts';
import { relayStream, responseExtractor } from './relay.ts';
import type { Span } from '../spans/span.ts';
import { openMemorySpanStore } from '../spans/memory-span-store.ts';
import { SpanWriter } from '../spans/span-writer.ts';
import { startSpanContext } from '../spans/trace-context.ts';
import { upstreamAnswerFrom } from '../../../test/support/answer-bodies.ts';

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
    const upstream = upstreamAnswerFrom(Readable.from(chunks, { objectMode: false }), headers);
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
    void relayStream({ res, upstream, call, prices, extractor: responseExtractor('openai', upstream, false, undefined), headers: { ...headers }, estimateInput: () => 0 });
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

describe('a caller who leaves before the usage arrives', () => {
  /** A relay of an upstream stream the test writes; resolves with the span once the call is finished. */
  async function leavingCaller(): Promise<{ upstream: PassThrough; span: Promise<Span>; leave: () => Promise<void> }> {
    const writer = new SpanWriter(openMemorySpanStore(10), { bufferSize: 10, batchSize: 10, flushIntervalMs: 1000 }, logger);
    const meter = new CallMeter(writer, logger);
    const finished = Promise.withResolvers<Span>();
    meter.observe({ callFinished: (span) => finished.resolve(span) });
    const body = new PassThrough();
    const left = Promise.withResolvers<void>();
    const server = createServer((_req, res) => {
      res.once('close', () => setImmediate(left.resolve));
      const upstream = upstreamAnswerFrom(body, { 'content-type': 'text/event-stream' });
      const call = meter.start({
        route: 'beta',
        provider: 'openai',
        model: 'gpt-4o-mini',
        operation: 'chat',
        userId: 'dan',
        projectId: null,
        requestId: 'r2',
        trace: startSpanContext(undefined, undefined),
      });
      void relayStream({ res, upstream, call, prices, extractor: responseExtractor('openai', upstream, false, undefined), headers: {}, estimateInput: () => 250 });
    });
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    closers.push(async () => {
      server.closeAllConnections();
      await new Promise<void>((resolve) => server.close(() => resolve()));
      await writer.close();
    });
    const { port } = server.address() as AddressInfo;
    const req = request({ host: '127.0.0.1', port, path: '/', agent: false });
    const firstBytes = new Promise<void>((resolve) => req.once('response', (res) => res.once('data', () => resolve())));
    req.on('error', () => undefined).end();
    for (const text of ['', 'Once', ' upon', ' a time']) body.write(`data: ${JSON.stringify(chunk(text === '' ? { role: 'assistant' } : { content: text }))}\n\n`);
    await firstBytes;
    return {
      upstream: body,
      span: finished.promise,
      leave: async () => {
        req.destroy();
        await left.promise;
      },
    };
  }

  const chunk = (delta: Record<string, unknown>) => ({ id: 'c1', object: 'chat.completion.chunk', model: 'gpt-4o-mini', choices: [{ index: 0, delta, finish_reason: null }] });

  afterEach(() => {
    vi.useRealTimers();
  });

  it('is charged an estimate, marked as such, when the usage has not come within the time the relay reads on', async () => {
    vi.useFakeTimers({ toFake: ['setTimeout', 'clearTimeout'] });
    const { upstream, span, leave } = await leavingCaller();
    await leave();
    vi.advanceTimersByTime(READ_AFTER_LEAVING_MS);
    const recorded = await span;
    // Input: the request's estimate (250); output: one token per event the stream carried (4).
    // gpt-4o-mini: 250 × 0.15 + 4 × 0.60 USD per million tokens.
    expect(recorded).toMatchObject({ status: 'client_aborted', usageEstimated: true, inputTokens: 250, outputTokens: 4 });
    expect(recorded.costUsd).toBeCloseTo(0.0000399, 12);
    expect(recorded.error).toContain('usage_estimated');
    expect(upstream.destroyed).toBe(true);
  });

  it('stops reading, and estimates, once the upstream has sent READ_AFTER_LEAVING_BYTES more without its usage', async () => {
    const { upstream, span, leave } = await leavingCaller();
    await leave();
    const event = `data: ${JSON.stringify(chunk({ content: 'x'.repeat(1000) }))}\n\n`;
    let sent = 0;
    while (!upstream.destroyed && sent <= READ_AFTER_LEAVING_BYTES + event.length) {
      upstream.write(event);
      sent += event.length;
      await new Promise((resolve) => setImmediate(resolve));
    }
    const recorded = await span;
    expect(recorded).toMatchObject({ status: 'client_aborted', usageEstimated: true, inputTokens: 250 });
    expect(upstream.destroyed).toBe(true);
  });

  it('is charged the provider usage that comes after it left, not an estimate', async () => {
    const { upstream, span, leave } = await leavingCaller();
    await leave();
    upstream.write(`data: ${JSON.stringify({ ...chunk({}), choices: [{ index: 0, delta: {}, finish_reason: 'stop' }] })}\n\n`);
    upstream.end(
      `data: ${JSON.stringify({ id: 'c1', object: 'chat.completion.chunk', model: 'gpt-4o-mini', choices: [], usage: { prompt_tokens: 900, completion_tokens: 30, total_tokens: 930 } })}\n\ndata: [DONE]\n\n`,
    );
    const recorded = await span;
    // gpt-4o-mini: 900 × 0.15 + 30 × 0.60 USD per million tokens
    expect(recorded).toMatchObject({ status: 'client_aborted', usageEstimated: false, inputTokens: 900, outputTokens: 30 });
    expect(recorded.costUsd).toBeCloseTo(0.000153, 12);
  });
});
