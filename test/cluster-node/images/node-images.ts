// The images a real node needs, built without Docker or a registry (ADR 0111): Tollgate's two images from the
// Dockerfile's targets, named as the chart's values name them, the test's own image and the sandbox (pause)
// image. `./tollgatew node test/cluster-node/images/node-images.ts` builds them and prints their sizes, as
// stored (uncompressed layers) and as a registry would store them (gzip).

import { spawn } from 'node:child_process';
import { existsSync, mkdirSync, readdirSync, readFileSync, renameSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { pipeline } from 'node:stream/promises';
import { createGzip } from 'node:zlib';
import { join } from 'node:path';
import { parse as parseYaml } from 'yaml';
import { tollgateCache } from '../cache-dir.ts';
import { run } from '../host-command.ts';
import { acquireHostLock } from '../host-lock.ts';
import { buildImage, type BuiltImage } from './image-build.ts';
import { sha256File, writeLayer, writeOciArchive } from './oci-archive.ts';

const ROOT = join(import.meta.dirname, '..', '..', '..');
const CHART = join(ROOT, 'charts', 'tollgate');
export const PAUSE_IMAGE = 'tollgate.test/pause:3.10';
export const TEST_TOOLS_IMAGE = 'tollgate.test/test-tools:dev';

export interface NodeImages {
  /** The operator and webhook image (Dockerfile target `tollgate`). */
  tollgate: BuiltImage;
  /** The injected proxy (Dockerfile target `sidecar`). */
  sidecar: BuiltImage;
  testTools: BuiltImage;
  pause: BuiltImage;
}

/** The references the chart's default values give both images (repository, tag or the chart's appVersion). */
export function chartImageRefs(): { tollgate: string; sidecar: string } {
  const chart = parseYaml(readFileSync(join(CHART, 'Chart.yaml'), 'utf8')) as { appVersion: string };
  const values = parseYaml(readFileSync(join(CHART, 'values.yaml'), 'utf8')) as {
    image: { repository: string; tag: string };
    sidecar: { image: { repository: string; tag: string } };
  };
  return {
    tollgate: `${values.image.repository}:${values.image.tag || chart.appVersion}`,
    sidecar: `${values.sidecar.image.repository}:${values.sidecar.image.tag || chart.appVersion}`,
  };
}

async function pauseImage(): Promise<BuiltImage> {
  const source = join(import.meta.dirname, 'pause.go');
  const key = (await sha256File(source)).slice('sha256:'.length, 'sha256:'.length + 16);
  const dir = tollgateCache('images', `pause-${key}`);
  const config = { env: {}, entrypoint: ['/pause'], workingDir: '/', user: '65535:65535', exposedPorts: [], labels: {} };
  if (!existsSync(join(dir, 'image.json'))) {
    const tmp = `${dir}.tmp-${process.pid}`;
    rmSync(tmp, { recursive: true, force: true });
    mkdirSync(join(tmp, 'rootfs'), { recursive: true });
    await run('go', ['build', '-trimpath', '-ldflags=-s -w', '-o', join(tmp, 'rootfs', 'pause'), source], {
      cwd: tmp,
      env: { ...process.env, CGO_ENABLED: '0', GOTOOLCHAIN: 'local', GOFLAGS: '-buildvcs=false', GO111MODULE: 'on' },
    });
    const layer = await writeLayer(join(tmp, 'rootfs'), join(tmp, 'layer.tar'));
    await writeOciArchive(join(tmp, 'image.tar'), PAUSE_IMAGE, config, [layer]);
    rmSync(join(tmp, 'rootfs'), { recursive: true });
    rmSync(join(tmp, 'layer.tar'));
    writeFileSync(join(tmp, 'image.json'), JSON.stringify({ ref: PAUSE_IMAGE, layers: [{ ...layer, path: '' }] }));
    rmSync(dir, { recursive: true, force: true });
    renameSync(tmp, dir);
  }
  const meta = JSON.parse(readFileSync(join(dir, 'image.json'), 'utf8')) as Pick<BuiltImage, 'ref' | 'layers'>;
  return { ...meta, config, archive: join(dir, 'image.tar') };
}

// Builds are serialised by the lock, so work folders and half-published entries still here are from a build
// that was killed.
function removeInterruptedBuilds(): void {
  const root = tollgateCache('images');
  if (!existsSync(root)) return;
  rmSync(join(root, 'work'), { recursive: true, force: true });
  for (const folder of readdirSync(root)) {
    const path = join(root, folder);
    if (folder.includes('.tmp-')) rmSync(path, { recursive: true, force: true });
    else if (statSync(path).isDirectory()) {
      for (const entry of readdirSync(path)) if (entry.includes('.tmp-')) rmSync(join(path, entry), { recursive: true, force: true });
    }
  }
}

/** Builds all four, one build at a time on the machine (the same discipline as build.sh). */
export async function buildNodeImages(): Promise<NodeImages> {
  const lock = await acquireHostLock(tollgateCache('images', '.build.lock'), 'images');
  try {
    removeInterruptedBuilds();
    const refs = chartImageRefs();
    const dockerfile = join(ROOT, 'Dockerfile');
    const tollgate = await buildImage({ dockerfile, context: ROOT, target: 'tollgate', ref: refs.tollgate });
    const sidecar = await buildImage({ dockerfile, context: ROOT, target: 'sidecar', ref: refs.sidecar });
    const testTools = await buildImage({
      dockerfile: join(import.meta.dirname, 'test-tools.Dockerfile'),
      context: ROOT,
      target: 'test-tools',
      ref: TEST_TOOLS_IMAGE,
    });
    return { tollgate, sidecar, testTools, pause: await pauseImage() };
  } finally {
    lock.release();
  }
}

export function imageSize(image: BuiltImage): number {
  return image.layers.reduce((sum, l) => sum + l.size, 0);
}

/** Bytes of the layer after gzip -6, as `docker push` would upload it: read out of the archive. */
async function gzippedSize(archive: string, digest: string): Promise<number> {
  const tar = spawn('tar', ['-xOf', archive, `./blobs/sha256/${digest.slice('sha256:'.length)}`], { stdio: ['ignore', 'pipe', 'inherit'] });
  let size = 0;
  const gzip = createGzip({ level: 6 });
  gzip.on('data', (chunk: Buffer) => (size += chunk.length));
  await pipeline(tar.stdout, gzip);
  return size;
}

if (import.meta.main) {
  const images = await buildNodeImages();
  const mb = (n: number) => `${(n / 1e6).toFixed(1)} MB`;
  const gzipped = new Map<string, number>();
  for (const image of [images.tollgate, images.sidecar, images.testTools, images.pause]) {
    const sizes: number[] = [];
    for (const layer of image.layers) {
      if (!gzipped.has(layer.digest)) gzipped.set(layer.digest, await gzippedSize(image.archive, layer.digest));
      sizes.push(gzipped.get(layer.digest)!);
    }
    const gz = sizes.reduce((a, b) => a + b, 0);
    console.log(`${image.ref}  ${mb(imageSize(image))} (${image.layers.map((l) => mb(l.size)).join(' + ')}), gzip ${mb(gz)} (${sizes.map(mb).join(' + ')})`);
  }
}
