// `tollgate selftest`, the chart's hooks and `helm test` (ADR 0812), against a real `tollgate proxy` standing in
// for an injected sidecar: its config file does what the operator's snapshot does in a pod (the beta route to
// the self-test's loopback provider, the price, the key). Each broken stage is named, with what was seen there.
// The kind suite runs the same command through Helm in a real pod.

import { spawn } from 'node:child_process';
import { writeFileSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { freePort, startProxyProcess, type ProxyProcess } from './proxy-process.ts';

const CLI = resolve(import.meta.dirname, '../../cmd/tollgate.ts');
const KEY = 'selftest-key-e2e';

function selftest(args: string[], env: NodeJS.ProcessEnv = {}): Promise<{ code: number | null; stdout: string; stderr: string }> {
  return new Promise((done) => {
    const child = spawn(process.execPath, [CLI, 'selftest', ...args], { env: { PATH: process.env.PATH, ...env } });
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (c: Buffer) => (stdout += c.toString()));
    child.stderr.on('data', (c: Buffer) => (stderr += c.toString()));
    child.on('close', (code) => done({ code, stdout, stderr }));
  });
}

describe('tollgate selftest against a running proxy', () => {
  let proxy: ProxyProcess;
  let upstreamPort: number;
  const call = (extra: string[], key = KEY) =>
    selftest(['call', `--sidecar-port=${proxy.port}`, `--upstream-port=${upstreamPort}`, '--proxy-config=tollgate-system/tollgate-selftest', '--timeout=3', ...extra], {
      SELFTEST_PROVIDER_KEY: key,
    });

  beforeAll(async () => {
    upstreamPort = await freePort();
    proxy = await startProxyProcess({
      configYaml: `upstreams:\n  beta: { baseUrl: "http://127.0.0.1:${upstreamPort}" }\npricing:\n  models:\n    - { provider: openai, model: gpt-4o-mini, input_per_million: 4.2, output_per_million: 0 }\ncredentials:\n  openaiApiKeyFile: key\n`,
    });
    writeFileSync(join(proxy.dir, 'key'), KEY);
  });

  afterAll(async () => {
    await proxy?.stop();
  });

  it('passes every stage of a metered call, and says what it saw at each', async () => {
    const result = await call(['--input-per-million=4.2']);
    expect(result.stderr).toBe('');
    expect(result.code).toBe(0);
    const lines = result.stdout.trim().split('\n');
    expect(lines.map((l) => l.split(',')[0])).toEqual(['injection: ok', 'config: ok', 'credentials: ok', 'metering: ok']);
    expect(lines[3]).toMatch(/^metering: ok, span [0-9a-f]{16}: 1000 input tokens of gpt-4o-mini for helm-test, \$0\.0042$/);
  });

  it('names the config stage when the sidecar runs another price than the ProxyConfig says', async () => {
    const result = await call(['--input-per-million=5']);
    expect(result.code).toBe(1);
    expect(result.stdout).toContain('config: FAILED, the sidecar did not get ProxyConfig tollgate-system/tollgate-selftest from the operator within 3 s');
    expect(result.stdout).toContain(`upstreams.beta.baseUrl "http://127.0.0.1:${upstreamPort}", gpt-4o-mini input price 4.2`);
  });

  it('names the credentials stage when the provider gets another key than the Secret holds', async () => {
    const result = await call(['--input-per-million=4.2'], 'another-key');
    expect(result.code).toBe(1);
    expect(result.stdout).toContain("credentials: FAILED, the provider did not get the key of ProxyConfig tollgate-system/tollgate-selftest's Secret (it got another key)");
  });

  it('names the injection stage when no sidecar answers', async () => {
    const result = await selftest(['injection', `--sidecar-port=${await freePort()}`, '--timeout=1']);
    expect(result.code).toBe(1);
    expect(result.stdout).toMatch(/^injection: FAILED, no Tollgate sidecar answers on http:\/\/127\.0\.0\.1:\d+ after 1 s: the webhook did not inject this pod/);
  });

  it('refuses a call check without what it needs, naming it', async () => {
    const result = await selftest(['call', '--proxy-config=tollgate-system/x', '--input-per-million=1'], { SELFTEST_PROVIDER_KEY: KEY });
    expect(result.code).toBe(2);
    expect(result.stderr).toContain('tollgate selftest: --upstream-port is required');
  });
});
