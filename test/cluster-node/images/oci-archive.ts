// An OCI image archive (image layout in a tar) from file trees: one uncompressed tar layer per tree, the
// image config, a manifest and an index whose annotation names the image, which is how `ctr images import`
// learns the reference. No registry and no Docker engine are involved.

import { createHash } from 'node:crypto';
import { createReadStream, linkSync, mkdirSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { run } from '../host-command.ts';

export interface Layer {
  /** The layer's tar file. */
  path: string;
  /** sha256:… of the tar (uncompressed, so digest = diff_id). */
  digest: string;
  size: number;
}

export interface ImageConfig {
  env: Record<string, string>;
  entrypoint?: string[];
  cmd?: string[];
  workingDir: string;
  user: string;
  exposedPorts: string[];
  labels: Record<string, string>;
}

export async function sha256File(path: string): Promise<string> {
  const hash = createHash('sha256');
  for await (const chunk of createReadStream(path)) hash.update(chunk as Buffer);
  return `sha256:${hash.digest('hex')}`;
}

/** A reproducible tar of dir's contents: sorted, owned by root, timestamps zeroed. */
export async function writeLayer(dir: string, out: string): Promise<Layer> {
  await run('tar', ['--create', `--file=${out}`, `--directory=${dir}`, '--sort=name', '--owner=0', '--group=0', '--numeric-owner', '--mtime=@0', '--format=gnu', '.']);
  return { path: out, digest: await sha256File(out), size: statSync(out).size };
}

function blob(layoutDir: string, content: string): { digest: string; size: number } {
  const bytes = Buffer.from(content, 'utf8');
  const hex = createHash('sha256').update(bytes).digest('hex');
  writeFileSync(join(layoutDir, 'blobs', 'sha256', hex), bytes);
  return { digest: `sha256:${hex}`, size: bytes.length };
}

export function configDocument(config: ImageConfig, layers: Layer[]): Record<string, unknown> {
  return {
    architecture: 'amd64',
    os: 'linux',
    created: '1970-01-01T00:00:00Z',
    config: {
      User: config.user,
      Env: Object.entries(config.env).map(([k, v]) => `${k}=${v}`),
      ...(config.entrypoint ? { Entrypoint: config.entrypoint } : {}),
      ...(config.cmd ? { Cmd: config.cmd } : {}),
      WorkingDir: config.workingDir,
      ...(config.exposedPorts.length ? { ExposedPorts: Object.fromEntries(config.exposedPorts.map((p) => [p, {}])) } : {}),
      ...(Object.keys(config.labels).length ? { Labels: config.labels } : {}),
    },
    rootfs: { type: 'layers', diff_ids: layers.map((l) => l.digest) },
  };
}

/** Writes the archive for image `ref` (name:tag) to out. The layer files are hard-linked, not copied. */
export async function writeOciArchive(out: string, ref: string, config: ImageConfig, layers: Layer[]): Promise<void> {
  const layoutDir = `${out}.layout`;
  rmSync(layoutDir, { recursive: true, force: true });
  mkdirSync(join(layoutDir, 'blobs', 'sha256'), { recursive: true });
  try {
    for (const layer of layers) {
      const target = join(layoutDir, 'blobs', 'sha256', layer.digest.slice('sha256:'.length));
      rmSync(target, { force: true });
      linkSync(layer.path, target);
    }
    const configBlob = blob(layoutDir, JSON.stringify(configDocument(config, layers)));
    const manifest = blob(
      layoutDir,
      JSON.stringify({
        schemaVersion: 2,
        mediaType: 'application/vnd.oci.image.manifest.v1+json',
        config: { mediaType: 'application/vnd.oci.image.config.v1+json', ...configBlob },
        layers: layers.map((l) => ({ mediaType: 'application/vnd.oci.image.layer.v1.tar', digest: l.digest, size: l.size })),
      }),
    );
    const tag = ref.slice(ref.lastIndexOf(':') + 1);
    writeFileSync(join(layoutDir, 'oci-layout'), JSON.stringify({ imageLayoutVersion: '1.0.0' }));
    writeFileSync(
      join(layoutDir, 'index.json'),
      JSON.stringify({
        schemaVersion: 2,
        mediaType: 'application/vnd.oci.image.index.v1+json',
        manifests: [
          {
            mediaType: 'application/vnd.oci.image.manifest.v1+json',
            ...manifest,
            platform: { architecture: 'amd64', os: 'linux' },
            annotations: { 'io.containerd.image.name': ref, 'org.opencontainers.image.ref.name': tag },
          },
        ],
      }),
    );
    await run('tar', ['--create', `--file=${out}`, `--directory=${layoutDir}`, '--sort=name', '--mtime=@0', '--owner=0', '--group=0', '--numeric-owner', '.']);
  } finally {
    rmSync(layoutDir, { recursive: true, force: true });
  }
}
