// A node component (etcd, kube-apiserver, containerd, kubelet …) as a detached process inside the node's
// network namespace (nsenter --net: the mount namespace stays the machine's, so the kubelet's and containerd's
// mounts are seen by both). Its PID goes into the state folder, so teardown finds it even after the process
// that started it is gone; `./tollgatew cluster up` leaves the node running on purpose. With pdeathsig (test
// runs) the kernel also kills it when the test process dies.

import { spawn } from 'node:child_process';
import { closeSync, existsSync, mkdirSync, openSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import type { ManagedProcess } from '../control-plane/managed-process.ts';
import { NETNS_PATH, paths } from './node-layout.ts';

export interface ComponentOptions {
  name: string;
  command: string;
  args: string[];
  /** Run in the node's network namespace (everything but the image import does). */
  inNamespace?: boolean;
  pdeathsig: boolean;
  env?: NodeJS.ProcessEnv;
}

// The PATH components see: containerd finds runc and its shim there, the kubelet mount and iptables.
const COMPONENT_PATH = '/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin';

export function startComponent(opts: ComponentOptions): ManagedProcess {
  mkdirSync(paths.logs, { recursive: true });
  mkdirSync(paths.pids, { recursive: true });
  const logPath = join(paths.logs, `${opts.name}.log`);
  const argv = [opts.command, ...opts.args];
  if (opts.inNamespace !== false) argv.unshift('nsenter', `--net=${NETNS_PATH}`, '--');
  if (opts.pdeathsig && existsSync('/usr/bin/setpriv')) argv.unshift('/usr/bin/setpriv', '--pdeathsig', 'SIGKILL', '--');
  const logFd = openSync(logPath, 'a');
  let child;
  try {
    child = spawn(argv[0]!, argv.slice(1), {
      detached: true,
      stdio: ['ignore', logFd, logFd],
      env: { ...(opts.env ?? process.env), PATH: COMPONENT_PATH },
    });
  } finally {
    closeSync(logFd);
  }
  if (child.pid === undefined) throw new Error(`${opts.name}: could not start ${opts.command}`);
  const pid = child.pid;
  writeFileSync(join(paths.pids, opts.name), String(pid));
  let ended = false;
  const exited = new Promise<string>((resolve) => {
    child.once('error', (err) => {
      ended = true;
      resolve(`failed: ${err.message}`);
    });
    child.once('exit', (code, signal) => {
      ended = true;
      resolve(signal ? `killed by ${signal}` : `exited with code ${code}`);
    });
  });
  child.unref();
  const logTail = (lines = 40) => {
    try {
      return readFileSync(logPath, 'utf8').trimEnd().split('\n').slice(-lines).join('\n');
    } catch {
      return '(no log)';
    }
  };
  const stop = async (graceMs = 10_000) => {
    if (ended) return;
    try {
      process.kill(pid, 'SIGTERM');
    } catch {
      return;
    }
    const timer = setTimeout(() => {
      try {
        process.kill(pid, 'SIGKILL');
      } catch {
        // gone
      }
    }, graceMs);
    await exited;
    clearTimeout(timer);
  };
  return { name: opts.name, pid, logPath, exited, hasExited: () => ended, stop, logTail };
}
