// Everything a kind cluster with Tollgate needs before it starts: a Docker daemon, the binaries (kubectl and
// helm from the control-plane build, kind and the node's binaries from build.sh's kind target: each built
// once into the shared cache under its lock), the node image and Tollgate's images.
//
// The node image is kind's published one where a registry answers; elsewhere local-images.sh assembles one
// from the same binaries (ADR 0112). TOLLGATE_KIND_NODE_IMAGE names another; TOLLGATE_OFFLINE_IMAGES=1 skips
// the registry (the local path, also where one answers).

import { join } from 'node:path';
import { ensureControlPlaneBinaries, runBuildScript } from '../control-plane/binaries.ts';
import { dockerEngineUp } from './docker-engine.ts';
import { run } from './host-command.ts';
import { buildPreviousRelease, type PreviousRelease } from './previous-release.ts';
import { buildTollgateImages, inspectImage, type TollgateImages } from './tollgate-images.ts';

/** kind v0.33.0's published image for Kubernetes 1.34 (1.35 and later refuse cgroup v1 hosts). */
export const PUBLISHED_NODE_IMAGE = 'kindest/node:v1.34.11@sha256:44e222ee2132dab25ff87301682f89eb82c7880ea3a1bf543bfe9708fd08d67d';

export interface NodeImage {
  ref: string;
  /** Assembled here: no kindnetd, and kubeadm told which etcd and CoreDNS tags it carries. */
  local: boolean;
  /** The image carries kindnetd (kind's default network plugin); without it kind-cluster.ts sets up the pod network. */
  kindnet: boolean;
  etcdTag?: string;
  corednsTag?: string;
}

export interface KindAssets {
  controlPlaneBin: string;
  kindBin: string;
  nodeImage: NodeImage;
  images: TollgateImages;
  /** The release the one-node suite upgrades from (ADR 0113); only when asked for. */
  previous?: PreviousRelease;
}

async function nodeImage(controlPlaneBin: string, kindBin: string, log: (line: string) => void): Promise<NodeImage> {
  const named = process.env.TOLLGATE_KIND_NODE_IMAGE;
  if (named) return { ref: named, local: false, kindnet: true };
  if (process.env.TOLLGATE_OFFLINE_IMAGES !== '1') {
    const pulled = await run('timeout', ['120', 'docker', 'pull', '-q', PUBLISHED_NODE_IMAGE], { okCodes: [0, 1, 124, 125] });
    if (pulled.code === 0) return { ref: PUBLISHED_NODE_IMAGE, local: false, kindnet: true };
    log(`${PUBLISHED_NODE_IMAGE.split('@')[0]} cannot be pulled: assembling a node image here`);
  }
  const script = join(import.meta.dirname, 'local-images.sh');
  const ref = (await run('bash', [script, 'kind-node', controlPlaneBin, kindBin], { showProgress: true })).stdout.trim().split('\n').at(-1)!;
  const labels = (await inspectImage(ref)).Labels ?? {};
  return { ref, local: true, kindnet: labels['dev.tollgate.kindnet'] === 'true', etcdTag: labels['dev.tollgate.etcd-tag']!, corednsTag: labels['dev.tollgate.coredns-tag']! };
}

export interface KindBinaries {
  controlPlaneBin: string;
  kindBin: string;
}

/** The Go builds: long when cold, and nothing on the machine changes, so callers run them before the lock. */
export async function kindBinaries(): Promise<KindBinaries> {
  // One after the other: each build takes both cores when it is cold.
  const controlPlaneBin = await ensureControlPlaneBinaries();
  const kindBin = await runBuildScript('kind');
  return { controlPlaneBin, kindBin };
}

/** Docker, the node image and Tollgate's images: the steps that change the machine (callers hold MACHINE_LOCK). */
export async function prepareKindAssets(log: (line: string) => void, binaries: KindBinaries, opts: { previousRelease?: boolean } = {}): Promise<KindAssets> {
  await dockerEngineUp();
  const node = await nodeImage(binaries.controlPlaneBin, binaries.kindBin, log);
  const images = await buildTollgateImages(log);
  const previous = opts.previousRelease ? await buildPreviousRelease(images, log) : undefined;
  return { ...binaries, nodeImage: node, images, ...(previous ? { previous } : {}) };
}
