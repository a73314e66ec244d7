// Kubelet probes for the operator, on a plain-HTTP port of their own that every replica opens (standbys do not
// open the push port, ADR 0701/0720). /readyz: the informer caches have synced, so this replica could lead at
// once. /healthz: the process answers and no informer's run loop has been silent past a limit. An API server
// outage does not fail /healthz: the informers keep retrying (and stay "active") and a restart would not help;
// only a wedged loop does, which a restart fixes.

import { createServer, type IncomingHttpHeaders, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import type { Logger } from 'pino';
import type { MetricsExposition } from '../../../contracts/metrics-exposition.ts';
import { HostAllowList } from '../../../contracts/allowed-hosts.ts';
import { OriginPolicy } from '../../../contracts/origin-policy.ts';
import { headerValue } from '../../../contracts/header-value.ts';

/** What the probes read from an informer (kube-client/informer.ts implements it). */
export interface ProbedInformer {
  hasSynced(): boolean;
  /** Epoch milliseconds of the informer loop's last sign of life. */
  lastActivityAt(): number;
}

export interface ProbeResult {
  ok: boolean;
  /** One line per informer that fails the probe; empty when ok. */
  problems: string[];
}

/** /readyz: every informer has listed at least once. */
export function readiness(informers: Record<string, ProbedInformer>): ProbeResult {
  const problems = Object.entries(informers)
    .filter(([, informer]) => !informer.hasSynced())
    .map(([name]) => `informer ${name}: cache not synced yet`);
  return { ok: problems.length === 0, problems };
}

/** /healthz: no informer loop silent for longer than `stuckAfterMs`. */
export function liveness(informers: Record<string, ProbedInformer>, now: number, stuckAfterMs: number): ProbeResult {
  const problems: string[] = [];
  for (const [name, informer] of Object.entries(informers)) {
    const silentMs = now - informer.lastActivityAt();
    if (silentMs > stuckAfterMs) {
      problems.push(`informer ${name}: no activity for ${Math.round(silentMs / 1000)}s (limit ${Math.round(stuckAfterMs / 1000)}s)`);
    }
  }
  return { ok: problems.length === 0, problems };
}

export interface HealthServerOptions {
  host: string;
  port: number;
  informers: Record<string, ProbedInformer>;
  /** Silence of an informer loop after which /healthz fails. */
  stuckAfterMs: number;
  logger: Logger;
  now?: () => number;
  /** This replica's pod IP (--pod-ip / POD_IP): kubelet probes name it in Host. */
  podIp?: string | undefined;
  /** Serves GET /metrics (Prometheus scrapes every replica here). */
  metrics?: MetricsExposition;
}

/**
 * Like every Tollgate listener, the probe port answers only to its own names and never to a web page
 * (ADR 1000). It changes nothing and holds no secret, but it listens on all interfaces of a pod, and the
 * check costs nothing next to the probe.
 */
function refusal(headers: IncomingHttpHeaders, hosts: HostAllowList, origins: OriginPolicy): { code: string; message: string } | null {
  if (!hosts.allows(headers.host)) {
    return { code: 'host_not_allowed', message: `Host ${JSON.stringify(headers.host)} is not one of this pod's names` };
  }
  const verdict = origins.check(headerValue(headers, 'origin'), headerValue(headers, 'sec-fetch-site'));
  return verdict.allowed ? null : { code: 'origin_not_allowed', message: verdict.reason };
}

export interface HealthServer {
  port: number;
  stop(): Promise<void>;
}

export async function startHealthServer(opts: HealthServerOptions): Promise<HealthServer> {
  const now = opts.now ?? Date.now;
  // Only the transition is logged: kubelet probes every few seconds and a steady state is not news.
  let lastLive = true;
  const hosts = new HostAllowList({ listenHost: opts.host, allowedHosts: [], podIp: opts.podIp });
  const origins = new OriginPolicy([]);
  const server: Server = createServer((req, res) => {
    const refused = refusal(req.headers, hosts, origins);
    if (refused !== null) {
      res.writeHead(403, { 'content-type': 'application/json' }).end(JSON.stringify({ error: refused }));
      return;
    }
    const path = (req.url ?? '').split('?')[0];
    if (path === '/metrics' && opts.metrics && (req.method === 'GET' || req.method === 'HEAD')) {
      void opts.metrics.serve(req, res);
      return;
    }
    let result: ProbeResult;
    if (path === '/readyz') result = readiness(opts.informers);
    else if (path === '/healthz') {
      result = liveness(opts.informers, now(), opts.stuckAfterMs);
      if (result.ok !== lastLive) {
        lastLive = result.ok;
        if (result.ok) opts.logger.info('liveness recovered');
        else opts.logger.error({ problems: result.problems }, 'liveness failing: informer loop stuck');
      }
    } else {
      res.writeHead(404, { 'content-type': 'text/plain' }).end('not found: only /healthz, /readyz and /metrics are served here\n');
      return;
    }
    if (req.method !== 'GET' && req.method !== 'HEAD') {
      res.writeHead(405, { 'content-type': 'text/plain', allow: 'GET, HEAD' }).end(`method ${req.method} not allowed\n`);
      return;
    }
    res.writeHead(result.ok ? 200 : 503, { 'content-type': 'text/plain', 'cache-control': 'no-store' });
    res.end(result.ok ? 'ok\n' : `${result.problems.join('\n')}\n`);
  });
  // Probes are tiny; a client that holds a connection open must not keep the process from stopping.
  server.keepAliveTimeout = 5_000;
  server.requestTimeout = 10_000;
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(opts.port, opts.host, () => {
      server.off('error', reject);
      resolve();
    });
  });
  return {
    port: (server.address() as AddressInfo).port,
    stop: () =>
      new Promise<void>((resolve) => {
        server.close(() => resolve());
        server.closeAllConnections();
      }),
  };
}
