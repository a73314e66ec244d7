// A long-running child (etcd, kube-apiserver) that must never outlive the test process: it runs in its own
// process group, its output goes to a log file, and it is killed on stop(), on process exit and on
// SIGINT/SIGTERM/SIGHUP. Where util-linux's setpriv exists, the kernel also kills it when its parent dies
// without running any handler (SIGKILL, an OOM kill), through PR_SET_PDEATHSIG.

import { spawn, type ChildProcess } from 'node:child_process';
import { closeSync, existsSync, openSync, readFileSync } from 'node:fs';

export interface ManagedProcess {
  readonly name: string;
  readonly pid: number;
  readonly logPath: string;
  /** Resolves with a description (exit code or signal) once the process has ended, for whatever reason. */
  readonly exited: Promise<string>;
  hasExited(): boolean;
  /** SIGTERM to the whole process group, SIGKILL after graceMs; resolves once the process is gone. */
  stop(graceMs?: number): Promise<void>;
  logTail(lines?: number): string;
}

const SETPRIV = '/usr/bin/setpriv';
const running = new Set<ChildProcess>();
let handlersInstalled = false;

function killGroupNow(child: ChildProcess): void {
  if (child.pid === undefined) return;
  try {
    process.kill(-child.pid, 'SIGKILL');
  } catch {
    // already gone
  }
}

// Synchronous on purpose: 'exit' listeners cannot wait for anything.
function killAllNow(): void {
  for (const child of running) killGroupNow(child);
  running.clear();
}

const exitHooks = new Set<() => void>();

/** Runs hook synchronously when the process exits or is interrupted; returns a function that unregisters it. */
export function onProcessExit(hook: () => void): () => void {
  installHandlers();
  exitHooks.add(hook);
  return () => exitHooks.delete(hook);
}

function runExitHooks(): void {
  killAllNow();
  for (const hook of exitHooks) {
    try {
      hook();
    } catch {
      // best effort while the process is going down
    }
  }
  exitHooks.clear();
}

function installHandlers(): void {
  if (handlersInstalled) return;
  handlersInstalled = true;
  process.on('exit', runExitHooks);
  for (const signal of ['SIGINT', 'SIGTERM', 'SIGHUP'] as const) {
    const handler = () => {
      runExitHooks();
      // If nobody else listens, restore the default action so the process still dies of the signal.
      if (process.listenerCount(signal) === 1) {
        process.removeListener(signal, handler);
        process.kill(process.pid, signal);
      }
    };
    process.on(signal, handler);
  }
}

export function startManagedProcess(opts: { name: string; command: string; args: string[]; logPath: string; env?: NodeJS.ProcessEnv }): ManagedProcess {
  installHandlers();
  const logFd = openSync(opts.logPath, 'a');
  const [command, args] = existsSync(SETPRIV) ? [SETPRIV, ['--pdeathsig', 'SIGKILL', '--', opts.command, ...opts.args]] : [opts.command, opts.args];
  let child: ChildProcess;
  try {
    child = spawn(command, args, {
      detached: true, // own process group, so a group kill reaches anything it forks
      stdio: ['ignore', logFd, logFd],
      env: opts.env ?? process.env,
    });
  } finally {
    closeSync(logFd);
  }
  if (child.pid === undefined) {
    throw new Error(`${opts.name}: could not start ${opts.command}`);
  }
  const pid = child.pid;
  running.add(child);
  let ended = false;
  const exited = new Promise<string>((resolve) => {
    child.once('error', (err) => {
      ended = true;
      running.delete(child);
      resolve(`failed: ${err.message}`);
    });
    child.once('exit', (code, signal) => {
      ended = true;
      running.delete(child);
      resolve(signal ? `killed by ${signal}` : `exited with code ${code}`);
    });
  });
  // Keep the test process from waiting on the child's handle at shutdown.
  child.unref();

  const logTail = (lines = 40): string => {
    try {
      return readFileSync(opts.logPath, 'utf8').trimEnd().split('\n').slice(-lines).join('\n');
    } catch {
      return '(no log)';
    }
  };

  const stop = async (graceMs = 10_000): Promise<void> => {
    if (ended) return;
    try {
      process.kill(-pid, 'SIGTERM');
    } catch {
      // already gone
    }
    const timer = setTimeout(() => killGroupNow(child), graceMs);
    try {
      await exited;
    } finally {
      clearTimeout(timer);
    }
  };

  return { name: opts.name, pid, logPath: opts.logPath, exited, hasExited: () => ended, stop, logTail };
}
