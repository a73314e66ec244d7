// A real redis-server for tests (Debian's package: Redis 7), on a free loopback port with its files in a temp
// directory, as a child that never outlives the test process. The package is installed with apt-get when it is
// missing and the process is root (CI); elsewhere the error names the command.
//
//   const redis = await startRedisServer();      // { url: 'redis://127.0.0.1:PORT', ... }
//   await redis.kill();                          // SIGKILL: what the server acked and had not fsynced is lost
//   await redis.start();                         // the same port and directory: it reloads its append-only file

import { existsSync, mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { accepts, freePort } from '../control-plane/free-port.ts';
import { type ManagedProcess, startManagedProcess } from '../control-plane/managed-process.ts';
import { installDebianPackages } from './debian-packages.ts';
import { waitFor } from './wait-for.ts';

const REDIS_SERVER = process.env.TOLLGATE_REDIS_SERVER ?? '/usr/bin/redis-server';

export interface RedisServer {
  url: string;
  port: number;
  /** Where it keeps its append-only file. */
  dir: string;
  /** SIGKILL, no shutdown: the server does not save or fsync anything more. */
  kill(): Promise<void>;
  /** SIGTERM: a clean shutdown. */
  stop(): Promise<void>;
  /** Starts it again on the same port and directory. */
  start(): Promise<void>;
}

export interface RedisServerOptions {
  /**
   * always (default, as the chart runs it): a write is on disk before the server answers it; everysec: a kill
   * loses up to a second of answered writes; none: nothing is kept, a restart comes back empty.
   */
  fsync?: 'always' | 'everysec' | 'none';
}

/** Installs Debian's redis-server when it is missing and this process may (root); else throws naming the command. */
export async function ensureRedisServer(log: (line: string) => void = () => undefined): Promise<void> {
  if (existsSync(REDIS_SERVER)) return;
  if (process.env.TOLLGATE_REDIS_SERVER !== undefined) throw new Error(`TOLLGATE_REDIS_SERVER names ${REDIS_SERVER}, which does not exist`);
  await installDebianPackages(['redis-server'], `the Redis tests need Debian's redis-server at ${REDIS_SERVER}`, log, ' (or set TOLLGATE_REDIS_SERVER)');
}

/** A first start whose port another process took between freePort() and the bind gets a new port, this often. */
const PORT_ATTEMPTS = 5;

export async function startRedisServer(opts: RedisServerOptions = {}): Promise<RedisServer> {
  await ensureRedisServer();
  let port = await freePort();
  const dir = mkdtempSync(join(tmpdir(), 'tollgate-redis-'));
  const fsync = opts.fsync ?? 'always';
  const persistence = fsync === 'none' ? ['--appendonly', 'no'] : ['--appendonly', 'yes', '--appendfsync', fsync];
  const args = () => ['--port', String(port), '--bind', '127.0.0.1', '--dir', dir, '--save', '', '--daemonize', 'no', ...persistence];
  let proc: ManagedProcess | null = null;
  let starts = 0;
  const start = async () => {
    // A log per start, so what is read below is this process's own.
    const logPath = join(dir, `redis-${++starts}.log`);
    const started = startManagedProcess({ name: 'redis-server', command: REDIS_SERVER, args: args(), logPath });
    proc = started;
    await waitFor(
      'redis-server to listen',
      async () => {
        if (started.hasExited()) throw new Error(`redis-server exited: ${await started.exited}\n${started.logTail()}`);
        // Its own log, not a connect alone: a connect may reach whichever process holds the port.
        return started.logTail().includes('Ready to accept connections') && accepts(port);
      },
      30_000,
    );
  };
  // freePort() closes the port before redis-server binds it: another test's server may take it in between.
  for (let attempt = 1; ; attempt++) {
    try {
      await start();
      break;
    } catch (error) {
      const taken = proc !== null && (proc as ManagedProcess).logTail().includes('Address already in use');
      if (!taken || attempt === PORT_ATTEMPTS) throw error;
      port = await freePort();
    }
  }
  return {
    url: `redis://127.0.0.1:${port}`,
    port,
    dir,
    kill: async () => {
      if (!proc || proc.hasExited()) return;
      process.kill(proc.pid, 'SIGKILL');
      await proc.exited;
    },
    stop: async () => {
      await proc?.stop();
    },
    start,
  };
}
