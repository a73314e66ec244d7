// The resilient informer (operator/src/kube/informer.ts) against a real API server, reached through a relay
// the test can cut: what each failure does to the stream of add/update/delete callbacks the reconcilers see.
// 410 Gone is produced for real: while the informer is cut off, objects change, etcd is compacted past the
// informer's resourceVersion and the API server restarts (so its watch cache cannot serve that version either).

import { Writable } from 'node:stream';
import { KubeConfig } from '@kubernetes/client-node';
import pino from 'pino';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { KubeApi, type KubeObject } from '../../kube-client/api-client.ts';
import { Informer, type InformerOptions } from '../../kube-client/informer.ts';
import { startControlPlane, type ControlPlane } from '../control-plane/control-plane.ts';
import { eventually, ensureNamespace } from './operator-fixtures.ts';
import { startPausableRelay, type PausableRelay } from './pausable-relay.ts';

interface ConfigMap extends KubeObject {
  data?: Record<string, string>;
}

const NS = 'informer-test';
const CM_PATH = `/api/v1/namespaces/${NS}/configmaps`;

let cp: ControlPlane;
let admin: KubeApi;

beforeAll(async () => {
  cp = await startControlPlane();
  admin = new KubeApi(cp.kubeConfig);
  await ensureNamespace(admin, NS);
});

afterAll(async () => {
  await cp?.stop();
});

/** Admin credentials, but the server address of the relay. */
function kubeConfigVia(relay: PausableRelay): KubeConfig {
  const kc = new KubeConfig();
  kc.loadFromOptions({
    clusters: cp.kubeConfig.clusters.map((c) => ({ ...c, server: relay.url })),
    users: cp.kubeConfig.users,
    contexts: cp.kubeConfig.contexts,
    currentContext: cp.kubeConfig.currentContext,
  });
  return kc;
}

interface LogLine {
  msg: string;
  retryInMs?: number;
}

/** An informer on this file's ConfigMaps through a fresh relay, recording every callback as "kind name data". */
async function startRecordedInformer(prefix: string, opts: Partial<InformerOptions<ConfigMap>> = {}) {
  const relay = await startPausableRelay({ host: '127.0.0.1', port: Number(new URL(cp.server).port) });
  const logs: LogLine[] = [];
  const sink = new Writable({
    write(chunk: Buffer, _enc, done) {
      for (const line of chunk.toString().split('\n')) if (line.trim()) logs.push(JSON.parse(line) as LogLine);
      done();
    },
  });
  const informer = new Informer<ConfigMap>({
    api: new KubeApi(kubeConfigVia(relay)),
    path: CM_PATH,
    labelSelector: `test=${prefix}`,
    logger: pino({ level: 'info' }, sink),
    restartBackoff: { baseMs: 50, maxMs: 400, jitter: 0.5 },
    ...opts,
  });
  const seen: string[] = [];
  const label = (cm: ConfigMap) => `${cm.metadata.name} ${cm.data?.v ?? ''}`.trim();
  informer.on({
    add: (cm) => seen.push(`add ${label(cm)}`),
    update: (cm) => seen.push(`update ${label(cm)}`),
    delete: (cm) => seen.push(`delete ${label(cm)}`),
  });
  informer.start();
  await informer.waitForSync();
  cleanups.push(async () => {
    await informer.stop();
    await relay.close();
  });
  return { informer, relay, seen, logs };
}

const cleanups: (() => Promise<void>)[] = [];
afterEach(async () => {
  for (const cleanup of cleanups.splice(0)) await cleanup();
});

function putCm(prefix: string, name: string, v: string): Promise<ConfigMap> {
  const body = { apiVersion: 'v1', kind: 'ConfigMap', metadata: { name: `${prefix}-${name}`, labels: { test: prefix } }, data: { v } };
  return admin.post<ConfigMap>(CM_PATH, body).catch((error: { statusCode?: number }) => {
    if (error.statusCode !== 409) throw error;
    return admin.put<ConfigMap>(`${CM_PATH}/${prefix}-${name}`, body);
  });
}

function deleteCm(prefix: string, name: string): Promise<unknown> {
  return admin.request('DELETE', `${CM_PATH}/${prefix}-${name}`);
}

/**
 * Waits for the callback `marker` (an object created last, so every callback for changes before it has been
 * delivered: a watch is ordered) and returns the callbacks after index `from`, without the marker.
 */
async function callbacksUntil(seen: string[], marker: string, from: number): Promise<string[]> {
  await eventually(`callback "${marker}"`, () => seen.includes(marker));
  return seen.slice(from).filter((s) => s !== marker);
}

async function compactEtcd(): Promise<number> {
  const range = await fetch(`${cp.etcdUrl}/v3/kv/range`, { method: 'POST', body: JSON.stringify({ key: Buffer.from('/').toString('base64') }) });
  const revision = ((await range.json()) as { header: { revision: string } }).header.revision;
  const compaction = await fetch(`${cp.etcdUrl}/v3/kv/compaction`, { method: 'POST', body: JSON.stringify({ revision, physical: true }) });
  if (!compaction.ok) throw new Error(`etcd compaction: HTTP ${compaction.status} ${await compaction.text()}`);
  return Number(revision);
}

