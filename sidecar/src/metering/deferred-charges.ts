// Results a provider bills when they are known rather than when they are asked for (ADR 0913): an Anthropic
// Message Batch, a background response. The call that submits one is admitted with a budget reservation that
// outlives it, kept here under the id the provider's answer names, until a read through the proxy shows the
// usage (then charged to the submitter, once) or the provider's own expiry plus a grace passes.
//
// Bounded: MAX_REMEMBERED ids, oldest dropped first (an open one gives its hold back as it goes). Who submitted
// each and what was charged are written through to a DeferredStore when the proxy keeps its spans in SQLite, so
// a restart forgets only the holds; without one an id dropped for room or a restart forgets it all, and a later
// read charges the reader, again (the trade-off is ADR 0913's). Reads of results not submitted here are kept
// apart, in memory, with their own bound: they never take a submission's room.

import type { DeferredRow, DeferredStore } from './deferred-store.ts';

/** Ids remembered, open or charged; each entry is a few hundred bytes. */
export const MAX_REMEMBERED = 20_000;
/** How long after the provider's expiry a hold is kept, for a result finished at the last moment. */
export const EXPIRY_GRACE_MS = 60 * 60 * 1000;
/** How often expired holds are looked for (on the next use after this long). */
const SWEEP_EVERY_MS = 60 * 1000;

/** Who submitted a deferred result, and what it holds against their budget. */
export interface DeferredSubmission {
  userId: string | null;
  projectId: string | null;
  /** The model its span names: the one its requests name, or `mixed`. */
  model: string;
  /** epoch ms after which the hold is given back (the provider's expiry plus the grace). */
  holdUntil: number;
  /** Gives the reservation back; called once. */
  release: () => void;
}

interface Charged {
  /** Result lines already charged by reads that did not reach the end (a batch's results). */
  chargedLines: number;
  charged: boolean;
}

interface Entry extends DeferredSubmission, Charged {}

export class DeferredCharges {
  readonly #entries = new Map<string, Entry>();
  /** Another id a result is read by (an OpenAI batch's output file) → the id it was submitted under. */
  readonly #aliases = new Map<string, string>();
  /**
   * Results read here that were not submitted here (another tool's batch, any file's content): what reads
   * charged, apart from the submissions, so that no number of such reads evicts a submission and its hold.
   * In memory only, bounded like the submissions, oldest dropped first.
   */
  readonly #unknown = new Map<string, Charged>();
  readonly #max: number;
  #store: DeferredStore | undefined;
  /** A write the store refused: metering never fails a call (ADR 1001), so it is reported, not thrown. */
  readonly #storeFailed: (error: unknown) => void;
  #nextSweep = 0;

