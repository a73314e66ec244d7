// Small readers of what a fake received.

import type { IncomingMessage } from 'node:http';

/** One request header as a string (the first value when repeated). */
export function requestHeader(req: IncomingMessage, name: string): string | undefined {
  const v = req.headers[name];
  return Array.isArray(v) ? v[0] : v;
}

/** The bearer token of the Authorization header, or null. */
export function bearerToken(req: IncomingMessage): string | null {
  const match = /^Bearer (.+)$/i.exec(requestHeader(req, 'authorization') ?? '');
  return match?.[1] ?? null;
}

/** The request body as a JSON object, or null when it is not one. */
export function jsonObject(json: unknown): Record<string, unknown> | null {
  return typeof json === 'object' && json !== null && !Array.isArray(json) ? (json as Record<string, unknown>) : null;
}
