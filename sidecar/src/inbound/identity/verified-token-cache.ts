// Answers about tokens already checked, so that a client sending the same token on every call (an SDK keeps
// its apiKey for the token's hour) is verified once, not on every request. Keyed by the token's SHA-256 (the
// token itself is not kept), each entry until its own deadline, at most MAX_ENTRIES (past that the oldest go).

import { createHash } from 'node:crypto';
import type { VerifiedClaims } from './credential-checks.ts';

const MAX_ENTRIES = 10_000;

export function tokenKey(token: string): string {
  return createHash('sha256').update(token).digest('base64url');
}

export class VerifiedTokenCache {
  readonly #entries = new Map<string, { verified: VerifiedClaims; expiresAt: number }>();
  readonly #now: () => number;

  constructor(now: () => number = () => Date.now()) {
    this.#now = now;
  }

  get(key: string): VerifiedClaims | undefined {
    const entry = this.#entries.get(key);
    if (!entry) return undefined;
    if (this.#now() < entry.expiresAt) return entry.verified;
    this.#entries.delete(key);
    return undefined;
  }

  /** Keeps `verified` until `expiresAt` (ms since the epoch); a deadline already past keeps nothing. */
  set(key: string, verified: VerifiedClaims, expiresAt: number): void {
    if (expiresAt <= this.#now()) return;
    if (this.#entries.size >= MAX_ENTRIES) this.#entries.delete(this.#entries.keys().next().value!);
    this.#entries.set(key, { verified, expiresAt });
  }
}
