// Version skew the other way (ADR 0723): an operator one release behind its sidecars, as after a `helm
// rollback` while pods created under the newer release keep running. The operator is the previous release's
// own code (the commit test/kind/previous-release.txt records, ADR 0113), run from its source with this
// checkout's dependencies (every package the previous lock file installs is installed here at the same
// version: this release may add dependencies, not change those the previous one runs on); the sidecar is this
// release's push client, which names a config revision the previous operator has never heard of and sends alias health reports (ADR 0724)
// it has no field for. It still gets its config, acks it, and takes a price change.

import { cpSync, readFileSync, symlinkSync } from 'node:fs';
import { join } from 'node:path';
import pino from 'pino';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { ProxyConfigSpec } from '../../crds/index.ts';
import { ConfigStore } from '../../sidecar/src/config/config-store.ts';
import { type PushClient, startPushClient } from '../../sidecar/src/config/push-client.ts';
import { startControlPlane, type ControlPlane } from '../control-plane/control-plane.ts';
import { freePort } from '../control-plane/free-port.ts';
import { startManagedProcess, type ManagedProcess } from '../control-plane/managed-process.ts';
import { previousTree, recordedPreviousCommit } from '../kind/previous-release.ts';
import {
  ensureNamespace,
  eventually,
  getProxyConfig,
  installOperatorPrerequisites,
  KubeApi,
  OPERATOR_NAMESPACE,
  operatorCaFile,
  podWithToken,
  putProxyConfig,
  tempDir,
} from './operator-fixtures.ts';

const ROOT = join(import.meta.dirname, '..', '..');
const NS = 'shop';

const spec = (price: number): ProxyConfigSpec => ({
  pricing: { models: [{ provider: 'openai', model: 'gpt-4o-mini', input_per_million: price, output_per_million: 0 }] },
  upstreams: { beta: { baseUrl: 'http://fake-openai.llm-fakes:8080' } },
});

/** Packages `previousLock` installs that `currentLock` does not, or at another version or integrity. */
function dependenciesNotHere(previousLock: string, currentLock: string): string[] {
  type Lock = { packages: Record<string, { version?: string; integrity?: string }> };
  const previous = (JSON.parse(readFileSync(previousLock, 'utf8')) as Lock).packages;
  const current = (JSON.parse(readFileSync(currentLock, 'utf8')) as Lock).packages;
  return Object.entries(previous)
    .filter(([path, entry]) => path !== '' && (current[path]?.version !== entry.version || current[path]?.integrity !== entry.integrity))
    .map(([path, entry]) => `${path}@${entry.version ?? '?'}`);
}

describe("an operator one release behind: the previous release's operator pushes to this release's sidecar", () => {
  let cp: ControlPlane;
  let api: KubeApi;
  let dir: ReturnType<typeof tempDir>;
  let operator: ManagedProcess;
  let client: PushClient;
  const store = new ConfigStore();
  const price = () => store.get().pricing.models.find((m) => m.provider === 'openai' && m.model === 'gpt-4o-mini')?.input_per_million;
  // Alias health as a sidecar whose config has an alias reports it: a new report on every look, so every look sends one.
  let aliasReports = 0;
  const aliasHealthReport = () => {
    aliasReports += 1;
    return {
      aliases: [{ alias: 'claude-sonnet', targets: [{ route: 'gamma-direct', model: 'claude-sonnet-4-5', state: 'circuit_open' as const }], degradedSinceUnixMs: aliasReports }],
    };
  };

  beforeAll(async () => {
    dir = tempDir('tollgate-operator-behind-');
    const tree = await previousTree(recordedPreviousCommit());
    const changed = dependenciesNotHere(join(tree, 'package-lock.json'), join(ROOT, 'package-lock.json'));
    if (changed.length > 0) {
      throw new Error(
        `the previous release (${tree}) has dependencies this checkout does not install at the same version (${changed.slice(0, 5).join(', ')}): this test runs it with this checkout's node_modules`,
      );
    }
    // The cached tree is shared by every checkout on the machine, so it runs from a copy beside this run's files
    // with this checkout's node_modules linked in. A link inside the cache pointed at the checkout that made it
    // first, and dangled once that checkout was removed (existsSync follows it: symlinkSync then threw EEXIST).
    const app = join(dir.path, 'previous-release');
    cpSync(tree, app, { recursive: true, filter: (source) => source !== join(tree, 'node_modules') });
    symlinkSync(join(ROOT, 'node_modules'), join(app, 'node_modules'));
    cp = await startControlPlane();
    api = new KubeApi(cp.kubeConfig);
    const kubeconfig = await installOperatorPrerequisites(cp, dir.path);
    await ensureNamespace(api, NS);
    await putProxyConfig(api, NS, 'default', spec(2.5));
    const grpcPort = await freePort();
    operator = startManagedProcess({
      name: 'previous operator',
      command: process.execPath,
      args: [
        join(app, 'cmd', 'tollgate.ts'),
        'operator',
        `--kubeconfig=${kubeconfig}`,
        `--namespace=${OPERATOR_NAMESPACE}`,
        '--identity=previous-operator',
        '--grpc-host=127.0.0.1',
        `--grpc-port=${grpcPort}`,
        '--health-host=127.0.0.1',
        `--health-port=${await freePort()}`,
        '--tls-ip=127.0.0.1',
      ],
      logPath: join(dir.path, 'operator.log'),
    });
    const caFile = await operatorCaFile(api, dir.path);
    const pod = await podWithToken(api, { namespace: NS, name: 'newer', dir: dir.path });
    client = startPushClient({
      address: `127.0.0.1:${grpcPort}`,
      caFile,
      tokenFile: pod.tokenFile,
      stateDir: join(dir.path, 'state'),
      store,
      logger: pino({ level: 'silent' }),
      aliasHealthReport,
      aliasReportIntervalMs: 20,
    });
  }, 120_000);

  afterAll(async () => {
    await client?.stop();
    await operator?.stop();
    await cp?.stop();
    dir?.remove();
  });

  it('gets its config and acks it, though its Hello names a config revision', async () => {
    await eventually('the first price', () => (price() === 2.5 ? true : undefined), 60_000);
    expect(client.status()).toMatchObject({ connected: true, fromCache: false });
    const status = await eventually('the sidecar counted as current', async () => {
      const pc = await getProxyConfig(api, NS, 'default');
      return pc.status?.sidecars?.current === 1 ? pc.status : undefined;
    });
    expect(status.sidecars).toEqual({ connected: 1, current: 1 });
    expect(operator.hasExited()).toBe(false);
  });

  it('keeps the stream while the sidecar sends alias health reports it does not know', async () => {
    // Counted from here: a first connect can fail while the operator is still opening its push port.
    const { connects } = client.status();
    const before = aliasReports;
    await eventually('twenty more alias reports', () => (aliasReports >= before + 20 ? true : undefined), 30_000);
    expect(client.status()).toMatchObject({ connected: true, connects });
    expect(client.status().lastError).toBeUndefined();
    expect(operator.hasExited()).toBe(false);
  });

  it('takes a price change', async () => {
    await putProxyConfig(api, NS, 'default', spec(7.5));
    await eventually('the new price', () => (price() === 7.5 ? true : undefined), 30_000);
  });
});
