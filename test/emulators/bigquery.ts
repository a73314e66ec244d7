// A local BigQuery emulator for tests: bqemulator (REST API over DuckDB), installed once into the shared cache
// (~/.cache/tollgate/bigquery-emulator, see bigquery-install.sh and ADR 1101) and started per test file on
// free ports, in memory. Any code under test reaches it through the real @google-cloud/bigquery client with
// `apiEndpoint: emulator.endpoint` (or BIGQUERY_EMULATOR_HOST).
//
//   const bq = await startBigQueryEmulator();           // first run installs (about 30 s), then seconds
//   const client = bq.client();                          // a BigQuery client bound to it
//   ... bq.stop() / bq.restart() (the same port; data is lost: it is in memory) ...

import { spawn } from 'node:child_process';
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { BigQuery } from '@google-cloud/bigquery';
import { freePort } from '../control-plane/free-port.ts';
import { type ManagedProcess, startManagedProcess } from '../control-plane/managed-process.ts';

const INSTALL_SCRIPT = join(dirname(fileURLToPath(import.meta.url)), 'bigquery-install.sh');

export interface BigQueryEmulator {
  /** e.g. http://127.0.0.1:41234, for `apiEndpoint`. */
  endpoint: string;
  /** `host:port`, as BIGQUERY_EMULATOR_HOST wants it. */
  host: string;
  projectId: string;
  /** A client of the emulator (no credentials needed). */
  client(): BigQuery;
  /** Stops it (the port stays reserved for restart()). */
  stop(): Promise<void>;
  /** Starts it again on the same port, empty. */
  restart(): Promise<void>;
  logTail(): string;
}

let installed: Promise<string> | undefined;

/** Runs the install script (seconds when cached) and resolves with the emulator's launcher. */
export function ensureBigQueryEmulator(): Promise<string> {
  installed ??= new Promise<string>((resolve, reject) => {
    const child = spawn('bash', [INSTALL_SCRIPT], { stdio: ['ignore', 'pipe', 'inherit'] });
    let stdout = '';
    child.stdout.setEncoding('utf8').on('data', (text: string) => (stdout += text));
    child.once('error', reject);
    child.once('close', (code) => {
      const launcher = stdout.trimEnd().split('\n').at(-1) ?? '';
      if (code === 0 && launcher) resolve(launcher);
      else reject(new Error(`${INSTALL_SCRIPT} failed with exit code ${code}; see its output above`));
    });
  });
  return installed;
}

async function waitHealthy(endpoint: string, process: ManagedProcess, timeoutMs: number): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    if (process.hasExited()) throw new Error(`bigquery emulator exited: ${await process.exited}\n${process.logTail()}`);
    try {
      const res = await fetch(`${endpoint}/healthz`);
      if (res.ok) return;
    } catch {
      // not listening yet
    }
    if (Date.now() > deadline) throw new Error(`bigquery emulator not healthy after ${timeoutMs} ms\n${process.logTail()}`);
    await new Promise((r) => setTimeout(r, 100));
  }
}

export async function startBigQueryEmulator(opts: { projectId?: string; startTimeoutMs?: number } = {}): Promise<BigQueryEmulator> {
  const launcher = await ensureBigQueryEmulator();
  const projectId = opts.projectId ?? 'tollgate-test';
  const port = await freePort();
  const dir = mkdtempSync(join(tmpdir(), 'tollgate-bigquery-'));
  const endpoint = `http://127.0.0.1:${port}`;
  let proc: ManagedProcess;
  const start = async () => {
    proc = startManagedProcess({
      name: 'bigquery-emulator',
      command: launcher,
      args: [
        'start',
        '--rest-host',
        '127.0.0.1',
        '--rest-port',
        String(port),
        '--grpc-port',
        '0',
        '--project',
        projectId,
        '--ephemeral',
        '--log-level',
        'warning',
        '--log-format',
        'console',
      ],
      logPath: join(dir, 'emulator.log'),
    });
    await waitHealthy(endpoint, proc, opts.startTimeoutMs ?? 60_000);
  };
  await start();
  return {
    endpoint,
    host: `127.0.0.1:${port}`,
    projectId,
    client: () => new BigQuery({ projectId, apiEndpoint: endpoint }),
    stop: () => proc.stop(),
    restart: async () => {
      await proc.stop();
      await start();
    },
    logTail: () => proc.logTail(),
  };
}
