// Tollgate's images as users build them: `docker build` of the repository's Dockerfile, targets `tollgate` and
// `sidecar`, tagged as the chart's values name them, plus the node test's own image (the fake upstream and
// the in-pod client) on top of the `tollgate` one. The base the Dockerfile names (node:24-bookworm-slim) is
// pulled, or built locally with the same tag where no registry answers (local-images.sh, ADR 0112).
//
// Without a registry the build uses Docker's classic builder: BuildKit would fetch the `# syntax` line's
// frontend image from Docker Hub. Both builders cache layers, so an unchanged tree rebuilds in seconds.

import { mkdtempSync, readFileSync, rmSync, cpSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { parse as parseYaml } from 'yaml';
import { run } from './host-command.ts';
import { tollgateCache } from './cache-dir.ts';

const ROOT = join(import.meta.dirname, '..', '..');
const CHART = join(ROOT, 'charts', 'tollgate');
export const TEST_TOOLS_IMAGE = 'tollgate.test/test-tools:dev';

/** What `docker image inspect` says of an image's config: what the test compares the running process to. */
export interface ImageConfig {
  user: string;
  entrypoint: string[];
  cmd: string[];
  workingDir: string;
  env: Record<string, string>;
}

export interface BuiltImage {
  ref: string;
  config: ImageConfig;
}

export interface TollgateImages {
  /** The operator and webhook image (Dockerfile target `tollgate`). */
  tollgate: BuiltImage;
  /** The injected proxy (Dockerfile target `sidecar`). */
  sidecar: BuiltImage;
  /** The chart's optional counter store (Dockerfile target `redis`, budgets.redis.deploy). */
  redis: BuiltImage;
  testTools: BuiltImage;
  /** The base the Dockerfile was built on, and whether it is the local stand-in. */
  base: { ref: string; standIn: boolean; nodeVersion: string };
}

/** The references the chart's default values give both images (repository, tag or the chart's appVersion). */
export function chartImageRefs(): { tollgate: string; sidecar: string; redis: string } {
  const chart = parseYaml(readFileSync(join(CHART, 'Chart.yaml'), 'utf8')) as { appVersion: string };
  const values = parseYaml(readFileSync(join(CHART, 'values.yaml'), 'utf8')) as {
    image: { repository: string; tag: string };
    sidecar: { image: { repository: string; tag: string } };
    budgets: { redis: { image: { repository: string; tag: string } } };
  };
  return {
    tollgate: `${values.image.repository}:${values.image.tag || chart.appVersion}`,
    sidecar: `${values.sidecar.image.repository}:${values.sidecar.image.tag || chart.appVersion}`,
    redis: `${values.budgets.redis.image.repository}:${values.budgets.redis.image.tag || chart.appVersion}`,
  };
}

interface InspectedConfig {
  Config: { User?: string; Entrypoint?: string[] | null; Cmd?: string[] | null; WorkingDir?: string; Env?: string[] | null; Labels?: Record<string, string> | null };
}

export async function inspectImage(ref: string): Promise<InspectedConfig['Config']> {
  const [image] = JSON.parse((await run('docker', ['image', 'inspect', ref])).stdout) as InspectedConfig[];
  return image!.Config;
}

async function builtImage(ref: string): Promise<BuiltImage> {
  const c = await inspectImage(ref);
  const env = Object.fromEntries((c.Env ?? []).map((e) => [e.slice(0, e.indexOf('=')), e.slice(e.indexOf('=') + 1)]));
  return { ref, config: { user: c.User ?? '', entrypoint: c.Entrypoint ?? [], cmd: c.Cmd ?? [], workingDir: c.WorkingDir || '/', env } };
}

async function buildKitAvailable(): Promise<boolean> {
  return (await run('docker', ['buildx', 'version'], { okCodes: [0, 1, 125] })).code === 0;
}

/** Docker's classic builder on the stand-in base or without buildx; BuildKit otherwise. */
export async function dockerBuildEnv(standIn: boolean): Promise<{ env: NodeJS.ProcessEnv; classic: boolean }> {
  const classic = standIn || !(await buildKitAvailable());
  return { env: { ...process.env, DOCKER_BUILDKIT: classic ? '0' : '1' }, classic };
}

export async function buildTollgateImages(log: (line: string) => void): Promise<TollgateImages> {
  const baseRef = (await run('bash', [join(import.meta.dirname, 'local-images.sh'), 'node-base'], { showProgress: true })).stdout.trim().split('\n').at(-1)!;
  const baseConfig = await inspectImage(baseRef);
  const standIn = Boolean(baseConfig.Labels?.['dev.tollgate.stand-in']);
  const { env, classic } = await dockerBuildEnv(standIn);
  const refs = chartImageRefs();
  const build = async (args: string[]) => {
    const started = Date.now();
    await run('docker', ['build', ...args], { env, cwd: ROOT });
    log(`docker build ${args.join(' ')}: ${Math.round((Date.now() - started) / 1000)} s${classic ? ' (classic builder)' : ''}`);
  };
  await build(['--target', 'tollgate', '-t', refs.tollgate, '.']);
  await build(['--target', 'sidecar', '-t', refs.sidecar, '.']);
  await build(['--target', 'redis', '-t', refs.redis, '.']);
  // The test image's context holds only what it copies, so both builders see the same files.
  const context = mkdtempSync(join(tollgateCache(), 'test-tools-context-'));
  try {
    // The Tetragon wire format the fake agents speak comes from the sidecar's own reader of it (two files, npm deps only).
    const paths = ['test/fakes', 'test/kind/in-pod', 'sidecar/src/audit/tetragon-protocol.ts', 'sidecar/src/audit/protojson.ts'];
    for (const path of paths) cpSync(join(ROOT, path), join(context, path), { recursive: true, filter: (src) => !src.endsWith('.test.ts') });
    writeFileSync(join(context, 'Dockerfile'), readFileSync(join(import.meta.dirname, 'test-tools.Dockerfile')));
    await run('docker', ['build', '--build-arg', `TOLLGATE_IMAGE=${refs.tollgate}`, '-t', TEST_TOOLS_IMAGE, context], { env });
  } finally {
    rmSync(context, { recursive: true, force: true });
  }
  // Each changed tree leaves the classic builder's earlier stage images untagged; a day keeps them as cache.
  await run('docker', ['image', 'prune', '-f', '--filter', 'until=24h']);
  const nodeVersion = (await run('docker', ['run', '--rm', '--entrypoint', 'node', refs.sidecar, '--version'])).stdout.trim().replace(/^v/, '');
  return {
    tollgate: await builtImage(refs.tollgate),
    sidecar: await builtImage(refs.sidecar),
    redis: await builtImage(refs.redis),
    testTools: await builtImage(TEST_TOOLS_IMAGE),
    base: { ref: baseRef, standIn, nodeVersion },
  };
}
