// HTTP/1.1 and cleartext HTTP/2 (prior knowledge, "h2c") on one port, for fastify's serverFactory. The AWS
// SDK's default BedrockRuntimeClient speaks HTTP/2 to an http:// endpoint without asking first, so a proxy that
// only speaks HTTP/1.1 makes it fail with "Protocol error" (docs/routes.md).
//
// Each connection is routed by its first bytes: a client with prior knowledge opens with the HTTP/2 preface
// (`PRI * HTTP/2.0`), which no HTTP/1 request starts with. The bytes read to decide are put back on the socket
// before either server sees it; both servers read those first (on the next tick) before anything newer from the
// network, so nothing is reordered. HTTP/2 requests reach the same handler through Node's compatibility API,
// with the same routes, hooks, Host and Origin checks (`:authority` stands in for Host, ADR 0004).

import { createServer as createHttp1Server, type RequestListener, type Server, type ServerOptions } from 'node:http';
import { createServer as createHttp2Server, type Http2Session, type ServerHttp2Session } from 'node:http2';
import type { Socket } from 'node:net';

/** The start of the HTTP/2 connection preface (RFC 9113 §3.4). */
const PREFACE = Buffer.from('PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n', 'latin1');

/** Per-session bounds: concurrent streams and the memory nghttp2 may hold for one client (ADR 0003). */
export const HTTP2_MAX_CONCURRENT_STREAMS = 128;
const HTTP2_MAX_SESSION_MEMORY_MB = 8;

export interface DualServerOptions {
  http1: ServerOptions;
  keepAliveTimeout: number;
  requestTimeout: number;
  /** How long a connection may take to send its first bytes, and an HTTP/2 session may stay idle. */
  idleTimeoutMs: number;
}

/** True when `chunk` (the first bytes of a connection) starts the HTTP/2 preface. */
export function startsHttp2Preface(chunk: Buffer): boolean {
  const n = Math.min(chunk.length, PREFACE.length);
  return n > 0 && chunk.compare(PREFACE, 0, n, 0, n) === 0;
}

/**
 * An HTTP/1.1 server that hands connections opening with the HTTP/2 preface to an HTTP/2 server sharing its
 * request handler. Listen, close and the connection-closing calls fastify makes act on both.
 */
export function createHttp1AndH2cServer(handler: RequestListener, opts: DualServerOptions): Server {
  const http1 = createHttp1Server(opts.http1, handler);
  http1.keepAliveTimeout = opts.keepAliveTimeout;
  http1.requestTimeout = opts.requestTimeout;
  const http2 = createHttp2Server(
    { settings: { maxConcurrentStreams: HTTP2_MAX_CONCURRENT_STREAMS }, maxSessionMemory: HTTP2_MAX_SESSION_MEMORY_MB },
    handler as unknown as Parameters<typeof createHttp2Server>[1],
  );
  const sessions = new Set<ServerHttp2Session>();
  http2.on('session', (session: ServerHttp2Session) => {
    sessions.add(session);
    session.once('close', () => sessions.delete(session));
    session.setTimeout(opts.idleTimeoutMs, () => session.close());
  });

  const http1Connection = http1.listeners('connection') as ((socket: Socket) => void)[];
  http1.removeAllListeners('connection');
  http1.on('connection', (socket: Socket) => {
    // Until it has said which protocol it speaks, a connection has the headers deadline to say it.
    const silent = setTimeout(() => socket.destroy(), opts.idleTimeoutMs);
    const fail = () => clearTimeout(silent);
    socket.once('error', fail);
    socket.once('readable', () => {
      clearTimeout(silent);
      socket.removeListener('error', fail);
      const first = socket.read() as Buffer | null;
      if (first === null) {
        socket.destroy();
        return;
      }
      socket.unshift(first);
      if (startsHttp2Preface(first)) {
        // The session takes the socket over and reads what is buffered itself.
        http2.emit('connection', socket);
      } else {
        for (const listener of http1Connection) listener.call(http1, socket);
        // A 'readable' listener paused the stream; the HTTP/1 parser reads it as 'data'.
        socket.resume();
      }
    });
  });

  // fastify closes idle keep-alive connections on close and all of them at the drain deadline (app.ts); an
  // HTTP/2 session is told to go away (GOAWAY: its open streams finish) or is cut the same way.
  const closeIdle = http1.closeIdleConnections.bind(http1);
  const closeAll = http1.closeAllConnections.bind(http1);
  const close = http1.close.bind(http1);
  http1.closeIdleConnections = () => {
    for (const session of sessions) closeWhenIdle(session);
    closeIdle();
  };
  http1.closeAllConnections = () => {
    for (const session of sessions) session.destroy();
    closeAll();
  };
  http1.close = (callback?: (err?: Error) => void) => {
    for (const session of sessions) session.close();
    return close(callback);
  };
  return http1;
}

function closeWhenIdle(session: Http2Session): void {
  if (session.closed || session.destroyed) return;
  session.close();
}
