// The rate-limit windows of one engine process (ADR 1309): a Map from subject to three numbers, checked and
// counted synchronously on the request path. Each engine (a local proxy, a server, each sidecar) counts its
// own calls; limits shared across the sidecars of a namespace need a shared store. A subject is a user id or a
// group key (ADR 1313): a call under several levels is checked at all of them before it is counted at any.

import {
  admissionOf,
  admittedAt,
  levelFits,
  type RateAdmission,
  type RateLimits,
  type RateSubject,
  type RateWindows,
  RATE_WINDOW_MS,
  requestsTatAfter,
  tokensTatAfter,
  type WindowsBefore,
} from './rate-windows.ts';

/** Counts an admitted call in one level's windows. */
function count(s: WindowsBefore, limits: RateLimits, tokens: number, now: number): void {
  s.rt = requestsTatAfter(s.rt, limits, now);
  s.tt = tokensTatAfter(s.tt, limits, tokens, now);
  if (limits.concurrent !== undefined) s.n++;
}

/** Subjects kept before idle ones (windows full again, nothing in flight) are dropped. */
const MAX_SUBJECTS = 100_000;

export class MemoryRateWindows implements RateWindows {
  /** Per subject: the theoretical arrival times (epoch ms; at or before now: the full allowance is there) and calls in flight. */
  readonly #subjects = new Map<string, WindowsBefore>();
  readonly #maxSubjects: number;

  constructor(opts: { maxSubjects?: number } = {}) {
    this.#maxSubjects = opts.maxSubjects ?? MAX_SUBJECTS;
  }

  /** Subjects with state in memory. */
  get size(): number {
    return this.#subjects.size;
  }

  /** `call`: every level of the call being admitted; none of them is dropped to make room for another. */
  #windows(key: string, now: number, call: readonly RateSubject[]): WindowsBefore {
    let s = this.#subjects.get(key);
    if (s === undefined) {
      if (this.#subjects.size >= this.#maxSubjects) this.#dropIdle(now, call);
      s = { rt: now, tt: now, n: 0 };
      this.#subjects.set(key, s);
    }
    return s;
  }

  admit(subjects: readonly RateSubject[], reservedTokens: number, now: number): RateAdmission {
    const tokens = reservedTokens > 0 ? reservedTokens : 0;
    if (subjects.length === 1) {
      // One level (the common case): no array, no second pass, as before there were levels.
      const subject = subjects[0]!;
      const s = this.#windows(subject.key, now, subjects);
      if (!levelFits(s, subject.limits, tokens, now)) return admissionOf([s], subjects, tokens, now, 0);
      const admitted = admittedAt(s, subject.limits, tokens, now);
      count(s, subject.limits, tokens, now);
      return admitted;
    }
    const windows = subjects.map((subject) => this.#windows(subject.key, now, subjects));
    let refusedAt = -1;
    for (let i = 0; i < subjects.length && refusedAt === -1; i++) if (!levelFits(windows[i]!, subjects[i]!.limits, tokens, now)) refusedAt = i;
    // The admission reads the windows before the call: it is worked out before they are counted.
    const admission = admissionOf(windows, subjects, tokens, now, refusedAt);
    if (refusedAt === -1) for (let i = 0; i < subjects.length; i++) count(windows[i]!, subjects[i]!.limits, tokens, now);
    return admission;
  }

  settle(subjects: readonly RateSubject[], reservedTokens: number, usedTokens: number | null, now: number): void {
    const reserved = reservedTokens > 0 ? reservedTokens : 0;
    for (const { key, limits } of subjects) {
      const s = this.#subjects.get(key);
      if (s === undefined) continue;
      if (limits.concurrent !== undefined && s.n > 0) s.n--;
      const tpm = limits.tokensPerMinute;
      if (tpm === undefined || usedTokens === null) continue;
      // Tokens given back never make the window fuller than full (a TAT before now means full).
      const tat = s.tt + ((usedTokens - reserved) * RATE_WINDOW_MS) / tpm;
      s.tt = tat > now ? tat : now;
    }
  }

  /**
   * Drops subjects whose windows are full again and that have nothing in flight: they hold no information. Not
   * the levels of the call being admitted: one fetched before this would be counted in a detached object, its
   * concurrent slot lost to the next call.
   */
  #dropIdle(now: number, call: readonly RateSubject[]): void {
    for (const [subject, s] of this.#subjects) {
      if (s.n === 0 && s.rt < now && s.tt < now && !call.some((level) => level.key === subject)) this.#subjects.delete(subject);
    }
  }
}
