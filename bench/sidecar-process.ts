// Tollgate started as the injected sidecar runs in a pod, for the benchmarks: the compiled proxy (dist/) laid
// out as the sidecar image lays it out, with the image's environment and node flags read from the Dockerfile's
// `sidecar` target (so the numbers follow NODE_OPTIONS when it changes there), the environment the webhook
// injects, the span file on tmpfs as on the pod's memory volume, log lines at the pod's default level (info),
// and its config and API keys pushed over TLS gRPC by a stand-in for the operator (the config push wire role
// only: no Kubernetes).

import { spawn, type ChildProcess } from 'node:child_process';
import { cpSync, existsSync, mkdirSync, readFileSync, rmSync, statfsSync, symlinkSync, writeFileSync } from 'node:fs';
import { join, resolve } from 'node:path';
import * as grpc from '@grpc/grpc-js';
import { createCertificateAuthority, issueCertificate } from '../contracts/pki.ts';
import { configPushService, type OperatorMessage, type SidecarMessage, type SnapshotMessage } from '../contracts/push-protocol.ts';
import { findStage, parseDockerfile, stageConfig } from './dockerfile.ts';
import { freePort } from '../test/e2e/proxy-process.ts';
import { waitFor } from '../test/support/wait-for.ts';

const ROOT = resolve(import.meta.dirname, '..');
const TMPFS_MAGIC = 0x01021994;

export interface SidecarImage {
  /** The image's ENV (NODE_OPTIONS, NODE_ENV, ...). */
  env: Record<string, string>;
  /** node's own arguments from the ENTRYPOINT (between `node` and the script). */
  nodeArgs: string[];
  /** The script the ENTRYPOINT runs, relative to the image's working directory. */
  script: string;
}

/** The sidecar target's environment and entry point, as `docker build --target sidecar` would give them. */
export function sidecarImage(): SidecarImage {
  return imageStage('sidecar');
}

/** A Dockerfile target's environment and entry point (`tollgate`: the operator and webhook image). */
export function imageStage(stage: 'sidecar' | 'tollgate'): SidecarImage {
  const dockerfile = parseDockerfile(join(ROOT, 'Dockerfile'));
  const config = stageConfig(dockerfile, findStage(dockerfile, stage));
  const entrypoint = config.entrypoint ?? [];
  if (entrypoint[0] !== 'node') throw new Error(`the ${stage} image's ENTRYPOINT does not start with node: ${JSON.stringify(entrypoint)}`);
  const scriptAt = entrypoint.findIndex((arg, i) => i > 0 && !arg.startsWith('-'));
  const env = { ...config.env };
  delete env.PATH;
  return { env, nodeArgs: entrypoint.slice(1, scriptAt), script: entrypoint[scriptAt]! };
}

/** How the benchmarks that start `tollgate proxy` themselves run it "as the image does": dist/ with the image's flags and environment. */
export function compiledLikeTheImage(): { cli: string; nodeArgs: string[]; env: Record<string, string> } {
  const image = sidecarImage();
  return { cli: join(ROOT, 'dist', image.script), nodeArgs: image.nodeArgs, env: image.env };
}

export interface ProcessMemory {
  rssMb: number;
  /** RssAnon: private memory, what the pod's cgroup is charged for this process and what an OOM kill counts. */
  privateMb: number;
  /** RssFile: pages of the Node binary and shared libraries, shared by every pod started from the image. */
  fileMb: number;
  /** VmHWM: the highest RSS so far. */
  peakRssMb: number;
}

/** One process's memory, or the sum over several (nginx's master and worker). */
export function processMemory(pid: number | number[]): ProcessMemory {
  const sum: ProcessMemory = { rssMb: 0, privateMb: 0, fileMb: 0, peakRssMb: 0 };
  for (const one of Array.isArray(pid) ? pid : [pid]) {
    const status = readFileSync(`/proc/${one}/status`, 'utf8');
    const mb = (key: string) => Number(new RegExp(`^${key}:\\s+(\\d+) kB`, 'm').exec(status)?.[1] ?? NaN) / 1024;
    sum.rssMb += mb('VmRSS');
    sum.privateMb += mb('RssAnon');
    sum.fileMb += mb('RssFile');
    sum.peakRssMb += mb('VmHWM');
  }
  return sum;
}

