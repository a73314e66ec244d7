// In server mode an opaque access token no cache knows costs one lookup at the tokeninfo endpoint. The
// refusal cache is per token, so made-up tokens, each new, cost one lookup each: 200 of them were 200
// lookups, as fast as they came, until Google throttled the project and every real caller's new token was a
// 503 too. Lookups are now bounded (a token bucket and a bound in flight, server.auth.accessTokens); past the
// bounds a request is refused with 503 token_lookups_throttled and Retry-After, counted and logged
// (rate-limited), while a token already verified keeps working without a lookup.

import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startFakeTokeninfo, type FakeTokeninfo } from '../fakes/google-tokeninfo.ts';
import { startRecordingServer, type RecordingServer } from '../fakes/recording-server.ts';
import { freePort, startProxyProcess, type ProxyProcess } from '../e2e/proxy-process.ts';
import { sampleValue } from '../support/prometheus-text.ts';
import { waitFor } from '../support/wait-for.ts';
import { chat, chatCompletion } from './security-bed.ts';

const PER_SECOND = 1;
const BURST = 5;
const MADE_UP = 200;

let tokeninfo: FakeTokeninfo;
let upstream: RecordingServer;
let server: ProxyProcess;
let healthPort: number;

beforeAll(async () => {
  tokeninfo = await startFakeTokeninfo();
  upstream = await startRecordingServer((_call, res) => {
    res.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify(chatCompletion()));
  });
  healthPort = await freePort();
  server = await startProxyProcess({
    args: ['--mode', 'server', '--host', '127.0.0.1'],
    env: { OPENAI_API_KEY: 'sk-proxy-own-openai-key', TOLLGATE_HEALTH_PORT: String(healthPort) },
    configYaml: `
upstreams:
  beta: { baseUrl: "${upstream.url}" }
storage: { kind: sqlite, path: spans.db }
server:
  auth:
    health: open
    accessTokens:
      tokeninfoUrl: ${tokeninfo.url}
      audiences: [test-cli.apps.googleusercontent.com]
      lookupsPerSecond: ${PER_SECOND}
      lookupBurst: ${BURST}
      concurrentLookups: 2
`,
  });
});

afterAll(async () => {
  await server?.stop();
  await Promise.all([tokeninfo?.close(), upstream?.close()]);
});

function call(token: string): Promise<Response> {
  return fetch(`${server.url}/proxy/beta/v1/chat/completions`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', authorization: `Bearer ${token}` },
    body: JSON.stringify(chat),
  });
}

const lookupsOf = (token: string) => tokeninfo.lookups().filter((lookup) => lookup.headers.authorization === `Bearer ${token}`).length;

describe('a flood of made-up access tokens', () => {
  it('costs lookups within the bounds, is refused with 503 and Retry-After past them, and a verified token keeps working', async () => {
    const good = tokeninfo.issue('alice@example.com');
    expect((await call(good)).status).toBe(200);
    expect(lookupsOf(good)).toBe(1);

    const before = tokeninfo.lookups().length;
    const started = Date.now();
    const flood = Array.from({ length: MADE_UP }, (_, i) => call(`ya29.made-up-${i}`));
    const meanwhile = Array.from({ length: 20 }, () => call(good));
    const [refused, accepted] = await Promise.all([Promise.all(flood), Promise.all(meanwhile)]);
    const seconds = (Date.now() - started) / 1000;

    // The bucket holds at most BURST lookups, and gains PER_SECOND a second while the flood lasts.
    const lookups = tokeninfo.lookups().length - before;
    expect(lookups).toBeLessThanOrEqual(BURST + Math.ceil(seconds * PER_SECOND));
    expect(lookups).toBeGreaterThanOrEqual(1);

    // Each made-up token was either looked up and refused, or not looked up and throttled.
    const statuses = refused.map((res) => res.status);
    const throttled = refused.filter((res) => res.status === 503);
    expect(statuses.filter((status) => status === 401)).toHaveLength(lookups);
    expect(throttled).toHaveLength(MADE_UP - lookups);
    for (const res of throttled) {
      expect(Number(res.headers.get('retry-after'))).toBeGreaterThanOrEqual(1);
      expect(((await res.json()) as { error: { code: string } }).error.code).toBe('token_lookups_throttled');
    }

    // The verified token was answered from the cache all along.
    expect(accepted.map((res) => res.status)).toEqual(Array.from({ length: 20 }, () => 200));
    expect(lookupsOf(good)).toBe(1);

    // Counted in a metric of its own (and among the inbound refusals).
    const scrape = await (await fetch(`http://127.0.0.1:${healthPort}/metrics`)).text();
    expect(sampleValue(scrape, 'tollgate_tokeninfo_lookups_throttled_total')).toBe(throttled.length);
    expect(sampleValue(scrape, 'tollgate_inbound_auth_failures_total')).toBe(MADE_UP);

    // Logged at most 20 lines a minute; the rest are counted by reason in the summary line, written at the
    // latest when the server stops.
    expect(await server.stop()).toBe(0);
    await waitFor('the last log line', () => server.logs.some((line) => line.msg === 'tollgate proxy stopped'));
    const lines = server.logs.filter((line) => line.msg === 'all auth strategies failed');
    expect(lines.length).toBeLessThanOrEqual(20);
    const summary = server.logs.find((line) => String(line.msg).startsWith('all auth strategies failed (')) as { reasons: Record<string, number> } | undefined;
    const loggedThrottled = lines.filter((line) => line.reason === 'token_lookups_throttled').length;
    expect(loggedThrottled + (summary?.reasons.token_lookups_throttled ?? 0)).toBe(throttled.length);
  });
});
