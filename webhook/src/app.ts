// The webhook's HTTP(S) app, built without listening so tests can use inject(): /mutate, /metrics, /healthz (the
// process serves) and /readyz (an admission now would inject: the API server trusts our certificate and the
// operator's CA, which every sidecar needs, is loaded).

import type { SecureContextOptions, Server as TlsServer } from 'node:tls';
import Fastify, { LogController, type FastifyInstance } from 'fastify';
import type { Logger } from 'pino';
import { OriginPolicy } from '../../contracts/origin-policy.ts';
import { mutateRoute } from './admission/mutate-route.ts';
import type { PodAdmissionDeps } from './admission/pod-admission.ts';
import type { KeyPairPem } from '../../contracts/pki.ts';
import { headerValue } from '../../contracts/header-value.ts';
import type { MetricsExposition } from '../../contracts/metrics-exposition.ts';

export interface WebhookAppOptions {
  logger: Logger;
  admission: PodAdmissionDeps;
  /** Serve HTTPS with this certificate (the API server only calls webhooks over TLS). */
  tls?: KeyPairPem;
  /** What still keeps this replica from injecting; empty when ready. Absent: ready whenever it serves. */
  notReady?: () => string[];
  /** Serves GET /metrics (Prometheus, through the chart's ServiceMonitor). */
  metrics?: MetricsExposition;
}

// The API server caps requests at 3 MiB; a pod spec near that size must still be admitted.
const BODY_LIMIT = 4 * 1024 * 1024;

export function buildWebhookApp(opts: WebhookAppOptions): FastifyInstance {
  const app = Fastify({
    loggerInstance: opts.logger,
    // One log line per admission decision comes from pod-admission.ts; per-request lines would double it.
    logController: new LogController({ disableRequestLogging: true }),
    bodyLimit: BODY_LIMIT,
    ...(opts.tls ? { https: { key: opts.tls.keyPem, cert: opts.tls.certPem, minVersion: 'TLSv1.2' as const } } : {}),
  }) as unknown as FastifyInstance;
  // Only the API server (and kubelet's probes) call this port, and neither is a browser: a request marked as
  // coming from a web page is refused. Host is not checked: TLS already binds the name (ADR 1000).
  const noPages = new OriginPolicy([]);
  app.addHook('onRequest', async (request, reply) => {
    const verdict = noPages.check(headerValue(request.headers, 'origin'), headerValue(request.headers, 'sec-fetch-site'));
    if (!verdict.allowed) return reply.code(403).send({ error: { code: 'origin_not_allowed', message: verdict.reason } });
  });
  app.get('/healthz', async () => ({ status: 'ok' }));
  app.get('/readyz', async (_request, reply) => {
    const waiting = opts.notReady?.() ?? [];
    if (waiting.length > 0) return reply.code(503).send({ status: 'not ready', waiting });
    return { status: 'ok' };
  });
  const metrics = opts.metrics;
  if (metrics) {
    app.get('/metrics', async (request, reply) => {
      const { contentType, body } = await metrics.render(request.headers.accept);
      return reply.header('content-type', contentType).header('cache-control', 'no-store').send(body);
    });
  }
  void app.register(mutateRoute, { admission: opts.admission });
  return app;
}

/** Swaps the serving certificate of a running HTTPS app; new connections use it, open ones keep theirs. */
export function reloadServingCertificate(app: FastifyInstance, pair: KeyPairPem): void {
  const server = app.server as unknown as TlsServer;
  if (typeof server.setSecureContext !== 'function') throw new Error('the webhook app is not serving HTTPS');
  const context: SecureContextOptions = { key: pair.keyPem, cert: pair.certPem, minVersion: 'TLSv1.2' };
  server.setSecureContext(context);
}