const TICKS_PER_SECOND = 100; // USER_HZ on Linux

/** User plus system CPU seconds a process (or several) has used so far. */
export function cpuSeconds(pid: number | number[]): number {
  let ticks = 0;
  for (const one of Array.isArray(pid) ? pid : [pid]) {
    const fields = readFileSync(`/proc/${one}/stat`, 'utf8').split(') ')[1]!.split(' ');
    ticks += Number(fields[11]) + Number(fields[12]); // utime, stime
  }
  return ticks / TICKS_PER_SECOND;
}

/** Samples a process's memory every few milliseconds while `during` runs; returns the highest readings. */
export async function peakMemory<T>(pid: number, during: () => Promise<T>): Promise<{ result: T; peak: ProcessMemory }> {
  const peak = processMemory(pid);
  const sample = () => {
    const now = processMemory(pid);
    peak.rssMb = Math.max(peak.rssMb, now.rssMb);
    peak.privateMb = Math.max(peak.privateMb, now.privateMb);
    peak.fileMb = Math.max(peak.fileMb, now.fileMb);
    peak.peakRssMb = now.peakRssMb;
  };
  const timer = setInterval(sample, 5);
  try {
    const result = await during();
    sample();
    return { result, peak };
  } finally {
    clearInterval(timer);
  }
}

export interface SidecarProcess {
  url: string;
  pid: number;
  child: ChildProcess;
  image: SidecarImage;
  /** Where the span file is (tmpfs when the machine has /dev/shm, as the pod's memory volume is). */
  stateDir: string;
  stderr(): string;
  stop(): Promise<void>;
}

export interface SidecarOptions {
  /** The ProxyConfig spec the stand-in operator pushes (upstreams, prices, ...), as JSON. */
  config: Record<string, unknown>;
  /** API keys pushed as credentials (openaiApiKey, anthropicApiKey, ...). */
  credentials: Record<string, string>;
  /** TOLLGATE_LOG_LEVEL; the chart's default for sidecars is info. */
  logLevel?: string;
  /** node flags added after the image's, e.g. --cpu-prof to profile the sidecar under the benchmark's load. */
  extraNodeArgs?: string[];
  /** Environment added to the image's (experiments with a variable before it goes in the Dockerfile). */
  extraEnv?: Record<string, string>;
  /** The compiled tree to run instead of dist/ (a copy of dist/ from before a change, for an A/B in one run). */
  dist?: string;
}

/** A folder laid out like the sidecar image's /app (the Dockerfile's COPY lines): compiled code from dist/, proto/, the UI, node_modules. */
function imageLayout(dir: string, dist = join(ROOT, 'dist')): string {
  if (!existsSync(join(dist, 'cmd', 'tollgate.js'))) throw new Error('dist/ is missing: run ./tollgatew npm run build first');
  const app = join(dir, 'app');
  for (const part of ['cmd', 'contracts', join('sidecar', 'src')]) cpSync(join(dist, part), join(app, part), { recursive: true });
  cpSync(join(ROOT, 'proto'), join(app, 'proto'), { recursive: true });
  cpSync(join(ROOT, 'sidecar', 'ui'), join(app, 'sidecar', 'ui'), { recursive: true });
  cpSync(join(ROOT, 'package.json'), join(app, 'package.json'));
  symlinkSync(join(ROOT, 'node_modules'), join(app, 'node_modules'));
  return app;
}

/** The operator's side of the config push, without Kubernetes: every stream that says Hello gets one snapshot. */
async function startPushStandIn(dir: string, snapshot: SnapshotMessage): Promise<{ address: string; caFile: string; stop(): void }> {
  const ca = await createCertificateAuthority({ commonName: 'bench-operator-ca' });
  const leaf = await issueCertificate(ca, { commonName: 'operator', ipAddresses: ['127.0.0.1'], usage: 'server' });
  const caFile = join(dir, 'operator-ca.crt');
  writeFileSync(caFile, ca.certPem);
  const server = new grpc.Server();
  server.addService(configPushService().service, {
    stream: (call: grpc.ServerDuplexStream<SidecarMessage, OperatorMessage>) => {
      call.on('data', (m: SidecarMessage) => {
        if (m.hello) call.write({ snapshot });
      });
      call.on('error', () => undefined);
    },
  });
  const port = await new Promise<number>((done, fail) =>
    server.bindAsync('127.0.0.1:0', grpc.ServerCredentials.createSsl(null, [{ private_key: Buffer.from(leaf.keyPem), cert_chain: Buffer.from(leaf.certPem) }]), (e, p) =>
      e ? fail(e) : done(p),
    ),
  );
  return { address: `127.0.0.1:${port}`, caFile, stop: () => server.forceShutdown() };
}

