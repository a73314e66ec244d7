import { describe, expect, it } from 'vitest';
import { DeferredCharges } from './deferred-charges.ts';

function hold() {
  const state = { released: 0 };
  return { state, release: () => state.released++ };
}

const submission = (release: () => void, holdUntil = 10_000) => ({ userId: 'alice', projectId: null, model: 'm', holdUntil, release });

describe('deferred results kept until they are charged', () => {
  it('gives the hold back once, when the result is charged whole, and remembers it was', () => {
    const charges = new DeferredCharges();
    const h = hold();
    charges.keep('r', 'batch_1', submission(h.release), 0);
    charges.settle('r', 'batch_1', { whole: false, lines: 3 }, 1);
    expect(h.state.released).toBe(0);
    expect(charges.chargedLines('r', 'batch_1')).toBe(3);
    charges.settle('r', 'batch_1', { whole: true, lines: 5 }, 2);
    charges.settle('r', 'batch_1', { whole: true, lines: 5 }, 3);
    expect(h.state.released).toBe(1);
    expect(charges.charged('r', 'batch_1')).toBe(true);
    expect(charges.submitter('r', 'batch_1', 4)).toMatchObject({ userId: 'alice' });
  });

  it('gives the hold back when its time ends, and still knows who submitted it', () => {
    const charges = new DeferredCharges();
    const h = hold();
    charges.keep('r', 'batch_1', submission(h.release, 5_000), 0);
    expect(charges.submitter('r', 'batch_1', 4_999)).toBeDefined();
    expect(h.state.released).toBe(0);
    // Holds are looked over at most once a minute: the first use after that.
    charges.submitter('r', 'other', 60_001);
    expect(h.state.released).toBe(1);
    expect(charges.submitter('r', 'batch_1', 60_002)).toMatchObject({ userId: 'alice' });
    expect(charges.charged('r', 'batch_1')).toBe(false);
  });

  it('keeps at most its bound: the oldest goes first, giving its hold back', () => {
    const charges = new DeferredCharges({ max: 2 });
    const [a, b, c] = [hold(), hold(), hold()];
    charges.keep('r', 'a', submission(a.release), 0);
    charges.keep('r', 'b', submission(b.release), 0);
    charges.keep('r', 'c', submission(c.release), 0);
    expect([a.state.released, b.state.released, c.state.released]).toEqual([1, 0, 0]);
    expect(charges.submitter('r', 'a', 0)).toBeUndefined();
    expect(charges.submitter('r', 'c', 0)).toBeDefined();
  });

  it('a result submitted elsewhere is remembered as charged once a read charged it', () => {
    const charges = new DeferredCharges();
    expect(charges.charged('r', 'msgbatch_x')).toBe(false);
    charges.settle('r', 'msgbatch_x', { whole: true, lines: 2 }, 0);
    expect(charges.charged('r', 'msgbatch_x')).toBe(true);
    expect(charges.charged('other-route', 'msgbatch_x')).toBe(false);
  });
});

describe('reads of results not submitted here', () => {
  it('take no room from submissions: many such reads keep every hold and its submitter', () => {
    const charges = new DeferredCharges({ max: 2 });
    const h = hold();
    charges.keep('r', 'batch_mine', submission(h.release), 0);
    // Reads of files nobody submitted here (an uploaded input file, another tool's batch), each read to its end.
    for (const id of ['file-1', 'file-2', 'file-3', 'file-4']) charges.settle('r', id, { whole: true, lines: 1 }, 0);
    expect(h.state.released).toBe(0);
    expect(charges.submitter('r', 'batch_mine', 0)).toMatchObject({ userId: 'alice' });
    expect(charges.charged('r', 'batch_mine')).toBe(false);
  });
});

describe('concurrent reads of results not submitted here', () => {
  it('charge each line to one reader: a second read at the same time claims none of the lines the first did', () => {
    const charges = new DeferredCharges();
    // Two reads of another tool's batch, interleaved line by line, then a third after both stopped short.
    const first = [1, 2].map((line) => charges.claimLine('r', 'msgbatch_elsewhere', line));
    const second = [1, 2, 3].map((line) => charges.claimLine('r', 'msgbatch_elsewhere', line));
    expect(first).toEqual([true, true]);
    expect(second).toEqual([false, false, true]);
    expect(charges.chargedLines('r', 'msgbatch_elsewhere')).toBe(3);
    expect(charges.claimLine('other-route', 'msgbatch_elsewhere', 1)).toBe(true);
  });
});
