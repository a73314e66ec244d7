// The dead-letter file: batches a sink gave up on (retries exhausted, a permanent error, or the drain deadline)
// go here as JSON lines, one per event, carrying the sink, the reason and the agent's bytes (base64) next to
// the event's protojson, so they can be replayed to that sink later. Bounded: past maxBytes nothing more is
// written and the events are counted as dropped by the caller.

import { mkdirSync } from 'node:fs';
import { type FileHandle, open, stat } from 'node:fs/promises';
import { dirname } from 'node:path';
import type { AuditRecord } from './sinks/audit-sink.ts';

export interface DeadLetterSettings {
  path: string;
  maxBytes: number;
}

export type DeadLetterOutcome = { written: true } | { written: false; reason: string };

export class DeadLetterFile {
  readonly path: string;
  readonly maxBytes: number;
  #file: FileHandle | undefined;
  #size = -1;
  #chain: Promise<unknown> = Promise.resolve();

  constructor(settings: DeadLetterSettings) {
    this.path = settings.path;
    this.maxBytes = settings.maxBytes;
  }

  /** Appends the batch whole, or not at all. Writes are serialised across sinks. */
  write(sink: string, reason: string, attempts: number, batch: readonly AuditRecord[]): Promise<DeadLetterOutcome> {
    const next = this.#chain.then(() => this.#write(sink, reason, attempts, batch));
    this.#chain = next.catch(() => undefined);
    return next;
  }

  async #write(sink: string, reason: string, attempts: number, batch: readonly AuditRecord[]): Promise<DeadLetterOutcome> {
    const at = new Date().toISOString();
    let text = '';
    for (const record of batch) {
      const { info } = record.event;
      text +=
        `{"sink":${JSON.stringify(sink)},"reason":${JSON.stringify(reason)},"attempts":${attempts},"dead_lettered_at":"${at}",` +
        `"sequence":${record.sequence},"event_type":${JSON.stringify(info.type)},` +
        `"tetragon_event_base64":"${record.event.raw.toString('base64')}","event":${record.event.json()}}\n`;
    }
    const bytes = Buffer.byteLength(text);
    try {
      if (!this.#file) {
        mkdirSync(dirname(this.path), { recursive: true });
        this.#file = await open(this.path, 'a', 0o600);
        this.#size = (await stat(this.path)).size;
      }
      if (this.#size + bytes > this.maxBytes) return { written: false, reason: `dead-letter file ${this.path} is full (${this.maxBytes} bytes)` };
      await this.#file.appendFile(text);
      this.#size += bytes;
      return { written: true };
    } catch (error) {
      return { written: false, reason: `cannot write dead-letter file ${this.path}: ${(error as Error).message}` };
    }
  }

  async close(): Promise<void> {
    await this.#chain;
    await this.#file?.close();
    this.#file = undefined;
  }
}