export async function startSidecar(dir: string, opts: SidecarOptions): Promise<SidecarProcess> {
  const image = sidecarImage();
  const app = imageLayout(dir, opts.dist);
  // The webhook mounts an emptyDir with medium: Memory at the state directory.
  const shm = existsSync('/dev/shm') && statfsSync('/dev/shm').type === TMPFS_MAGIC;
  const stateDir = join(shm ? '/dev/shm' : dir, `tollgate-bench-state-${process.pid}-${Date.now()}`);
  mkdirSync(stateDir, { recursive: true });
  const tokenFile = join(dir, 'token');
  writeFileSync(tokenFile, 'bench-service-account-token');
  const push = await startPushStandIn(dir, {
    version: 'bench-1',
    source: 'bench/default',
    configJson: JSON.stringify(opts.config),
    credentials: Object.fromEntries(Object.entries(opts.credentials).map(([k, v]) => [k, Buffer.from(v)])),
  });
  const port = await freePort();
  const healthPort = await freePort();
  const child = spawn(process.execPath, [...image.nodeArgs, ...(opts.extraNodeArgs ?? []), join(app, image.script), 'proxy', '--port', String(port)], {
    cwd: app,
    env: {
      PATH: process.env.PATH,
      ...image.env,
      // what webhook/src/sidecar-container.ts injects
      TOLLGATE_OPERATOR_ADDRESS: push.address,
      TOLLGATE_OPERATOR_CA_FILE: push.caFile,
      TOLLGATE_TOKEN_FILE: tokenFile,
      TOLLGATE_POD_NAME: 'bench-0',
      TOLLGATE_POD_NAMESPACE: 'bench',
      TOLLGATE_POD_IP: '127.0.0.1',
      TOLLGATE_STATE_DIR: stateDir,
      TOLLGATE_PORT: String(port),
      TOLLGATE_HEALTH_PORT: String(healthPort),
      TOLLGATE_LOG_LEVEL: opts.logLevel ?? 'info',
      ...opts.extraEnv,
    },
    // stdout is read and dropped, as the container runtime reads a pod's log pipe
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  child.stdout.resume();
  let stderr = '';
  child.stderr.setEncoding('utf8').on('data', (t: string) => (stderr = (stderr + t).slice(-8000)));
  const url = `http://127.0.0.1:${port}`;
  const exited = new Promise<void>((done) => child.once('exit', () => done()));
  const stop = async () => {
    if (child.exitCode === null) {
      child.kill('SIGTERM');
      await exited;
    }
    push.stop();
    rmSync(stateDir, { recursive: true, force: true });
  };
  try {
    // Ready once the pushed config runs: the route's upstream is the one the stand-in sent.
    const wanted = JSON.stringify((opts.config.upstreams as Record<string, unknown> | undefined) ?? {});
    await waitFor(
      'the sidecar serving the pushed config',
      async () => {
        if (child.exitCode !== null) throw new Error(`the sidecar exited with ${child.exitCode}: ${stderr}`);
        const res = await fetch(`${url}/_local/api/config`);
        const view = (await res.json()) as { config: { upstreams: Record<string, unknown> } };
        return Object.entries(JSON.parse(wanted) as Record<string, { baseUrl: string }>).every(
          ([route, u]) => (view.config.upstreams[route] as { baseUrl?: string } | undefined)?.baseUrl === u.baseUrl,
        );
      },
      { timeoutMs: 30_000 },
    );
  } catch (error) {
    await stop();
    // What the sidecar said is the useful part of a start that never became ready.
    throw new Error(`${(error as Error).message}; the sidecar's stderr: ${stderr.trim() || '(empty)'}`, { cause: error });
  }
  return { url, pid: child.pid!, child, image, stateDir, stderr: () => stderr, stop };
}