describe('resilient informer on a real API server', () => {
  it('relists on 410 Gone and hands over exactly the changes it missed, once each, then watches again', async () => {
    const p = 'gone';
    await putCm(p, 'changed', '1');
    await putCm(p, 'deleted', '1');
    await putCm(p, 'untouched', '1');
    const { informer, relay, seen, logs } = await startRecordedInformer(p);
    expect(seen.toSorted()).toEqual(['add gone-changed 1', 'add gone-deleted 1', 'add gone-untouched 1']);
    expect(informer.relists).toBe(1);

    relay.refuse();
    await eventually('the informer to notice it is cut off', () => informer.errorRestarts > 0);
    await putCm(p, 'changed', '2');
    await deleteCm(p, 'deleted');
    await putCm(p, 'created', '1');
    const compactedAt = await compactEtcd();
    // The restarted API server's watch cache starts after the compacted revision and etcd no longer has the
    // informer's version either: the informer's next watch can only be answered with 410 Gone.
    await cp.restartApiServer();
    const from = seen.length;
    relay.resume();

    await eventually('a relist after 410 Gone', () => informer.relists === 2, 60_000);
    expect(logs.some((l) => l.msg === 'watch expired (410 Gone); relisting')).toBe(true);
    expect(seen.slice(from).toSorted()).toEqual(['add gone-created 1', 'delete gone-deleted 1', 'update gone-changed 2']);

    // Watching again (not relisting): a later change arrives once, as a watch event.
    const afterRelist = seen.length;
    const marker = await putCm(p, 'marker', '1');
    expect(Number(marker.metadata.resourceVersion)).toBeGreaterThan(compactedAt);
    await putCm(p, 'untouched', '2');
    await putCm(p, 'marker2', '1');
    expect(await callbacksUntil(seen, 'add gone-marker2 1', afterRelist)).toEqual(['add gone-marker 1', 'update gone-untouched 2']);
    expect(informer.relists).toBe(2);
    expect(informer.get(`${NS}/gone-deleted`)).toBeUndefined();
    expect(informer.get(`${NS}/gone-changed`)?.data?.v).toBe('2');
  });

  it('resumes from its resourceVersion after a connection error: the changes made meanwhile arrive once, no relist', async () => {
    const p = 'resume';
    await putCm(p, 'a', '1');
    const { informer, relay, seen } = await startRecordedInformer(p);
    relay.refuse();
    await eventually('the informer to notice it is cut off', () => informer.errorRestarts > 0);
    const from = seen.length;
    await putCm(p, 'a', '2');
    await putCm(p, 'b', '1');
    await deleteCm(p, 'b');
    relay.resume();
    await putCm(p, 'marker', '1');
    expect(await callbacksUntil(seen, 'add resume-marker 1', from)).toEqual(['update resume-a 2', 'add resume-b 1', 'delete resume-b 1']);
    expect(informer.relists).toBe(1);
  });

  it('replaces a watch that went silent (half-open connection) and misses nothing', async () => {
    const p = 'stale';
    await putCm(p, 'a', '1');
    // The real server sends bookmarks about once a minute; 1.5 s of silence is "stale" here.
    const { informer, relay, seen, logs } = await startRecordedInformer(p, { staleAfterMs: 1_500 });
    const staleBefore = informer.staleRestarts;
    // Open connections now swallow everything for good; nothing errors, the watch just goes quiet.
    relay.blackhole();
    const from = seen.length;
    await putCm(p, 'a', '2');
    await eventually('a stale-watch restart', () => informer.staleRestarts > staleBefore);
    relay.resume();
    await putCm(p, 'marker', '1');
    expect(await callbacksUntil(seen, 'add stale-marker 1', from)).toEqual(['update stale-a 2']);
    expect(informer.relists).toBe(1);
    expect(logs.some((l) => l.msg === 'watch stale (no events or bookmarks); restarting it')).toBe(true);
  });

  it('restarts after errors with growing, jittered delays (no hot loop), and forgets them after progress', async () => {
    const p = 'backoff';
    await putCm(p, 'a', '1');
    const policy = { baseMs: 20, maxMs: 320, jitter: 0.5 };
    const { relay, seen, logs } = await startRecordedInformer(p, { restartBackoff: policy });
    const retries = () => logs.filter((l) => l.msg === 'informer error; restarting after backoff').map((l) => l.retryInMs ?? -1);
    const raw = (n: number) => Math.min(policy.maxMs, policy.baseMs * 2 ** (n - 1));

    relay.resetCount();
    relay.refuse();
    await eventually('seven failed attempts', () => retries().length >= 7);
    // Every attempt to reach the server was preceded by a backoff delay (one may be in flight right now).
    const attempts = relay.connections();
    expect(attempts).toBeLessThanOrEqual(retries().length + 1);
    const delays = retries().slice(0, 7);
    delays.forEach((d, i) => {
      expect(d).toBeGreaterThanOrEqual(raw(i + 1) * (1 - policy.jitter));
      expect(d).toBeLessThanOrEqual(raw(i + 1));
    });
    expect(delays.some((d, i) => d < raw(i + 1))).toBe(true);

    // Back online and an event delivered: the next failure starts from the base delay again.
    relay.resume();
    const from = seen.length;
    await putCm(p, 'a', '2');
    await callbacksUntil(seen, 'update backoff-a 2', from);
    const before = retries().length;
    relay.refuse();
    await eventually('a failure after recovery', () => retries().length > before);
    expect(retries()[before]).toBeLessThanOrEqual(policy.baseMs);
  });
});
