// A real Kubernetes control plane for cluster tests: etcd plus kube-apiserver as local processes (the envtest
// pattern; see docs/decisions/0100). Each test file starts its own and stops it in afterAll.
//
// What there is: the full API (CRDs, RBAC, admission webhooks, TokenRequest/TokenReview, status subresources).
// What there is not: kube-controller-manager, scheduler and kubelet. So no ServiceAccount is created for a
// namespace (tests create the ServiceAccounts they need), no garbage collection, namespaces never finish
// deleting, pods stay Pending, Deployments never get ReplicaSets. The ServiceAccount admission plugin is off
// (as in envtest), so a pod needs no existing ServiceAccount and gets no token volume.
//
// Set TOLLGATE_KEEP_CONTROL_PLANE=1 to keep the work folder (logs, certificates, kubeconfig) after stop().

import { mkdirSync, mkdtempSync, rmSync, writeFileSync, existsSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { basename, join } from 'node:path';
import { KubeConfig } from '@kubernetes/client-node';
import { resolveBinDir } from './binaries.ts';
import { createClusterCredentials, issueUserCertificate, ADMIN_USER } from './cluster-credentials.ts';
import { freePort } from './free-port.ts';
import { httpGet, httpsGet, StartupError, waitUntilHealthy, type TlsClient } from './health-probe.ts';
import { renderKubeconfig } from './kubeconfig.ts';
import { onProcessExit, startManagedProcess, type ManagedProcess } from './managed-process.ts';
import { RUN_PREFIX, removeStaleRuns } from './stale-runs.ts';
import { runTool, type ToolResult } from './tool-run.ts';

export type { ToolResult } from './tool-run.ts';

export interface ControlPlane {
  /** https://127.0.0.1:PORT */
  server: string;
  /** Admin kubeconfig file (client certificate, CN=tollgate-admin, O=system:masters). */
  kubeconfigPath: string;
  /** Admin client configuration for @kubernetes/client-node. */
  kubeConfig: KubeConfig;
  /** The cluster CA: signs the API server's serving certificate and every client certificate. */
  caPem: string;
  /** http://127.0.0.1:PORT, etcd's client URL (its v3 JSON gateway: e.g. POST /v3/kv/compaction). */
  etcdUrl: string;
  /** Folder holding etcd, kube-apiserver, kubectl and helm. */
  binDir: string;
  /**
   * Per-run folder (certificates, kubeconfig, etcd.log, kube-apiserver.log). Its name appears in the command
   * line of both processes, so a test can check that none survives stop().
   */
  workDir: string;
  /** A client-certificate user: CN = user, O = groups. RBAC applies (the user is not in system:masters). */
  userKubeConfig(user: string, groups?: string[]): Promise<KubeConfig>;
  /** kubectl with KUBECONFIG set to the admin kubeconfig and a private discovery cache. */
  kubectl(args: string[], opts?: { input?: string }): Promise<ToolResult>;
  /** helm with the admin kubeconfig and private cache/config/data folders. */
  helm(args: string[], opts?: { input?: string }): Promise<ToolResult>;
  /** Stops kube-apiserver and starts it again on the same port; etcd (and so all data) stays. */
  restartApiServer(): Promise<void>;
  /** Kills both processes (SIGTERM, then SIGKILL) and removes the work folders. Idempotent. */
  stop(): Promise<void>;
}

const ETCD_READY_TIMEOUT_MS = 60_000;
// A cold API server on a busy two-core machine takes tens of seconds to install every API group.
const APISERVER_READY_TIMEOUT_MS = 180_000;

export function etcdArgs(opts: { port: number; dataDir: string }): string[] {
  const url = `http://127.0.0.1:${opts.port}`;
  return [
    `--data-dir=${opts.dataDir}`,
    `--listen-client-urls=${url}`,
    `--advertise-client-urls=${url}`,
    // Port 0: a single-member cluster never talks to peers, and a fixed 2380 would collide between runs.
    '--listen-peer-urls=http://localhost:0',
    // Test data is thrown away; skipping fsync makes etcd writes cost microseconds instead of milliseconds.
    '--unsafe-no-fsync',
    '--log-level=warn',
  ];
}

export function apiServerArgs(opts: { port: number; etcdPort: number; files: CredentialFiles; certDir: string; admissionPlugins?: readonly string[] }): string[] {
  const { files } = opts;
  const server = `https://127.0.0.1:${opts.port}`;
  return [
    `--etcd-servers=http://127.0.0.1:${opts.etcdPort}`,
    `--secure-port=${opts.port}`,
    '--bind-address=127.0.0.1',
    '--advertise-address=127.0.0.1',
    `--cert-dir=${opts.certDir}`,
    `--tls-cert-file=${files.servingCert}`,
    `--tls-private-key-file=${files.servingKey}`,
    `--client-ca-file=${files.caCert}`,
    '--service-cluster-ip-range=10.0.0.0/24',
    '--allow-privileged=true',
    '--authorization-mode=RBAC',
    // No controller-manager creates ServiceAccounts, so the plugin would reject every pod.
    '--disable-admission-plugins=ServiceAccount',
    // Beyond the default set, e.g. OwnerReferencesPermissionEnforcement, which some clusters turn on.
    ...(opts.admissionPlugins?.length ? [`--enable-admission-plugins=${opts.admissionPlugins.join(',')}`] : []),
    `--service-account-issuer=${server}/`,
    `--service-account-key-file=${files.serviceAccountPublicKey}`,
    `--service-account-signing-key-file=${files.serviceAccountPrivateKey}`,
    '--v=1',
  ];
}

interface CredentialFiles {
  caCert: string;
  servingCert: string;
  servingKey: string;
  serviceAccountPublicKey: string;
  serviceAccountPrivateKey: string;
}

function writePrivate(path: string, content: string): string {
  writeFileSync(path, content, { mode: 0o600 });
  return path;
}

function memoryBackedTmp(): string {
  // etcd on tmpfs: no disk I/O at all. /dev/shm is on every Linux; elsewhere the normal temp folder will do.
  try {
    if (existsSync('/dev/shm')) {
      const probe = mkdtempSync('/dev/shm/tollgate-probe-');
      rmSync(probe, { recursive: true });
      return '/dev/shm';
    }
  } catch {
    // not writable
  }
  return tmpdir();
}

export interface ControlPlaneOptions {
  binDir?: string;
  /** Admission plugins to enable on top of kube-apiserver's defaults (e.g. OwnerReferencesPermissionEnforcement). */
  admissionPlugins?: readonly string[];
}

export async function startControlPlane(opts: ControlPlaneOptions = {}): Promise<ControlPlane> {
  const binDir = await resolveBinDir(opts.binDir);
  const keep = process.env.TOLLGATE_KEEP_CONTROL_PLANE === '1';
  const dataParent = memoryBackedTmp();
  if (!keep) removeStaleRuns([dataParent, tmpdir()]);
  const workDir = mkdtempSync(join(tmpdir(), RUN_PREFIX));
  // The etcd data folder carries the work folder's unique name, so every process of this run can be found.
  const etcdDataDir = join(dataParent, `${basename(workDir)}-etcd`);
  const removeDirs = () => {
    if (keep) return;
    rmSync(etcdDataDir, { recursive: true, force: true });
    rmSync(workDir, { recursive: true, force: true });
  };
  const unregisterExitHook = onProcessExit(removeDirs);

  let etcd: ManagedProcess | undefined;
  let apiServer: ManagedProcess | undefined;
  let stopped = false;
  const stop = async (): Promise<void> => {
    if (stopped) return;
    stopped = true;
    try {
      await apiServer?.stop();
      await etcd?.stop();
    } finally {
      removeDirs();
      unregisterExitHook();
      if (keep) process.stderr.write(`[control-plane] kept ${workDir} and ${etcdDataDir}\n`);
    }
  };

  try {
    mkdirSync(etcdDataDir, { mode: 0o700 });
    const creds = await createClusterCredentials();
    const files: CredentialFiles = {
      caCert: writePrivate(join(workDir, 'ca.crt'), creds.ca.certPem),
      servingCert: writePrivate(join(workDir, 'apiserver.crt'), creds.serving.certPem),
      servingKey: writePrivate(join(workDir, 'apiserver.key'), creds.serving.keyPem),
      serviceAccountPublicKey: writePrivate(join(workDir, 'sa.pub'), creds.serviceAccount.publicKeyPem),
      serviceAccountPrivateKey: writePrivate(join(workDir, 'sa.key'), creds.serviceAccount.privateKeyPem),
    };
    const certDir = join(workDir, 'apiserver-certs');
    mkdirSync(certDir);

    const etcdPort = await freePort();
    etcd = startManagedProcess({
      name: 'etcd',
      command: join(binDir, 'etcd'),
      args: etcdArgs({ port: etcdPort, dataDir: etcdDataDir }),
      logPath: join(workDir, 'etcd.log'),
    });
    await waitUntilHealthy(
      etcd,
      'healthy /health',
      async () => {
        const res = await httpGet(`http://127.0.0.1:${etcdPort}/health`);
        return res.status === 200 && (JSON.parse(res.body) as { health?: string }).health === 'true';
      },
      ETCD_READY_TIMEOUT_MS,
    );

    const port = await freePort();
    const server = `https://127.0.0.1:${port}`;
    const adminTls: TlsClient = { caPem: creds.ca.certPem, certPem: creds.admin.certPem, keyPem: creds.admin.keyPem };
    const startApiServer = async (): Promise<ManagedProcess> => {
      const proc = startManagedProcess({
        name: 'kube-apiserver',
        command: join(binDir, 'kube-apiserver'),
        args: apiServerArgs({ port, etcdPort, files, certDir, ...(opts.admissionPlugins ? { admissionPlugins: opts.admissionPlugins } : {}) }),
        logPath: join(workDir, 'kube-apiserver.log'),
      });
      try {
        await waitUntilHealthy(proc, 'ready /readyz', async () => (await httpsGet(`${server}/readyz`, adminTls)).status === 200, APISERVER_READY_TIMEOUT_MS);
        // The namespace controller inside the API server creates `default` soon after readiness; tests that
        // create objects there must not race it.
        await waitUntilHealthy(proc, 'namespace default', async () => (await httpsGet(`${server}/api/v1/namespaces/default`, adminTls)).status === 200, APISERVER_READY_TIMEOUT_MS);
      } catch (err) {
        await proc.stop();
        throw err;
      }
      return proc;
    };
    apiServer = await startApiServer();

    const kubeconfigPath = join(workDir, 'admin.kubeconfig');
    const adminKubeconfig = renderKubeconfig({ server, caPem: creds.ca.certPem, user: ADMIN_USER, ...creds.admin });
    writePrivate(kubeconfigPath, adminKubeconfig);
    const kubeConfig = new KubeConfig();
    kubeConfig.loadFromString(adminKubeconfig);

    const toolEnv: NodeJS.ProcessEnv = {
      ...process.env,
      KUBECONFIG: kubeconfigPath,
      KUBECACHEDIR: join(workDir, 'kube-cache'),
      HELM_CACHE_HOME: join(workDir, 'helm', 'cache'),
      HELM_CONFIG_HOME: join(workDir, 'helm', 'config'),
      HELM_DATA_HOME: join(workDir, 'helm', 'data'),
    };

    return {
      server,
      etcdUrl: `http://127.0.0.1:${etcdPort}`,
      kubeconfigPath,
      kubeConfig,
      caPem: creds.ca.certPem,
      binDir,
      workDir,
      async userKubeConfig(user: string, groups: string[] = []): Promise<KubeConfig> {
        const cert = await issueUserCertificate(creds.ca, user, groups);
        const kc = new KubeConfig();
        kc.loadFromString(renderKubeconfig({ server, caPem: creds.ca.certPem, user, ...cert }));
        return kc;
      },
      kubectl: (args, toolOpts = {}) => runTool(join(binDir, 'kubectl'), args, { env: toolEnv, ...toolOpts }),
      helm: (args, toolOpts = {}) => runTool(join(binDir, 'helm'), args, { env: toolEnv, ...toolOpts }),
      async restartApiServer(): Promise<void> {
        if (stopped) throw new Error('restartApiServer() after stop()');
        await apiServer?.stop();
        apiServer = undefined;
        apiServer = await startApiServer();
      },
      stop,
    };
  } catch (err) {
    await stop();
    if (err instanceof StartupError) throw err;
    throw new StartupError(`control plane failed to start: ${err instanceof Error ? (err.stack ?? err.message) : String(err)}`);
  }
}
