// A local Firestore emulator for tests: @firestore-emulator/server from npm (ADR 1303), a gRPC server holding
// everything in memory, started per test file as a child process on a free loopback port. Code under test
// reaches it through the real @google-cloud/firestore client with FIRESTORE_EMULATOR_HOST=<host>, as every
// Google library does; no credentials are needed.
//
//   const fs = await startFirestoreEmulator();     // { host: '127.0.0.1:PORT', projectId }
//   ... fs.stop() / fs.restart() (the same port, empty: it keeps nothing on disk) ...
//
// The emulator does not isolate concurrent transactions and applies a batch write by write; Tollgate's
// ledger uses neither transactions nor a batch whose partial application could count twice.

import { mkdtempSync } from 'node:fs';
import { connect } from 'node:net';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { freePort } from '../control-plane/free-port.ts';
import { type ManagedProcess, startManagedProcess } from '../control-plane/managed-process.ts';

const SERVER = join(dirname(fileURLToPath(import.meta.url)), 'firestore-server.ts');

export interface FirestoreEmulator {
  /** `127.0.0.1:PORT`, as FIRESTORE_EMULATOR_HOST wants it. */
  host: string;
  projectId: string;
  /** Stops it (the port stays reserved for restart()). */
  stop(): Promise<void>;
  /** Starts it again on the same port, empty. */
  restart(): Promise<void>;
}

function accepts(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const socket = connect(port, '127.0.0.1');
    socket.once('connect', () => {
      socket.destroy();
      resolve(true);
    });
    socket.once('error', () => resolve(false));
  });
}

async function waitListening(port: number, proc: ManagedProcess, timeoutMs: number): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    if (proc.hasExited()) throw new Error(`firestore emulator exited: ${await proc.exited}\n${proc.logTail()}`);
    if (await accepts(port)) return;
    if (Date.now() > deadline) throw new Error(`firestore emulator not listening after ${timeoutMs} ms\n${proc.logTail()}`);
    await new Promise((r) => setTimeout(r, 50));
  }
}

export async function startFirestoreEmulator(opts: { projectId?: string; startTimeoutMs?: number } = {}): Promise<FirestoreEmulator> {
  const projectId = opts.projectId ?? 'tollgate-test';
  const port = await freePort();
  const dir = mkdtempSync(join(tmpdir(), 'tollgate-firestore-'));
  let proc: ManagedProcess;
  const start = async () => {
    proc = startManagedProcess({
      name: 'firestore-emulator',
      command: process.execPath,
      args: [SERVER, String(port)],
      logPath: join(dir, 'emulator.log'),
    });
    await waitListening(port, proc, opts.startTimeoutMs ?? 30_000);
  };
  await start();
  return {
    host: `127.0.0.1:${port}`,
    projectId,
    stop: () => proc.stop(),
    restart: async () => {
      await proc.stop();
      await start();
    },
  };
}
