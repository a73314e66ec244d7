// kind: jsonl. One protojson line per event in the shape `tetra getevents -o json` prints, appended to a
// file that rotates by size (audit.jsonl → audit.jsonl.1 → ... → .keep), as SIEM shippers expect.

import { mkdirSync } from 'node:fs';
import { type FileHandle, open, rename, rm, stat } from 'node:fs/promises';
import { dirname } from 'node:path';
import type { AuditRecord, AuditSink } from './audit-sink.ts';
import { SinkWriteError } from './audit-sink.ts';

export interface JsonlSinkSettings {
  name: string;
  path: string;
  rotate: { maxBytes: number; keep: number };
}

export class JsonlSink implements AuditSink {
  readonly kind = 'jsonl';
  readonly name: string;
  readonly maxBatch = 500;
  #settings: JsonlSinkSettings;
  #file: FileHandle | undefined;
  #size = 0;

  constructor(settings: JsonlSinkSettings) {
    this.#settings = settings;
    this.name = settings.name;
  }

  async write(batch: readonly AuditRecord[]): Promise<void> {
    let text = '';
    for (const record of batch) text += `${record.event.json()}\n`;
    const bytes = Buffer.byteLength(text);
    try {
      if (!this.#file) await this.#open();
      if (this.#size > 0 && this.#size + bytes > this.#settings.rotate.maxBytes) await this.#rotate();
      await this.#file!.appendFile(text);
      this.#size += bytes;
    } catch (error) {
      // The handle may be the problem (file removed, disk replaced): reopen on the next attempt.
      await this.#file?.close().catch(() => undefined);
      this.#file = undefined;
      throw new SinkWriteError(`cannot append to ${this.#settings.path}: ${(error as Error).message}`, true, { cause: error });
    }
  }

  async close(): Promise<void> {
    await this.#file?.close();
    this.#file = undefined;
  }

  async #open(): Promise<void> {
    mkdirSync(dirname(this.#settings.path), { recursive: true });
    this.#file = await open(this.#settings.path, 'a', 0o640);
    this.#size = (await stat(this.#settings.path)).size;
  }

  async #rotate(): Promise<void> {
    const { path, rotate } = this.#settings;
    await this.#file?.close();
    this.#file = undefined;
    if (rotate.keep === 0) {
      await rm(path, { force: true });
    } else {
      for (let i = rotate.keep - 1; i >= 1; i--) {
        await rename(`${path}.${i}`, `${path}.${i + 1}`).catch((error: NodeJS.ErrnoException) => {
          if (error.code !== 'ENOENT') throw error;
        });
      }
      await rename(path, `${path}.1`);
    }
    await this.#open();
  }
}
