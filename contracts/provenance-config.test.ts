import { describe, expect, it } from 'vitest';
import { parseRuntimeConfigPatch } from './config-schema.ts';
import { PROVENANCE_DEFAULTS } from './provenance-config.ts';

describe('the provenance section', () => {
  it('fills in the defaults: on, 2 s window, binary only, no /proc, bypass detection on', () => {
    expect(parseRuntimeConfigPatch({ provenance: {} }).provenance).toEqual({
      enabled: true,
      attributionWindowMs: 2000,
      arguments: 'none',
      redact: PROVENANCE_DEFAULTS.redact,
      procfs: false,
      sidecarContainer: 'tollgate-proxy',
      bypass: { enabled: true, extraHosts: [], resolveIntervalMs: 60_000 },
      trail: { enabled: true, windowMs: 30_000, maxTraces: 1000 },
    });
  });

  it('takes a trail window and bound, and turns the trail off alone', () => {
    expect(parseRuntimeConfigPatch({ provenance: { trail: { windowMs: 5000, maxTraces: 20 } } }).provenance?.trail).toEqual({ enabled: true, windowMs: 5000, maxTraces: 20 });
    expect(parseRuntimeConfigPatch({ provenance: { trail: { enabled: false } } }).provenance?.trail).toEqual({ enabled: false, windowMs: 30_000, maxTraces: 1000 });
  });

  it.each([
    [{ arguments: 'some' }, 'provenance.arguments'],
    [{ attributionWindowMs: 60_000 }, 'provenance.attributionWindowMs'],
    [{ redact: ['(unclosed'] }, 'provenance.redact[0]'],
    [{ bypass: { extraHosts: ['no-port'] } }, 'provenance.bypass.extraHosts[0]'],
    [{ address: 'http://agent' }, 'provenance.address'],
    [{ trail: { windowMs: 50 } }, 'provenance.trail.windowMs'],
    [{ trail: { maxTraces: 0 } }, 'provenance.trail.maxTraces'],
    [{ trail: { windowMs: '30s' } }, 'provenance.trail.windowMs'],
    [{ trail: { keep: true } }, 'provenance.trail.keep'],
    [{ unknown: true }, 'provenance.unknown'],
  ])('refuses %j naming %s', (section, field) => {
    expect(() => parseRuntimeConfigPatch({ provenance: section })).toThrow(field);
  });
});
