// GET /metrics on the engine's own port (Prometheus text, or OpenMetrics when asked; docs/observability.md).
// Behind the same Host/Origin checks and inbound identity as every route: a central server that requires an
// identity requires it here too, and Prometheus then scrapes the health-only port instead.

import type { FastifyPluginAsync } from 'fastify';
import type { MetricsExposition } from '../../../contracts/metrics-exposition.ts';

export const metricsRoutes: FastifyPluginAsync<{ exposition: MetricsExposition }> = async (app, opts) => {
  app.get('/metrics', async (request, reply) => {
    const { contentType, body } = await opts.exposition.render(request.headers.accept);
    return reply.header('content-type', contentType).header('cache-control', 'no-store').send(body);
  });
};
