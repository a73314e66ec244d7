// The one way the engine answers with its own JSON (an error, a translated completion): a fixed length, and
// the call's span and trace ids so every answer can be looked up.

import { answerClosed, closeConnectionAfter } from './caller-connection.ts';
import { setAnswerTrace } from './trace-headers.ts';
import type { ServerResponse } from 'node:http';
import type { ProxyError } from '../errors.ts';
import type { TraceContext } from '../spans/trace-context.ts';

export function sendJson(res: ServerResponse, statusCode: number, body: unknown, trace: TraceContext): void {
  const text = JSON.stringify(body);
  const headers: Record<string, string | number> = { 'content-type': 'application/json; charset=utf-8', 'content-length': Buffer.byteLength(text) };
  setAnswerTrace(headers, trace);
  res.writeHead(statusCode, headers);
  res.end(text);
}

/**
 * A failed call's answer, `body` in the caller's error shape. Once the upstream's headers are sent, the only
 * honest signal left is to cut the connection.
 */
export function sendFailure(res: ServerResponse, error: ProxyError, body: unknown, trace: TraceContext): void {
  if (answerClosed(res)) return;
  if (res.headersSent) {
    res.destroy(error);
    return;
  }
  // The rest of a body that came too slowly is not waited for: this answer ends the connection.
  if (error.code === 'client_timeout') closeConnectionAfter(res);
  sendJson(res, error.statusCode, body, trace);
}
