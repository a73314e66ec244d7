// Cross-site spending: any page the developer visits can make the browser POST to 127.0.0.1. A `text/plain`
// POST needs no preflight, and the proxy used to forward it with its own key (with "stream": true it even
// upgraded the content type to JSON and passed the page's Origin on). Pages are refused unless
// server.allowedOrigins lists them; a JSON body must say it is JSON; where a browser request came from never
// reaches the provider, and neither do headers that would pick the caller's key or billing project.

import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { httpRequest, rawRequest } from './raw-http.ts';
import { chat, OPENAI_KEY, postJson, startSecurityBed, type SecurityBed } from './security-bed.ts';

const APP = 'http://localhost:3000';
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

async function errorCode(res: Response): Promise<unknown> {
  return ((await res.json()) as { error: { code: unknown } }).error.code;
}

/** What a page's fetch(…, {method: 'POST', body: string}) sends: text/plain, the page's Origin, Sec-Fetch-*. */
function fromPage(path: string, body: string, origin = 'http://evil.example', extra: Record<string, string> = {}): Promise<Response> {
  return fetch(`${bed.proxy.url}${path}`, {
    method: 'POST',
    headers: { 'content-type': 'text/plain;charset=UTF-8', origin, 'sec-fetch-site': 'cross-site', 'sec-fetch-mode': 'no-cors', ...extra },
    body,
  });
}

describe('a page that is not allowed gets 403 and spends nothing', () => {
  it.each([
    ['a chat completion', JSON.stringify(chat)],
    ['a streamed one (the proxy used to rewrite it to JSON and forward the Origin)', JSON.stringify({ ...chat, stream: true })],
  ])('%s on /proxy/beta', async (_what, body) => {
    const res = await fromPage('/proxy/beta/v1/chat/completions', body);
    expect(res.status).toBe(403);
    expect(await errorCode(res)).toBe('origin_not_allowed');
    expect(bed.upstream.calls).toEqual([]);
  });

  it("on the /v1 gateway, in OpenAI's error shape", async () => {
    const res = await fromPage('/v1/chat/completions', JSON.stringify(chat));
    expect(res.status).toBe(403);
    expect(await res.json()).toMatchObject({ error: { type: 'permission_error', code: 'origin_not_allowed' } });
    expect(bed.upstream.calls).toEqual([]);
  });

  it('on the config API, even with a JSON body', async () => {
    const before = await (await fetch(`${bed.proxy.url}/_local/api/config`)).json();
    const res = await postJson(bed, '/_local/api/config', { breaker: { openMs: 10 } }, { origin: 'http://evil.example' });
    expect(res.status).toBe(403);
    expect(await (await fetch(`${bed.proxy.url}/_local/api/config`)).json()).toEqual(before);
  });

  it('a browser request without Origin but marked cross-site (an <img> or <script> GET)', async () => {
    const res = await fetch(`${bed.proxy.url}/proxy/beta/v1/models`, { headers: { 'sec-fetch-site': 'cross-site', 'sec-fetch-mode': 'no-cors' } });
    expect(res.status).toBe(403);
    expect(bed.upstream.calls).toEqual([]);
  });

  it('the opaque Origin "null" of a sandboxed frame or a file:// page', async () => {
    expect((await fromPage('/proxy/beta/v1/chat/completions', JSON.stringify(chat), 'null')).status).toBe(403);
    expect(bed.upstream.calls).toEqual([]);
  });
});

describe('a JSON body must be sent as JSON', () => {
  it.each([
    ['/proxy/beta/v1/chat/completions', 'text/plain'],
    ['/proxy/gamma-direct/v1/messages', 'application/x-www-form-urlencoded'],
    ['/v1/chat/completions', 'text/plain;charset=UTF-8'],
    ['/_local/api/config', 'text/plain'],
  ])('%s with %s is 415 unsupported_media_type, and nothing is forwarded or applied', async (path, contentType) => {
    const before = await (await fetch(`${bed.proxy.url}/_local/api/config`)).json();
    const body = path === '/_local/api/config' ? JSON.stringify({ breaker: { openMs: 10 } }) : JSON.stringify(chat);
    const res = await fetch(`${bed.proxy.url}${path}`, { method: 'POST', headers: { 'content-type': contentType }, body });
    expect(res.status).toBe(415);
    expect(await errorCode(res)).toBe('unsupported_media_type');
    expect(bed.upstream.calls).toEqual([]);
    expect(await (await fetch(`${bed.proxy.url}/_local/api/config`)).json()).toEqual(before);
  });

  it('a body without any Content-Type (a Blob posted with no-cors) is refused too', async () => {
    const res = await rawRequest(bed.proxy.port, httpRequest('POST', '/proxy/beta/v1/chat/completions', {}, JSON.stringify(chat)));
    expect(res.status).toBe(415);
    expect(bed.upstream.calls).toEqual([]);
  });
});

describe('an allowed page', () => {
  it('is answered with CORS headers; its preflight is answered by the proxy and never forwarded', async () => {
    const withApp = await startSecurityBed({ configYaml: `server: { allowedOrigins: ["${APP}"] }` });
    try {
      const preflight = await fetch(`${withApp.proxy.url}/proxy/beta/v1/chat/completions`, {
        method: 'OPTIONS',
        headers: { origin: APP, 'access-control-request-method': 'POST', 'access-control-request-headers': 'content-type' },
      });
      expect(preflight.status).toBe(204);
      expect(preflight.headers.get('access-control-allow-origin')).toBe(APP);
      expect(preflight.headers.get('access-control-allow-headers')).toBe('content-type');
      expect(withApp.upstream.calls).toEqual([]);

      const res = await postJson(withApp, '/proxy/beta/v1/chat/completions', chat, {
        origin: APP,
        referer: `${APP}/chat`,
        'sec-fetch-site': 'same-site',
        'sec-fetch-mode': 'cors',
      });
      expect(res.status).toBe(200);
      expect(res.headers.get('access-control-allow-origin')).toBe(APP);
      expect(res.headers.get('access-control-expose-headers')).toContain('x-proxy-span-id');
      // where the request came from stays with the proxy
      const seen = withApp.upstream.calls[0]!.headers;
      expect(Object.keys(seen).filter((name) => name === 'origin' || name === 'referer' || name.startsWith('sec-fetch-'))).toEqual([]);
      // another page is still refused
      expect((await postJson(withApp, '/proxy/beta/v1/chat/completions', chat, { origin: 'http://localhost:3001' })).status).toBe(403);
    } finally {
      await withApp.close();
    }
  });
});

describe('headers that would choose the key or the bill are not forwarded', () => {
  it('x-goog-user-project and api-key are dropped like the other credential headers', async () => {
    const res = await postJson(bed, '/proxy/beta/v1/chat/completions', chat, {
      'x-goog-user-project': 'someone-elses-project',
      'api-key': 'caller-azure-key',
      authorization: 'Bearer caller-key',
    });
    expect(res.status).toBe(200);
    const seen = bed.upstream.calls[0]!.headers;
    expect(seen['x-goog-user-project']).toBeUndefined();
    expect(seen['api-key']).toBeUndefined();
    expect(seen.authorization).toBe(`Bearer ${OPENAI_KEY}`);
  });
});
