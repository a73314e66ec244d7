import { describe, expect, it } from 'vitest';
import { BUILTIN_SOURCE, selectConfig } from './config-selection.ts';

describe('selectConfig', () => {
  const existing = new Set(['team-a/default', 'team-a/strict', 'team-b/strict']);
  const exists = (key: string) => existing.has(key);

  it('uses the ProxyConfig the annotation names, in the pod namespace', () => {
    expect(selectConfig('team-a', 'strict', exists)).toBe('team-a/strict');
  });

  it('falls back to the namespace default without an annotation, or when the named one does not exist', () => {
    expect(selectConfig('team-a', undefined, exists)).toBe('team-a/default');
    expect(selectConfig('team-a', 'missing', exists)).toBe('team-a/default');
  });

  it('uses the built-in defaults when the namespace has neither', () => {
    expect(selectConfig('team-b', undefined, exists)).toBe(BUILTIN_SOURCE);
    expect(selectConfig('team-c', 'strict', exists)).toBe(BUILTIN_SOURCE);
  });

  it('never leaves the pod namespace, whatever the annotation says', () => {
    expect(selectConfig('team-c', 'team-a/strict', exists)).toBe(BUILTIN_SOURCE);
    expect(selectConfig('team-c', '../team-a/default', exists)).toBe(BUILTIN_SOURCE);
  });
});
