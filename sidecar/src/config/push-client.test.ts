// The push client against a gRPC server speaking proto/config_push.proto over real TLS. The server here
// plays the operator's wire role only (no Kubernetes); test/cluster/push.test.ts runs the real operator.

import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { createServer, type Socket } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import * as grpc from '@grpc/grpc-js';
import pino from 'pino';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { createCertificateAuthority, issueCertificate } from '../../../contracts/pki.ts';
import { ConfigStore } from './config-store.ts';
import { type PushClientOptions, startPushClient } from './push-client.ts';
import { BypassReportQueue } from '../provenance/bypass-reports.ts';
import { type AliasHealthReportMessage, configPushService, type OperatorMessage, type SidecarMessage } from '../../../contracts/push-protocol.ts';
import { waitFor } from '../../../test/support/wait-for.ts';

type Call = grpc.ServerDuplexStream<SidecarMessage, OperatorMessage>;

const priceJson = (input: number) => JSON.stringify({ pricing: { models: [{ provider: 'openai', model: 'gpt-4o', input_per_million: input, output_per_million: 1 }] } });

describe('startPushClient', () => {
  let dir: string;
  let server: grpc.Server;
  let port: number;
  let caFile: string;
  const calls: { call: Call; token: string; received: SidecarMessage[] }[] = [];

  beforeEach(async () => {
    dir = mkdtempSync(join(tmpdir(), 'push-client-'));
    const ca = await createCertificateAuthority({ commonName: 'test-ca' });
    const leaf = await issueCertificate(ca, { commonName: 'operator', ipAddresses: ['127.0.0.1'], usage: 'server' });
    caFile = join(dir, 'ca.crt');
    writeFileSync(caFile, ca.certPem);
    calls.length = 0;
    server = new grpc.Server();
    server.addService(configPushService().service, {
      stream: (call: Call) => {
        const entry = { call, token: String(call.metadata.get('authorization')[0] ?? ''), received: [] as SidecarMessage[] };
        calls.push(entry);
        call.on('data', (m: SidecarMessage) => entry.received.push(m));
        call.on('error', () => undefined);
      },
    });
    port = await new Promise<number>((resolve, reject) =>
      server.bindAsync('127.0.0.1:0', grpc.ServerCredentials.createSsl(null, [{ private_key: Buffer.from(leaf.keyPem), cert_chain: Buffer.from(leaf.certPem) }]), (e, p) =>
        e ? reject(e) : resolve(p),
      ),
    );
  });

  afterEach(async () => {
    server.forceShutdown();
    rmSync(dir, { recursive: true, force: true });
  });

  const start = (store: ConfigStore, extra: Partial<PushClientOptions> = {}) => {
    const tokenFile = join(dir, 'token');
    writeFileSync(tokenFile, 'token-1\n');
    return {
      tokenFile,
      client: startPushClient({
        address: `127.0.0.1:${port}`,
        caFile,
        tokenFile,
        stateDir: join(dir, 'state'),
        store,
        logger: pino({ level: 'silent' }),
        podName: 'p',
        podNamespace: 'ns',
        reconnect: { baseMs: 20, maxMs: 100 },
        ...extra,
      }),
    };
  };

  it('says Hello with its bearer token, acks a good snapshot and nacks a bad one with the field, keeping the good one', async () => {
    const store = new ConfigStore();
    const { client } = start(store);
    const first = await waitFor('the first stream', () => calls[0], 10_000);
    expect(first.token).toBe('Bearer token-1');
    await waitFor('the hello', () => first.received[0], 10_000);
    expect(first.received[0]!.hello).toMatchObject({ podName: 'p', podNamespace: 'ns', currentVersion: '' });

    first.call.write({ snapshot: { version: 'v1', configJson: priceJson(1.5), credentials: { openaiApiKey: Buffer.from('sk') }, source: 'ns/default' } });
    await waitFor('the ack', () => first.received.find((m) => m.ack), 10_000);
    expect(first.received.find((m) => m.ack)!.ack).toEqual({ version: 'v1' });
    expect(store.get().pricing.models[0]?.input_per_million).toBe(1.5);

    first.call.write({ snapshot: { version: 'v2', configJson: priceJson(-3), credentials: {}, source: 'ns/default' } });
    const nack = await waitFor('the nack', () => first.received.find((m) => m.nack)?.nack, 10_000);
    expect(nack.version).toBe('v2');
    expect(nack.reason).toMatch(/^pricing\.models\[0\]\.input_per_million/);
    expect(store.get().pricing.models[0]?.input_per_million).toBe(1.5);
    expect(client.status()).toMatchObject({ version: 'v1', connected: true, lastRejected: { version: 'v2' } });
    await client.stop();
  });

  it('reconnects after the stream fails, with the token as it is on disk then, and reports what it runs', async () => {
    const store = new ConfigStore();
    const { client, tokenFile } = start(store);
    const first = await waitFor('the first stream', () => calls[0], 10_000);
    first.call.write({ snapshot: { version: 'v1', configJson: priceJson(2), credentials: {}, source: 'ns/default' } });
    await waitFor('the ack', () => first.received.find((m) => m.ack), 10_000);

    writeFileSync(tokenFile, 'token-2'); // the kubelet rotated it
    first.call.emit('error', { code: grpc.status.UNAVAILABLE, details: 'operator going away' });
    const second = await waitFor('the second stream', () => calls[1], 10_000);
    expect(second.token).toBe('Bearer token-2');
    const hello = await waitFor('the hello on the second stream', () => second.received[0]?.hello, 10_000);
    expect(hello.currentVersion).toBe('v1');
    expect(client.status().connects).toBe(2);
    await client.stop();
  });

  describe('alias health reports (ADR 0724)', () => {
    const healthy: AliasHealthReportMessage = {
      aliases: [{ alias: 'claude-sonnet', targets: [{ route: 'gamma-direct', model: 'claude-sonnet-4-5', state: 'healthy' }], degradedSinceUnixMs: 0 }],
    };
    const reportsOn = (stream: { received: SidecarMessage[] }) => stream.received.filter((m) => m.aliasHealthReport).map((m) => m.aliasHealthReport!);

    it('sends none before the operator sent a snapshot, then one, and another only when it changed', async () => {
      let looked = 0;
      let report = healthy;
      const { client } = start(new ConfigStore(), {
        aliasHealthReport: () => {
          looked += 1;
          return report;
        },
        aliasReportIntervalMs: 10,
        aliasReportRefreshMs: 3_600_000,
      });
      const first = await waitFor('the first stream', () => calls[0], 10_000);
      await waitFor('looked at before any snapshot', () => looked >= 5, 10_000);
      expect(reportsOn(first)).toEqual([]);

      first.call.write({ snapshot: { version: 'v1', configJson: '{}', credentials: {}, source: 'ns/default' } });
      await waitFor('the first report', () => reportsOn(first).length === 1, 10_000);
      const before = looked;
      await waitFor('looked at again, unchanged', () => looked >= before + 5, 10_000);
      expect(reportsOn(first)).toHaveLength(1);

      report = { aliases: [{ ...healthy.aliases[0]!, targets: [{ ...healthy.aliases[0]!.targets[0]!, state: 'circuit_open' }], degradedSinceUnixMs: 1_764_410_400_000 }] };
      await waitFor('the changed report', () => reportsOn(first).length === 2, 10_000);
      // int64 arrives as a decimal string
      expect(reportsOn(first)[1]).toEqual({ aliases: [{ ...report.aliases[0]!, degradedSinceUnixMs: '1764410400000' }] });
      await client.stop();
    });

    it('sends an unchanged report again once the refresh interval has passed, and nothing while the config has no alias', async () => {
      let report: AliasHealthReportMessage | undefined;
      const { client } = start(new ConfigStore(), { aliasHealthReport: () => report, aliasReportIntervalMs: 10, aliasReportRefreshMs: 50 });
      const first = await waitFor('the first stream', () => calls[0], 10_000);
      first.call.write({ snapshot: { version: 'v1', configJson: '{}', credentials: {}, source: 'ns/default' } });
      await waitFor('the ack', () => first.received.find((m) => m.ack), 10_000);
      report = healthy;
      await waitFor('the same report three times', () => reportsOn(first).length >= 3, 10_000);
      expect(new Set(reportsOn(first).map((r) => JSON.stringify(r))).size).toBe(1);
      await client.stop();
    });
  });

  it('sends bypass entries only on a stream the operator registered, 64 a report, and keeps them while it is away (ADR 1605)', async () => {
    const queue = new BypassReportQueue(pino({ level: 'silent' }));
    queue.open();
    for (let pid = 1; pid <= 70; pid++) {
      queue.add({ provider: 'openai', pid, binary: '/usr/bin/curl', container: 'app', destination: '162.159.140.245:443', connects: 1, firstSeenUnixMs: 1, lastSeenUnixMs: 2 });
    }
    const { client } = start(new ConfigStore(), { bypassReports: queue, bypassReportIntervalMs: 10 });
    const first = await waitFor('the first stream', () => calls[0], 10_000);
    await waitFor('the Hello', () => first.received.find((m) => m.hello), 10_000);
    // no snapshot yet: the operator has not registered the stream, the entries stay queued
    first.call.emit('error', { code: grpc.status.UNAVAILABLE, details: 'operator going away' });
    const second = await waitFor('the second stream', () => calls[1], 10_000);
    expect(queue.size).toBe(70);
    expect(first.received.filter((m) => m.bypassReport)).toEqual([]);

    second.call.write({ snapshot: { version: 'v1', configJson: '{}', credentials: {}, source: 'ns/default' } });
    const reports = await waitFor('both reports', () => {
      const sent = second.received.filter((m) => m.bypassReport).map((m) => m.bypassReport!);
      return sent.length === 2 && sent;
    });
    expect(reports.map((r) => r.entries.length)).toEqual([64, 6]);
    // int64 arrives as a decimal string
    expect(reports[1]!.entries[5]).toEqual({
      provider: 'openai',
      pid: 70,
      binary: '/usr/bin/curl',
      container: 'app',
      destination: '162.159.140.245:443',
      connects: 1,
      firstSeenUnixMs: '1',
      lastSeenUnixMs: '2',
    });
    expect(queue.size).toBe(0);
    await client.stop();
  });

  it('gives up a connect that hangs and dials again, so an address nobody answers cannot stall config for minutes', async () => {
    // Accepts TCP and never answers the TLS handshake: the channel stays connecting, with no error to retry on.
    const sockets: Socket[] = [];
    const silent = createServer((socket) => sockets.push(socket));
    await new Promise<void>((resolve) => silent.listen(0, '127.0.0.1', resolve));
    const tokenFile = join(dir, 'token');
    writeFileSync(tokenFile, 'token-1');
    const client = startPushClient({
      address: `127.0.0.1:${(silent.address() as { port: number }).port}`,
      caFile,
      tokenFile,
      stateDir: join(dir, 'state'),
      store: new ConfigStore(),
      logger: pino({ level: 'silent' }),
      reconnect: { baseMs: 20, maxMs: 100 },
      connectTimeoutMs: 300,
    });
    try {
      await waitFor('a second connection', () => sockets.length >= 2, 10_000);
      expect(client.status()).toMatchObject({ connected: false, lastError: 'cannot connect to the operator within 300 ms' });
    } finally {
      await client.stop();
      for (const socket of sockets) socket.destroy();
      silent.close();
    }
  });
});
