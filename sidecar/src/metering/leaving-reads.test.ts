import { describe, expect, it } from 'vitest';
import { LeavingReads } from './leaving-reads.ts';

describe('reads after the caller left, bounded per caller and in all', () => {
  it('refuses a caller past its own bound while others still get a place, and counts each refusal', () => {
    const reads = new LeavingReads(5, 2);
    const [a1, a2, a3] = [reads.take('alice'), reads.take('alice'), reads.take('alice')];
    expect('release' in a1 && 'release' in a2).toBe(true);
    expect(a3).toEqual({ refusal: 'this caller already has 2 calls read on after it left (at most 2)' });
    expect('release' in reads.take('bob')).toBe(true);
    expect(reads.inUse).toBe(3);
    expect(reads.refused).toBe(1);
  });

  it('refuses everyone once the total is reached, and a place given back is taken again', () => {
    const reads = new LeavingReads(2, 2);
    const first = reads.take('a');
    reads.take('b');
    expect(reads.take('c')).toEqual({ refusal: '2 calls already read on after their callers left (at most 2)' });
    if (!('release' in first)) throw new Error('expected a place');
    first.release();
    first.release(); // twice is once
    expect(reads.inUse).toBe(1);
    expect('release' in reads.take('c')).toBe(true);
    expect('release' in reads.take('a')).toBe(false);
  });
});