  constructor(opts: { max?: number; store?: DeferredStore | undefined; storeFailed?: (error: unknown) => void } = {}) {
    this.#max = opts.max ?? MAX_REMEMBERED;
    this.#store = opts.store;
    this.#storeFailed = opts.storeFailed ?? (() => undefined);
    const stored = this.#persist(() => this.#store?.load());
    for (const row of stored?.rows.slice(-this.#max) ?? []) {
      // A restart gave the holds back: what is kept is who submitted what, and what was charged.
      this.#entries.set(row.key, { ...row, holdUntil: 0, release: () => undefined });
    }
    for (const [alias, key] of stored?.aliases.slice(-this.#max) ?? []) this.#aliases.set(alias, key);
  }

  /** A submission the provider accepted under `id`: its hold is kept until the result is charged or expires. */
  keep(route: string, id: string, submission: DeferredSubmission, now: number): void {
    this.#sweep(now);
    const key = keyOf(route, id);
    this.#entries.get(key)?.release();
    this.#entries.delete(key);
    while (this.#entries.size >= this.#max) {
      const [oldest, entry] = this.#entries.entries().next().value!;
      entry.release();
      this.#entries.delete(oldest);
      this.#persist(() => this.#store?.remove(oldest));
    }
    const entry: Entry = { ...submission, release: once(submission.release), chargedLines: 0, charged: false };
    this.#entries.set(key, entry);
    this.#save(key, entry);
  }

  /** Closes the store at shutdown: a later write (a read still finishing) is dropped, and the file is left whole. */
  close(): void {
    const store = this.#store;
    this.#store = undefined;
    this.#persist(() => store?.close());
  }

  /** `alias` names `id`'s result from now on (an OpenAI batch's output file id), for reads by it. */
  link(route: string, alias: string, id: string): void {
    const key = keyOf(route, alias);
    if (this.#aliases.has(key) || !this.#entries.has(keyOf(route, id))) return;
    if (this.#aliases.size >= this.#max) this.#aliases.delete(this.#aliases.keys().next().value!);
    this.#aliases.set(key, keyOf(route, id));
    this.#persist(() => this.#store?.link(key, keyOf(route, id)));
  }

  /** Who submitted `id` through this proxy, if it is remembered. */
  submitter(route: string, id: string, now: number): Pick<DeferredSubmission, 'userId' | 'projectId' | 'model'> | undefined {
    this.#sweep(now);
    return this.#entries.get(this.#key(route, id));
  }

  /** Whether `id`'s result was charged already: a later read charges nothing. */
  charged(route: string, id: string): boolean {
    return this.#charges(this.#key(route, id))?.charged === true;
  }

  /** Lines of `id`'s results an earlier read that stopped short already charged. */
  chargedLines(route: string, id: string): number {
    return this.#charges(this.#key(route, id))?.chargedLines ?? 0;
  }

  /**
   * A read of `id`'s results reached its `line`th line: true when that read charges it, which makes it charged for
   * every other read; false when the result is charged whole or another read (at the same time) charged the line.
   * A result not submitted here is charged to its reader, and its lines are claimed the same way, so two reads at
   * once charge each line to one of them (ADR 0913).
   */
  claimLine(route: string, id: string, line: number): boolean {
    const key = this.#key(route, id);
    const entry = this.#entries.get(key) ?? this.#unknownRead(key);
    if (entry.charged || line <= entry.chargedLines) return false;
    entry.chargedLines = line;
    return true;
  }

  /**
   * A read charged `id`'s result: whole (its hold is given back and later reads charge nothing), or its first
   * `lines` lines (a read cut short; the next read charges from there).
   */
  settle(route: string, id: string, outcome: { whole: boolean; lines?: number }, now: number): void {
    this.#sweep(now);
    const key = this.#key(route, id);
    const entry = this.#entries.get(key);
    // Submitted elsewhere (or forgotten): remembered apart from the submissions, so it is charged once here too.
    const charged = entry ?? this.#unknownRead(key);
    charged.chargedLines = Math.max(charged.chargedLines, outcome.lines ?? 0);
    if (outcome.whole) charged.charged = true;
    if (entry === undefined) return;
    if (outcome.whole) entry.release();
    this.#save(key, entry);
  }

  #charges(key: string): Charged | undefined {
    return this.#entries.get(key) ?? this.#unknown.get(key);
  }

  /** The record of a result not submitted here, made on its first read; the oldest such goes when full. */
  #unknownRead(key: string): Charged {
    let charged = this.#unknown.get(key);
    if (charged !== undefined) return charged;
    if (this.#unknown.size >= this.#max) this.#unknown.delete(this.#unknown.keys().next().value!);
    charged = { chargedLines: 0, charged: false };
    this.#unknown.set(key, charged);
    return charged;
  }

  #save(key: string, entry: Entry): void {
    const row: DeferredRow = { key, userId: entry.userId, projectId: entry.projectId, model: entry.model, chargedLines: entry.chargedLines, charged: entry.charged };
    this.#persist(() => this.#store?.put(row));
  }

  #persist<T>(write: () => T): T | undefined {
    try {
      return write();
    } catch (error) {
      this.#storeFailed(error);
      return undefined;
    }
  }

  #key(route: string, id: string): string {
    const key = keyOf(route, id);
    return this.#aliases.get(key) ?? key;
  }

  /** Gives back the holds of results whose expiry has passed; the ids stay remembered (who submitted them). */
  #sweep(now: number): void {
    if (now < this.#nextSweep) return;
    this.#nextSweep = now + SWEEP_EVERY_MS;
    for (const entry of this.#entries.values()) {
      if (entry.holdUntil > 0 && entry.holdUntil <= now) {
        entry.release();
        entry.holdUntil = 0;
      }
    }
  }
}

function keyOf(route: string, id: string): string {
  return `${route}\u0000${id}`;
}

function once(release: () => void): () => void {
  let open = true;
  return () => {
    if (!open) return;
    open = false;
    release();
  };
}
