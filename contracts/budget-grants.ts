// How a charge is split over a user's grants and the period's limit, and when alert thresholds are crossed:
// the arithmetic every ledger applies the same way (a local proxy, a sidecar, the operator), so a charge is
// split identically wherever it is computed (ADR 1300). Amounts are ledger units (money.ts). Pure.

export interface Grant {
  id: string;
  amount: bigint;
  /** Spend this grant absorbed so far (across periods). */
  used: bigint;
  reason: string | null;
  /** epoch ms */
  createdAt: number;
  /** epoch ms; null: never expires. */
  expiresAt: number | null;
}

/** What the ledger keeps of one user's period. */
export interface PeriodUsage {
  spent: bigint;
  limitUsed: bigint;
  /** The highest alert threshold already logged this period (0: none). */
  alerted: number;
}

/** How one charge is absorbed: by grants (in order) and by the limit. */
export interface ChargeSplit {
  amount: bigint;
  limitPart: bigint;
  grantParts: { grantId: string; amount: bigint }[];
}

export function isGrantActive(grant: Grant, at: number): boolean {
  return grant.createdAt <= at && (grant.expiresAt === null || grant.expiresAt > at);
}

/** Soonest expiry first; never-expiring last; then oldest first; then by id, so every process agrees. */
export function grantOrder(a: Grant, b: Grant): number {
  const ea = a.expiresAt ?? Number.POSITIVE_INFINITY;
  const eb = b.expiresAt ?? Number.POSITIVE_INFINITY;
  if (ea !== eb) return ea < eb ? -1 : 1;
  if (a.createdAt !== b.createdAt) return a.createdAt - b.createdAt;
  return a.id < b.id ? -1 : a.id > b.id ? 1 : 0;
}

/** Splits `amount` over the grants active at `at` (soonest-expiring first), the rest onto the limit. Pure. */
export function splitCharge(grants: readonly Grant[], amount: bigint, at: number): ChargeSplit {
  const grantParts: ChargeSplit['grantParts'] = [];
  let left = amount;
  if (left > 0n && grants.length > 0) {
    for (const grant of [...grants].sort(grantOrder)) {
      if (left === 0n) break;
      if (!isGrantActive(grant, at)) continue;
      const room = grant.amount - grant.used;
      if (room <= 0n) continue;
      const part = room < left ? room : left;
      grantParts.push({ grantId: grant.id, amount: part });
      left -= part;
    }
  }
  return { amount, limitPart: left, grantParts };
}

/** Percent of the limit used, as a number for threshold comparisons; a zero limit is used up by any spend. */
export function percentUsed(limit: bigint, limitUsed: bigint): number {
  if (limit === 0n) return limitUsed > 0n ? Number.POSITIVE_INFINITY : 0;
  // Integer math first so 80% of 0.01 USD is exactly 80, not 79.99999.
  const scaled = (limitUsed * 1_000_000n) / limit;
  return Number(scaled) / 10_000;
}

/** Thresholds (ascending) reached by `limitUsed` that are above `alerted`: each is alerted once per period. */
export function newlyCrossed(thresholds: readonly number[], limit: bigint, limitUsed: bigint, alerted: number): number[] {
  const percent = percentUsed(limit, limitUsed);
  return thresholds.filter((t) => t > alerted && percent >= t);
}
