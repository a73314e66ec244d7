import pino from 'pino';
import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import { CONFIG_REVISION } from '../../../contracts/config-revisions.ts';
import { MAX_STREAMS_PER_POD, SidecarRegistry, STREAM_REPLACED } from './sidecar-registry.ts';
import { BUILTIN_SNAPSHOT, buildSnapshot, type Snapshot } from './snapshot.ts';

function setup(existing: string[]) {
  const exists = new Set(existing);
  const events: string[] = [];
  const registry = new SidecarRegistry({
    exists: (k) => exists.has(k),
    logger: pino({ level: 'silent' }),
    debounceMs: 10,
    maxDelayMs: 50,
    listener: {
      countsChanged: (s) => events.push(`counts ${s}`),
      pushed: (s, v, n) => events.push(`pushed ${s} ${v} ${n}`),
      rejected: (s, pod, v, reason) => events.push(`rejected ${s} ${pod.namespace}/${pod.name} ${v} ${reason}`),
      withheld: (s, pod, v, revision, fields) => events.push(`withheld ${s} ${pod.namespace}/${pod.name} ${v} r${revision} ${fields.join('; ')}`),
    },
  });
  const received = new Map<string, Snapshot[]>();
  const connect = (id: string, namespace: string, annotation?: string, configRevision?: number) => {
    received.set(id, []);
    return registry.connect({
      id,
      namespace,
      podName: id,
      ...(annotation ? { annotation } : {}),
      ...(configRevision ? { configRevision } : {}),
      send: (s) => received.get(id)!.push(s),
    });
  };
  return { registry, exists, events, received, connect };
}

const snap = (source: string, price: number) =>
  buildSnapshot(source, { pricing: { models: [{ provider: 'openai', model: 'gpt-4o', input_per_million: price, output_per_million: 1 }] } }, {}, []);

