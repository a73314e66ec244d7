// Requests no HTTP library sends, written byte by byte: a raw `#` in the target (it used to reach the
// upstream one level above its base path, with the proxy's key), a tab, a bad percent-encoding, 17 KB of
// headers, headers or a body that never finish, a caller that leaves mid-body. Each is refused in the
// engine's error shape; one aimed at a /proxy route leaves a span its X-Proxy-Span-Id points to.

import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { httpRequest, rawRequest } from './raw-http.ts';
import { startSecurityBed, type SecurityBed } from './security-bed.ts';
import { waitFor } from '../support/wait-for.ts';

let bed: SecurityBed;

beforeAll(async () => {
  bed = await startSecurityBed();
});

afterAll(async () => {
  await bed?.close();
});

afterEach(() => {
  bed.upstream.calls.length = 0;
});

function errorOf(body: string): { code?: unknown; message?: unknown } {
  return (JSON.parse(body) as { error: { code?: unknown; message?: unknown } }).error;
}

describe('a raw # in the request target', () => {
  it.each(['/proxy/beta/..#', '/proxy/beta/.#', '/proxy/gamma-cloud/..#x', '/proxy/gamma-direct/v1/models#fragment', '/proxy/beta/v1/models?limit=1#x'])(
    '%s is refused before anything is sent upstream',
    async (target) => {
      const res = await rawRequest(bed.proxy.port, httpRequest('GET', target));
      expect(res.status).toBe(400);
      expect(errorOf(res.body)).toMatchObject({ code: 'invalid_request', message: expect.stringContaining('"#"') });
      expect(bed.upstream.calls).toEqual([]);
      expect(await bed.span(res.headers['x-proxy-span-id'])).toMatchObject({ status: 'rejected', error: expect.stringMatching(/^invalid_request: /) });
    },
  );

  it('a percent-encoded %23 is an ordinary character and is forwarded as sent; the raw one is not', async () => {
    const res = await rawRequest(bed.proxy.port, httpRequest('GET', '/proxy/beta/v1/models/a%23b'));
    expect(res.status).toBe(200);
    expect((await rawRequest(bed.proxy.port, httpRequest('GET', '/proxy/beta/v1/models/a#b'))).status).toBe(400);
    expect(bed.upstream.calls.map((c) => c.path)).toEqual(['/base/v1/models/a%23b']);
  });
});

describe('requests the HTTP parser or the router refuses', () => {
  it('a raw tab in the path: 400 invalid_request in the engine shape, with a span', async () => {
    const res = await rawRequest(bed.proxy.port, httpRequest('GET', '/proxy/beta/v1/mo\tdels'));
    expect(res.status).toBe(400);
    expect(errorOf(res.body)).toMatchObject({ code: 'invalid_request' });
    expect(await bed.span(res.headers['x-proxy-span-id'])).toMatchObject({
      route: 'beta',
      status: 'rejected',
      error: expect.stringMatching(/^invalid_request: malformed HTTP request/),
    });
    expect(bed.upstream.calls).toEqual([]);
  });

  it('a path that is not valid percent-encoding: 400 invalid_request naming it, with a span', async () => {
    const res = await rawRequest(bed.proxy.port, httpRequest('GET', '/proxy/beta/v1/%zz'));
    expect(res.status).toBe(400);
    expect(errorOf(res.body)).toMatchObject({ code: 'invalid_request', message: 'path "/proxy/beta/v1/%zz" is not valid percent-encoding' });
    expect(await bed.span(res.headers['x-proxy-span-id'])).toMatchObject({ route: 'beta', status: 'rejected' });
    expect(res.headers['x-proxy-request-id']).toMatch(/\S/);
  });

  it('headers over 16 KB: 431 headers_too_large, with a span', async () => {
    const res = await rawRequest(bed.proxy.port, httpRequest('GET', '/proxy/gamma-direct/v1/models', { 'x-padding': 'a'.repeat(17_000) }));
    expect(res.status).toBe(431);
    expect(errorOf(res.body)).toMatchObject({ code: 'headers_too_large' });
    expect(await bed.span(res.headers['x-proxy-span-id'])).toMatchObject({
      route: 'gamma-direct',
      provider: 'anthropic',
      status: 'rejected',
      error: expect.stringMatching(/^headers_too_large: /),
    });
  });

  it('on a path that records no spans (the management API), the same shape without a span id', async () => {
    const res = await rawRequest(bed.proxy.port, httpRequest('GET', '/_local/api/tra\tces'));
    expect(res.status).toBe(400);
    expect(errorOf(res.body)).toMatchObject({ code: 'invalid_request' });
    expect(res.headers['x-proxy-span-id']).toBeUndefined();
  });
});

describe('callers that are slow or leave', () => {
  it('headers that never finish, and a body that trickles, are answered 408 client_timeout once server.requestTimeoutMs passes', async () => {
    const slow = await startSecurityBed({ configYaml: 'server: { requestTimeoutMs: 1000 }' });
    try {
      const headers = await rawRequest(slow.proxy.port, 'GET /proxy/beta/v1/models HTTP/1.1\r\nHost: 127.0.0.1\r\nx-slow: ', { giveUpMs: 8000 });
      expect(headers.status).toBe(408);
      expect(errorOf(headers.body)).toMatchObject({ code: 'client_timeout' });

      const head = httpRequest('POST', '/proxy/beta/v1/chat/completions', { 'content-type': 'application/json', 'content-length': '1000', connection: 'keep-alive' });
      const body = await rawRequest(slow.proxy.port, `${head}{"model":`, { trickleMs: 100, giveUpMs: 8000 });
      expect(body.status).toBe(408);
      expect(errorOf(body.body)).toMatchObject({ code: 'client_timeout', message: 'request body not received within 1000 ms (server.requestTimeoutMs)' });
      expect(await slow.span(body.headers['x-proxy-span-id'])).toMatchObject({ status: 'rejected', error: expect.stringMatching(/^client_timeout: /) });
      expect(slow.upstream.calls).toEqual([]);
    } finally {
      await slow.close();
    }
  });

  it('a caller that leaves mid-body is recorded as client_aborted, not as an upstream failure', async () => {
    const head = httpRequest('POST', '/proxy/beta/v1/chat/completions', { 'content-type': 'application/json', 'content-length': '1000', 'x-request-id': 'left-mid-body' });
    await rawRequest(bed.proxy.port, `${head}{"model":`, { giveUpMs: 200 });
    const span = await waitFor('the span of the call', async () => (await bed.spans()).find((s) => s.request_id === 'left-mid-body'), 2_000).catch(() => undefined);
    expect(span).toMatchObject({ status: 'client_aborted', error: expect.stringMatching(/^client_aborted: /) });
    expect(bed.upstream.calls).toEqual([]);
  });
});
