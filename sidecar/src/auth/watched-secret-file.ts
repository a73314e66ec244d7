// A secret mounted from a file, kept in memory and re-read when it changes. Kubernetes updates a mounted
// Secret by writing a new timestamped directory and renaming the `..data` symlink over the old one, so the
// watch is on the directory (a watch on the file would follow the old inode). A periodic stat is the
// fallback for filesystems where fs.watch reports nothing. Requests never touch the disk.

import { watch, type FSWatcher, readFileSync, statSync } from 'node:fs';
import { readFile, stat } from 'node:fs/promises';
import { dirname } from 'node:path';
import type { Logger } from 'pino';
import { summarizeError } from './error-summary.ts';

export interface WatchedSecretFileOptions {
  path: string;
  /** What the secret is, for logs and errors, e.g. `OpenAI API key`. */
  label: string;
  logger: Logger;
  /** How often the stat fallback runs. */
  pollIntervalMs?: number;
}

interface FileIdentity {
  mtimeMs: number;
  ino: number;
  size: number;
}

export class WatchedSecretFile {
  readonly path: string;
  readonly #label: string;
  readonly #logger: Logger;
  #value: string | undefined;
  #problem: string | null = null;
  #identity: FileIdentity | undefined;
  #watcher: FSWatcher | undefined;
  #poll: NodeJS.Timeout | undefined;
  #reading: Promise<void> | undefined;
  #rereadRequested = false;
  #closed = false;

  constructor(options: WatchedSecretFileOptions) {
    this.path = options.path;
    this.#label = options.label;
    this.#logger = options.logger;
    this.#loadSync();
    try {
      this.#watcher = watch(dirname(this.path), { persistent: false }, () => this.#reload());
      this.#watcher.on('error', (error) => {
        this.#logger.warn({ err: summarizeError(error), path: this.path }, 'secret file watch failed; polling only');
        this.#watcher?.close();
        this.#watcher = undefined;
      });
    } catch (error) {
      this.#logger.warn({ err: summarizeError(error), path: this.path }, 'cannot watch secret file directory; polling only');
    }
    this.#poll = setInterval(() => void this.#checkIdentity(), options.pollIntervalMs ?? 10_000);
    this.#poll.unref();
  }

  /** The trimmed file content, or undefined when the file is missing, unreadable or empty. */
  get value(): string | undefined {
    return this.#value;
  }

  /** Why there is no value, or null. */
  get problem(): string | null {
    return this.#problem;
  }

  close(): void {
    this.#closed = true;
    this.#watcher?.close();
    clearInterval(this.#poll);
  }

  #loadSync(): void {
    try {
      const identity = identityOf(statSync(this.path));
      this.#accept(readFileSync(this.path, 'utf8'), identity);
    } catch (error) {
      this.#reject(error);
    }
  }

  async #checkIdentity(): Promise<void> {
    try {
      const identity = identityOf(await stat(this.path));
      if (!sameIdentity(identity, this.#identity)) this.#reload();
    } catch (error) {
      // A vanished file keeps the last good value (see #read); only report it when there is none.
      if (this.#value === undefined) this.#reject(error);
    }
  }

  /** Coalesces bursts of watch events (a Secret update renames several entries) into one read at a time. */
  #reload(): void {
    if (this.#closed) return;
    if (this.#reading) {
      this.#rereadRequested = true;
      return;
    }
    this.#reading = this.#read().finally(() => {
      this.#reading = undefined;
      if (this.#rereadRequested) {
        this.#rereadRequested = false;
        this.#reload();
      }
    });
  }

  async #read(): Promise<void> {
    try {
      const identity = identityOf(await stat(this.path));
      const content = await readFile(this.path, 'utf8');
      const previous = this.#value;
      this.#accept(content, identity);
      if (this.#value !== undefined && previous !== undefined && this.#value !== previous) {
        this.#logger.info({ path: this.path }, `${this.#label} file changed; new value in use`);
      }
    } catch (error) {
      // Keep serving the last good value: a rotation in progress can briefly remove the file.
      if (this.#value === undefined) this.#reject(error);
      else this.#logger.warn({ err: summarizeError(error), path: this.path }, `cannot re-read ${this.#label} file; keeping the current value`);
    }
  }

  #accept(content: string, identity: FileIdentity): void {
    this.#identity = identity;
    const trimmed = content.trim();
    if (trimmed === '') {
      if (this.#value === undefined) this.#problem = `${this.#label} file ${this.path} is empty`;
      else this.#logger.warn({ path: this.path }, `${this.#label} file is empty; keeping the current value`);
      return;
    }
    this.#value = trimmed;
    this.#problem = null;
  }

  #reject(error: unknown): void {
    this.#identity = undefined;
    this.#problem = this.#describe(error);
  }

  #describe(error: unknown): string {
    const { code, message } = summarizeError(error);
    return code === 'ENOENT' ? `${this.#label} file ${this.path} does not exist` : `cannot read ${this.#label} file ${this.path}: ${message}`;
  }
}

function identityOf(stats: { mtimeMs: number; ino: number; size: number }): FileIdentity {
  return { mtimeMs: stats.mtimeMs, ino: stats.ino, size: stats.size };
}

function sameIdentity(a: FileIdentity, b: FileIdentity | undefined): boolean {
  return b !== undefined && a.mtimeMs === b.mtimeMs && a.ino === b.ino && a.size === b.size;
}
