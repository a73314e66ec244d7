// CPU the proxy spends per call: sends N non-streaming calls through `tollgate proxy` and divides the
// proxy process's user+system CPU time (from /proc) by N. Unlike latency percentiles on a shared 2-core
// machine, this barely moves with what the neighbours do, so it is the number to compare code changes by.
// Usage: node bench/proxy-cpu.ts [calls=5000] [--compiled] [--otlp=http://collector:4318] [--node-args="FLAGS"]
//   --otlp exports every span to that collector too (the export runs off the request path, in this process).
//   --node-args adds node flags after the image's (with --compiled), to price a flag before it goes in the Dockerfile.

import { readFileSync } from 'node:fs';
import { Pool } from 'undici';
import { startProxyProcess } from '../test/e2e/proxy-process.ts';
import { startFakeUpstream } from '../test/fakes/llm-upstream.ts';
import { compiledLikeTheImage } from './sidecar-process.ts';

const image = compiledLikeTheImage();

const calls = Number(process.argv.slice(2).find((a) => !a.startsWith('--')) ?? 5000);
const compiled = process.argv.includes('--compiled');
const otlp = process.argv.find((a) => a.startsWith('--otlp='))?.slice('--otlp='.length);
const extraNodeArgs = (process.argv.find((a) => a.startsWith('--node-args='))?.slice('--node-args='.length) ?? '').split(/\s+/).filter(Boolean);
if (extraNodeArgs.length > 0 && !compiled) throw new Error("--node-args goes with --compiled: it adds flags to the image's");
const TICKS_PER_SECOND = 100; // USER_HZ on Linux

function cpuSeconds(pid: number): number {
  const fields = readFileSync(`/proc/${pid}/stat`, 'utf8').split(') ')[1]!.split(' ');
  return (Number(fields[11]) + Number(fields[12])) / TICKS_PER_SECOND; // utime, stime
}

const upstream = await startFakeUpstream('openai', { expectApiKey: 'k' });
const proxy = await startProxyProcess({
  configYaml: `upstreams:\n  beta: { baseUrl: "${upstream.url}" }\nstorage: { kind: sqlite, path: spans.db }\n${otlp ? `tracing: { otlp: { endpoint: "${otlp}" } }\n` : ''}`,
  env: { ...(compiled ? image.env : {}), OPENAI_API_KEY: 'k', TOLLGATE_LOG_LEVEL: 'warn' },
  ...(compiled ? { cli: image.cli, nodeArgs: [...image.nodeArgs, ...extraNodeArgs] } : {}),
});
const pool = new Pool(proxy.url, { connections: 16 });
const body = JSON.stringify({ model: 'gpt-4o-mini', messages: [{ role: 'user', content: 'Say hello.' }] });
async function run(n: number): Promise<void> {
  let next = 0;
  await Promise.all(
    Array.from({ length: 16 }, async () => {
      while (next++ < n) {
        const res = await pool.request({ method: 'POST', path: '/proxy/beta/v1/chat/completions', headers: { 'content-type': 'application/json' }, body });
        await res.body.dump();
      }
    }),
  );
}
await run(2000); // warm-up: JIT, connections, the span worker
const before = cpuSeconds(proxy.child.pid!);
await run(calls);
const after = cpuSeconds(proxy.child.pid!);
console.log(JSON.stringify({ calls, proxy_cpu_us_per_call: Math.round(((after - before) / calls) * 1e6), run: compiled ? 'dist/' : 'sources' }));
await pool.close();
await proxy.stop();
await upstream.close();
