// A /v1 answer translated whole (not streamed) has the bounds of a stream once its caller left (ADR 1305, ADR
// 1700): the upstream is read on for the usage for at most READ_AFTER_LEAVING_MS and READ_AFTER_LEAVING_BYTES,
// then dropped and the call charged an estimate. Before, it was read on to its end, however long that took.

import { createServer, request } from 'node:http';
import type { AddressInfo } from 'node:net';
import { PassThrough } from 'node:stream';
import pino from 'pino';
import { afterEach, describe, expect, it, vi } from 'vitest';
import { defaultRuntimeConfig, ConfigStore } from '../config/config-store.ts';
import { CHAT_ANSWER } from '../gateway-apis/chat-completions.ts';
import { CallMeter } from '../metering/call-meter.ts';
import { LEAVING_READS, MAX_LEAVING_READS_PER_CALLER } from '../metering/leaving-reads.ts';
import { READ_AFTER_LEAVING_BYTES, READ_AFTER_LEAVING_MS } from '../pipeline/answer-bounds.ts';
import { findModel, planGatewayCall } from '../routes/v1-plan.ts';
import type { Span } from '../spans/span.ts';
import { openMemorySpanStore } from '../spans/memory-span-store.ts';
import { SpanWriter } from '../spans/span-writer.ts';
import { startSpanContext } from '../spans/trace-context.ts';
import { upstreamAnswerFrom } from '../../../test/support/answer-bodies.ts';
import { relay } from './gateway-relay.ts';

const logger = pino({ level: 'silent' });
const prices = new ConfigStore().current().prices;

/** Anthropic's whole answer, cut where its text starts: `ANSWER_HEAD`, then text, then `answerTail(usage)`. */
const ANSWER_HEAD = '{"id":"msg_1","type":"message","role":"assistant","model":"claude-haiku-4-5-20251001","content":[{"type":"text","text":"';
const answerTail = (input: number, output: number) => `"}],"stop_reason":"end_turn","stop_sequence":null,"usage":{"input_tokens":${input},"output_tokens":${output}}}`;

const closers: (() => Promise<void>)[] = [];
afterEach(async () => {
  vi.useRealTimers();
  for (const close of closers.splice(0)) await close();
});

/**
 * A /v1 chat call for claude-haiku-4-5 planned as the gateway plans it (translated from Anthropic, not streamed),
 * whose upstream body the test writes; the caller has sent its request and waits.
 */
