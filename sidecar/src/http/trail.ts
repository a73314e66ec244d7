// GET /_local/api/trail/<trace-id>: the causal trail of one trace (docs/management-api.md, ADR 1604). Registered
// inside the management API's plugin, so it has its guards and its error shape. The id is checked here rather
// than by a JSON schema: a schema would make fastify load ajv in every sidecar (ADR 0003).

import type { FastifyPluginAsync } from 'fastify';
import type { TrailJson } from '../provenance/trail-view.ts';

export interface TrailSource {
  /** The trail of a trace, or null when none is kept (unknown, forgotten, or the trail is off). */
  trail(traceId: string): TrailJson | null;
}

/** A W3C trace id: 32 hex digits, not all zero. */
const TRACE_ID = /^(?!0{32})[0-9a-f]{32}$/;

export const trailRoutes: FastifyPluginAsync<{ trail: TrailSource }> = async (app, opts) => {
  app.get<{ Params: { traceId: string } }>('/_local/api/trail/:traceId', async (request, reply) => {
    const traceId = request.params.traceId.toLowerCase();
    if (!TRACE_ID.test(traceId)) {
      return reply.code(400).send({
        error: {
          code: 'invalid_request',
          message: `trace id must be 32 hex digits, not all zero, as in a span's trace_id (got ${JSON.stringify(request.params.traceId.slice(0, 80))})`,
        },
      });
    }
    const trail = opts.trail.trail(traceId);
    if (trail === null) {
      return reply.code(404).send({
        error: {
          code: 'trail_not_found',
          message: `no causal trail is kept for trace ${traceId}: its call was not attributed to a process by Tetragon, it was forgotten (provenance.trail.maxTraces, memory only, lost on restart), or provenance.trail is off`,
        },
      });
    }
    return trail;
  });
};
