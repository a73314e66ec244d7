import { describe, expect, it } from 'vitest';
import { LogRing } from './log-ring.ts';

describe('LogRing', () => {
  it('keeps the last lines, joined across chunks, and counts the ones it let go', () => {
    const ring = new LogRing(3, 100);
    const seen: string[] = [];
    ring.write('one\ntw', (line) => seen.push(line));
    ring.write('o\r\nthree\nfour\nfi', (line) => seen.push(line));
    expect(ring.tail()).toEqual(['two', 'three', 'four']);
    expect(ring.dropped).toBe(1);
    ring.end((line) => seen.push(line));
    expect(ring.tail(2)).toEqual(['four', 'fi']);
    expect(seen).toEqual(['one', 'two', 'three', 'four', 'fi']);
  });

  it('cuts a line longer than its bound and drops the rest of it until the newline', () => {
    const ring = new LogRing(10, 5);
    ring.write('abcdefghij');
    ring.write('klmno\nnext\n');
    expect(ring.tail()).toEqual(['abcde…', 'next']);
  });
});
