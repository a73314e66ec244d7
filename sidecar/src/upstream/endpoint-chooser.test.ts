import { describe, expect, it } from 'vitest';
import { anyAvailable, chooseEndpoint, type ChoosableEndpoint } from './endpoint-chooser.ts';

/** An endpoint with a breaker that is open or not, as the test says. */
function endpoint(weight: number, state: { open?: boolean; outstanding?: number; coolingUntil?: number } = {}): ChoosableEndpoint & { open: boolean } {
  const out = {
    weight,
    open: state.open ?? false,
    load: { outstanding: state.outstanding ?? 0, current: 0, coolingUntil: state.coolingUntil ?? 0, breaker: { available: () => !out.open } },
  };
  return out;
}

const NOW = 1_000_000;

function picks(endpoints: readonly ChoosableEndpoint[], n: number, strategy: 'weighted' | 'least-outstanding' = 'weighted'): number[] {
  return Array.from({ length: n }, () => chooseEndpoint(endpoints, strategy, 0, NOW));
}

describe('weighted: smooth weighted round robin', () => {
  it('3:1 interleaves a a b a and repeats it, 30 and 10 of 40', () => {
    // By hand: running weights (3,1) → a, (-1,1)+(3,1)=(2,2) → a (the first of a tie), (-2,2)+(3,1)=(1,3) → b,
    // (1,-1)+(3,1)=(4,0) → a, back to (0,0).
    const endpoints = [endpoint(3), endpoint(1)];
    const forty = picks(endpoints, 40);
    expect(forty.slice(0, 8)).toEqual([0, 0, 1, 0, 0, 0, 1, 0]);
    expect(forty.filter((i) => i === 0)).toHaveLength(30);
    expect(forty.filter((i) => i === 1)).toHaveLength(10);
  });

  it('5:1:1 gives nginx’s a a b a c a a', () => {
    expect(picks([endpoint(5), endpoint(1), endpoint(1)], 7)).toEqual([0, 0, 1, 0, 2, 0, 0]);
  });

  it('equal weights take turns', () => {
    expect(picks([endpoint(1), endpoint(1), endpoint(1)], 6)).toEqual([0, 1, 2, 0, 1, 2]);
  });

  it('skips an endpoint whose breaker is open, and shares among the others', () => {
    const endpoints = [endpoint(1, { open: true }), endpoint(1), endpoint(1)];
    expect(picks(endpoints, 4)).toEqual([1, 2, 1, 2]);
  });

  it('skips an endpoint cooling down until its cool-down has passed', () => {
    const endpoints = [endpoint(1, { coolingUntil: NOW + 1 }), endpoint(1)];
    expect(chooseEndpoint(endpoints, 'weighted', 0, NOW)).toBe(1);
    expect(chooseEndpoint(endpoints, 'weighted', 0, NOW)).toBe(1);
    // At its end (coolingUntil <= now) it is back.
    expect(chooseEndpoint(endpoints, 'weighted', 0, NOW + 1)).toBe(0);
  });

  it('skips the endpoints the call already tried', () => {
    const endpoints = [endpoint(10), endpoint(1), endpoint(1)];
    expect(chooseEndpoint(endpoints, 'weighted', 0b001, NOW)).toBe(1);
    expect(chooseEndpoint(endpoints, 'weighted', 0b011, NOW)).toBe(2);
    expect(chooseEndpoint(endpoints, 'weighted', 0b111, NOW)).toBe(-1);
  });

  it('finds none when every endpoint is open or cooling down, and says so without moving the round robin', () => {
    const endpoints = [endpoint(1, { open: true }), endpoint(1, { coolingUntil: NOW + 5_000 })];
    expect(anyAvailable(endpoints, 0, NOW)).toBe(false);
    expect(chooseEndpoint(endpoints, 'weighted', 0, NOW)).toBe(-1);
    expect(chooseEndpoint(endpoints, 'least-outstanding', 0, NOW)).toBe(-1);
    const up = [endpoint(2), endpoint(1)];
    expect(anyAvailable(up, 0b01, NOW)).toBe(true);
    expect(anyAvailable(up, 0b11, NOW)).toBe(false);
    expect(up.map((e) => e.load.current)).toEqual([0, 0]);
  });
});

describe('least-outstanding', () => {
  it('sends the call to the endpoint with fewer calls in flight', () => {
    expect(chooseEndpoint([endpoint(1, { outstanding: 1 }), endpoint(1)], 'least-outstanding', 0, NOW)).toBe(1);
    expect(chooseEndpoint([endpoint(1), endpoint(1, { outstanding: 3 })], 'least-outstanding', 0, NOW)).toBe(0);
  });

  it('counts calls in flight per unit of weight: 1 call on weight 2 is less load than 1 on weight 1', () => {
    expect(chooseEndpoint([endpoint(1, { outstanding: 1 }), endpoint(2, { outstanding: 1 })], 'least-outstanding', 0, NOW)).toBe(1);
  });

  it('shares ties by weight, as the round robin does (idle endpoints 3:1 get a a b a)', () => {
    expect(picks([endpoint(3), endpoint(1)], 4, 'least-outstanding')).toEqual([0, 0, 1, 0]);
  });

  it('takes a busy endpoint when the idle one is open', () => {
    expect(chooseEndpoint([endpoint(1, { outstanding: 5 }), endpoint(1, { open: true })], 'least-outstanding', 0, NOW)).toBe(0);
  });
});
