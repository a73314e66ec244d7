// DNS rebinding: a page on rebind.evil.example re-points its name at 127.0.0.1, and its scripts then reach
// the proxy with `Host: rebind.evil.example`. That used to change the OpenAI upstream to the attacker's
// server (the next call carried the key there) and read the traces. Every listener now answers only to its
// own names: loopback, the machine's names and addresses, the pod IP, and server.allowedHosts.

import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { freePort } from '../e2e/proxy-process.ts';
import { startRecordingServer, type RecordingServer } from '../fakes/recording-server.ts';
import { httpRequest, rawRequest, type RawResponse } from './raw-http.ts';
import { chat, OPENAI_KEY, postJson, startSecurityBed, type SecurityBed } from './security-bed.ts';

const POD_IP = '10.77.0.9';
let bed: SecurityBed;
let attacker: RecordingServer;
let healthPort: number;

beforeAll(async () => {
  attacker = await startRecordingServer((_call, res) => res.writeHead(200, { 'content-type': 'application/json' }).end('{}'));
  healthPort = await freePort();
  bed = await startSecurityBed({ env: { TOLLGATE_HEALTH_PORT: String(healthPort), TOLLGATE_POD_IP: POD_IP } });
});

afterAll(async () => {
  await bed?.close();
  await attacker?.close();
});

afterEach(() => {
  bed.upstream.calls.length = 0;
});

function errorCode(res: RawResponse): unknown {
  return (JSON.parse(res.body) as { error: { code: unknown } }).error.code;
}

const send = (host: string, method: string, target: string, headers: Record<string, string> = {}, body = '') =>
  rawRequest(bed.proxy.port, httpRequest(method, target, { host, ...headers }, body));

describe('a foreign Host gets 403 and changes nothing', () => {
  it('POST /_local/api/config cannot re-point an upstream, and the next call still carries the key to the real one', async () => {
    const before = await (await fetch(`${bed.proxy.url}/_local/api/config`)).json();
    const change = JSON.stringify({ upstreams: { beta: { baseUrl: attacker.url } } });
    const res = await send('rebind.evil.example', 'POST', '/_local/api/config', { 'content-type': 'application/json' }, change);
    expect(res.status).toBe(403);
    expect(errorCode(res)).toBe('host_not_allowed');
    expect(await (await fetch(`${bed.proxy.url}/_local/api/config`)).json()).toEqual(before);

    expect((await postJson(bed, '/proxy/beta/v1/chat/completions', chat)).status).toBe(200);
    expect(attacker.calls).toEqual([]);
    expect(bed.upstream.calls[0]!.headers.authorization).toBe(`Bearer ${OPENAI_KEY}`);
  });

  it.each([
    ['GET', '/_local/api/traces'],
    ['GET', '/_local/api/config'],
    ['GET', '/proxy/beta/v1/models'],
    ['POST', '/v1/chat/completions'],
    ['GET', '/healthz'],
  ])('%s %s', async (method, target) => {
    for (const host of ['rebind.evil.example', 'rebind.evil.example:8181', '127.0.0.1.nip.io', 'localhost.evil.example']) {
      const res = await send(host, method, target, { 'content-type': 'application/json' }, method === 'POST' ? JSON.stringify(chat) : '');
      expect(res.status, `${host} ${target}`).toBe(403);
      expect(errorCode(res)).toBe('host_not_allowed');
    }
    expect(bed.upstream.calls).toEqual([]);
  });
});

describe("the proxy's own names are served, and only those", () => {
  it.each(['127.0.0.1', 'localhost', '[::1]', POD_IP])('Host %s', async (name) => {
    expect((await send(`${name}:${bed.proxy.port}`, 'GET', '/_local/api/traces?limit=1')).status).toBe(200);
    // the same request under a name that merely resembles it
    const lookalike = name.startsWith('[') ? '[::2]' : `${name}.evil.example`;
    expect((await send(`${lookalike}:${bed.proxy.port}`, 'GET', '/_local/api/traces?limit=1')).status).toBe(403);
  });

  it('names listed in server.allowedHosts are served too (a central server behind its DNS name)', async () => {
    const central = await startSecurityBed({ configYaml: 'server: { allowedHosts: [tollgate.internal, "*.corp.example"] }' });
    try {
      const get = (host: string) => rawRequest(central.proxy.port, httpRequest('GET', '/_local/api/traces?limit=1', { host }));
      expect((await get('tollgate.internal:8181')).status).toBe(200);
      expect((await get('llm.corp.example')).status).toBe(200);
      expect((await get('corp.example.evil.example')).status).toBe(403);
    } finally {
      await central.close();
    }
  });
});

describe('the health-only listener, on every interface for kubelet probes', () => {
  const probe = (host: string, headers: Record<string, string> = {}) => rawRequest(healthPort, httpRequest('GET', '/healthz', { host, ...headers }));

  it('answers kubelet, which names the pod IP, and refuses a rebound name and a web page', async () => {
    const kubelet = await probe(`${POD_IP}:${healthPort}`);
    expect(kubelet.status).toBe(200);
    expect(JSON.parse(kubelet.body)).toEqual({ status: 'ok' });
    const rebound = await probe(`rebind.evil.example:${healthPort}`);
    expect(rebound.status).toBe(403);
    expect(errorCode(rebound)).toBe('host_not_allowed');
    const page = await probe(`127.0.0.1:${healthPort}`, { origin: 'http://evil.example' });
    expect(page.status).toBe(403);
    expect(errorCode(page)).toBe('origin_not_allowed');
  });
});
