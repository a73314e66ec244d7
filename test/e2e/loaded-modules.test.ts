// A proxy loads only what its config uses (ADR 0003): every module a real `tollgate proxy` process loads over a
// call, a scrape and a shutdown is recorded (test/support/module-load-recorder.ts) and checked against the
// packages its config does not call for. The OpenTelemetry SDK and its OTLP exporters load only when a
// collector is configured; a regression here costs every sidecar several MiB of private memory.

import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { freePort, startProxyProcess } from './proxy-process.ts';
import { startUpstreamBed, type UpstreamBed } from './upstream-bed.ts';

const RECORDER = resolve(import.meta.dirname, '../support/module-load-recorder.ts');

/** Loaded only with a `tracing.otlp` section or the OTEL_EXPORTER_OTLP_* variables. */
const OTLP_EXPORT = [
  '@opentelemetry/core',
  '@opentelemetry/exporter-trace-otlp-grpc',
  '@opentelemetry/exporter-trace-otlp-proto',
  '@opentelemetry/otlp-exporter-base',
  '@opentelemetry/otlp-grpc-exporter-base',
  '@opentelemetry/otlp-transformer',
  '@opentelemetry/resources',
  '@opentelemetry/sdk-metrics',
  '@opentelemetry/sdk-trace',
];

/** Loaded only by the config sections ADR 0003 names: audit sinks, server auth, cloud span stores, schema'd routes. */
const OTHER_OPTIONAL = ['@google-cloud/bigquery', '@google-cloud/firestore', '@duckdb/node-api', 'jose', 'google-auth-library', 'ajv'];

/** The packages among loaded module URLs (`@scope/name` or `name`), from the innermost node_modules of each. */
function packagesIn(urls: readonly string[]): Set<string> {
  const packages = new Set<string>();
  for (const url of urls) {
    const at = url.lastIndexOf('/node_modules/');
    if (at === -1) continue;
    const [first, second] = url.slice(at + '/node_modules/'.length).split('/');
    packages.add(first!.startsWith('@') ? `${first}/${second}` : first!);
  }
  return packages;
}

let bed: UpstreamBed;
let listDir: string;
beforeAll(async () => {
  bed = await startUpstreamBed();
  listDir = mkdtempSync(join(tmpdir(), 'tollgate-loaded-modules-'));
});
afterAll(async () => {
  await bed?.close();
  if (listDir) rmSync(listDir, { recursive: true, force: true });
});

/** Runs a proxy through one metered call and a scrape, stops it, and returns the URLs of every module it loaded. */
async function modulesLoaded(name: string, extraConfig = ''): Promise<string[]> {
  const list = join(listDir, `${name}.txt`);
  const proxy = await startProxyProcess({
    configYaml: bed.configYaml(extraConfig),
    env: { ...bed.env, TOLLGATE_LOADED_MODULES_FILE: list },
    nodeArgs: ['--import', RECORDER],
  });
  try {
    bed.openai.behave({ usage: { input: 10, output: 2 } });
    const res = await fetch(`${proxy.url}/proxy/beta/v1/chat/completions`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', traceparent: '00-5b8aa5a2d2c872e8321cf37308d69df2-051581bf3cb55c13-01' },
      body: JSON.stringify({ model: 'gpt-4o-mini', messages: [{ role: 'user', content: 'hi' }] }),
    });
    expect(res.status).toBe(200);
    await res.text();
    expect((await fetch(`${proxy.url}/metrics`)).status).toBe(200);
  } finally {
    expect(await proxy.stop()).toBe(0);
  }
  return readFileSync(list, 'utf8').split('\n').filter(Boolean);
}

describe('modules a proxy loads', () => {
  it('never loads the OTLP exporter, the OpenTelemetry SDK or other unconfigured stacks without their config', async () => {
    const urls = await modulesLoaded('no-tracing');
    const packages = packagesIn(urls);
    expect(packages).toContain('fastify'); // the recorder saw the process's dependencies
    expect([...packages].filter((p) => OTLP_EXPORT.includes(p) || OTHER_OPTIONAL.includes(p))).toEqual([]);
    expect(urls.filter((url) => url.endsWith('/sidecar/src/spans/otlp-export.ts'))).toEqual([]);
    // prom-client's default process metrics require the OpenTelemetry API (CommonJS) for exemplars; nothing more of it.
    expect([...packages].filter((p) => p.startsWith('@opentelemetry/'))).toEqual(['@opentelemetry/api']);
    // undici's Agent and request call only (ADR 0005): its index would bring fetch, WebSocket, the cache and the mocks.
    expect(packages).toContain('undici');
    expect(urls.filter((url) => /\/node_modules\/undici\/(index\.js|lib\/web\/|lib\/mock\/)/.test(url))).toEqual([]);
  });

  it('loads the OTLP exporter when tracing.otlp names a collector', async () => {
    const nobody = await freePort(); // export fails there, counted; what matters is what loaded
    const urls = await modulesLoaded('otlp', `tracing: { otlp: { endpoint: "http://127.0.0.1:${nobody}", timeoutMs: 1000 } }\n`);
    const packages = packagesIn(urls);
    expect(packages).toContain('@opentelemetry/sdk-trace');
    expect(packages).toContain('@opentelemetry/exporter-trace-otlp-proto');
    expect(urls.some((url) => url.endsWith('/sidecar/src/spans/otlp-export.ts'))).toBe(true);
  });
});
