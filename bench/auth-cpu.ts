// CPU the central server's inbound authentication adds per call: the same N non-streaming calls through
// `tollgate proxy` without auth, and in server mode with an RS256 ID token (jose), an ES256 ID token, a Google
// ID token (google-auth-library) and a cached opaque access token. Proxy CPU from /proc, as in proxy-cpu.ts.
// Usage: node bench/auth-cpu.ts [calls=5000] [--compiled]

import { readFileSync } from 'node:fs';
import { Pool } from 'undici';
import { startProxyProcess, type ProxyProcess } from '../test/e2e/proxy-process.ts';
import { startFakeUpstream } from '../test/fakes/llm-upstream.ts';
import { startFakeTokeninfo } from '../test/fakes/google-tokeninfo.ts';
import { startOidcIssuer } from '../test/fakes/oidc-issuer.ts';
import { compiledLikeTheImage } from './sidecar-process.ts';

const calls = Number(process.argv.slice(2).find((a) => !a.startsWith('--')) ?? 5000);
const compiled = process.argv.includes('--compiled');
const TICKS_PER_SECOND = 100; // USER_HZ on Linux

function cpuSeconds(pid: number): number {
  const fields = readFileSync(`/proc/${pid}/stat`, 'utf8').split(') ')[1]!.split(' ');
  return (Number(fields[11]) + Number(fields[12])) / TICKS_PER_SECOND; // utime, stime
}

const upstream = await startFakeUpstream('openai', { expectApiKey: 'k' });
const [issuer, google, tokeninfo] = await Promise.all([startOidcIssuer(), startOidcIssuer(), startFakeTokeninfo()]);
const now = Math.floor(Date.now() / 1000);
const googleToken = await google.mint({ iss: 'https://accounts.google.com', aud: 'tollgate', sub: 'g', email: 'g@example.com', email_verified: true, iat: now, exp: now + 3600 });
const base = `upstreams:\n  beta: { baseUrl: "${upstream.url}" }\nstorage: { kind: sqlite, path: spans.db }\n`;
const auth = `
server:
  auth:
    oidc:
      - { issuer: "${issuer.url}", audiences: [tollgate] }
      - { issuer: https://accounts.google.com, audiences: [tollgate], certsUrl: "${google.googleCertsUrl}" }
    accessTokens: { tokeninfoUrl: "${tokeninfo.url}", cacheSeconds: 300, audiences: [test-cli.apps.googleusercontent.com] }
`;
const body = JSON.stringify({ model: 'gpt-4o-mini', messages: [{ role: 'user', content: 'Say hello.' }] });

async function measure(proxy: ProxyProcess, headers: Record<string, string>): Promise<number> {
  const pool = new Pool(proxy.url, { connections: 16 });
  const run = async (n: number) => {
    let next = 0;
    await Promise.all(
      Array.from({ length: 16 }, async () => {
        while (next++ < n) {
          const res = await pool.request({ method: 'POST', path: '/proxy/beta/v1/chat/completions', headers: { 'content-type': 'application/json', ...headers }, body });
          if (res.statusCode !== 200) throw new Error(`status ${res.statusCode}: ${await res.body.text()}`);
          await res.body.dump();
        }
      }),
    );
  };
  await run(1000); // warm-up: JIT, connections, keys fetched, the span worker
  const before = cpuSeconds(proxy.child.pid!);
  await run(calls);
  const after = cpuSeconds(proxy.child.pid!);
  await pool.close();
  return Math.round(((after - before) / calls) * 1e6);
}

const image = compiledLikeTheImage();
const run = compiled ? { cli: image.cli, nodeArgs: image.nodeArgs } : {};
const env = { ...(compiled ? image.env : {}), OPENAI_API_KEY: 'k', TOLLGATE_LOG_LEVEL: 'warn' };

const plain = await startProxyProcess({ configYaml: base, env, ...run });
const results: Record<string, number> = { no_auth: await measure(plain, {}) };
await plain.stop();

const server = await startProxyProcess({
  configYaml: base + auth,
  args: ['--mode', 'server', '--host', '127.0.0.1'],
  env,
  ready: async (url) => (await fetch(`${url}/healthz`)).status === 401,
  ...run,
});
results.id_token_rs256_jose = await measure(server, { authorization: `Bearer ${await issuer.idToken('a@example.com', 'tollgate')}` });
results.id_token_es256_jose = await measure(server, { authorization: `Bearer ${await issuer.idToken('a@example.com', 'tollgate', {}, { alg: 'ES256' })}` });
results.id_token_google_library = await measure(server, { authorization: `Bearer ${googleToken}` });
results.access_token_cached = await measure(server, { authorization: `Bearer ${tokeninfo.issue('a@example.com')}` });
await server.stop();

console.log(JSON.stringify({ calls, proxy_cpu_us_per_call: results, run: compiled ? 'dist/' : 'sources' }));
await Promise.all([upstream.close(), issuer.close(), google.close(), tokeninfo.close()]);
