// Starts `tollgate proxy` as a real child process, the way a user or a pod runs it, and collects its
// JSON log lines so tests can assert what operators grep for.

import { spawn, type ChildProcess } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { waitFor } from '../support/wait-for.ts';

const CLI = resolve(import.meta.dirname, '../../cmd/tollgate.ts');

export interface ProxyProcess {
  url: string;
  port: number;
  dir: string;
  logs: Record<string, unknown>[];
  stderr(): string;
  /** Sends SIGTERM and waits for the exit code. */
  stop(signal?: NodeJS.Signals): Promise<number | null>;
  child: ChildProcess;
}

export async function freePort(): Promise<number> {
  return new Promise((resolvePort, reject) => {
    const server = createServer();
    server.once('error', reject);
    server.listen(0, '127.0.0.1', () => {
      const { port } = server.address() as { port: number };
      server.close(() => resolvePort(port));
    });
  });
}

interface ProxyOptions {
  configYaml?: string;
  env?: NodeJS.ProcessEnv;
  args?: string[];
  cli?: string;
  nodeArgs?: string[];
  /** Run in this folder (a restart over the files of an earlier run) and leave it in place on stop(). */
  dir?: string;
  /** Headers for the readiness wait on /healthz (a server whose health needs a token). */
  readyHeaders?: Record<string, string>;
  /** Replaces the readiness check (default: GET /healthz answers 2xx). */
  ready?: (url: string) => Promise<boolean>;
}

/** A first listen whose port another test's process took between freePort() and the bind gets a new port, this often. */
const PORT_ATTEMPTS = 5;

class PortTaken extends Error {}

export async function startProxyProcess(opts: ProxyOptions = {}): Promise<ProxyProcess> {
  const dir = opts.dir ?? mkdtempSync(join(tmpdir(), 'tollgate-proxy-'));
  if (opts.configYaml !== undefined) writeFileSync(join(dir, 'tollgate.yaml'), opts.configYaml);
  for (let attempt = 1; ; attempt++) {
    try {
      return await launch(opts, dir, await freePort());
    } catch (error) {
      if (!(error instanceof PortTaken) || attempt === PORT_ATTEMPTS) throw error;
    }
  }
}

async function launch(opts: ProxyOptions, dir: string, port: number): Promise<ProxyProcess> {
  const args = [...(opts.nodeArgs ?? []), opts.cli ?? CLI, 'proxy', '--port', String(port)];
  if (opts.configYaml !== undefined) args.push('--config', join(dir, 'tollgate.yaml'));
  args.push(...(opts.args ?? []));
  const child = spawn(process.execPath, args, {
    cwd: dir,
    // No LM Studio-compatible listener unless a test asks for one: port 1234 is one per machine, and tests run side by side.
    env: { PATH: process.env.PATH, HOME: dir, TOLLGATE_LOG_LEVEL: 'debug', TOLLGATE_LMSTUDIO_PORT: '0', ...opts.env },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  const logs: Record<string, unknown>[] = [];
  let stderr = '';
  let pending = '';
  child.stdout.setEncoding('utf8').on('data', (text: string) => {
    pending += text;
    let nl;
    while ((nl = pending.indexOf('\n')) !== -1) {
      const line = pending.slice(0, nl);
      pending = pending.slice(nl + 1);
      try {
        logs.push(JSON.parse(line) as Record<string, unknown>);
      } catch {
        logs.push({ msg: line });
      }
    }
  });
  child.stderr.setEncoding('utf8').on('data', (text: string) => (stderr += text));
  const exited = new Promise<number | null>((resolveExit) => child.once('exit', (code) => resolveExit(code)));
  const url = `http://127.0.0.1:${port}`;
  // A proxy that exits (a bad flag or config) can never become healthy: stop waiting at once.
  const gone = new AbortController();
  void exited.then(() => gone.abort());
  try {
    const ready = opts.ready ?? (async () => (await fetch(`${url}/healthz`, { headers: opts.readyHeaders ?? {} })).ok);
    await waitFor('tollgate proxy to answer /healthz', () => ready(url), { timeoutMs: 20_000, signal: gone.signal });
  } catch (error) {
    if (child.exitCode !== null || child.signalCode !== null) {
      const message = `tollgate proxy exited with ${child.exitCode ?? child.signalCode}: ${stderr}`;
      throw stderr.includes(`EADDRINUSE: address already in use 127.0.0.1:${port}`) ? new PortTaken(message) : new Error(message);
    }
    child.kill('SIGKILL');
    throw new Error(`tollgate proxy did not become healthy: ${stderr}`, { cause: error });
  }
  return {
    url,
    port,
    dir,
    logs,
    child,
    stderr: () => stderr,
    stop: async (signal = 'SIGTERM') => {
      if (child.exitCode === null) child.kill(signal);
      const code = await exited;
      if (opts.dir === undefined) rmSync(dir, { recursive: true, force: true });
      return code;
    },
  };
}

/** Runs `tollgate proxy` with a config file it must refuse at start: its exit code and what it wrote to stderr. */
export async function refusedConfigFile(configYaml: string): Promise<{ code: number | null; stderr: string }> {
  const dir = mkdtempSync(join(tmpdir(), 'tollgate-bad-config-'));
  try {
    const configPath = join(dir, 'tollgate.yaml');
    writeFileSync(configPath, configYaml);
    const child = spawn(process.execPath, [CLI, 'proxy', '--port', '0', '--config', configPath], {
      env: { PATH: process.env.PATH, HOME: dir, TOLLGATE_LMSTUDIO_PORT: '0' },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let stderr = '';
    child.stderr.setEncoding('utf8').on('data', (text: string) => (stderr += text));
    const code = await new Promise<number | null>((resolve) => child.once('exit', resolve));
    return { code, stderr };
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}
