// GET /_local/api/health: a JSON view of the engine's runtime health, assembled from sections that the
// parts of the engine register (proxy, spans, breakers, the local runtime, audit, auth). Each section is a
// function called per request, so the view is always current and costs nothing when unread; a section that
// must ask something over the network (the local runtime) returns a promise, and the sections are read at once.

import type { FastifyPluginAsync } from 'fastify';

export type HealthSection = () => unknown;

function sectionError(error: unknown): { error: string } {
  return { error: error instanceof Error ? error.message : String(error) };
}

export class RuntimeHealth {
  #sections = new Map<string, HealthSection>();

  /** Adds (or replaces) a named section; returns a function that removes it. */
  register(name: string, section: HealthSection): () => void {
    this.#sections.set(name, section);
    return () => {
      if (this.#sections.get(name) === section) this.#sections.delete(name);
    };
  }

  async view(): Promise<Record<string, unknown>> {
    const entries = [...this.#sections].map(async ([name, section]): Promise<[string, unknown]> => {
      try {
        return [name, await section()];
      } catch (error) {
        // One broken section must not hide the others.
        return [name, sectionError(error)];
      }
    });
    return Object.fromEntries(await Promise.all(entries));
  }
}

export const runtimeHealthRoutes: FastifyPluginAsync<{ health: RuntimeHealth; status: () => { statusCode: number; body: unknown } }> = async (app, opts) => {
  app.get('/_local/api/health', async () => ({ status: opts.status().body, ...(await opts.health.view()) }));
};
