// The management UI's page and the door its API calls pass: the engine in-process (fastify inject), a page of
// the engine's own origin against pages of other origins, and what the page's headers forbid.

import pino from 'pino';
import { afterEach, describe, expect, it } from 'vitest';
import { buildEngine, type Engine } from '../app.ts';
import { ConfigStore } from '../config/config-store.ts';
import type { RuntimeConfigPatch } from '../../../contracts/config-schema.ts';

const engines: Engine[] = [];

async function engine(patch: RuntimeConfigPatch = {}): Promise<Engine> {
  const built = await buildEngine({ store: new ConfigStore({ storage: { kind: 'memory' }, ...patch }), logger: pino({ level: 'silent' }), env: {} });
  engines.push(built);
  return built;
}

afterEach(async () => {
  await Promise.all(engines.splice(0).map((e) => e.shutdown(0)));
});

const price = { pricing: { models: [{ provider: 'openai', model: 'gpt-4o-mini', input_per_million: 10, output_per_million: 20 }] } };

describe('GET /_local/', () => {
  it('serves the page with headers that keep other sites from framing it or running scripts in it', async () => {
    const app = (await engine()).app;
    const redirect = await app.inject({ url: '/_local' });
    expect(redirect.statusCode).toBe(308);
    expect(redirect.headers.location).toBe('/_local/');
    const page = await app.inject({ url: '/_local/', headers: { host: '127.0.0.1:8181' } });
    expect(page.statusCode).toBe(200);
    expect(page.headers['content-type']).toBe('text/html; charset=utf-8');
    expect(page.body).toContain('<title>Tollgate</title>');
    expect(page.headers['x-frame-options']).toBe('DENY');
    expect(page.headers['x-content-type-options']).toBe('nosniff');
    expect(page.headers['content-security-policy']).toContain("frame-ancestors 'none'");
    expect(page.headers['content-security-policy']).toContain("script-src 'self'");
    expect(page.headers['content-security-policy']).toContain("connect-src 'self'");
  });

  it('serves its script, its styles and the chart library from node_modules, and nothing else', async () => {
    const app = (await engine()).app;
    for (const [path, type] of [
      ['app.js', 'text/javascript; charset=utf-8'],
      ['app.css', 'text/css; charset=utf-8'],
      ['vendor/uPlot.iife.min.js', 'text/javascript; charset=utf-8'],
      ['vendor/uPlot.min.css', 'text/css; charset=utf-8'],
    ]) {
      const res = await app.inject({ url: `/_local/ui/${path}` });
      expect(res.statusCode, path).toBe(200);
      expect(res.headers['content-type'], path).toBe(type);
    }
    expect((await app.inject({ url: '/_local/ui/../../package.json' })).statusCode).toBe(404);
    expect((await app.inject({ url: '/_local/ui/index.html' })).statusCode).toBe(404);
  });

  it('refuses a cross-site frame or link to it, like every other page request (ADR 1000)', async () => {
    const res = await (await engine()).app.inject({ url: '/_local/', headers: { host: '127.0.0.1:8181', 'sec-fetch-site': 'cross-site', 'sec-fetch-dest': 'iframe' } });
    expect(res.statusCode).toBe(403);
  });
});

describe("the page's calls to its own API (same origin)", () => {
  const fromPage = (origin: string, host: string, site: string | undefined = 'same-origin') => ({
    host,
    origin,
    'content-type': 'application/json',
    ...(site === undefined ? {} : { 'sec-fetch-site': site }),
  });

  it('are served: the UI changes a price, and the next snapshot has it', async () => {
    const e = await engine();
    const res = await e.app.inject({ method: 'POST', url: '/_local/api/config', headers: fromPage('http://127.0.0.1:8181', '127.0.0.1:8181'), payload: price });
    expect(res.statusCode, res.body).toBe(200);
    expect(res.headers['access-control-allow-origin']).toBeUndefined();
    expect(e.store.current().prices.resolve('openai', 'gpt-4o-mini')?.input_per_million).toBe(10);
  });

  it("are another site's when the origin differs in host, port or name: refused, nothing changes (CSRF)", async () => {
    const e = await engine();
    const before = e.store.current().revision;
    for (const [origin, host, site] of [
      ['http://evil.example', '127.0.0.1:8181', 'cross-site'],
      ['http://127.0.0.1:1234', '127.0.0.1:8181', 'same-site'], // another local port: the LM Studio listener, a dev server
      ['http://localhost:8181', '127.0.0.1:8181', 'same-site'],
      ['http://127.0.0.1:8181', '127.0.0.1:8181', 'cross-site'], // an Origin a browser would not pair with this
      ['null', '127.0.0.1:8181', 'cross-site'],
    ] as const) {
      const res = await e.app.inject({ method: 'POST', url: '/_local/api/config', headers: fromPage(origin, host, site), payload: price });
      expect(res.statusCode, `${origin} -> ${host}`).toBe(403);
      expect(JSON.parse(res.body).error.code).toBe('origin_not_allowed');
    }
    // A form a page can post without a preflight: refused before it is read.
    const form = await e.app.inject({
      method: 'POST',
      url: '/_local/api/config',
      headers: { host: '127.0.0.1:8181', origin: 'http://evil.example', 'content-type': 'text/plain' },
      payload: JSON.stringify(price),
    });
    expect(form.statusCode).toBe(403);
    expect(e.store.current().revision).toBe(before);
  });

  it('do not let a DNS-rebinding page pass as the same origin, even with server.allowedHosts ["*"]', async () => {
    const e = await engine({ server: { allowedHosts: ['*'] } });
    const res = await e.app.inject({ method: 'POST', url: '/_local/api/config', headers: fromPage('http://rebind.evil.example:8181', 'rebind.evil.example:8181'), payload: price });
    expect(res.statusCode).toBe(403);
    expect(JSON.parse(res.body).error.code).toBe('origin_not_allowed');
    expect(e.store.current().prices.resolve('openai', 'gpt-4o-mini')?.input_per_million).toBe(0.15);
    // Without the wildcard, the rebinding page is refused by its Host already.
    const strict = await (
      await engine()
    ).app.inject({
      method: 'POST',
      url: '/_local/api/config',
      headers: fromPage('http://rebind.evil.example:8181', 'rebind.evil.example:8181'),
      payload: price,
    });
    expect(JSON.parse(strict.body).error.code).toBe('host_not_allowed');
  });

  it('are served under a listed name too (server.allowedHosts), as the page is then served under it', async () => {
    const e = await engine({ server: { allowedHosts: ['tollgate.internal'] } });
    const res = await e.app.inject({ method: 'POST', url: '/_local/api/config', headers: fromPage('http://tollgate.internal:8181', 'tollgate.internal:8181'), payload: price });
    expect(res.statusCode).toBe(200);
  });
});
