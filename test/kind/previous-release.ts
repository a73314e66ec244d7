// The previous release as a platform team has it installed: its chart and its two images, built from the
// commit test/kind/previous-release.txt records (ADR 0113; the repository has no tags yet). The tree comes
// out of git with `git archive` into the cache, and its own Dockerfile builds the images with the same
// builder as today's, so the layers the two releases share (the base, the npm ci stages when the lock file
// is unchanged) are built once. Tagged `previous-<commit>`, so they never replace today's images and a warm
// run finds them.

import { existsSync, mkdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { tollgateCache } from './cache-dir.ts';
import { run } from './host-command.ts';
import { chartImageRefs, dockerBuildEnv, type TollgateImages } from './tollgate-images.ts';

const ROOT = join(import.meta.dirname, '..', '..');

export interface PreviousRelease {
  commit: string;
  /** The release's chart directory (charts/tollgate of that tree). */
  chart: string;
  /** Its operator/webhook and sidecar images, tagged apart from today's. */
  images: { tollgate: string; sidecar: string };
  /** The image tag, for `--set image.tag=… --set sidecar.image.tag=…`. */
  tag: string;
}

export function recordedPreviousCommit(): string {
  const lines = readFileSync(join(import.meta.dirname, 'previous-release.txt'), 'utf8')
    .split('\n')
    .map((l) => l.trim())
    .filter((l) => l && !l.startsWith('#'));
  const commit = lines[0];
  if (!commit || !/^[0-9a-f]{40}$/.test(commit)) throw new Error('test/kind/previous-release.txt must name one full commit hash');
  return commit;
}

/** The recorded commit's tree in the cache, extracted once (also run from source by test/cluster/operator-behind.test.ts). */
export async function previousTree(commit: string): Promise<string> {
  const dir = tollgateCache('kind', 'previous', commit.slice(0, 12));
  if (existsSync(join(dir, '.complete'))) return dir;
  const known = await run('git', ['-C', ROOT, 'cat-file', '-e', `${commit}^{commit}`], { okCodes: [0, 1, 128] });
  if (known.code !== 0) {
    throw new Error(`the previous release's commit ${commit} (test/kind/previous-release.txt) is not in this clone: a shallow clone? \`git fetch --unshallow\` gets it`);
  }
  rmSync(dir, { recursive: true, force: true });
  mkdirSync(dir, { recursive: true });
  await run('sh', ['-c', `git -C "$1" archive --format=tar "$2" | tar -x -C "$3"`, 'sh', ROOT, commit, dir]);
  writeFileSync(join(dir, '.complete'), `${commit}\n`);
  return dir;
}

async function hasImage(ref: string): Promise<boolean> {
  return (await run('docker', ['image', 'inspect', ref], { okCodes: [0, 1] })).code === 0;
}

const withTag = (ref: string, tag: string) => `${ref.slice(0, ref.lastIndexOf(':'))}:${tag}`;

/** Builds (or finds) the previous release's images, after today's (they share the base and its builder). */
export async function buildPreviousRelease(today: TollgateImages, log: (line: string) => void): Promise<PreviousRelease> {
  const commit = recordedPreviousCommit();
  const dir = await previousTree(commit);
  const tag = `previous-${commit.slice(0, 12)}`;
  const refs = chartImageRefs();
  const images = { tollgate: withTag(refs.tollgate, tag), sidecar: withTag(refs.sidecar, tag) };
  const { env } = await dockerBuildEnv(today.base.standIn);
  for (const [target, ref] of [
    ['tollgate', images.tollgate],
    ['sidecar', images.sidecar],
  ] as const) {
    if (await hasImage(ref)) continue;
    const started = Date.now();
    await run('docker', ['build', '--target', target, '-t', ref, '.'], { env, cwd: dir });
    log(`docker build --target ${target} of the previous release (${commit.slice(0, 12)}): ${Math.round((Date.now() - started) / 1000)} s`);
  }
  return { commit, chart: join(dir, 'charts', 'tollgate'), images, tag };
}
