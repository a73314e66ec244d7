// Which endpoints count as a provider's, and what a connect to one from another process produces: the count per
// provider, one log line per process per minute, nothing for the sidecar's own connects.

import pino from 'pino';
import { Writable } from 'node:stream';
import { describe, expect, it } from 'vitest';
import { ConfigStore } from '../config/config-store.ts';
import { BypassDetector } from './bypass-detector.ts';
import { BypassReportQueue } from './bypass-reports.ts';
import { ProviderEndpoints, providerHosts } from './provider-endpoints.ts';
import type { TcpConnect } from './tcp-connect-event.ts';

function connect(over: Partial<TcpConnect>): TcpConnect {
  return {
    atMs: 0,
    podNamespace: 'team-a',
    podName: 'web-1',
    containerName: 'app',
    pid: 4242,
    binary: '/usr/bin/curl',
    arguments: '',
    parents: [],
    saddr: '10.0.0.5',
    daddr: '10.0.0.7',
    sport: 40_000,
    dport: 8080,
    ...over,
  };
}

function captured(): { logger: pino.Logger; lines: Record<string, unknown>[] } {
  const lines: Record<string, unknown>[] = [];
  const stream = new Writable({
    write(chunk: Buffer, _encoding, done) {
      lines.push(JSON.parse(chunk.toString()) as Record<string, unknown>);
      done();
    },
  });
  return { logger: pino({ level: 'info' }, stream), lines };
}

describe('provider endpoints', () => {
  it("are every route's upstream as the sidecar calls it, the extra hosts, and not a local runtime's default", () => {
    const config = new ConfigStore({ upstreams: { beta: { baseUrl: 'http://10.0.0.7:8080/openai' } } }).get();
    const hosts = providerHosts(config, ['llm.internal:8443'], {});
    expect(hosts).toEqual(
      expect.arrayContaining([
        { host: '10.0.0.7', port: 8080, provider: 'openai' },
        { host: 'api.anthropic.com', port: 443, provider: 'anthropic' },
        { host: 'bedrock-runtime.us-east-1.amazonaws.com', port: 443, provider: 'anthropic' },
        { host: 'us-central1-aiplatform.googleapis.com', port: 443, provider: 'google' },
        { host: 'llm.internal', port: 8443, provider: 'other' },
      ]),
    );
    expect(hosts.find((h) => h.host === 'api.openai.com')).toBeUndefined();
    expect(hosts.find((h) => h.port === 11434)).toBeUndefined();
  });

  it('leave out the local runtime wherever it runs: it bills nothing, so a straight connection loses no charge', () => {
    const config = new ConfigStore({ upstreams: { local: { baseUrl: 'http://10.0.0.9:11434' } } }).get();
    expect(providerHosts(config, [], {}).find((h) => h.host === '10.0.0.9')).toBeUndefined();
  });

  it('resolve an IP address as itself', async () => {
    const endpoints = new ProviderEndpoints();
    await endpoints.refresh([{ host: '10.0.0.7', port: 8080, provider: 'openai' }]);
    expect(endpoints.providerAt('10.0.0.7', 8080)).toBe('openai');
    expect(endpoints.providerAt('10.0.0.7', 443)).toBeUndefined();
  });
});

describe('bypass detector', () => {
  it('counts each connect to a provider from another container, logs once a minute per process, ignores the sidecar', async () => {
    const endpoints = new ProviderEndpoints();
    await endpoints.refresh([{ host: '10.0.0.7', port: 8080, provider: 'openai' }]);
    const { logger, lines } = captured();
    let now = 1_000_000;
    const counts = new Map<string, number>();
    const detector = new BypassDetector({ endpoints, sidecarContainer: 'tollgate-proxy', ownPid: 1, logger, counts, now: () => now });

    expect(detector.onConnect(connect({ containerName: 'tollgate-proxy', pid: 77 }))).toBe(false);
    expect(detector.onConnect(connect({ dport: 443 }))).toBe(false);
    expect(detector.onConnect(connect({}))).toBe(true);
    now += 59_999;
    expect(detector.onConnect(connect({ sport: 40_001 }))).toBe(true);
    expect(detector.onConnect(connect({ pid: 5000, binary: '/usr/bin/python3' }))).toBe(true);
    now += 1;
    expect(detector.onConnect(connect({ sport: 40_002 }))).toBe(true);

    expect(counts).toEqual(new Map([['openai', 4]]));
    const bypassLines = lines.filter((l) => l.msg === 'provider call bypassed the sidecar');
    // curl at 0 s, python at 59.999 s, curl again at 60 s with the one connect its line did not show
    expect(bypassLines.map((l) => [l.pid, l.binary, l.suppressed])).toEqual([
      [4242, '/usr/bin/curl', 0],
      [5000, '/usr/bin/python3', 0],
      [4242, '/usr/bin/curl', 1],
    ]);
    expect(bypassLines[0]).toMatchObject({ provider: 'openai', container: 'app', pod: 'team-a/web-1', destination: '10.0.0.7:8080' });
  });

  it('queues an entry for the operator with each log line: the connects it stands for and when they were seen (ADR 1605)', async () => {
    const endpoints = new ProviderEndpoints();
    await endpoints.refresh([
      { host: '10.0.0.7', port: 8080, provider: 'openai' },
      { host: '2001:db8::7', port: 443, provider: 'anthropic' },
    ]);
    let now = 1_764_410_400_000;
    const reports = new BypassReportQueue(captured().logger);
    reports.open();
    const detector = new BypassDetector({ endpoints, sidecarContainer: 'tollgate-proxy', ownPid: 1, logger: captured().logger, counts: new Map(), reports, now: () => now });

    detector.onConnect(connect({}));
    now += 10_000;
    detector.onConnect(connect({ sport: 40_001 }));
    now += 20_000;
    detector.onConnect(connect({ sport: 40_002 }));
    detector.onConnect(connect({ containerName: 'tollgate-proxy', pid: 77 }));
    now += 30_000;
    detector.onConnect(connect({ sport: 40_003 }));
    detector.onConnect(connect({ pid: 5000, binary: '/usr/bin/python3', containerName: null, daddr: '2001:db8::7', dport: 443 }));

    expect(reports.take(64)).toEqual([
      // the first connect of curl
      {
        provider: 'openai',
        pid: 4242,
        binary: '/usr/bin/curl',
        container: 'app',
        destination: '10.0.0.7:8080',
        connects: 1,
        firstSeenUnixMs: 1_764_410_400_000,
        lastSeenUnixMs: 1_764_410_400_000,
      },
      // a minute later: this connect and the two held back since 10 s
      {
        provider: 'openai',
        pid: 4242,
        binary: '/usr/bin/curl',
        container: 'app',
        destination: '10.0.0.7:8080',
        connects: 3,
        firstSeenUnixMs: 1_764_410_410_000,
        lastSeenUnixMs: 1_764_410_460_000,
      },
      {
        provider: 'anthropic',
        pid: 5000,
        binary: '/usr/bin/python3',
        container: '',
        destination: '[2001:db8::7]:443',
        connects: 1,
        firstSeenUnixMs: 1_764_410_460_000,
        lastSeenUnixMs: 1_764_410_460_000,
      },
    ]);
  });
});
