// Money in budgets: integers, never floats. A ledger amount is a count of 10⁻¹⁰ USD, the resolution every
// span's cost_usd is rounded to (ADR 0203), so a user's spend is exactly the sum of their spans' costs however
// many calls it adds up (ADR 1301). Limits and grants are written in USD with at most six decimals (whole
// micro-dollars); they become ledger units by an exact decimal parse, never by multiplying a float.
//
// Amounts are bigint in memory: 2^63 units is about 922 million USD, and SQLite and Firestore both store
// 64-bit integers. Amounts are bounded where they enter (limits and grants at MAX_BUDGET_USD, one call's charge
// at MAX_CHARGE_USD) and sums saturate at MAX_SPEND_UNITS, so no value a user or an upstream can cause reaches
// 2^63, where a store's integer would overflow into a float and every reader of the ledger would fail. JSON carries them as decimal USD strings (exact) or, in the
// management API, as numbers rounded to 10⁻¹⁰ like span costs.

/** Ledger units per USD. */
export const UNITS_PER_USD = 10_000_000_000n;
/** Ledger units per micro-dollar (the finest a limit or a grant can be written in). */
export const UNITS_PER_MICRO_USD = 10_000n;
/** Decimal places a limit or grant may have: whole micro-dollars. */
export const USD_DECIMALS = 6;
/** Largest limit or grant accepted: big enough for any budget, small enough that sums stay far below 2^63 units. */
export const MAX_BUDGET_USD = 100_000_000;
/** Most one call is charged, whatever its prices and usage say (the span keeps the cost it was priced at). */
export const MAX_CHARGE_USD = 1_000_000;
/** Where a spend, a limit's use or a grant's use stops growing: half of 2^63, so a sum of two never overflows. */
export const MAX_SPEND_UNITS = 2n ** 62n;

/** `a + b`, stopping at MAX_SPEND_UNITS. */
export function addSpend(a: bigint, b: bigint): bigint {
  const sum = a + b;
  return sum > MAX_SPEND_UNITS ? MAX_SPEND_UNITS : sum;
}

/**
 * What is wrong with an amount a ledger is asked to add to a spend, a limit's use or a grant's use, or null. The
 * engine makes every such amount from charges, each from 0 to MAX_CHARGE_USD (unitsFromCostUsd), added up with
 * addSpend: so it is from 0 to MAX_SPEND_UNITS, and anything else did not come from a charge.
 */
export function spendUnitsProblem(units: bigint): string | null {
  if (units < 0n) return `is negative (${formatUsd(units)} USD)`;
  if (units > MAX_SPEND_UNITS) return `is more than a spend can reach (${formatUsd(units)} USD; sums stop at ${formatUsd(MAX_SPEND_UNITS)} USD)`;
  return null;
}

const USD_TEXT = /^(\d{1,10})(?:\.(\d{1,6}))?$/;

/**
 * Parses a USD amount written as a decimal string ("25", "0.01") or a JSON/YAML number (25, 0.01) into
 * ledger units. A number goes through its shortest decimal form (`String(0.01)` is "0.01"), so no binary
 * fraction leaks in. Returns an error text naming the rule, or the units.
 */
export function parseUsd(value: unknown): bigint | string {
  let text: string;
  if (typeof value === 'number') {
    if (!Number.isFinite(value)) return `must be a finite amount of USD (got ${value})`;
    text = String(value);
  } else if (typeof value === 'string') {
    text = value.trim();
  } else {
    return `must be an amount of USD, a number or a decimal string such as "25" or "0.01" (got ${JSON.stringify(value) ?? typeof value})`;
  }
  const match = USD_TEXT.exec(text);
  if (!match) {
    return `must be a non-negative amount of USD with at most ${USD_DECIMALS} decimal places, such as 25 or "0.01" (got ${JSON.stringify(value)})`;
  }
  const whole = BigInt(match[1]!);
  const fraction = BigInt((match[2] ?? '').padEnd(USD_DECIMALS, '0'));
  const units = whole * UNITS_PER_USD + fraction * UNITS_PER_MICRO_USD;
  if (units > BigInt(MAX_BUDGET_USD) * UNITS_PER_USD) return `must be at most ${MAX_BUDGET_USD} USD (got ${JSON.stringify(value)})`;
  return units;
}

/** Whole micro-dollars (the CRD's integer form of an amount) as ledger units. */
export function microUsdToUnits(micro: number | bigint): bigint {
  return BigInt(micro) * UNITS_PER_MICRO_USD;
}

/**
 * A span's cost_usd as ledger units, at most MAX_CHARGE_USD. Span costs are integers of 10⁻¹⁰ USD divided by
 * 10¹⁰ (cost.ts), and multiplying back and rounding recovers that integer exactly for any cost below 900,000 USD.
 */
export function unitsFromCostUsd(costUsd: number): bigint {
  if (!Number.isFinite(costUsd) || costUsd <= 0) return 0n;
  if (costUsd >= MAX_CHARGE_USD) return BigInt(MAX_CHARGE_USD) * UNITS_PER_USD;
  return BigInt(Math.round(costUsd * 1e10));
}

/** A stored amount as units, whatever type the store returned it in (a float when an old sum overflowed). */
export function storedUnits(value: unknown): bigint {
  if (typeof value === 'bigint') return value > MAX_SPEND_UNITS ? MAX_SPEND_UNITS : value;
  const number = Number(value);
  if (!Number.isFinite(number) || number <= 0) return 0n;
  return number >= Number(MAX_SPEND_UNITS) ? MAX_SPEND_UNITS : BigInt(Math.trunc(number));
}

/** Exact decimal USD, trailing zeros trimmed: 1000000n → "0.0001", 0n → "0", -5n → "-0.0000000005". */
export function formatUsd(units: bigint): string {
  const negative = units < 0n;
  const abs = negative ? -units : units;
  const whole = abs / UNITS_PER_USD;
  const fraction = (abs % UNITS_PER_USD).toString().padStart(10, '0').replace(/0+$/, '');
  return `${negative ? '-' : ''}${whole}${fraction ? `.${fraction}` : ''}`;
}

/** USD as a JSON number, rounded to 10⁻¹⁰ as span costs are (for display; totals stay exact in the ledger). */
export function unitsToUsd(units: bigint): number {
  return Number(formatUsd(units));
}
