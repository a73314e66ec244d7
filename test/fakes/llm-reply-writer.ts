// Writes fake replies the way real upstreams do: streams progressively (one write per event, a macrotask
// between writes, backpressure respected) and with the failure shapes tests ask for (truncation, an abort,
// a garbage event, an in-stream error, events split into tiny writes and coalesced).

import { once } from 'node:events';
import type { OutgoingHttpHeaders, ServerResponse } from 'node:http';
import { setImmediate as tick } from 'node:timers/promises';
import type { ReplyContent } from './llm-reply-content.ts';
import type { FakeBehaviour } from './llm-upstream.ts';

/** A stream reply, already encoded in the provider's framing. */
export interface StreamPlan {
  headers: OutgoingHttpHeaders;
  /** Events before the content (message_start, role chunk, …). */
  head: Buffer[];
  /** Content events, generated lazily; `bodyCount` of them. */
  body: Iterable<Buffer>;
  bodyCount: number;
  /** Final events (finish reason, usage, stop, [DONE]); left out of a truncated stream. */
  tail: Buffer[];
  /** A corrupted event for `malformedStream`. */
  garbage: Buffer;
  /** The provider's in-stream error event for `streamError`. */
  errorEvent: Buffer;
}

export async function writeStream(res: ServerResponse, plan: StreamPlan, b: FakeBehaviour): Promise<void> {
  res.writeHead(200, plan.headers);
  const sink = new StreamSink(res, b.splitFrames === true);
  const cutShort = b.truncateStream || b.abortStream || b.streamError;
  const stopAfter = cutShort ? Math.max(1, Math.floor(plan.bodyCount / 2)) : Infinity;
  for (const event of plan.head) await sink.push(event);
  let written = 0;
  for (const event of plan.body) {
    if (written >= stopAfter || res.destroyed) break;
    await sink.push(event);
    written += 1;
    if (written === 1 && b.malformedStream) await sink.push(plan.garbage);
  }
  if (cutShort) {
    if (b.streamError) await sink.push(plan.errorEvent);
    await sink.flush();
    if (b.abortStream) {
      res.destroy();
      return;
    }
    res.end();
    return;
  }
  if (b.holdTail) {
    await sink.flush();
    await b.holdTail.catch(() => undefined);
    if (res.destroyed) return;
  }
  for (const event of plan.tail) await sink.push(event);
  await sink.flush();
  res.end();
}

/** Sends a JSON body whole, with a content length. */
export function writeJson(res: ServerResponse, status: number, body: unknown, headers: OutgoingHttpHeaders = {}): void {
  const bytes = Buffer.from(JSON.stringify(body));
  res.writeHead(status, { 'content-type': 'application/json', 'content-length': bytes.length, ...headers });
  res.end(bytes);
}

/**
 * Sends a JSON reply whose text comes from `content`. A big body is streamed: the JSON is built around a
 * marker and the text pieces are written in its place one by one, so it is never held whole.
 */
export async function writeJsonWithText(res: ServerResponse, headers: OutgoingHttpHeaders, content: ReplyContent, build: (text: string) => unknown): Promise<void> {
  if (content.text !== null) {
    writeJson(res, 200, build(content.text), headers);
    return;
  }
  const marker = '\u0000fake-text\u0000';
  const [prefix, suffix] = JSON.stringify(build(marker)).split(JSON.stringify(marker).slice(1, -1));
  res.writeHead(200, { 'content-type': 'application/json', ...headers });
  const sink = new StreamSink(res, false);
  await sink.push(Buffer.from(prefix ?? ''));
  for (const piece of content.pieces()) {
    if (res.destroyed) return;
    await sink.push(Buffer.from(JSON.stringify(piece).slice(1, -1)));
  }
  await sink.push(Buffer.from(suffix ?? ''));
  res.end();
}

const tinyWrites = [1, 2, 3, 5, 7];
const eventsPerCoalescedWrite = 3;

class StreamSink {
  res: ServerResponse;
  split: boolean;
  pending: Buffer[] = [];

  constructor(res: ServerResponse, split: boolean) {
    this.res = res;
    this.split = split;
  }

  async push(event: Buffer): Promise<void> {
    if (!this.split) return this.write(event);
    this.pending.push(event);
    if (this.pending.length >= eventsPerCoalescedWrite) await this.flush();
  }

  /** In split mode: a few tiny writes cutting into the first event, then the rest of the group in one write. */
  async flush(): Promise<void> {
    if (this.pending.length === 0) return;
    const group = Buffer.concat(this.pending);
    this.pending = [];
    let offset = 0;
    for (const size of tinyWrites) {
      if (offset + size >= group.length) break;
      await this.write(group.subarray(offset, offset + size));
      offset += size;
    }
    await this.write(group.subarray(offset));
  }

  async write(bytes: Buffer): Promise<void> {
    if (this.res.destroyed) return;
    if (!this.res.write(bytes)) {
      // Whichever fires first wins; the abort removes the other listener so none pile up.
      const ac = new AbortController();
      const { signal } = ac;
      await Promise.race([once(this.res, 'drain', { signal }), once(this.res, 'close', { signal })]).finally(() => ac.abort());
    }
    await tick();
  }
}

/** One server-sent event. Google's endpoints end lines with CRLF, the others with LF. */
export function sseEvent(data: unknown, opts: { event?: string; crlf?: boolean } = {}): Buffer {
  const eol = opts.crlf ? '\r\n' : '\n';
  const payload = typeof data === 'string' ? data : JSON.stringify(data);
  const eventLine = opts.event ? `event: ${opts.event}${eol}` : '';
  return Buffer.from(`${eventLine}data: ${payload}${eol}${eol}`);
}
