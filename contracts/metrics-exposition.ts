// GET /metrics for every Tollgate process (proxy, operator, webhook): one prom-client Registry, rendered in the
// Prometheus text format (0.0.4), or in OpenMetrics 1.0 when the scraper's Accept header prefers it (Prometheus
// does by default). What the metrics mean is each component's business; how they are exposed is shared here.

import type { IncomingMessage, ServerResponse } from 'node:http';
import { Registry, type RegistryContentType } from 'prom-client';

export const PROMETHEUS_TEXT = Registry.PROMETHEUS_CONTENT_TYPE;
export const OPENMETRICS_TEXT = Registry.OPENMETRICS_CONTENT_TYPE;

/**
 * Whether an Accept header asks for OpenMetrics over the classic text format: the media type with the higher
 * q-value wins, text on a tie or when neither is named (a bare `curl`, `*\/*`).
 */
export function prefersOpenMetrics(accept: string | undefined): boolean {
  const header = accept?.toLowerCase();
  if (header === undefined || !header.includes('application/openmetrics-text')) return false;
  let openMetrics = -1;
  let text = -1;
  for (const part of header.split(',')) {
    const [type = '', ...params] = part.split(';');
    const mediaType = type.trim();
    let q = 1;
    for (const param of params) {
      const [key, value] = param.split('=');
      if (key?.trim() === 'q' && value !== undefined) q = Number(value.trim());
    }
    if (!Number.isFinite(q)) continue;
    if (mediaType === 'application/openmetrics-text') openMetrics = Math.max(openMetrics, q);
    else if (mediaType === 'text/plain') text = Math.max(text, q);
  }
  return openMetrics > 0 && openMetrics > text;
}

/**
 * Renders one registry in either format. prom-client switches format per registry and, for OpenMetrics, renames
 * counters in place (`x_total` becomes `x`, the suffix then goes on the samples). So renders run one at a time,
 * and after an OpenMetrics render every counter gets its registered name back, or the next text scrape would
 * lose its `_total`.
 */
export class MetricsExposition {
  readonly registry: Registry<RegistryContentType>;
  #queue: Promise<unknown> = Promise.resolve();

  constructor(registry: Registry<RegistryContentType>) {
    this.registry = registry;
  }

  render(accept: string | undefined): Promise<{ contentType: string; body: string }> {
    const openMetrics = prefersOpenMetrics(accept);
    const next = this.#queue.then(() => (openMetrics ? this.#renderOpenMetrics() : this.#renderText()));
    this.#queue = next.catch(() => undefined);
    return next;
  }

  async #renderText(): Promise<{ contentType: string; body: string }> {
    return { contentType: PROMETHEUS_TEXT, body: await this.registry.metrics() };
  }

  async #renderOpenMetrics(): Promise<{ contentType: string; body: string }> {
    const names = new Map(this.registry.getMetricsAsArray().map((metric) => [metric, metric.name]));
    this.registry.setContentType(OPENMETRICS_TEXT);
    try {
      return { contentType: OPENMETRICS_TEXT, body: await this.registry.metrics() };
    } finally {
      this.registry.setContentType(PROMETHEUS_TEXT);
      for (const [metric, name] of names) (metric as { name: string }).name = name;
    }
  }

  /** Serves GET (and HEAD) /metrics on a plain node:http server; the caller has already judged Host and Origin. */
  async serve(req: IncomingMessage, res: ServerResponse): Promise<void> {
    try {
      const { contentType, body } = await this.render(req.headers.accept);
      res.writeHead(200, { 'content-type': contentType, 'cache-control': 'no-store' }).end(req.method === 'HEAD' ? undefined : body);
    } catch (error) {
      // A collector that throws must not take the process down; the scrape fails visibly instead.
      res.writeHead(500, { 'content-type': 'text/plain; charset=utf-8' }).end(`metrics collection failed: ${(error as Error).message}\n`);
    }
  }
}