async function translatedCall(userId: string | null = 'erin'): Promise<{ upstream: PassThrough; span: Promise<Span>; leave: () => Promise<void> }> {
  const writer = new SpanWriter(openMemorySpanStore(10), { bufferSize: 10, batchSize: 10, flushIntervalMs: 1000 }, logger);
  const meter = new CallMeter(writer, logger);
  const finished = Promise.withResolvers<Span>();
  meter.observe({ callFinished: (span) => finished.resolve(span) });
  const body = new PassThrough();
  const relaying = Promise.withResolvers<void>();
  const left = Promise.withResolvers<void>();
  const request_ = { model: 'claude-haiku-4-5', messages: [{ role: 'user', content: 'Tell me a story' }] };
  const plan = planGatewayCall(request_, { ...findModel(prices, 'claude-haiku-4-5')!, requested: 'claude-haiku-4-5' }, defaultRuntimeConfig(), {});
  expect(plan).toMatchObject({ route: 'gamma-direct', stream: false, translation: 'anthropic' });
  const server = createServer((_req, res) => {
    res.once('close', () => setImmediate(left.resolve));
    const upstream = upstreamAnswerFrom(body, { 'content-type': 'application/json' });
    const trace = startSpanContext(undefined, undefined);
    const call = meter.start({ route: 'v1', provider: 'anthropic', model: plan.model, operation: 'chat', userId, projectId: null, requestId: 'r1', trace });
    void relay({ wire: 'anthropic', res, upstream, call, prices, plan, trace, answer: CHAT_ANSWER, estimateInput: () => 250 }).catch(() => undefined);
    relaying.resolve();
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  closers.push(async () => {
    server.closeAllConnections();
    await new Promise<void>((resolve) => server.close(() => resolve()));
    await writer.close();
  });
  const { port } = server.address() as AddressInfo;
  const req = request({ host: '127.0.0.1', port, path: '/', method: 'POST', agent: false });
  req.on('error', () => undefined).end();
  await relaying.promise;
  body.write(ANSWER_HEAD + 'Once upon a time');
  return {
    upstream: body,
    span: finished.promise,
    leave: async () => {
      req.destroy();
      await left.promise;
    },
  };
}

describe('a caller who leaves a /v1 answer translated whole', () => {
  it('is charged an estimate, marked as such, when the answer has not ended within the time it is read on', async () => {
    vi.useFakeTimers({ toFake: ['setTimeout', 'clearTimeout'] });
    const { upstream, span, leave } = await translatedCall();
    await leave();
    vi.advanceTimersByTime(READ_AFTER_LEAVING_MS);
    const recorded = await span;
    // Input: the request's estimate (250); output: none reported, and a whole answer has no events to count.
    // claude-haiku-4-5: 250 × 1 USD per million tokens = 250 µ$.
    expect(recorded).toMatchObject({ status: 'client_aborted', usageEstimated: true, inputTokens: 250, outputTokens: 0, costUsd: 0.00025 });
    expect(recorded.error).toContain(`within ${READ_AFTER_LEAVING_MS} ms`);
    expect(upstream.destroyed).toBe(true);
  });

  it('stops reading, and estimates, once the upstream has sent READ_AFTER_LEAVING_BYTES more without its end', async () => {
    const { upstream, span, leave } = await translatedCall();
    await leave();
    const text = 'x'.repeat(64 * 1024);
    let sent = 0;
    while (!upstream.destroyed && sent <= READ_AFTER_LEAVING_BYTES + text.length) {
      upstream.write(text);
      sent += text.length;
      await new Promise((resolve) => setImmediate(resolve));
    }
    const recorded = await span;
    expect(recorded).toMatchObject({ status: 'client_aborted', usageEstimated: true, inputTokens: 250, outputTokens: 0 });
    expect(recorded.error).toContain(`${READ_AFTER_LEAVING_BYTES} more bytes`);
    expect(upstream.destroyed).toBe(true);
    // Cut just past the bound: 2 MiB and at most one more piece, not the 32 MiB a whole answer may have.
    expect(sent).toBeLessThanOrEqual(READ_AFTER_LEAVING_BYTES + 2 * text.length);
  });

  it('counts a caller without a user id by its address among the reads after leaving, as a stream does', async () => {
    vi.useFakeTimers({ toFake: ['setTimeout', 'clearTimeout'] });
    // This address (the test's caller) already has its most reads after leaving: another of its calls is not read on.
    const taken = Array.from({ length: MAX_LEAVING_READS_PER_CALLER }, () => LEAVING_READS.take('127.0.0.1'));
    try {
      const { upstream, span, leave } = await translatedCall(null);
      await leave();
      vi.advanceTimersByTime(READ_AFTER_LEAVING_MS);
      const recorded = await span;
      expect(recorded).toMatchObject({ status: 'client_aborted', usageEstimated: true, inputTokens: 250, outputTokens: 0 });
      expect(recorded.error).toContain(`this caller already has ${MAX_LEAVING_READS_PER_CALLER} calls read on after it left`);
      expect(upstream.destroyed).toBe(true);
    } finally {
      for (const slot of taken) if ('release' in slot) slot.release();
    }
  });

  it('is charged the usage the answer reports when it ends within the bounds, not an estimate', async () => {
    const { upstream, span, leave } = await translatedCall();
    await leave();
    upstream.end(', the end.' + answerTail(400, 20));
    const recorded = await span;
    // claude-haiku-4-5: 400 × 1 + 20 × 5 USD per million tokens = 500 µ$.
    expect(recorded).toMatchObject({ status: 'client_aborted', usageEstimated: false, inputTokens: 400, outputTokens: 20, costUsd: 0.0005 });
  });
});
