import { describe, expect, it } from 'vitest';
import { findCondition, setCondition } from './conditions.ts';

const T0 = '2025-01-01T00:00:00Z';
const T1 = '2025-01-01T00:05:00Z';

describe('setCondition', () => {
  it('adds a condition with the transition time set to now', () => {
    const list = setCondition([], { type: 'Ready', status: 'True', observedGeneration: 1, reason: 'Accepted', message: 'ok' }, T0);
    expect(list).toEqual([{ type: 'Ready', status: 'True', observedGeneration: 1, lastTransitionTime: T0, reason: 'Accepted', message: 'ok' }]);
  });

  it('keeps lastTransitionTime when the status does not change, even if reason and generation do', () => {
    const first = setCondition([], { type: 'Ready', status: 'False', observedGeneration: 1, reason: 'SecretNotFound', message: 'a' }, T0);
    const second = setCondition(first, { type: 'Ready', status: 'False', observedGeneration: 2, reason: 'InvalidConfig', message: 'b' }, T1);
    expect(findCondition(second, 'Ready')).toMatchObject({ lastTransitionTime: T0, observedGeneration: 2, reason: 'InvalidConfig', message: 'b' });
  });

  it('moves lastTransitionTime when the status changes', () => {
    const first = setCondition([], { type: 'Ready', status: 'False', reason: 'SecretNotFound', message: 'a' }, T0);
    const second = setCondition(first, { type: 'Ready', status: 'True', reason: 'Accepted', message: 'b' }, T1);
    expect(findCondition(second, 'Ready')?.lastTransitionTime).toBe(T1);
  });

  it('leaves other condition types alone and does not modify its input', () => {
    const other = { type: 'Other', status: 'Unknown' as const, lastTransitionTime: T0, reason: 'Pending', message: '' };
    const input = [other];
    const list = setCondition(input, { type: 'Ready', status: 'True', reason: 'Accepted', message: '' }, T1);
    expect(list.map((c) => c.type)).toEqual(['Other', 'Ready']);
    expect(list[0]).toEqual(other);
    expect(input).toHaveLength(1);
  });

  it('refuses a reason that is not CamelCase', () => {
    expect(() => setCondition([], { type: 'Ready', status: 'True', reason: 'not ok', message: '' }, T0)).toThrow(/CamelCase/);
  });
});
