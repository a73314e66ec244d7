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
    });
  });

  it.each([
    [{ arguments: 'some' }, 'provenance.arguments'],
    [{ attributionWindowMs: 60_000 }, 'provenance.attributionWindowMs'],
    [{ redact: ['(unclosed'] }, 'provenance.redact[0]'],
    [{ bypass: { extraHosts: ['no-port'] } }, 'provenance.bypass.extraHosts[0]'],
    [{ address: 'http://agent' }, 'provenance.address'],
    [{ unknown: true }, 'provenance.unknown'],
  ])('refuses %j naming %s', (section, field) => {
    expect(() => parseRuntimeConfigPatch({ provenance: section })).toThrow(field);
  });
});
