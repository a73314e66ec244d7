// The dead-letter file: batches a sink gave up on (retries exhausted, a permanent error, the sink down, or the
// drain deadline) go here as JSON lines, one per event, carrying the sink, the reason and the agent's bytes
// (base64) next to the event's protojson, so they can be replayed to that sink later. Bounded: past maxBytes
// no more lines are written and the events left over are counted as dropped by the caller.
//
// A batch is written a piece at a time (piecewise-append.ts), never as one string: 60 events of 9 MiB made a
// string longer than V8 allows. Nothing here throws: every failure is an outcome the caller counts.

import { mkdirSync } from 'node:fs';
import { type FileHandle, open } from 'node:fs/promises';
import { dirname } from 'node:path';
import { base64Length, PiecewiseAppend } from './piecewise-append.ts';
import type { AuditRecord } from './sinks/audit-sink.ts';

export interface DeadLetterSettings {
  path: string;
  maxBytes: number;
}

/** `written` events of the batch, from its start, are in the file; `reason` says why the rest are not. */
export interface DeadLetterOutcome {
  written: number;
  reason?: string;
}

export class DeadLetterFile {
  readonly path: string;
  readonly maxBytes: number;
  #file: FileHandle | undefined;
  #size = -1;
  /** The file does not end with a newline (a write cut short): the next line starts with one. */
  #torn = false;
  #chain: Promise<unknown> = Promise.resolve();

  constructor(settings: DeadLetterSettings) {
    this.path = settings.path;
    this.maxBytes = settings.maxBytes;
  }

  /** Appends the batch's events in order, as many as fit. Writes are serialised across sinks; never rejects. */
  write(sink: string, reason: string, attempts: number, batch: readonly AuditRecord[]): Promise<DeadLetterOutcome> {
    const next = this.#chain.then(() => this.#write(sink, reason, attempts, batch));
    this.#chain = next;
    return next;
  }

  async #write(sink: string, reason: string, attempts: number, batch: readonly AuditRecord[]): Promise<DeadLetterOutcome> {
    let out: PiecewiseAppend | undefined;
    try {
      const file = await this.#open();
      out = new PiecewiseAppend(file);
      const at = new Date().toISOString();
      const head = `{"sink":${JSON.stringify(sink)},"reason":${JSON.stringify(reason)},"attempts":${attempts},"dead_lettered_at":"${at}",`;
      let added = 0;
      for (const record of batch) {
        const { raw, info } = record.event;
        const start = `${this.#torn ? '\n' : ''}${head}"sequence":${record.sequence},"event_type":${JSON.stringify(info.type)},"tetragon_event_base64":"`;
        const json = record.event.json();
        const middle = '","event":';
        const jsonBytes = Buffer.byteLength(json);
        const lineBytes = Buffer.byteLength(start) + base64Length(raw.length) + middle.length + jsonBytes + 2;
        if (this.#size + lineBytes > this.maxBytes) {
          await out.flush();
          return { written: out.committed, reason: `dead-letter file ${this.path} is full (${this.maxBytes} bytes)` };
        }
        await out.add(start);
        this.#torn = false;
        await out.addBase64(raw);
        await out.add(middle, middle.length);
        await out.add(json, jsonBytes);
        await out.add('}\n', 2, true);
        this.#size += lineBytes;
        added++;
      }
      await out.flush();
      return { written: added };
    } catch (error) {
      // What reached the file is unknown: reopen (and measure) it on the next write, which starts a new line.
      await this.#file?.close().catch(() => undefined);
      this.#file = undefined;
      return { written: out?.committed ?? 0, reason: `cannot write dead-letter file ${this.path}: ${(error as Error).message}` };
    }
  }

  async #open(): Promise<FileHandle> {
    if (this.#file) return this.#file;
    mkdirSync(dirname(this.path), { recursive: true });
    const file = await open(this.path, 'a+', 0o600);
    try {
      this.#size = (await file.stat()).size;
      // A line cut short (a failed write, a killed process) is ended before the next one starts.
      if (this.#size > 0) {
        const last = Buffer.alloc(1);
        await file.read(last, 0, 1, this.#size - 1);
        this.#torn = last[0] !== 0x0a;
      }
    } catch (error) {
      await file.close().catch(() => undefined);
      throw error;
    }
    this.#file = file;
    return file;
  }

  async close(): Promise<void> {
    await this.#chain;
    await this.#file?.close().catch(() => undefined);
    this.#file = undefined;
  }
}
