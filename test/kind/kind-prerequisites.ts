// Whether this machine can run kind, and if not, why, in one plain sentence. `./tollgatew test` skips the kind
// tests with that sentence; CI (CI=true) fails with it instead.

import { spawnSync } from 'node:child_process';
import { existsSync } from 'node:fs';
import { onPath } from './host-command.ts';

export function kindUnavailableReason(): string | undefined {
  if (process.platform !== 'linux' || process.arch !== 'x64') return `kind here needs Linux on x86-64 (this is ${process.platform}/${process.arch})`;
  const root = process.getuid?.() === 0;
  const daemonAnswers = onPath('docker') && spawnSync('docker', ['version'], { stdio: 'ignore', timeout: 10_000 }).status === 0;
  if (!daemonAnswers) {
    if (!root) return 'no Docker daemon answers, and starting one needs root';
    if (!onPath('dockerd') && !onPath('apt-get')) return 'no Docker daemon answers, dockerd is not installed and there is no apt-get to install docker.io';
  }
  if (!root) return `the kind tests read and reset pod memory cgroups on the machine, which needs root (running as uid ${process.getuid?.()})`;
  if (!existsSync('/sys/fs/cgroup/memory') && !existsSync('/sys/fs/cgroup/cgroup.controllers')) return 'no cgroup file system with a memory controller under /sys/fs/cgroup';
  for (const command of ['go', 'tar', 'flock', 'ldd']) {
    if (!onPath(command)) return `${command} is not on PATH${command === 'go' ? ' (kind, kubelet and the other node binaries are built with it)' : ''}`;
  }
  return undefined;
}
