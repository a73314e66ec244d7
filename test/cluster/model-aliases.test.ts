// Model aliases in Kubernetes (issue 36, ADR 0724), on a real API server with the chart's operator RBAC: the
// `tollgate operator` command (with --alias-degraded-after=2, so "a few minutes" is two seconds here) renders a
// ProxyConfig's spec.models into the config it pushes; a real `tollgate proxy` process in a pod's place runs it and
// falls back from a failing upstream to a working one; its alias health report becomes the ProxyConfig's
// status.models, and the operator records AliasDegraded while the alias is served below its first priority and
// AliasRecovered when it is not. A bad alias is Ready=False naming the field; a sidecar of the previous config
// revision gets the rest of the config without the aliases.

import { mkdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import * as grpc from '@grpc/grpc-js';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { AUTHORIZATION, configPushService, type OperatorMessage, type SidecarMessage, type SnapshotMessage } from '../../contracts/push-protocol.ts';
import type { ModelAliasStatus, ProxyConfigSpec } from '../../crds/index.ts';
import { startControlPlane, type ControlPlane } from '../control-plane/control-plane.ts';
import { freePort } from '../control-plane/free-port.ts';
import { startManagedProcess, type ManagedProcess } from '../control-plane/managed-process.ts';
import { type FakeUpstream, startFakeUpstream } from '../fakes/llm-upstream.ts';
import { findSpan } from '../support/spans.ts';
import {
  CLI,
  ensureNamespace,
  eventsFor,
  eventually,
  getProxyConfig,
  installOperatorPrerequisites,
  KubeApi,
  operatorCaFile,
  podWithToken,
  putProxyConfig,
  putSecret,
  readyCondition,
  startOperatorProcess,
  tempDir,
  type OperatorProcess,
} from './operator-fixtures.ts';

const NS = 'shop';
const PRIMARY_KEY = 'sk-ant-primary-0123456789';
const BACKUP_KEY = 'sk-ant-backup-0123456789';

/** claude-sonnet: the Anthropic API (gamma-direct) first, then a route of the ProxyConfig's own at priority 1. */
function spec(primary: FakeUpstream, backup: FakeUpstream, openMs: number): ProxyConfigSpec {
  return {
    upstreams: { 'gamma-direct': { baseUrl: primary.url } },
    credentials: { anthropicApiKey: { secretName: 'llm-keys', key: 'primary' } },
    routes: [
      {
        name: 'claude-backup',
        format: 'anthropic',
        baseUrl: backup.url,
        credential: { kind: 'api-key', header: 'x-api-key', apiKey: { secretName: 'llm-keys', key: 'backup' } },
        headers: { 'anthropic-version': '2023-06-01' },
      },
    ],
    // Two failures in a row open gamma-direct's breaker: the status then shows it circuit_open.
    breaker: { consecutiveFailures: 2, failureRatio: 1, minimumRequests: 1000, windowMs: 60_000, openMs },
    models: {
      'claude-sonnet': {
        targets: [
          { route: 'gamma-direct', model: 'claude-sonnet-4-5' },
          { route: 'claude-backup', model: 'claude-sonnet-4-5-20250929', priority: 1 },
        ],
      },
    },
  };
}

/** A push stream that says Hello as a sidecar of config revision 2 (before model aliases) and acks every snapshot. */
function revision2Sidecar(address: string, caFile: string, tokenFile: string): { snapshots: SnapshotMessage[]; close(): void } {
  const client = new (configPushService())(address, grpc.credentials.createSsl(readFileSync(caFile)));
  const metadata = new grpc.Metadata();
  metadata.set(AUTHORIZATION, `Bearer ${readFileSync(tokenFile, 'utf8').trim()}`);
  const call = (client as unknown as { stream(md: grpc.Metadata): grpc.ClientDuplexStream<SidecarMessage, OperatorMessage> }).stream(metadata);
  const snapshots: SnapshotMessage[] = [];
  call.on('data', (message: OperatorMessage) => {
    if (!message.snapshot) return;
    snapshots.push(message.snapshot);
    call.write({ ack: { version: message.snapshot.version } });
  });
  call.on('error', () => undefined);
  call.write({ hello: { podName: 'routes-only', podNamespace: NS, currentVersion: '', sidecarVersion: 'previous', configRevision: 2 } });
  return {
    snapshots,
    close() {
      call.cancel();
      client.close();
    },
  };
}

describe('model aliases through a ProxyConfig', () => {
  let cp: ControlPlane;
  let api: KubeApi;
  let dir: ReturnType<typeof tempDir>;
  let operator: OperatorProcess;
  let address: string;
  let caFile: string;
  let primary: FakeUpstream;
  let backup: FakeUpstream;
  let proxy: ManagedProcess | undefined;
  let proxyUrl: string;
  let older: ReturnType<typeof revision2Sidecar> | undefined;

  const sonnetStatus = async (): Promise<ModelAliasStatus | undefined> =>
    (await getProxyConfig(api, NS, 'default')).status?.models?.find((alias) => alias.alias === 'claude-sonnet');
  const call = () =>
    fetch(`${proxyUrl}/v1/chat/completions`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', 'x-tollgate-user': 'ada' },
      body: JSON.stringify({ model: 'claude-sonnet', max_tokens: 32, messages: [{ role: 'user', content: 'hi' }] }),
    });

  beforeAll(async () => {
    dir = tempDir('tollgate-model-aliases-test-');
    primary = await startFakeUpstream('anthropic', { expectApiKey: PRIMARY_KEY });
    backup = await startFakeUpstream('anthropic', { expectApiKey: BACKUP_KEY });
    cp = await startControlPlane();
    api = new KubeApi(cp.kubeConfig);
    const kubeconfig = await installOperatorPrerequisites(cp, dir.path);
    await ensureNamespace(api, NS);
    await putSecret(api, NS, 'llm-keys', { primary: PRIMARY_KEY, backup: BACKUP_KEY });
    await putProxyConfig(api, NS, 'default', spec(primary, backup, 600_000));
    const grpcPort = await freePort();
    address = `127.0.0.1:${grpcPort}`;
    operator = startOperatorProcess({ kubeconfig, identity: 'aliases-operator', grpcPort, logDir: dir.path, extraArgs: ['--alias-degraded-after=2'] });
    caFile = await operatorCaFile(api, dir.path);
  });

  afterAll(async () => {
    older?.close();
    await proxy?.stop(5_000);
    await operator?.stop(5_000);
    await cp?.stop();
    await primary?.close();
    await backup?.close();
    dir?.remove();
  });

  it('accepts the ProxyConfig, and a running sidecar gets the alias', async () => {
    const accepted = await eventually('Ready=True', async () => {
      const pc = await getProxyConfig(api, NS, 'default');
      return readyCondition(pc)?.status === 'True' ? pc : undefined;
    });
    expect(readyCondition(accepted)).toMatchObject({ reason: 'Accepted', observedGeneration: 1 });

    const pod = await podWithToken(api, { namespace: NS, name: 'app-1', dir: dir.path });
    const port = await freePort();
    const work = join(dir.path, 'app-1');
    mkdirSync(work);
    proxyUrl = `http://127.0.0.1:${port}`;
    proxy = startManagedProcess({
      name: 'tollgate proxy',
      command: 'sh',
      args: ['-c', `cd "${work}" && exec "${process.execPath}" "${CLI}" proxy --port ${port}`],
      logPath: join(dir.path, 'app-1.log'),
      env: {
        ...process.env,
        TOLLGATE_OPERATOR_ADDRESS: address,
        TOLLGATE_OPERATOR_CA_FILE: caFile,
        TOLLGATE_TOKEN_FILE: pod.tokenFile,
        TOLLGATE_STATE_DIR: join(work, 'state'),
        TOLLGATE_POD_NAME: 'app-1',
        TOLLGATE_POD_NAMESPACE: NS,
      },
    });
    const models = await eventually(
      'the alias in the sidecar config',
      async () => {
        const body = (await (await fetch(`${proxyUrl}/_local/api/config`)).json()) as { config: { models: Record<string, unknown> } };
        return Object.keys(body.config.models).length > 0 ? body.config.models : undefined;
      },
      60_000,
    );
    expect(models).toEqual(spec(primary, backup, 600_000).models);
  });

  it('a /v1 call to the alias falls back from the failing upstream to the working one, and status.models shows the failing target', async () => {
    primary.behave({ status: 500 });
    backup.behave({ usage: { input: 1000, output: 200 } });
    for (const n of [1, 2]) {
      const response = await call();
      expect(response.status, `call ${n}`).toBe(200);
      const body = (await response.json()) as { choices: { message: { content: string } }[] };
      expect(body.choices[0]!.message.content).toBeTruthy();
      const span = await findSpan(proxyUrl, { spanId: response.headers.get('x-proxy-span-id')! });
      expect(span).toMatchObject({ alias: 'claude-sonnet', route: 'claude-backup', status: 'ok', user_id: 'ada' });
    }
    // Both calls tried gamma-direct first (two 500s opened its breaker) and were answered by the backup.
    expect(primary.requests.length).toBe(2);
    expect(backup.requests.map((r) => r.headers['x-api-key'])).toEqual([BACKUP_KEY, BACKUP_KEY]);

    const status = await eventually('status.models with gamma-direct circuit_open', async () => {
      const alias = await sonnetStatus();
      return alias?.targets[0]?.state === 'circuit_open' && alias.servedBelowFirstPriority === 1 ? alias : undefined;
    });
    expect(status).toMatchObject({ alias: 'claude-sonnet', sidecars: 1, servedBelowFirstPriority: 1 });
    expect(status.targets).toEqual([
      { route: 'gamma-direct', model: 'claude-sonnet-4-5', priority: 0, state: 'circuit_open', healthy: 0, coolingDown: 0, circuitOpen: 1 },
      { route: 'claude-backup', model: 'claude-sonnet-4-5-20250929', priority: 1, state: 'healthy', healthy: 1, coolingDown: 0, circuitOpen: 0 },
    ]);
    expect(Date.parse(status.fallbackSince!)).toBeLessThanOrEqual(Date.now());
  });

  it('records AliasDegraded once the alias has been served below its first priority for longer than --alias-degraded-after', async () => {
    const event = await eventually('an AliasDegraded Event', async () => (await eventsFor(api, NS, 'default')).find((e) => e.reason === 'AliasDegraded'));
    expect(event).toMatchObject({ type: 'Warning', reportingController: 'tollgate.dev/operator', regarding: { kind: 'ProxyConfig', name: 'default' } });
    expect(event.note).toMatch(/^Alias claude-sonnet has been served below its first priority for more than 2s, since \S+Z, by 1 of 1 sidecar; /);
    expect(event.note).toContain('first priority: gamma-direct claude-sonnet-4-5 circuit_open');
    const status = await eventually('degraded in the status', async () => {
      const alias = await sonnetStatus();
      return alias?.degraded ? alias : undefined;
    });
    // Recorded no sooner than two seconds after the fallback began (the status shows that second, rounded down).
    const recordedAt = Date.parse((event as unknown as { eventTime: string }).eventTime);
    expect(recordedAt - Date.parse(status.fallbackSince!)).toBeGreaterThanOrEqual(2_000);
  });

  it('records AliasRecovered once the first priority answers again', async () => {
    primary.behave({ usage: { input: 1000, output: 200 } });
    // A shorter open period lets the breaker's probe through: the next calls reach gamma-direct again.
    await putProxyConfig(api, NS, 'default', spec(primary, backup, 200));
    await eventually('a call answered by gamma-direct', async () => {
      const response = await call();
      if (response.status !== 200) return undefined;
      const span = await findSpan(proxyUrl, { spanId: response.headers.get('x-proxy-span-id')! });
      return span.route === 'gamma-direct' ? span : undefined;
    });
    const event = await eventually('an AliasRecovered Event', async () => (await eventsFor(api, NS, 'default')).find((e) => e.reason === 'AliasRecovered'));
    expect(event).toMatchObject({ type: 'Normal', note: 'Alias claude-sonnet is served by its first priority again on every reporting sidecar (1)' });
    const status = await eventually('the status recovered', async () => {
      const alias = await sonnetStatus();
      return alias && !alias.degraded && alias.targets[0]?.state === 'healthy' ? alias : undefined;
    });
    expect(status).toMatchObject({ servedBelowFirstPriority: 0, degraded: false });
    expect(status.fallbackSince).toBeUndefined();
    // One degradation, one recovery: no Event was repeated.
    const reasons = (await eventsFor(api, NS, 'default')).map((e) => e.reason).filter((r) => r.startsWith('Alias'));
    expect(reasons.sort()).toEqual(['AliasDegraded', 'AliasRecovered']);
  });

  it('a sidecar of the previous config revision gets the config without the aliases, and the operator says so', async () => {
    const pod = await podWithToken(api, { namespace: NS, name: 'routes-only', dir: dir.path });
    older = revision2Sidecar(address, caFile, pod.tokenFile);
    const [first] = await eventually('a snapshot', () => (older!.snapshots.length ? older!.snapshots : undefined));
    const config = JSON.parse(first!.configJson) as Record<string, unknown>;
    expect(config.models).toBeUndefined();
    expect(config.routes).toEqual([expect.objectContaining({ name: 'claude-backup' })]);
    const event = await eventually('a ConfigWithheld Event', async () => (await eventsFor(api, NS, 'default')).find((e) => e.reason === 'ConfigWithheld'));
    expect(event.note).toContain('runs config revision 2');
    expect(event.note).toContain('models (claude-sonnet)');
  });

  it('refuses an alias naming a route that does not exist: Ready=False naming the field, the sidecars keep what they run', async () => {
    const bad = spec(primary, backup, 200);
    bad.models!['claude-sonnet']!.targets[1]!.route = 'claude-europe';
    await putProxyConfig(api, NS, 'default', bad);
    const rejected = await eventually('Ready=False', async () => {
      const pc = await getProxyConfig(api, NS, 'default');
      return readyCondition(pc)?.status === 'False' ? pc : undefined;
    });
    expect(readyCondition(rejected)).toMatchObject({
      reason: 'InvalidConfig',
      observedGeneration: rejected.metadata!.generation,
      message: 'spec.models.claude-sonnet.targets[1].route names no route (got "claude-europe"): a built-in route or one of the config\'s routes',
    });
    const event = await eventually('a Rejected Event', async () => (await eventsFor(api, NS, 'default')).find((e) => e.reason === 'Rejected'));
    expect(event.note).toContain('spec.models.claude-sonnet.targets[1].route');
    const body = (await (await fetch(`${proxyUrl}/_local/api/config`)).json()) as { config: { models: ProxyConfigSpec['models'] } };
    expect(body.config.models!['claude-sonnet']!.targets[1]!.route).toBe('claude-backup');
    expect(operator.hasExited()).toBe(false);
  });
});
