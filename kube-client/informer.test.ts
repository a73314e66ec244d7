// The one informer case a real API server does not produce on demand: a server that answers every watch, even
// one from the version it has just listed, with 410 Gone. A loopback server speaking the Kubernetes list and
// watch wire format (JSON list, then JSON lines with an ERROR Status event) plays it. The other failure cases
// run against a real API server in test/cluster/informer.test.ts.

import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { Writable } from 'node:stream';
import { KubeConfig } from '@kubernetes/client-node';
import pino from 'pino';
import { afterEach, describe, expect, it } from 'vitest';
import { KubeApi } from './api-client.ts';
import { Informer } from './informer.ts';
import { waitFor } from '../test/support/wait-for.ts';

let server: Server | undefined;
afterEach(() => new Promise<void>((resolve) => (server ? server.close(() => resolve()) : resolve())));

describe('Informer against a server that refuses every watch with 410 Gone', () => {
  it('relists after a backoff delay each time instead of spinning', async () => {
    const requests: { watch: boolean; resourceVersion: string | null }[] = [];
    server = createServer((req, res) => {
      const url = new URL(req.url ?? '/', 'http://x');
      const watch = url.searchParams.get('watch') === '1';
      requests.push({ watch, resourceVersion: url.searchParams.get('resourceVersion') });
      res.writeHead(200, { 'content-type': 'application/json' });
      if (!watch) {
        res.end(JSON.stringify({ kind: 'ConfigMapList', apiVersion: 'v1', metadata: { resourceVersion: '7' }, items: [] }));
        return;
      }
      const gone = { type: 'ERROR', object: { kind: 'Status', apiVersion: 'v1', status: 'Failure', message: 'too old resource version: 7 (9)', reason: 'Expired', code: 410 } };
      res.end(`${JSON.stringify(gone)}\n`);
    });
    await new Promise<void>((resolve) => server!.listen(0, '127.0.0.1', resolve));
    const kc = new KubeConfig();
    kc.loadFromOptions({
      clusters: [{ name: 'fake', server: `http://127.0.0.1:${(server.address() as AddressInfo).port}`, skipTLSVerify: true }],
      users: [{ name: 'fake' }],
      contexts: [{ name: 'fake', cluster: 'fake', user: 'fake' }],
      currentContext: 'fake',
    });
    const logs: { msg: string; retryInMs?: number }[] = [];
    const sink = new Writable({
      write(chunk: Buffer, _enc, done) {
        for (const line of chunk.toString().split('\n')) if (line.trim()) logs.push(JSON.parse(line) as (typeof logs)[number]);
        done();
      },
    });
    const informer = new Informer({
      api: new KubeApi(kc),
      path: '/api/v1/configmaps',
      logger: pino({ level: 'info' }, sink),
      restartBackoff: { baseMs: 20, maxMs: 20, jitter: 0 },
    });
    informer.start();
    await waitFor('five relists', () => informer.relists >= 5, { timeoutMs: 10_000, intervalMs: 10 });
    await informer.stop();

    // Every watch asked for the version just listed, and every relist after the first waited a backoff delay.
    const watches = requests.filter((r) => r.watch);
    expect(watches.every((w) => w.resourceVersion === '7')).toBe(true);
    const throttled = logs.filter((l) => l.msg === 'watch refused the version just listed (410 Gone); relisting after backoff');
    expect(throttled.length).toBeGreaterThanOrEqual(informer.relists - 1);
    expect(throttled.every((l) => l.retryInMs === 20)).toBe(true);
    expect(informer.hasSynced()).toBe(true);
  });
});
