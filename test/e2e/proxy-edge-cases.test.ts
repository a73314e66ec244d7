// The request path's edges, as an HTTP client that is not a browser meets them: hop-by-hop headers named in
// Connection, `Expect: 100-continue`, paths that try to climb out of the upstream's base path, chunked bodies
// over the limit, callers that leave before or during a response, informational and bodiless upstream
// answers, and the config API's refusals. Wire-level upstream behaviour the provider fakes do not offer
// (1xx, 304, a response that never ends, watching for an aborted request) comes from a bare loopback server.

import { createServer, request as httpRequest, type IncomingHttpHeaders, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { startProxyProcess, type ProxyProcess } from './proxy-process.ts';
import { PROJECT, startUpstreamBed, type UpstreamBed } from './upstream-bed.ts';
import type { SpanJson } from '../../sidecar/src/spans/span-json.ts';
import { findSpan } from '../support/spans.ts';
import { waitFor } from '../support/wait-for.ts';

interface SeenRequest {
  method: string;
  url: string;
  headers: IncomingHttpHeaders;
  bytes: number;
  /** The proxy closed the connection before the request body ended or the response was finished. */
  aborted: boolean;
}

/** A bare upstream: each test sets `handle`; every request is recorded, with whether it was cut short. */
interface BareUpstream {
  url: string;
  seen: SeenRequest[];
  handle: (req: IncomingMessage, res: ServerResponse, seen: SeenRequest) => void;
  close(): Promise<void>;
}

async function startBareUpstream(): Promise<BareUpstream> {
  const bare: BareUpstream = {
    url: '',
    seen: [],
    handle: (_req, res) => res.end(),
    close: () =>
      new Promise<void>((resolve) => {
        server.close(() => resolve());
        server.closeAllConnections();
      }),
  };
  const server: Server = createServer((req, res) => {
    const seen: SeenRequest = { method: req.method ?? '', url: req.url ?? '', headers: req.headers, bytes: 0, aborted: false };
    bare.seen.push(seen);
    req.on('data', (chunk: Buffer) => (seen.bytes += chunk.length));
    res.once('close', () => {
      if (!res.writableFinished) seen.aborted = true;
    });
    req.once('error', () => (seen.aborted = true));
    bare.handle(req, res, seen);
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  bare.url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  return bare;
}

interface RawResponse {
  status: number;
  headers: IncomingHttpHeaders;
  body: string;
}

/** A request exactly as written: no URL normalisation, any header (fetch forbids Connection and Expect). */
function raw(method: string, path: string, headers: Record<string, string> = {}, body?: Buffer | string | ((req: ReturnType<typeof httpRequest>) => void)): Promise<RawResponse> {
  return new Promise((resolve, reject) => {
    const req = httpRequest({ host: '127.0.0.1', port: proxy.port, method, path, headers, agent: false }, (res) => {
      let text = '';
      res.setEncoding('utf8');
      res.on('data', (chunk: string) => (text += chunk));
      res.once('end', () => resolve({ status: res.statusCode ?? 0, headers: res.headers, body: text }));
      res.once('error', reject);
    });
    req.once('error', reject);
    if (typeof body === 'function') body(req);
    else req.end(body);
  });
}

/** The span of a request sent with this x-request-id; waits for calls that finish after the caller left. */
function spanByRequestId(requestId: string): Promise<SpanJson> {
  return findSpan(proxy.url, { requestId });
}

let bed: UpstreamBed;
let bare: BareUpstream;
let proxy: ProxyProcess;
let nextId = 0;
const requestId = () => `edge-${++nextId}`;

const chat = { model: 'gpt-4o-mini', messages: [{ role: 'user', content: 'hi' }] };
/** gamma-cloud passes bodies through unread; the bare upstream sits behind it under the /base prefix. */
const cloudPath = `/proxy/gamma-cloud/v1/projects/${PROJECT}/locations/us-east5/publishers/anthropic/models/claude-sonnet-4@20250514:streamRawPredict`;

beforeAll(async () => {
  bed = await startUpstreamBed();
  bare = await startBareUpstream();
});

afterAll(async () => {
  await bare?.close();
  await bed?.close();
});

/** Each describe block runs its own proxy, so breaker state never carries over from one block to the next. */
function ownProxy(): void {
  beforeAll(async () => {
    proxy = await startProxyProcess({
      configYaml: bed
        .configYaml(
          `
server: { bodyLimitBytes: 4096 }
breaker: { consecutiveFailures: 3, openMs: 300, minimumRequests: 100 }
`,
        )
        .replace(/gamma-cloud: \{ baseUrl: "[^"]+"/, `gamma-cloud: { baseUrl: "${bare.url}/base"`)
        // The paths here are about how the upstream URL is built, not about metering: any path is forwarded.
        .replace(/gamma-direct: \{ baseUrl: "[^"]+"/, `gamma-direct: { unmetered: allow, baseUrl: "${bare.url}/base"`)
        .replace('beta: { baseUrl: "', 'beta: { unmetered: allow, baseUrl: "'),
      env: bed.env,
    });
  });
  afterAll(async () => {
    await proxy?.stop();
  });
}

afterEach(() => {
  bed.reset();
  bare.seen.length = 0;
  bare.handle = (_req, res) => res.end();
});

describe('headers', () => {
  ownProxy();

  it('drops headers the caller names in Connection, as hop-by-hop (RFC 9110 §7.6.1)', async () => {
    const res = await raw(
      'POST',
      '/proxy/beta/v1/chat/completions',
      {
        'content-type': 'application/json',
        connection: 'keep-alive, X-Hop-Secret',
        'x-hop-secret': 'for-the-proxy-only',
        'x-end-to-end': 'kept',
      },
      JSON.stringify(chat),
    );
    expect(res.status).toBe(200);
    expect(bed.openai.requests[0]!.headers['x-end-to-end']).toBe('kept');
    expect(bed.openai.requests[0]!.headers['x-hop-secret']).toBeUndefined();
  });

  it('drops headers the upstream names in Connection from the response', async () => {
    bare.handle = (_req, res) => {
      res.writeHead(200, { 'content-type': 'application/json', connection: 'x-upstream-hop', 'x-upstream-hop': 'internal', 'x-kept': 'yes' });
      res.end('{}');
    };
    const res = await raw('GET', '/proxy/gamma-direct/v1/models');
    expect(res.status).toBe(200);
    expect(res.headers['x-kept']).toBe('yes');
    expect(res.headers['x-upstream-hop']).toBeUndefined();
  });

  it('serves a caller that sends `Expect: 100-continue` (curl does for bodies over 1 KiB)', async () => {
    const body = JSON.stringify({ ...chat, messages: [{ role: 'user', content: 'x'.repeat(2000) }] });
    const res = await raw(
      'POST',
      '/proxy/beta/v1/chat/completions',
      { 'content-type': 'application/json', 'content-length': String(Buffer.byteLength(body)), expect: '100-continue' },
      (req) => {
        req.once('continue', () => req.end(body));
      },
    );
    expect(res.status).toBe(200);
    expect(bed.openai.requests).toHaveLength(1);
    expect(bed.openai.requests[0]!.headers.expect).toBeUndefined();
  });

  it('echoes the request id the caller sent, and sends the upstream the same one', async () => {
    const id = requestId();
    const res = await raw('GET', '/proxy/gamma-direct/v1/models', { 'x-request-id': id });
    expect(res.status).toBe(200);
    expect(bare.seen[0]!.headers['x-request-id']).toBe(id);
    expect((await spanByRequestId(id)).route).toBe('gamma-direct');
  });
});

describe('paths stay under the upstream base path', () => {
  ownProxy();

  it.each([
    ['dot segments', '/proxy/gamma-direct/v1/../../admin'],
    ['encoded dot segments', '/proxy/gamma-direct/v1/%2e%2e/%2E%2E/admin'],
    ['dot segments behind an encoded slash', '/proxy/gamma-direct/v1/..%2F..%2Fadmin'],
    ['backslashes', '/proxy/gamma-direct/v1/..\\..\\admin'],
    ['dot segments on a route that re-encodes its path', '/proxy/gamma-cloudb/model/%2e%2e/%2e%2e/admin'],
  ])('%s are refused with 400 and never sent', async (_name, path) => {
    const res = await raw('GET', path);
    expect(res.status).toBe(400);
    expect(JSON.parse(res.body)).toMatchObject({ error: { code: 'invalid_request' } });
    expect(bare.seen).toHaveLength(0);
    expect(bed.bedrock.requests).toHaveLength(0);
  });

  it('a path that starts with two slashes is forwarded under the base path, not read as a host', async () => {
    const res = await raw('GET', '/proxy/gamma-direct//other.example/v1/models?x=1');
    expect(res.status).toBe(200);
    expect(bare.seen[0]!.url).toBe('/base//other.example/v1/models?x=1');
  });

  it('a path that starts with two slashes on a route without a base path is still a path', async () => {
    await raw('GET', '/proxy/beta//other.example/v1/models');
    expect(bed.openai.requests.map((r) => r.path)).toEqual(['//other.example/v1/models']);
  });

  it('forwards the query string and encoded characters as sent', async () => {
    const res = await raw('GET', '/proxy/gamma-direct/v1/models/a%2Fb?after_id=x%20y&limit=2');
    expect(res.status).toBe(200);
    expect(bare.seen[0]!.url).toBe('/base/v1/models/a%2Fb?after_id=x%20y&limit=2');
  });
});

describe('request bodies', () => {
  ownProxy();

  it('a chunked body over the limit is answered 413, the upstream request is aborted, and the breaker does not count it', async () => {
    bare.handle = (req, res) => {
      req.resume();
      req.once('end', () => res.end('{}'));
    };
    for (let i = 0; i < 4; i++) {
      const id = requestId();
      const res = await raw('POST', cloudPath, { 'content-type': 'application/json', 'transfer-encoding': 'chunked', 'x-request-id': id }, (req) => {
        // The first body crosses the limit only once its request is on the upstream, the others at once.
        req.write('x'.repeat(2000));
        void waitFor('the upstream to receive the first bytes', () => i > 0 || bare.seen[0]?.bytes === 2000).then(() => {
          for (let k = 0; k < 8; k++) req.write('x'.repeat(1000));
          req.end();
        });
      });
      expect(res.status).toBe(413);
      expect(JSON.parse(res.body)).toMatchObject({ error: { code: 'body_too_large' } });
      expect((await spanByRequestId(id)).status).toBe('rejected');
    }
    await waitFor('the upstream to see its request cut', () => bare.seen[0]?.aborted === true);
    expect(bare.seen.every((s) => s.aborted)).toBe(true);
    // Four oversized bodies with consecutiveFailures 3: the upstream did nothing wrong, so the breaker stays closed.
    const ok = await raw('POST', cloudPath, { 'content-type': 'application/json' }, '{}');
    expect(ok.status).toBe(200);
  });

  it('a body over the limit on a route that reads it is answered 413 and recorded', async () => {
    const id = requestId();
    const res = await raw('POST', '/proxy/beta/v1/chat/completions', { 'content-type': 'application/json', 'transfer-encoding': 'chunked', 'x-request-id': id }, (req) => {
      for (let k = 0; k < 10; k++) req.write('x'.repeat(1000));
      req.end();
    });
    expect(res.status).toBe(413);
    expect(res.headers['x-proxy-span-id']).toMatch(/^[0-9a-f]{16}$/);
    expect(await spanByRequestId(id)).toMatchObject({ status: 'rejected', span_id: res.headers['x-proxy-span-id'] });
    expect(bed.openai.requests).toHaveLength(0);
  });

  it('GET and HEAD without a body reach the upstream without one', async () => {
    bare.handle = (req, res) => {
      res.writeHead(200, { 'content-type': 'application/json', 'content-length': '2' });
      res.end(req.method === 'HEAD' ? undefined : '{}');
    };
    expect((await raw('GET', '/proxy/gamma-direct/v1/models')).body).toBe('{}');
    const head = await raw('HEAD', '/proxy/gamma-direct/v1/models');
    expect(head.status).toBe(200);
    expect(head.headers['content-length']).toBe('2');
    expect(bare.seen.map((s) => [s.method, s.bytes, s.headers['content-length'], s.headers['transfer-encoding']])).toEqual([
      ['GET', 0, undefined, undefined],
      ['HEAD', 0, undefined, undefined],
    ]);
  });
});

describe('upstream answers without a body', () => {
  ownProxy();

  it('a 304 reaches the caller with its validators and is not an error', async () => {
    bare.handle = (_req, res) => {
      res.writeHead(304, { etag: '"v1"' });
      res.end();
    };
    const id = requestId();
    const res = await raw('GET', '/proxy/gamma-direct/v1/models', { 'if-none-match': '"v1"', 'x-request-id': id });
    expect(res.status).toBe(304);
    expect(res.headers.etag).toBe('"v1"');
    expect(bare.seen[0]!.headers['if-none-match']).toBe('"v1"');
    expect(await spanByRequestId(id)).toMatchObject({ status: 'ok', status_code: 304 });
  });

  it('a 204 reaches the caller as 204', async () => {
    bare.handle = (_req, res) => {
      res.writeHead(204);
      res.end();
    };
    const id = requestId();
    const res = await raw('DELETE', '/proxy/gamma-direct/v1/files/f1', { 'x-request-id': id });
    expect(res.status).toBe(204);
    expect(await spanByRequestId(id)).toMatchObject({ status: 'ok', status_code: 204 });
  });

  it('informational 1xx responses before the final one are skipped', async () => {
    bare.handle = (_req, res) => {
      res.writeEarlyHints({ link: '</x>; rel=preload' });
      res.writeProcessing();
      res.writeHead(200, { 'content-type': 'application/json' });
      res.end('{"ok":true}');
    };
    const res = await raw('GET', '/proxy/gamma-direct/v1/models');
    expect(res.status).toBe(200);
    expect(res.body).toBe('{"ok":true}');
  });
});

describe('callers that leave', () => {
  ownProxy();

  /** Opens the bare upstream's breaker on gamma-cloud (three 500s); the test's next call then waits to be its probe. */
  async function openCloudBreaker(): Promise<void> {
    bare.handle = (_req, res) => res.end('{}');
    // An earlier test may have left it open: calls are refused until a probe closes it.
    await waitFor('a closed breaker on gamma-cloud', async () => (await raw('POST', cloudPath, { 'content-type': 'application/json' }, '{}')).status === 200);
    bare.handle = (_req, res) => {
      res.writeHead(500, { 'content-type': 'application/json' });
      res.end('{"error":{"message":"boom"}}');
    };
    for (let i = 0; i < 3; i++) expect((await raw('POST', cloudPath, { 'content-type': 'application/json' }, '{}')).status).toBe(500);
    expect(JSON.parse((await raw('POST', cloudPath, { 'content-type': 'application/json' }, '{}')).body)).toMatchObject({ error: { code: 'circuit_open' } });
  }

  /** Whether a response is the open breaker's refusal (502 circuit_open, answered without calling the upstream). */
  function refusedByBreaker(res: IncomingMessage): Promise<boolean> {
    if (res.statusCode !== 502) return Promise.resolve(false);
    return new Promise((resolve) => {
      let text = '';
      res.setEncoding('utf8');
      res.on('data', (chunk: string) => (text += chunk));
      res.once('end', () => resolve(text.includes('"circuit_open"')));
    });
  }

  /**
   * Sends a call (with a fresh x-request-id each time) until the open breaker lets it through as its half-open
   * probe, which it does once openMs has passed; `send` answers undefined for a refusal.
   */
  async function asProbe<T>(send: (id: string) => Promise<T | undefined>): Promise<{ id: string; admitted: T }> {
    return waitFor(
      'the breaker to admit a half-open probe',
      async () => {
        const id = requestId();
        const admitted = await send(id);
        return admitted === undefined ? undefined : { id, admitted };
      },
      { intervalMs: 20 },
    );
  }

  function streamForever(_req: IncomingMessage, res: ServerResponse): void {
    res.writeHead(200, { 'content-type': 'text/event-stream' });
    const tick = setInterval(() => res.write('event: ping\ndata: {"type": "ping"}\n\n'), 20);
    res.once('close', () => clearInterval(tick));
  }

  it('mid-stream: the upstream request is aborted, the span is client_aborted, and a half-open probe is released', async () => {
    await openCloudBreaker();
    bare.handle = streamForever;
    const { id } = await asProbe(
      (probeId) =>
        new Promise<true | undefined>((resolve, reject) => {
          const req = httpRequest(
            { host: '127.0.0.1', port: proxy.port, method: 'POST', path: cloudPath, headers: { 'content-type': 'application/json', 'x-request-id': probeId }, agent: false },
            (res) => {
              void refusedByBreaker(res).then((refused) => {
                if (refused) return resolve(undefined);
                if (res.statusCode !== 200) return reject(new Error(`expected 200, got ${res.statusCode}`));
                res.once('data', () => {
                  req.destroy();
                  resolve(true);
                });
              });
            },
          );
          req.once('error', () => undefined);
          req.end('{}');
          setTimeout(() => reject(new Error('no stream bytes')), 5000);
        }),
    );
    await waitFor('the upstream request to be aborted', () => bare.seen.at(-1)!.aborted);
    expect(await spanByRequestId(id)).toMatchObject({ status: 'client_aborted', status_code: 200 });
    // The abandoned probe gave no verdict: the next call is the new probe, not refused.
    bare.handle = (_req, res) => res.end('{}');
    expect((await raw('POST', cloudPath, { 'content-type': 'application/json' }, '{}')).status).toBe(200);
  });

  it('after the last event (as SDKs stop at the end of a stream): the call is complete and costed, not aborted', async () => {
    // A whole Anthropic stream, then the upstream keeps the connection open: the caller leaves first.
    const events = [
      [
        'message_start',
        {
          type: 'message_start',
          message: { id: 'msg_1', type: 'message', role: 'assistant', model: 'claude-sonnet-4-20250514', content: [], usage: { input_tokens: 100, output_tokens: 1 } },
        },
      ],
      ['content_block_start', { type: 'content_block_start', index: 0, content_block: { type: 'text', text: '' } }],
      ['content_block_delta', { type: 'content_block_delta', index: 0, delta: { type: 'text_delta', text: 'Hi' } }],
      ['content_block_stop', { type: 'content_block_stop', index: 0 }],
      ['message_delta', { type: 'message_delta', delta: { stop_reason: 'end_turn' }, usage: { output_tokens: 20 } }],
      ['message_stop', { type: 'message_stop' }],
    ] as const;
    bare.handle = (_req, res) => {
      res.writeHead(200, { 'content-type': 'text/event-stream' });
      res.write(events.map(([type, data]) => `event: ${type}\ndata: ${JSON.stringify(data)}\n\n`).join(''));
      // no res.end(): the caller's departure ends the call
    };
    const id = requestId();
    await new Promise<void>((resolve, reject) => {
      const req = httpRequest(
        { host: '127.0.0.1', port: proxy.port, method: 'POST', path: cloudPath, headers: { 'content-type': 'application/json', 'x-request-id': id }, agent: false },
        (res) => {
          let text = '';
          res.setEncoding('utf8');
          res.on('data', (chunk: string) => {
            text += chunk;
            if (text.includes('message_stop')) {
              req.destroy();
              resolve();
            }
          });
        },
      );
      req.once('error', () => undefined);
      req.end('{}');
      setTimeout(() => reject(new Error('the stream did not arrive')), 5000);
    });
    await waitFor('the upstream request to be aborted', () => bare.seen.at(-1)!.aborted);
    const span = await spanByRequestId(id);
    expect(span).toMatchObject({ status: 'ok', status_code: 200, input_tokens: 100, output_tokens: 20 });
    expect(span.cost_usd).toBeCloseTo((100 * 3 + 20 * 15) / 1e6, 12);
  });

  it('before the response headers: the upstream request is aborted and the half-open probe is released', async () => {
    await openCloudBreaker();
    bare.handle = () => undefined; // never answers
    const { id, admitted: req } = await asProbe(async (probeId) => {
      const probe = httpRequest({
        host: '127.0.0.1',
        port: proxy.port,
        method: 'POST',
        path: cloudPath,
        headers: { 'content-type': 'application/json', 'x-request-id': probeId },
        agent: false,
      });
      const sent = bare.seen.length;
      let refused = false;
      probe.once('response', (res) => void refusedByBreaker(res).then((r) => (refused = r)));
      probe.once('error', () => undefined);
      probe.end('{}');
      const reached = await waitFor('the request to reach the upstream or be refused', () => (refused ? 'refused' : bare.seen.length === sent + 1 ? 'reached' : undefined));
      return reached === 'reached' ? probe : undefined;
    });
    req.destroy();
    await waitFor('the upstream request to be aborted', () => bare.seen.at(-1)!.aborted);
    expect(await spanByRequestId(id)).toMatchObject({ status: 'client_aborted', status_code: null });
    bare.handle = (_req, res) => res.end('{}');
    expect((await raw('POST', cloudPath, { 'content-type': 'application/json' }, '{}')).status).toBe(200);
  });
});

describe('config API', () => {
  ownProxy();

  it('refuses an upstream base URL that carries credentials, so none can show in GET', async () => {
    const res = await fetch(`${proxy.url}/_local/api/config`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ upstreams: { beta: { baseUrl: 'https://user:sk-live-secret@api.openai.com' } } }),
    });
    expect(res.status).toBe(400);
    expect(((await res.json()) as { error: { message: string } }).error.message).toMatch(/upstreams\.beta\.baseUrl/);
    expect(await (await fetch(`${proxy.url}/_local/api/config`)).text()).not.toContain('sk-live-secret');
  });

  it('applies nothing when one section of a change is bad', async () => {
    const before = (await (await fetch(`${proxy.url}/_local/api/config`)).json()) as { revision: number };
    const res = await fetch(`${proxy.url}/_local/api/config`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ pricing: { models: [{ provider: 'openai', model: 'gpt-edge', input_per_million: 1, output_per_million: 2 }] }, breaker: { openMs: -1 } }),
    });
    expect(res.status).toBe(400);
    expect(((await res.json()) as { error: { message: string } }).error.message).toContain('breaker.openMs');
    const after = (await (await fetch(`${proxy.url}/_local/api/config`)).json()) as { revision: number; config: { pricing: { models: { model: string }[] } } };
    expect(after.revision).toBe(before.revision);
    expect(after.config.pricing.models.some((m) => m.model === 'gpt-edge')).toBe(false);
  });
});
