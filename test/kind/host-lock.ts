// A machine-wide exclusive lock held by a `flock` child process: released when release() is called or when
// this process dies (the child sees its stdin close), so a killed run never leaves the lock taken.

import { spawn } from 'node:child_process';
import { mkdirSync } from 'node:fs';
import type { Socket } from 'node:net';
import { dirname } from 'node:path';

export interface HostLock {
  release(): void;
}

export async function acquireHostLock(path: string, what: string): Promise<HostLock> {
  mkdirSync(dirname(path), { recursive: true });
  const child = spawn('flock', ['--exclusive', path, 'sh', '-c', 'echo locked; exec cat >/dev/null'], { stdio: ['pipe', 'pipe', 'inherit'] });
  const waiting = setTimeout(() => process.stderr.write(`[${what}] another run holds ${path}; waiting for it\n`), 1000);
  try {
    await new Promise<void>((resolve, reject) => {
      child.once('error', reject);
      child.once('exit', (code) => reject(new Error(`flock ${path} exited with code ${code} before taking the lock`)));
      child.stdout.setEncoding('utf8').once('data', () => resolve());
    });
  } finally {
    clearTimeout(waiting);
  }
  child.removeAllListeners('exit');
  // The lock must not keep this process alive; it ends with release() or with this process.
  child.unref();
  (child.stdout as Socket).unref();
  (child.stdin as Socket).unref();
  return {
    release() {
      child.stdin.end();
    },
  };
}