describe('SidecarRegistry', () => {
  // The debounce runs on timers: a fake clock moves them exactly, however loaded the machine is.
  beforeEach(() => {
    vi.useFakeTimers();
  });
  afterEach(() => {
    vi.useRealTimers();
  });

  it('sends a new sidecar its snapshot at once and pushes changes to all bound sidecars after the debounce', () => {
    const { registry, received, connect, events } = setup(['ns/default']);
    const v1 = snap('ns/default', 1);
    registry.publish(v1);
    connect('a', 'ns');
    connect('b', 'ns');
    connect('other', 'ns2');
    expect(received.get('a')!.map((s) => s.version)).toEqual([v1.version]);
    expect(received.get('other')!.map((s) => s.version)).toEqual([BUILTIN_SNAPSHOT.version]);

    const v2 = snap('ns/default', 2);
    const v3 = snap('ns/default', 3);
    registry.publish(v2);
    registry.publish(v3); // within the debounce: only the latest goes out
    vi.advanceTimersByTime(9);
    expect(received.get('a')).toHaveLength(1);
    vi.advanceTimersByTime(1);
    expect(received.get('a')!.map((s) => s.version)).toEqual([v1.version, v3.version]);
    expect(received.get('b')!.map((s) => s.version)).toEqual([v1.version, v3.version]);
    expect(received.get('other')).toHaveLength(1);
    expect(events).toContain(`pushed ns/default ${v3.version} 2`);
    registry.close();
  });

  it('counts connected and current sidecars from acks, and reports a rejection once per version', () => {
    const { registry, connect, events } = setup(['ns/default']);
    const v1 = snap('ns/default', 1);
    registry.publish(v1);
    connect('a', 'ns');
    connect('b', 'ns');
    expect(registry.counts('ns/default')).toEqual({ connected: 2, current: 0 });
    registry.ack('a', v1.version);
    registry.nack('b', v1.version, 'pricing.models[0] bad');
    registry.nack('b', v1.version, 'pricing.models[0] bad');
    expect(registry.counts('ns/default')).toEqual({ connected: 2, current: 1 });
    expect(events.filter((e) => e.startsWith('rejected'))).toEqual([`rejected ns/default ns/b ${v1.version} pricing.models[0] bad`]);
    registry.disconnect('a');
    expect(registry.counts('ns/default')).toEqual({ connected: 1, current: 0 });
    registry.close();
  });

  it('rebinds sidecars when the ProxyConfig they name appears or disappears', () => {
    const { registry, exists, received, connect } = setup(['ns/default']);
    const def = snap('ns/default', 1);
    registry.publish(def);
    expect(connect('a', 'ns', 'strict')).toBe('ns/default');

    exists.add('ns/strict');
    const strict = snap('ns/strict', 9);
    registry.publish(strict);
    vi.advanceTimersByTime(10);
    expect(received.get('a')!.map((s) => s.source)).toEqual(['ns/default', 'ns/strict']);
    expect(registry.counts('ns/strict').connected).toBe(1);

    exists.delete('ns/strict');
    registry.withdraw('ns/strict');
    vi.advanceTimersByTime(10);
    expect(received.get('a')!.map((s) => s.source)).toEqual(['ns/default', 'ns/strict', 'ns/default']);

    exists.delete('ns/default');
    registry.withdraw('ns/default');
    vi.advanceTimersByTime(10);
    expect(received.get('a')!.at(-1)!.version).toBe(BUILTIN_SNAPSHOT.version);
    registry.close();
  });

  it('keeps at most a few streams per pod: a pod opening more loses its oldest, so one tenant cannot pile up streams', () => {
    const { registry } = setup(['ns/default']);
    registry.publish(snap('ns/default', 1));
    const closed: string[] = [];
    for (let i = 0; i < MAX_STREAMS_PER_POD + 2; i++) {
      registry.connect({ id: `s${i}`, namespace: 'ns', podName: 'p', podUid: 'uid-p', send: () => undefined, close: (reason) => closed.push(`s${i}: ${reason}`) });
    }
    registry.connect({ id: 'other', namespace: 'ns', podName: 'q', podUid: 'uid-q', send: () => undefined, close: () => closed.push('other') });
    expect(closed).toEqual([`s0: ${STREAM_REPLACED}`, `s1: ${STREAM_REPLACED}`]);
    expect(registry.counts('ns/default').connected).toBe(MAX_STREAMS_PER_POD + 1);
    registry.close();
  });

  it('sends a sidecar of an older config revision the snapshot without what it does not know, under the same version, and reports it once per stream and version', () => {
    const { registry, received, connect, events } = setup(['ns/default']);
    const withRoute = (price: number) =>
      buildSnapshot(
        'ns/default',
        {
          routes: [{ name: 'mistral', format: 'openai-chat', baseUrl: 'https://api.mistral.ai', credential: { kind: 'none' } }],
          pricing: {
            models: [
              { provider: 'openai', model: 'gpt-4o', input_per_million: price, output_per_million: 1 },
              { provider: 'mistral', model: 'mistral-small', input_per_million: 0.2, output_per_million: 0.6 },
            ],
          },
        },
        {},
        [],
      );
    const v1 = withRoute(1);
    registry.publish(v1);
    connect('old', 'ns');
    connect('new', 'ns', undefined, CONFIG_REVISION);
    const [old] = received.get('old')!;
    expect(old!.version).toBe(v1.version);
    expect(JSON.parse(old!.configJson)).toEqual({ pricing: { models: [{ provider: 'openai', model: 'gpt-4o', input_per_million: 1, output_per_million: 1 }] } });
    expect(received.get('new')).toEqual([v1]);
    const withheld = (v: string) => `withheld ns/default ns/old ${v} r1 routes (mistral); pricing.models of provider mistral`;
    expect(events.filter((e) => e.startsWith('withheld'))).toEqual([withheld(v1.version)]);

    // A reconnect is a new stream, reported again; a new version on it is reported once more.
    registry.disconnect('old');
    connect('old', 'ns');
    const v2 = withRoute(2);
    registry.publish(v2);
    vi.advanceTimersByTime(10);
    expect(JSON.parse(received.get('old')!.at(-1)!.configJson).pricing.models).toEqual([{ provider: 'openai', model: 'gpt-4o', input_per_million: 2, output_per_million: 1 }]);
    expect(events.filter((e) => e.startsWith('withheld'))).toEqual([withheld(v1.version), withheld(v1.version), withheld(v2.version)]);
  });

  it("keeps each sidecar's alias report as far as its ProxyConfig's aliases go, re-reconciles only on a change, forgets it with the stream", () => {
    const { registry, connect, events } = setup(['ns/default']);
    const target = { route: 'gamma-direct', model: 'claude-sonnet-4-5' };
    registry.publish(buildSnapshot('ns/default', { models: { 'claude-sonnet': { targets: [target] } } }, {}, []));
    connect('a', 'ns');
    connect('other', 'ns2'); // built-in defaults: no aliases
    const report = (state: 'healthy' | 'circuit_open', extra = 0) => ({
      aliases: [
        { alias: 'claude-sonnet', targets: [{ ...target, state }], degradedSinceUnixMs: state === 'healthy' ? 0 : 1_000 },
        ...Array.from({ length: extra }, (_, i) => ({ alias: `invented-${i}`, targets: [{ ...target, state }], degradedSinceUnixMs: 0 })),
      ],
    });
    events.length = 0;
    registry.aliasHealthReport('a', report('healthy', 500));
    expect(events).toEqual(['counts ns/default']);
    // 500 aliases the config does not have were not kept.
    expect(registry.aliasReports('ns/default').map((r) => [...r.keys()])).toEqual([['claude-sonnet']]);
    registry.aliasHealthReport('a', report('healthy'));
    expect(events).toEqual(['counts ns/default']); // unchanged: no reconcile
    registry.aliasHealthReport('a', report('circuit_open'));
    expect(events).toEqual(['counts ns/default', 'counts ns/default']);
    expect(registry.aliasReports('ns/default')[0]!.get('claude-sonnet')).toEqual({
      degradedSince: 1_000,
      targets: new Map([['gamma-direct\u0000claude-sonnet-4-5', 'circuit_open']]),
    });
    registry.aliasHealthReport('other', report('circuit_open'));
    expect(registry.aliasReports('')).toEqual([]);

    registry.disconnect('a');
    expect(registry.aliasReports('ns/default')).toEqual([]);
    expect(registry.aliasModels('ns/default')).toEqual({ 'claude-sonnet': { targets: [target] } });
    registry.close();
  });
});
