import { describe, expect, it } from 'vitest';
import { isTimeZone, periodBounds } from './budget-period.ts';

const iso = (ms: number) => new Date(ms).toISOString();
const bounds = (period: 'day' | 'week' | 'month', zone: string, at: string) => {
  const b = periodBounds(period, zone, Date.parse(at));
  return { start: iso(b.start), end: iso(b.end), hours: (b.end - b.start) / 3_600_000 };
};

describe('calendar periods', () => {
  it('months run from the 1st to the 1st, whatever their length (leap February included)', () => {
    expect(bounds('month', 'UTC', '2024-02-29T23:59:59.999Z')).toEqual({ start: '2024-02-01T00:00:00.000Z', end: '2024-03-01T00:00:00.000Z', hours: 29 * 24 });
    expect(bounds('month', 'UTC', '2026-12-31T12:00:00Z')).toEqual({ start: '2026-12-01T00:00:00.000Z', end: '2027-01-01T00:00:00.000Z', hours: 31 * 24 });
    expect(bounds('month', 'UTC', '2026-04-30T23:59:59.999Z').end).toBe('2026-05-01T00:00:00.000Z');
  });

  it('the last instant of a period belongs to it, its end to the next', () => {
    const { start, end } = periodBounds('month', 'UTC', Date.parse('2026-11-15T00:00:00Z'));
    expect(periodBounds('month', 'UTC', end - 1)).toEqual({ start, end });
    expect(periodBounds('month', 'UTC', end).start).toBe(end);
  });

  it('a month in a zone ahead of UTC starts on the previous UTC day', () => {
    // Kathmandu is UTC+05:45: local midnight of Feb 1 is 18:15 UTC on Jan 31.
    expect(bounds('month', 'Asia/Kathmandu', '2026-01-31T20:00:00Z')).toMatchObject({ start: '2026-01-31T18:15:00.000Z', end: '2026-02-28T18:15:00.000Z' });
  });

  it('ISO weeks start on Monday, across a year boundary', () => {
    // 2026-01-01 is a Thursday: its week began on Monday 2025-12-29.
    expect(bounds('week', 'UTC', '2026-01-01T00:00:00Z')).toEqual({ start: '2025-12-29T00:00:00.000Z', end: '2026-01-05T00:00:00.000Z', hours: 168 });
    // A Sunday late in the evening is still in the week that began six days before.
    expect(bounds('week', 'UTC', '2026-11-29T23:59:00Z').start).toBe('2026-11-23T00:00:00.000Z');
  });

  it('a day is 23 or 25 hours across a DST change', () => {
    expect(bounds('day', 'America/New_York', '2026-03-08T12:00:00Z')).toEqual({ start: '2026-03-08T05:00:00.000Z', end: '2026-03-09T04:00:00.000Z', hours: 23 });
    expect(bounds('day', 'America/New_York', '2026-11-01T12:00:00Z')).toEqual({ start: '2026-11-01T04:00:00.000Z', end: '2026-11-02T05:00:00.000Z', hours: 25 });
    // The week holding Europe's spring change is an hour short.
    expect(bounds('week', 'Europe/Berlin', '2026-03-29T12:00:00Z')).toEqual({ start: '2026-03-22T23:00:00.000Z', end: '2026-03-29T22:00:00.000Z', hours: 167 });
  });

  it('a day whose local midnight does not exist starts when the clocks jump', () => {
    // Chile springs forward at 24:00: 2025-09-07 begins at 01:00 local (-03), i.e. 04:00 UTC.
    expect(bounds('day', 'America/Santiago', '2025-09-07T12:00:00Z')).toEqual({ start: '2025-09-07T04:00:00.000Z', end: '2025-09-08T03:00:00.000Z', hours: 23 });
    expect(bounds('day', 'America/Santiago', '2025-09-06T12:00:00Z').end).toBe('2025-09-07T04:00:00.000Z');
  });

  it('a half-hour DST shift and a skipped calendar day are handled', () => {
    // Lord Howe's DST moves clocks by 30 minutes (on 2026-04-05), so April is 720.5 hours long.
    expect(bounds('month', 'Australia/Lord_Howe', '2026-04-15T12:00:00Z')).toEqual({ start: '2026-03-31T13:00:00.000Z', end: '2026-04-30T13:30:00.000Z', hours: 720.5 });
    // Samoa skipped 2011-12-30: the day before it ends where 2011-12-31 begins.
    expect(bounds('day', 'Pacific/Apia', '2011-12-29T12:00:00Z')).toEqual({ start: '2011-12-29T10:00:00.000Z', end: '2011-12-30T10:00:00.000Z', hours: 24 });
  });

  it('knows IANA zones and refuses others', () => {
    expect(isTimeZone('UTC')).toBe(true);
    expect(isTimeZone('Europe/Berlin')).toBe(true);
    expect(isTimeZone('Mars/Olympus_Mons')).toBe(false);
    expect(isTimeZone('')).toBe(false);
  });
});
