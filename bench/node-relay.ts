// The bare Node relay of the side-by-side benchmark: a node:http server that pipes each call to an undici Pool
// and pipes the answer back, with no logic at all (no routing, no credential, no metering, no log line). It runs
// on the same runtime and the same HTTP client as Tollgate, so the distance between the two is Tollgate's own
// per-call work, not Node's. Run as its own process (one event loop, like the sidecar), with node's defaults:
//
//   node bench/node-relay.ts UPSTREAM_URL PORT        # prints "listening" once it accepts calls
//   node bench/node-relay.ts UPSTREAM_URL PORT fastify  # the same relay as one hijacked fastify route, as Tollgate's
//                                                       # /proxy routes are: what fastify alone adds to a call

import { spawn, type ChildProcess } from 'node:child_process';
import { createServer, type IncomingHttpHeaders, type IncomingMessage, type OutgoingHttpHeaders, type ServerResponse } from 'node:http';
import { Pool } from 'undici';
import { freePort } from '../test/e2e/proxy-process.ts';

// Hop-by-hop headers belong to one connection; undici refuses some of them on a request.
const HOP_BY_HOP = new Set(['connection', 'keep-alive', 'transfer-encoding', 'upgrade', 'proxy-connection', 'host']);

function endToEnd(headers: IncomingHttpHeaders | Record<string, string | string[] | undefined>): OutgoingHttpHeaders {
  const out: OutgoingHttpHeaders = {};
  for (const name in headers) if (!HOP_BY_HOP.has(name)) out[name] = headers[name];
  return out;
}

function relayCall(pool: Pool, req: IncomingMessage, res: ServerResponse): void {
  const hasBody = req.headers['content-length'] !== undefined || req.headers['transfer-encoding'] !== undefined;
  // stream(): undici writes the answer's body straight into the response, as a pipe would, without a
  // Readable in between.
  pool
    .stream({ method: req.method as 'POST', path: req.url ?? '/', headers: endToEnd(req.headers) as Record<string, string>, body: hasBody ? req : null }, (answer) => {
      res.writeHead(answer.statusCode, endToEnd(answer.headers));
      return res;
    })
    .catch(() => {
      if (!res.headersSent) res.writeHead(502);
      res.end();
    });
}

function serve(upstreamUrl: string, port: number): void {
  const pool = new Pool(upstreamUrl, { connections: 64 });
  const server = createServer((req, res) => relayCall(pool, req, res));
  server.keepAliveTimeout = 60_000;
  server.listen(port, '127.0.0.1', () => process.stdout.write('listening\n'));
}

/** The relay inside fastify: one catch-all route, the body left unread and the reply hijacked, as proxy.ts does. */
async function serveInFastify(upstreamUrl: string, port: number): Promise<void> {
  const { default: fastify } = await import('fastify');
  const pool = new Pool(upstreamUrl, { connections: 64 });
  const app = fastify({ logger: false, keepAliveTimeout: 60_000 });
  app.removeAllContentTypeParsers();
  app.addContentTypeParser('*', (_request, _payload, done) => done(null));
  app.all('/*', (request, reply) => {
    reply.hijack();
    relayCall(pool, request.raw, reply.raw);
  });
  await app.listen({ port, host: '127.0.0.1' });
  process.stdout.write('listening\n');
}

export interface NodeRelay {
  url: string;
  pid: number;
  stop(): Promise<void>;
}

/**
 * Starts the relay as a child process in front of `upstreamUrl`; `nodeArgs` go before the script (e.g. --cpu-prof),
 * `inFastify` serves it from one fastify route.
 */
export async function startNodeRelay(upstreamUrl: string, nodeArgs: string[] = [], inFastify = false): Promise<NodeRelay> {
  const port = await freePort();
  const child: ChildProcess = spawn(process.execPath, [...nodeArgs, new URL(import.meta.url).pathname, upstreamUrl, String(port), ...(inFastify ? ['fastify'] : [])], {
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let stderr = '';
  child.stderr!.setEncoding('utf8').on('data', (t: string) => (stderr = (stderr + t).slice(-4000)));
  const exited = new Promise<void>((done) => child.once('exit', () => done()));
  await new Promise<void>((ready, fail) => {
    child.stdout!.setEncoding('utf8').on('data', (t: string) => {
      if (t.includes('listening')) ready();
    });
    child.once('exit', (code) => fail(new Error(`the bare Node relay exited with ${code}: ${stderr}`)));
  });
  return {
    url: `http://127.0.0.1:${port}`,
    pid: child.pid!,
    async stop() {
      if (child.exitCode === null) {
        child.kill('SIGTERM');
        await exited;
      }
    },
  };
}

if (import.meta.main) {
  const [upstreamUrl, port, mode] = process.argv.slice(2);
  if (!upstreamUrl || !port || (mode !== undefined && mode !== 'fastify')) throw new Error('usage: node bench/node-relay.ts UPSTREAM_URL PORT [fastify]');
  // SIGTERM ends the process through exit, so --cpu-prof writes its profile.
  process.once('SIGTERM', () => process.exit(0));
  if (mode === 'fastify') await serveInFastify(upstreamUrl, Number(port));
  else serve(upstreamUrl, Number(port));
}
