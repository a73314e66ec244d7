// /healthz for probes: 200 while the engine can serve, 503 naming what is wrong.

import type { FastifyPluginAsync } from 'fastify';
import type { Lifecycle } from '../lifecycle.ts';
import type { SpanWriter } from '../spans/span-writer.ts';

export interface HealthOptions {
  lifecycle: Lifecycle;
  writer: SpanWriter;
}

export const healthRoutes: FastifyPluginAsync<HealthOptions> = async (app, opts) => {
  let lastWriteErrors = 0;
  app.get('/healthz', async (_request, reply) => {
    if (opts.lifecycle.draining) {
      return reply.code(503).send({ status: 'error', detail: 'shutting down: draining in-flight requests' });
    }
    const stats = opts.writer.stats();
    // Unhealthy only while errors keep coming: a single failed batch that was retried is not an outage.
    const failing = stats.writeErrors > lastWriteErrors;
    lastWriteErrors = stats.writeErrors;
    if (failing) {
      return reply.code(503).send({ status: 'error', detail: `span store writes are failing (${stats.writeErrors} errors so far)` });
    }
    return { status: 'ok' };
  });
};
