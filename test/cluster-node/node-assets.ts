// Everything a node needs before it starts: the control-plane binaries (kube-apiserver, etcd, kubectl, helm),
// the node binaries (kubelet, kube-scheduler, kube-controller-manager, kube-proxy, CoreDNS), both built once
// by test/control-plane/build.sh into the shared cache under its lock, and the images.

import { existsSync } from 'node:fs';
import { join } from 'node:path';
import { ensureControlPlaneBinaries, runBuildScript } from '../control-plane/binaries.ts';
import { buildNodeImages, type NodeImages } from './images/node-images.ts';

export const NODE_BINARIES = ['kubelet', 'kube-scheduler', 'kube-controller-manager', 'kube-proxy', 'coredns'] as const;

export interface NodeAssets {
  controlPlaneBin: string;
  nodeBin: string;
  images: NodeImages;
}

export async function ensureNodeBinaries(): Promise<string> {
  const dir = await runBuildScript('node');
  const missing = NODE_BINARIES.filter((name) => !existsSync(join(dir, name)));
  if (dir === '' || missing.length > 0) throw new Error(`node binary folder '${dir}' lacks ${missing.join(', ')}`);
  return dir;
}

export async function prepareNodeAssets(): Promise<NodeAssets> {
  // One after the other: each build takes both cores when it is cold.
  const controlPlaneBin = await ensureControlPlaneBinaries();
  const nodeBin = await ensureNodeBinaries();
  const images = await buildNodeImages();
  return { controlPlaneBin, nodeBin, images };
}
