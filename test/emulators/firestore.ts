// A local Firestore emulator for tests: @firestore-emulator/server from npm (ADR 0404), in memory, run as a
// child process on a free loopback port so that a test can stop it and start it again like a real outage.
// Code under test reaches it through the real @google-cloud/firestore client with FIRESTORE_EMULATOR_HOST set
// to `host`, as every Google client library does; no credentials are needed.
//
//   const fs = await startFirestoreEmulator();   // { host: '127.0.0.1:PORT', projectId }
//   process.env.FIRESTORE_EMULATOR_HOST = fs.host;
//   ... fs.stop() / fs.restart() (the same port; it comes back empty) ...

import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { accepts, freePort } from '../control-plane/free-port.ts';
import { type ManagedProcess, startManagedProcess } from '../control-plane/managed-process.ts';
import { waitFor } from '../support/wait-for.ts';

const SERVER = join(dirname(fileURLToPath(import.meta.url)), 'firestore-server.ts');

export interface FirestoreEmulator {
  /** `127.0.0.1:PORT`, as FIRESTORE_EMULATOR_HOST wants it. */
  host: string;
  projectId: string;
  /** Stops it; the port stays reserved for restart(). */
  stop(): Promise<void>;
  /** Starts it again on the same port, empty. */
  restart(): Promise<void>;
}

export async function startFirestoreEmulator(opts: { projectId?: string } = {}): Promise<FirestoreEmulator> {
  const projectId = opts.projectId ?? 'tollgate-test';
  const port = await freePort();
  const dir = mkdtempSync(join(tmpdir(), 'tollgate-firestore-'));
  let proc: ManagedProcess;
  const start = async () => {
    const started = startManagedProcess({ name: 'firestore-emulator', command: process.execPath, args: [SERVER, String(port)], logPath: join(dir, 'emulator.log') });
    proc = started;
    await waitFor(
      'the firestore emulator to listen',
      async () => {
        if (started.hasExited()) throw new Error(`firestore emulator exited: ${await started.exited}\n${started.logTail()}`);
        return accepts(port);
      },
      30_000,
    );
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
