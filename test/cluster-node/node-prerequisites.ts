// Whether this machine can run a real node, and if not, why, in one plain sentence. `./tollgatew test`
// skips the node test with that sentence; CI (CI=true) fails with it instead.

import { existsSync, readFileSync } from 'node:fs';
import { spawnSync } from 'node:child_process';
import { onPath } from './host-command.ts';
import { missingPackages } from './host-packages.ts';

export function nodeUnavailableReason(): string | undefined {
  if (process.platform !== 'linux' || process.arch !== 'x64') return `a node needs Linux on x86-64 (this is ${process.platform}/${process.arch})`;
  const uid = process.getuid?.() ?? -1;
  if (uid !== 0) return `a node needs root for network namespaces, mounts and cgroups (running as uid ${uid})`;
  if (!existsSync('/sys/fs/cgroup/memory') && !existsSync('/sys/fs/cgroup/cgroup.controllers')) {
    return 'no cgroup file system with a memory controller under /sys/fs/cgroup';
  }
  if (!readFileSync('/proc/filesystems', 'utf8').includes('overlay')) return "the kernel has no overlay file system (containerd's snapshotter needs it)";
  for (const command of ['ip', 'nsenter', 'unshare', 'mount', 'umount', 'tar', 'flock', 'ldd']) {
    if (!onPath(command)) return `${command} is not on PATH`;
  }
  if (!onPath('go')) return 'Go is not on PATH (kubelet and the other node components are built with it)';
  if (missingPackages().length > 0 && !(onPath('apt-get') && onPath('dpkg-query'))) {
    return `containerd, runc and the CNI plugins are missing and there is no apt-get to install them`;
  }
  if (spawnSync('unshare', ['--net', 'true'], { stdio: 'ignore' }).status !== 0) return 'cannot create a network namespace (unshare --net failed)';
  return undefined;
}
