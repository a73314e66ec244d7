import { request as httpRequest } from 'node:http';
import pino from 'pino';
import { afterEach, describe, expect, it } from 'vitest';
import { sampleValue } from '../../../test/support/prometheus-text.ts';
import { OperatorMetrics } from '../metrics/operator-metrics.ts';
import { type HealthServer, type ProbedInformer, startHealthServer } from './health-server.ts';

class InformerState implements ProbedInformer {
  synced = false;
  activity = 0;
  hasSynced() {
    return this.synced;
  }
  lastActivityAt() {
    return this.activity;
  }
}

const servers: HealthServer[] = [];
afterEach(async () => {
  for (const s of servers.splice(0)) await s.stop();
});

async function start(informers: Record<string, ProbedInformer>, now: () => number) {
  const server = await startHealthServer({ host: '127.0.0.1', port: 0, informers, stuckAfterMs: 300_000, logger: pino({ level: 'silent' }), now });
  servers.push(server);
  const get = async (path: string, method = 'GET') => {
    const res = await fetch(`http://127.0.0.1:${server.port}${path}`, { method });
    return { status: res.status, body: await res.text() };
  };
  return { server, get };
}

describe('operator health listener', () => {
  it('is ready only once every informer has synced, and names the one that has not', async () => {
    const proxyConfigs = new InformerState();
    const secrets = new InformerState();
    const { get } = await start({ proxyconfigs: proxyConfigs, secrets }, () => 0);
    proxyConfigs.synced = true;
    expect(await get('/readyz')).toEqual({ status: 503, body: 'informer secrets: cache not synced yet\n' });
    secrets.synced = true;
    expect(await get('/readyz')).toEqual({ status: 200, body: 'ok\n' });
  });

  it('is live while the informer loops show activity, fails past the limit naming the loop, and recovers', async () => {
    const secrets = new InformerState();
    let now = 1_000_000;
    const { get } = await start({ secrets }, () => now);
    secrets.activity = now;
    // Not synced (an unreachable API server, say) is not a reason to restart.
    expect(await get('/healthz')).toEqual({ status: 200, body: 'ok\n' });
    now += 300_000;
    expect((await get('/healthz')).status).toBe(200);
    now += 1_000;
    expect(await get('/healthz')).toEqual({ status: 503, body: 'informer secrets: no activity for 301s (limit 300s)\n' });
    secrets.activity = now;
    expect((await get('/healthz')).status).toBe(200);
  });

  it('answers only to its own names and never to a web page, like every Tollgate listener', async () => {
    const server = await startHealthServer({ host: '0.0.0.0', port: 0, informers: {}, stuckAfterMs: 300_000, logger: pino({ level: 'silent' }), podIp: '10.4.0.17' });
    servers.push(server);
    const status = (headers: Record<string, string>) =>
      new Promise<number>((resolve, reject) => {
        const req = httpRequest({ host: '127.0.0.1', port: server.port, path: '/healthz', headers, agent: false }, (res) => {
          res.resume();
          resolve(res.statusCode ?? 0);
        });
        req.once('error', reject);
        req.end();
      });
    expect(await status({ host: `127.0.0.1:${server.port}` })).toBe(200);
    expect(await status({ host: `10.4.0.17:${server.port}` })).toBe(200); // kubelet's probe
    expect(await status({ host: 'rebind.evil.example' })).toBe(403);
    expect(await status({ host: 'localhost', origin: 'http://evil.example' })).toBe(403);
  });

  it('serves nothing else', async () => {
    const { get } = await start({}, () => 0);
    expect((await get('/metrics')).status).toBe(404);
    expect((await get('/healthz', 'POST')).status).toBe(405);
    expect((await get('/healthz?verbose=1')).status).toBe(200);
  });

  it('refuses to start on a port that is taken', async () => {
    const { server } = await start({}, () => 0);
    await expect(startHealthServer({ host: '127.0.0.1', port: server.port, informers: {}, stuckAfterMs: 1, logger: pino({ level: 'silent' }) })).rejects.toThrow(/EADDRINUSE/);
  });
});

describe('operator /metrics', () => {
  it('serves the operator metrics on the health port, as text or OpenMetrics, behind the same Host check', async () => {
    const metrics = new OperatorMetrics({ defaultMetrics: false });
    metrics.watch({ leader: () => true, queueDepth: () => 3, connectedSidecars: () => 7 });
    metrics.reconciled('success', 0.02);
    metrics.reconciled('error', 0.5);
    metrics.retried();
    const server = await startHealthServer({ host: '127.0.0.1', port: 0, informers: {}, stuckAfterMs: 300_000, logger: pino({ level: 'silent' }), metrics: metrics.exposition });
    servers.push(server);
    const res = await fetch(`http://127.0.0.1:${server.port}/metrics`);
    expect(res.status).toBe(200);
    expect(res.headers.get('content-type')).toBe('text/plain; version=0.0.4; charset=utf-8');
    const body = await res.text();
    expect(sampleValue(body, 'tollgate_operator_leader')).toBe(1);
    expect(sampleValue(body, 'tollgate_operator_workqueue_depth')).toBe(3);
    expect(sampleValue(body, 'tollgate_operator_connected_sidecars')).toBe(7);
    expect(sampleValue(body, 'tollgate_operator_reconciles_total', { result: 'success' })).toBe(1);
    expect(sampleValue(body, 'tollgate_operator_reconciles_total', { result: 'error' })).toBe(1);
    expect(sampleValue(body, 'tollgate_operator_reconciles_total', { result: 'requeue_after' })).toBe(0);
    expect(sampleValue(body, 'tollgate_operator_workqueue_retries_total')).toBe(1);
    const open = await fetch(`http://127.0.0.1:${server.port}/metrics`, { headers: { accept: 'application/openmetrics-text; version=1.0.0' } });
    expect((await open.text()).endsWith('# EOF\n')).toBe(true);
    const refused = await new Promise<number | undefined>((resolve, reject) => {
      httpRequest({ host: '127.0.0.1', port: server.port, path: '/metrics', headers: { host: 'attacker.example:80' } }, (r) => {
        r.resume();
        resolve(r.statusCode);
      })
        .on('error', reject)
        .end();
    });
    expect(refused).toBe(403);
  });
});
