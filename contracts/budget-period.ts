// Budget periods are calendar periods of a time zone: a day, an ISO week (Monday to Monday) or a month, from
// local midnight to local midnight. A period's length therefore varies: 23 or 25 hours across a DST change,
// 28 to 31 days for a month. Local midnight can also not exist (zones that spring forward at 00:00) or, in a
// few historical cases, a whole day was skipped; a period then starts at the first instant whose local date
// is on or after its first day. The zone rules are the runtime's (ICU, through Intl), so no table is kept here.
//
// Computed once per user per period (never per request): the request path compares a timestamp with the
// cached end.

export const BUDGET_PERIODS = ['day', 'week', 'month'] as const;
export type BudgetPeriod = (typeof BUDGET_PERIODS)[number];

export interface PeriodBounds {
  /** First instant of the period (epoch ms). */
  start: number;
  /** First instant of the next period (epoch ms). */
  end: number;
}

interface LocalDate {
  year: number;
  /** 1-12 */
  month: number;
  day: number;
}

const formatters = new Map<string, Intl.DateTimeFormat>();

function formatter(timeZone: string): Intl.DateTimeFormat {
  let f = formatters.get(timeZone);
  if (!f) {
    f = new Intl.DateTimeFormat('en-US', { timeZone, calendar: 'iso8601', numberingSystem: 'latn', year: 'numeric', month: 'numeric', day: 'numeric' });
    formatters.set(timeZone, f);
  }
  return f;
}

/** True when the runtime knows the IANA zone (`UTC`, `Europe/Berlin`; not `CET+1` or a typo). */
export function isTimeZone(timeZone: string): boolean {
  if (timeZone.length === 0 || timeZone.length > 64) return false;
  try {
    formatter(timeZone);
    return true;
  } catch {
    return false;
  }
}

function localDate(ms: number, timeZone: string): LocalDate {
  let year = 0;
  let month = 0;
  let day = 0;
  for (const part of formatter(timeZone).formatToParts(ms)) {
    if (part.type === 'year') year = Number(part.value);
    else if (part.type === 'month') month = Number(part.value);
    else if (part.type === 'day') day = Number(part.value);
  }
  return { year, month, day };
}

function ordinal(d: LocalDate): number {
  return d.year * 10_000 + d.month * 100 + d.day;
}

/** Calendar arithmetic on a local date (no zone involved): `days` later, normalised (Jan 32 → Feb 1). */
function addDays(d: LocalDate, days: number): LocalDate {
  const t = new Date(Date.UTC(d.year, d.month - 1, d.day + days));
  return { year: t.getUTCFullYear(), month: t.getUTCMonth() + 1, day: t.getUTCDate() };
}

const HOUR = 3_600_000;

/**
 * The first instant whose local date in `timeZone` is `d` or later. Local dates only move forward in the zones
 * in use (a fall-back across midnight, where the date briefly repeats, is historical), so a binary search over
 * a window of two days either side of UTC midnight finds it; offsets never exceed 26 hours.
 */
export function startOfLocalDay(d: LocalDate, timeZone: string): number {
  const target = ordinal(d);
  const utcMidnight = Date.UTC(d.year, d.month - 1, d.day);
  let lo = utcMidnight - 48 * HOUR; // local date before d
  let hi = utcMidnight + 48 * HOUR; // local date on or after d
  while (hi - lo > 1) {
    const mid = lo + Math.floor((hi - lo) / 2);
    if (ordinal(localDate(mid, timeZone)) >= target) hi = mid;
    else lo = mid;
  }
  return hi;
}

/** The period of kind `period` in `timeZone` that contains `at` (epoch ms). */
export function periodBounds(period: BudgetPeriod, timeZone: string, at: number): PeriodBounds {
  const today = localDate(at, timeZone);
  let first: LocalDate;
  let next: LocalDate;
  switch (period) {
    case 'day':
      first = today;
      next = addDays(today, 1);
      break;
    case 'week': {
      // ISO weeks start on Monday; getUTCDay of the calendar date is its weekday whatever the zone.
      const weekday = new Date(Date.UTC(today.year, today.month - 1, today.day)).getUTCDay();
      first = addDays(today, -((weekday + 6) % 7));
      next = addDays(first, 7);
      break;
    }
    case 'month':
      first = { year: today.year, month: today.month, day: 1 };
      next = today.month === 12 ? { year: today.year + 1, month: 1, day: 1 } : { year: today.year, month: today.month + 1, day: 1 };
      break;
  }
  const start = startOfLocalDay(first, timeZone);
  // A skipped local midnight can put `at` a few minutes before the computed start of its own local day only
  // if the zone's dates run backwards; guard so the period always contains `at`.
  return { start: Math.min(start, at), end: startOfLocalDay(next, timeZone) };
}
