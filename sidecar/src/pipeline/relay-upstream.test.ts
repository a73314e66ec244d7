// The relay reads the upstream through undici's dispatcher (upstream/answer-body.ts), as fast as the caller
// takes the answer and no faster: a caller that stops reading stops the upstream being read, so a slow caller
// never makes the sidecar hold a provider's whole answer. And a caller who leaves has the upstream read on for
// its usage only within the bounds of ADR 1305, then the exchange is aborted.

import { createServer, request, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import pino from 'pino';
import { afterEach, describe, expect, it } from 'vitest';
import { createCredentialProviders } from '../auth/credential-provider.ts';
import { ConfigStore } from '../config/config-store.ts';
import { CallMeter } from '../metering/call-meter.ts';
import type { Span } from '../spans/span.ts';
import { openMemorySpanStore } from '../spans/memory-span-store.ts';
import { SpanWriter } from '../spans/span-writer.ts';
import { startSpanContext } from '../spans/trace-context.ts';
import { CallAbort } from '../upstream/call-abort.ts';
import { UpstreamClient } from '../upstream/upstream-client.ts';
import { READ_AFTER_LEAVING_BYTES } from './answer-bounds.ts';
import { relayStream, responseExtractor } from './relay.ts';

const logger = pino({ level: 'silent' });
/** One SSE event of 64 KiB: a chat chunk whose content is padding, no usage. */
const EVENT = Buffer.from(
  `data: ${JSON.stringify({ id: 'c1', object: 'chat.completion.chunk', model: 'gpt-4o-mini', choices: [{ index: 0, delta: { content: 'x'.repeat(65_536 - 150) }, finish_reason: null }] })}\n\n`,
);
/** What the upstream means to send: 1024 events, 64 MiB or so. */
const EVENTS = 1024;
/** The stream's last events: OpenAI's usage chunk, then [DONE]. */
const FINALE = Buffer.from(
  `data: ${JSON.stringify({ id: 'c1', object: 'chat.completion.chunk', model: 'gpt-4o-mini', choices: [], usage: { prompt_tokens: 900, completion_tokens: 30, total_tokens: 930 } })}\n\ndata: [DONE]\n\n`,
);
const TOTAL = EVENTS * EVENT.length + FINALE.length;

/** An upstream streaming EVENTS events as fast as its connection takes them; counts what it managed to write. */
interface Upstream {
  server: Server;
  written: number;
  /** Its last write waits for the connection to drain. */
  blocked: boolean;
  /** Its response was closed before it was finished (the sidecar aborted the exchange). */
  cut: Promise<boolean>;
}

const closers: (() => Promise<void>)[] = [];
afterEach(async () => {
  for (const close of closers.splice(0).reverse()) await close();
});

async function listen(server: Server): Promise<string> {
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  closers.push(async () => {
    server.closeAllConnections();
    await new Promise<void>((resolve) => server.close(() => resolve()));
  });
  return `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
}

async function streamingUpstream(): Promise<{ upstream: Upstream; url: string }> {
  const cut = Promise.withResolvers<boolean>();
  const upstream: Upstream = { server: undefined as unknown as Server, written: 0, blocked: false, cut: cut.promise };
  upstream.server = createServer((_req: IncomingMessage, res: ServerResponse) => {
    res.once('close', () => cut.resolve(!res.writableFinished));
    res.writeHead(200, { 'content-type': 'text/event-stream' });
    let sent = 0;
    const more = (): void => {
      upstream.blocked = false;
      while (sent < EVENTS && !res.destroyed) {
        sent++;
        upstream.written += EVENT.length;
        if (!res.write(EVENT)) {
          upstream.blocked = true;
          res.once('drain', more);
          return;
        }
      }
      if (sent === EVENTS) {
        upstream.written += FINALE.length;
        res.end(FINALE);
      }
    };
    more();
  });
  return { upstream, url: await listen(upstream.server) };
}

/** A sidecar's relay of route beta (OpenAI) to `url`; resolves the span of its one call. */
async function relayingSidecar(url: string): Promise<{ sidecar: string; span: Promise<Span> }> {
  const store = new ConfigStore({ upstreams: { beta: { baseUrl: url } } });
  const credentials = createCredentialProviders({ credentials: {}, upstreams: () => store.get().upstreams, logger, env: { OPENAI_API_KEY: 'sk-test-relay' } });
  const client = new UpstreamClient({ credentials, breaker: store.get().breaker, logger });
  const writer = new SpanWriter(openMemorySpanStore(10), { bufferSize: 10, batchSize: 10, flushIntervalMs: 1000 }, logger);
  const meter = new CallMeter(writer, logger);
  const finished = Promise.withResolvers<Span>();
  meter.observe({ callFinished: (span) => finished.resolve(span) });
  const prices = store.current().prices;
  const server = createServer((_req, res) => {
    void (async () => {
      const upstream = await client.send(store.get(), {
        route: 'beta',
        method: 'POST',
        path: '/v1/chat/completions',
        headers: {},
        body: Buffer.from('{}'),
        signal: new CallAbort(),
      });
      const call = meter.start({
        route: 'beta',
        provider: 'openai',
        model: 'gpt-4o-mini',
        operation: 'chat',
        userId: 'fay',
        projectId: null,
        requestId: 'r1',
        trace: startSpanContext(undefined, undefined),
      });
      const extractor = responseExtractor('openai', upstream, false, undefined);
      await relayStream({ res, upstream, call, prices, extractor, headers: { 'content-type': 'text/event-stream' }, estimateInput: () => 100 });
    })();
  });
  const sidecar = await listen(server);
  closers.push(async () => {
    await client.close();
    await writer.close();
  });
  return { sidecar, span: finished.promise };
}

/** A caller that sends its request and never reads the answer's body until told. */
function stalledCaller(sidecar: string): Promise<{ res: IncomingMessage; leave: () => void }> {
  return new Promise((resolve, reject) => {
    const req = request(`${sidecar}/`, { method: 'POST', agent: false }, (res) => {
      res.pause();
      resolve({ res, leave: () => req.destroy() });
    });
    req.on('error', () => undefined);
    req.once('error', reject);
    req.end();
  });
}

/** Turns of the event loop until the upstream has been blocked, with no byte more written, for 200 turns in a row. */
async function untilUpstreamStalls(upstream: Upstream): Promise<void> {
  let still = 0;
  let last = -1;
  for (let turn = 0; turn < 200_000 && still < 200; turn++) {
    await new Promise((resolve) => setImmediate(resolve));
    still = upstream.blocked && upstream.written === last ? still + 1 : 0;
    last = upstream.written;
  }
}

describe('the relay on undici’s dispatcher', () => {
  it('stops reading the upstream while the caller does not read, and relays all of it once the caller does', async () => {
    const { upstream, url } = await streamingUpstream();
    const { sidecar, span } = await relayingSidecar(url);
    const { res } = await stalledCaller(sidecar);
    await untilUpstreamStalls(upstream);
    // Loopback socket buffers and one chunk in each hand hold a few MiB; without backpressure the relay would
    // have read all 64 MiB into the sidecar's memory by now.
    expect(upstream.written).toBeLessThan(TOTAL / 2);
    let received = 0;
    res.on('data', (chunk: Buffer) => (received += chunk.length));
    res.resume();
    await new Promise((resolve) => res.once('end', resolve));
    expect(received).toBe(TOTAL);
    expect(upstream.written).toBe(TOTAL);
    expect(await upstream.cut).toBe(false);
    // gpt-4o-mini: 900 × 0.15 + 30 × 0.60 USD per million tokens
    expect(await span).toMatchObject({ status: 'ok', inputTokens: 900, outputTokens: 30 });
    expect((await span).costUsd).toBeCloseTo(0.000153, 12);
  });

  it('reads on after the caller left, though it had stopped reading, and aborts the exchange past READ_AFTER_LEAVING_BYTES', async () => {
    const { upstream, url } = await streamingUpstream();
    const { sidecar, span } = await relayingSidecar(url);
    const { leave } = await stalledCaller(sidecar);
    await untilUpstreamStalls(upstream);
    const atLeaving = upstream.written;
    leave();
    const recorded = await span;
    // Cut by the bytes bound, not by the 10 s timer: the paused upstream was resumed for the read on.
    expect(recorded).toMatchObject({ status: 'client_aborted', usageEstimated: true, inputTokens: 100 });
    expect(recorded.error).toContain(`sent ${READ_AFTER_LEAVING_BYTES} more bytes without its usage`);
    expect(await upstream.cut).toBe(true);
    // What the sidecar's buffers held when the caller left, plus the bound, plus what was in flight then.
    expect(upstream.written - atLeaving).toBeLessThan(TOTAL / 2);
    expect(upstream.written).toBeLessThan(TOTAL);
  });
});
