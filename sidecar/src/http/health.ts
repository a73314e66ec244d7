// /healthz for probes: 200 while the engine can serve, 503 naming what is wrong. In a pod the proxy
// listens on loopback only (anyone who reaches it spends the pod's credentials), so kubelet probes get a
// separate health-only listener that answers nothing but this.

import { createServer, type Server } from 'node:http';
import type { FastifyPluginAsync } from 'fastify';
import { judgeInbound, sendRefusal, type InboundPolicy } from '../inbound/request-guard.ts';
import type { Lifecycle } from '../lifecycle.ts';
import type { MetricsExposition } from '../../../contracts/metrics-exposition.ts';
import type { SpanWriter } from '../spans/span-writer.ts';

export interface HealthOptions {
  lifecycle: Lifecycle;
  writer: SpanWriter;
  /** False for a remote span store: its outage must not fail the probes of every pod (default true). */
  writeFailuresAreUnhealthy?: boolean;
}

export interface Health {
  statusCode: 200 | 503;
  body: { status: 'ok' } | { status: 'error'; detail: string };
}

/** Unhealthy while draining, or while span writes keep failing (a failed batch that was retried is not an outage). */
export function healthCheck(opts: HealthOptions): () => Health {
  let lastWriteErrors = 0;
  let lastCheck = 0;
  let failing = false;
  return () => {
    if (opts.lifecycle.draining) return { statusCode: 503, body: { status: 'error', detail: 'shutting down: draining in-flight requests' } };
    const now = Date.now();
    const stats = opts.writer.stats();
    // Compare against the previous probe, but not more often than once a second, so two probers
    // (kubelet and a curious human) don't hide errors from each other.
    if (now - lastCheck >= 1000) {
      failing = stats.writeErrors > lastWriteErrors;
      lastWriteErrors = stats.writeErrors;
      lastCheck = now;
    }
    if (failing && opts.writeFailuresAreUnhealthy !== false)
      return { statusCode: 503, body: { status: 'error', detail: `span store writes are failing (${stats.writeErrors} errors so far)` } };
    return { statusCode: 200, body: { status: 'ok' } };
  };
}

export const healthRoutes: FastifyPluginAsync<HealthOptions & { check: () => Health }> = async (app, opts) => {
  app.get('/healthz', async (_request, reply) => {
    const health = opts.check();
    return reply.code(health.statusCode).send(health.body);
  });
};

/**
 * A listener that serves only GET /healthz and GET /metrics, for probes and Prometheus from outside the pod.
 * It listens on every interface, so it checks Host and Origin like the proxy's own port: kubelet and
 * Prometheus send the pod IP, which is one of the pod's own names. It asks for no identity: metrics hold
 * counts and costs, never a credential (restrict the port with a NetworkPolicy where that matters).
 */
export function startHealthListener(opts: { check: () => Health; host: string; port: number; inbound: InboundPolicy; metrics?: MetricsExposition }): Promise<Server> {
  const { check, host, port, inbound } = opts;
  const server = createServer((req, res) => {
    const path = req.url?.split('?')[0] ?? '/';
    const verdict = judgeInbound(inbound, req.headers);
    if (verdict.refusal !== null) {
      sendRefusal(res, path, verdict.refusal);
      return;
    }
    if (req.method === 'GET' && path === '/metrics' && opts.metrics) {
      void opts.metrics.serve(req, res);
      return;
    }
    if (req.method !== 'GET' || path !== '/healthz') {
      res.writeHead(404, { 'content-type': 'application/json' }).end('{"status":"error","detail":"only GET /healthz and GET /metrics are served here"}');
      return;
    }
    const health = check();
    res.writeHead(health.statusCode, { 'content-type': 'application/json' }).end(JSON.stringify(health.body));
  });
  return new Promise((resolve, reject) => {
    server.once('error', reject);
    server.listen(port, host, () => resolve(server));
  });
}
