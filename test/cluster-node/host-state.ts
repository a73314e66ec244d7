// What a node changes on the machine outside its own folders and network namespace, recorded before it
// starts and put back by teardown: the kernel settings the kubelet rewrites (they are global, not per network
// namespace) and the well-known folders Kubernetes components create when they do not exist yet.

import { existsSync, lstatSync, readdirSync, readFileSync, readlinkSync, rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { STATE_DIR } from './node-layout.ts';

// The kubelet sets these at start-up (unless protectKernelDefaults, which instead refuses to start).
export const GLOBAL_SYSCTLS = ['vm.overcommit_memory', 'vm.panic_on_oom', 'kernel.panic', 'kernel.panic_on_oops', 'kernel.keys.root_maxkeys', 'kernel.keys.root_maxbytes'] as const;

// Default locations of Kubernetes and containerd state. The node points every configurable one at its own
// folders; these are watched anyway, so one that is not configurable (the kubelet's /var/log/containers, the
// shims' sockets under /run/containerd) or a default that a future version starts using is cleaned up too.
export const WATCHED_PATHS = [
  '/var/log/containers',
  '/var/log/pods',
  '/var/lib/cni',
  '/var/lib/kubelet',
  '/var/lib/containerd',
  '/run/containerd',
  '/run/kubernetes',
  '/etc/cni',
  '/etc/kubernetes',
  '/opt/cni',
  '/opt/containerd',
] as const;

export interface HostBefore {
  sysctls: Record<string, string>;
  absentPaths: string[];
}

const sysctlPath = (name: string) => join('/proc/sys', ...name.split('.'));

export function readSysctls(): Record<string, string> {
  const values: Record<string, string> = {};
  for (const name of GLOBAL_SYSCTLS) {
    try {
      values[name] = readFileSync(sysctlPath(name), 'utf8').trim();
    } catch {
      // not on this kernel
    }
  }
  return values;
}

export function recordHostBefore(file: string): HostBefore {
  const before: HostBefore = { sysctls: readSysctls(), absentPaths: WATCHED_PATHS.filter((p) => !existsSync(p)) };
  writeFileSync(file, JSON.stringify(before, null, 2));
  return before;
}

/** Puts back what recordHostBefore saw; returns what it changed. */
export function restoreHost(before: HostBefore): string[] {
  const changed: string[] = [];
  for (const [name, value] of Object.entries(before.sysctls)) {
    try {
      if (readFileSync(sysctlPath(name), 'utf8').trim() !== value) {
        writeFileSync(sysctlPath(name), value);
        changed.push(`sysctl ${name}=${value}`);
      }
    } catch (err) {
      changed.push(`sysctl ${name}: could not restore ${value}: ${(err as Error).message}`);
    }
  }
  for (const path of WATCHED_PATHS) {
    if (before.absentPaths.includes(path)) {
      if (existsSync(path)) {
        rmSync(path, { recursive: true, force: true });
        changed.push(`removed ${path}`);
      }
    } else if (path === '/var/log/containers' && existsSync(path)) {
      // The folder was there before: remove only the kubelet's links into the node's pod logs.
      for (const name of readdirSync(path)) {
        const link = join(path, name);
        if (lstatSync(link).isSymbolicLink() && readlinkSync(link).startsWith(`${STATE_DIR}/`)) {
          rmSync(link, { force: true });
          changed.push(`removed ${link}`);
        }
      }
    }
  }
  return changed;
}

export function readHostBefore(file: string): HostBefore | undefined {
  try {
    return JSON.parse(readFileSync(file, 'utf8')) as HostBefore;
  } catch {
    return undefined;
  }
}

/** What a node could leave behind on the machine, for a before/after comparison. */
export interface HostSnapshot {
  links: string[];
  routes: string[];
  mounts: string[];
  sysctls: Record<string, string>;
  watchedPaths: string[];
  nodeCgroups: string[];
  nodeProcesses: number;
}

export function hostSnapshot(deps: {
  mounts: () => Array<{ target: string }>;
  cgroupHierarchies: () => string[];
  nodeProcesses: () => number[];
  ip: (args: string[]) => string;
}): HostSnapshot {
  return {
    links: (JSON.parse(deps.ip(['-j', 'link', 'show'])) as Array<{ ifname: string }>).map((l) => l.ifname).sort(),
    routes: (JSON.parse(deps.ip(['-j', 'route', 'show', 'table', 'all'])) as Array<{ dst: string; dev?: string; table?: string | number }>)
      .map((r) => `${r.dst} ${r.dev ?? ''} ${r.table ?? ''}`)
      .sort(),
    mounts: deps
      .mounts()
      .map((m) => m.target)
      .sort(),
    sysctls: readSysctls(),
    watchedPaths: WATCHED_PATHS.filter((p) => existsSync(p)),
    nodeCgroups: deps.cgroupHierarchies().filter((h) => existsSync(join(h, 'tollgate-node'))),
    nodeProcesses: deps.nodeProcesses().length,
  };
}
