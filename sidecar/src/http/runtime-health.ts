// GET /_local/api/health: a JSON view of the engine's runtime health, assembled from sections that the
// parts of the engine register (audit today; storage, breakers and the local runtime can add theirs). Each
// section is a function called per request, so the view is always current and costs nothing when unread.

import type { FastifyPluginAsync } from 'fastify';

export type HealthSection = () => unknown;

export class RuntimeHealth {
  #sections = new Map<string, HealthSection>();

  /** Adds (or replaces) a named section; returns a function that removes it. */
  register(name: string, section: HealthSection): () => void {
    this.#sections.set(name, section);
    return () => {
      if (this.#sections.get(name) === section) this.#sections.delete(name);
    };
  }

  view(): Record<string, unknown> {
    const out: Record<string, unknown> = {};
    for (const [name, section] of this.#sections) {
      try {
        out[name] = section();
      } catch (error) {
        // One broken section must not hide the others.
        out[name] = { error: (error as Error).message };
      }
    }
    return out;
  }
}

export const runtimeHealthRoutes: FastifyPluginAsync<{ health: RuntimeHealth; status: () => { statusCode: number; body: unknown } }> = async (app, opts) => {
  app.get('/_local/api/health', async () => ({ status: opts.status().body, ...opts.health.view() }));
};
