// What the routes ask of the caller's connection, for both protocols the proxy port speaks (h2c-server.ts).
// Routes are typed with HTTP/1.1's ServerResponse (fastify's raw reply); an HTTP/2 call brings Node's
// compatibility response instead, which forbids connection-specific headers and has no `destroyed`.

import type { ServerResponse } from 'node:http';
import type { Http2ServerResponse } from 'node:http2';

function http2Response(res: ServerResponse): Http2ServerResponse | null {
  const maybe = res as unknown as Partial<Http2ServerResponse>;
  return maybe.stream !== undefined ? (maybe as Http2ServerResponse) : null;
}

/**
 * The whole answer was handed to the connection: ended by us and flushed. On HTTP/2 the compatibility
 * response's writableFinished is its stream's, and a stream the caller resets is ended by Node itself (and so
 * "finished" when nothing was buffered): only an end we called counts there.
 */
export function answerFinished(res: ServerResponse): boolean {
  const h2 = http2Response(res);
  return h2 ? h2.writableEnded && h2.stream.writableFinished : res.writableFinished;
}

/** The caller went away before the answer was complete. */
export function callerGone(res: ServerResponse): boolean {
  const h2 = http2Response(res);
  const destroyed = h2 ? h2.stream.destroyed : res.destroyed;
  return destroyed && !answerFinished(res);
}

/**
 * Calls `left` once when the caller goes away before its answer was handed over: at once when it has gone
 * already (its connection's close was emitted before anyone listened), else when its connection closes. Every
 * step of a call asks here, so /proxy, /v1, the relay and a whole answer's read agree on who left (ADR 1700).
 */
export function onCallerLeaving(res: ServerResponse, left: () => void): void {
  if (callerGone(res)) {
    left();
    return;
  }
  res.once('close', () => {
    if (!answerFinished(res)) left();
  });
}

/** The answer can no longer be written (sent or abandoned). */
export function answerClosed(res: ServerResponse): boolean {
  const h2 = http2Response(res);
  return h2 ? h2.stream.destroyed || h2.stream.closed : res.destroyed;
}

/**
 * Ends the connection after this answer: `Connection: close` on HTTP/1.1; on HTTP/2, where that header is
 * forbidden, the session is told to go away once its open streams (this one included) finish.
 */
export function closeConnectionAfter(res: ServerResponse): void {
  const h2 = http2Response(res);
  if (h2) h2.stream.session?.close();
  else res.setHeader('connection', 'close');
}
