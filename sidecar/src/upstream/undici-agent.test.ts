import { createServer, type Server } from 'node:http';
import { createRequire } from 'node:module';
import type { AddressInfo } from 'node:net';
import * as undici from 'undici';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Agent, request, undiciErrors } from './undici-agent.ts';

let server: Server;
let origin: string;
beforeAll(async () => {
  server = createServer((req, res) => {
    if (req.url === '/slow') return; // never answers: the headers timeout fires
    res.setHeader('x-seen-method', req.method ?? '');
    req.pipe(res);
  });
  await new Promise<void>((done) => server.listen(0, '127.0.0.1', done));
  origin = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
});
afterAll(async () => {
  server.closeAllConnections();
  await new Promise((done) => server.close(done));
});

describe("undici's parts loaded without its index", () => {
  it('are the objects the package exports, so an undici upgrade that moves a file fails here', () => {
    expect(Agent).toBe(undici.Agent);
    expect(undiciErrors).toBe(undici.errors);
    expect(undiciErrors.HeadersTimeoutError).toBe(undici.errors.HeadersTimeoutError);
    // the function the index copies onto every dispatcher as `request`, which `request()` calls
    const requestFile: unknown = createRequire(import.meta.url)('undici/lib/api/api-request.js');
    expect(requestFile).toBe((undici.Dispatcher.prototype as unknown as { request: unknown }).request);
  });

  it('send a request through an Agent and stream its answer back', async () => {
    const agent = new Agent({ connections: 1 });
    try {
      const res = await request(agent, { origin, path: '/echo', method: 'POST', body: 'hello upstream' });
      expect(res.statusCode).toBe(200);
      expect(res.headers['x-seen-method']).toBe('POST');
      expect(await res.body.text()).toBe('hello upstream');
    } finally {
      await agent.close();
    }
  });

  it("reject with undici's own error classes, which the proxy maps to its error codes", async () => {
    const agent = new Agent({ connections: 1 });
    try {
      const error = await request(agent, { origin, path: '/slow', method: 'GET', headersTimeout: 100 }).catch((e: unknown) => e);
      expect(error).toBeInstanceOf(undiciErrors.HeadersTimeoutError);
    } finally {
      await agent.close();
    }
  });
});
