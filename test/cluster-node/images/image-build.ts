// Builds one target of a Dockerfile into an OCI archive without a container engine (ADR 0111).
//
// Each stage is a folder on the build host that stands for the stage's file system (only what the stage itself
// adds; the base is a separate layer). COPY copies from the build context (honouring .dockerignore) or from an
// earlier stage's folder; WORKDIR, ENV, USER, ENTRYPOINT, CMD, EXPOSE and LABEL go into the image config as
// Docker would put them. RUN runs on the host in the stage folder's working directory with the Node.js and npm
// of this process; only npm and npx commands are accepted, so a RUN can never write outside its stage.
// The base of `FROM node:<major>-…` is node-base.ts (the Node binary, glibc, libstdc++).
//
// Results are cached by content: a stage's exported folders by the digest of everything that went into it, the
// state after a RUN that later instructions build on (the `npm ci` before the sources are copied) likewise, and
// the finished archive by the digest of the whole target. A warm build of an unchanged tree takes milliseconds.

import { execFileSync } from 'node:child_process';
import { createHash, randomBytes } from 'node:crypto';
import { existsSync, mkdirSync, readdirSync, readFileSync, renameSync, rmSync, statSync, utimesSync, writeFileSync } from 'node:fs';
import { dirname, join, posix } from 'node:path';
import { tollgateCache } from '../cache-dir.ts';
import { run } from '../host-command.ts';
import { contextEntries, copyEntry, digestEntries, openBuildContext, type BuildContext } from './build-context.ts';
import { findStage, parseDockerfile, type Dockerfile, type Instruction, type Stage } from './dockerfile.ts';
import { IMAGE_PATH, nativeAddons, nodeBinary, sharedLibraries, writeBaseRootfs } from './node-base.ts';
import { writeLayer, writeOciArchive, type ImageConfig, type Layer } from './oci-archive.ts';

// Bump when the assembler's output changes for the same inputs, so caches built by an older one are not reused.
const ASSEMBLER_VERSION = '1';
// How many most recently used entries each cache folder keeps (an archive is ~200 MB, a snapshot ~300 MB).
const KEEP_CACHE_ENTRIES = { stages: 16, snapshots: 4, oci: 8, bases: 4 };
// Entries used this recently are kept beyond that count: another worktree's test run may have built them and
// not yet imported them into its node (several engineers' runs share the cache; each builds three archives).
const IN_USE_MS = 60 * 60 * 1000;

export interface BuildRequest {
  dockerfile: string;
  context: string;
  target: string;
  /** name:tag the archive's index gives the image. */
  ref: string;
  buildArgs?: Record<string, string>;
}

export interface BuiltImage {
  ref: string;
  archive: string;
  config: ImageConfig;
  /** Uncompressed layers, base first. */
  layers: Layer[];
  nodeVersion?: string;
}

type Base = { kind: 'node'; major: number } | { kind: 'scratch' };

interface StagePlan {
  stage: Stage;
  base: Base;
  parent?: StagePlan;
  /** keys[i]: the digest of the stage's state after instructions[0..i]. */
  keys: string[];
  startKey: string;
  finalKey: string;
}

const sha = (...parts: string[]) => createHash('sha256').update(parts.join('\0')).digest('hex');
const cacheDir = (...parts: string[]) => tollgateCache('images', ...parts);

function parseBase(from: string, stage: Stage, df: Dockerfile): Base {
  if (from === 'scratch') return { kind: 'scratch' };
  const node = /^(?:docker\.io\/)?(?:library\/)?node:(\d+)(?:[.-][\w.-]*)?$/.exec(from);
  if (node) return { kind: 'node', major: Number(node[1]) };
  throw new Error(`${df.path}:${stage.line}: FROM ${from}: the image assembler provides node:<major> bases and scratch only`);
}

/**
 * The commands of a RUN: npm and npx only, chained with &&. Anything else could write outside the stage's
 * folder on the build host, so it is refused with the line it came from.
 */
export function runSteps(at: string, command: string): string[] {
  if (/[;|`<>]|\$\(/.test(command)) throw new Error(`${at}: RUN may only chain commands with && (got ${JSON.stringify(command)})`);
  const steps = command.split('&&').map((s) => s.trim());
  for (const step of steps) {
    if (!/^(npm|npx)\s/.test(step)) throw new Error(`${at}: RUN supports npm and npx commands only (got ${JSON.stringify(step)})`);
  }
  return steps;
}

/**
 * The image config a stage ends with: its base's (PATH for a Node base), then WORKDIR, ENV, LABEL, USER,
 * ENTRYPOINT, CMD and EXPOSE applied in order, as Docker applies them.
 */
export function stageConfig(df: Dockerfile, stage: Stage): ImageConfig {
  const parentStage = df.stages.find((s) => s.name === stage.from && s.index < stage.index);
  let config: ImageConfig;
  if (parentStage) config = structuredClone(stageConfig(df, parentStage));
  else {
    const base = parseBase(stage.from, stage, df);
    config = { env: base.kind === 'node' ? { PATH: IMAGE_PATH } : {}, workingDir: '/', user: '', exposedPorts: [], labels: {} };
  }
  for (const i of stage.instructions) {
    switch (i.kind) {
      case 'WORKDIR':
        config.workingDir = posix.resolve(config.workingDir, i.path);
        break;
      case 'ENV':
        for (const [k, v] of i.vars) config.env[k] = v;
        break;
      case 'LABEL':
        for (const [k, v] of i.labels) config.labels[k] = v;
        break;
      case 'USER':
        config.user = i.user;
        break;
      case 'ENTRYPOINT':
        config.entrypoint = i.argv;
        delete config.cmd; // Docker drops an inherited CMD when ENTRYPOINT is set
        break;
      case 'CMD':
        config.cmd = i.argv;
        break;
      case 'EXPOSE':
        config.exposedPorts = [...new Set([...config.exposedPorts, ...i.ports])];
        break;
      default:
        break;
    }
  }
  return config;
}

class Builder {
  private readonly plans = new Map<string, StagePlan>();
  private readonly outputs = new Map<string, string>();
  private npmVersion: string | undefined;

  /** What a RUN's result depends on besides its command: the Node and npm that run it. */
  private runTools(): string {
    this.npmVersion ??= execFileSync('npm', ['--version'], { encoding: 'utf8' }).trim();
    return `node ${process.versions.node} npm ${this.npmVersion}`;
  }

  private readonly df: Dockerfile;
  private readonly ctx: BuildContext;
  private readonly work: string;

  constructor(df: Dockerfile, ctx: BuildContext, work: string) {
    this.df = df;
    this.ctx = ctx;
    this.work = work;
  }

  private contextSources(sources: string[]): string[] {
    return sources.flatMap((s) => contextEntries(this.ctx, s));
  }

  plan(stage: Stage): StagePlan {
    const known = this.plans.get(stage.name);
    if (known) return known;
    const parentStage = this.df.stages.find((s) => s.name === stage.from && s.index < stage.index);
    const parent = parentStage ? this.plan(parentStage) : undefined;
    const base = parent ? parent.base : parseBase(stage.from, stage, this.df);
    const startKey = parent ? parent.finalKey : sha('base', ASSEMBLER_VERSION, JSON.stringify(base));
    const keys: string[] = [];
    let key = startKey;
    for (const i of stage.instructions) {
      let inputs = '';
      if (i.kind === 'COPY') {
        inputs = i.from === undefined ? digestEntries(this.ctx, this.contextSources(i.sources)) : this.plan(this.sourceStage(stage, i.from, i.line)).finalKey;
      }
      if (i.kind === 'RUN') inputs = this.runTools();
      const { line: _line, ...meaning } = i;
      key = sha(key, JSON.stringify(meaning), inputs);
      keys.push(key);
    }
    const plan = { stage, base, ...(parent ? { parent } : {}), keys, startKey, finalKey: key };
    this.plans.set(stage.name, plan);
    return plan;
  }

  private sourceStage(stage: Stage, name: string, line: number): Stage {
    const source = this.df.stages.find((s) => (s.name === name || String(s.index) === name) && s.index < stage.index);
    if (!source) throw new Error(`${this.df.path}:${line}: COPY --from=${name}: no earlier stage of that name`);
    return source;
  }

  /** The paths later stages copy out of this one: all a cached stage output needs to keep. */
  private exportedPaths(stage: Stage): string[] {
    const paths = new Set<string>();
    for (const s of this.df.stages) {
      for (const i of s.instructions) {
        if (i.kind === 'COPY' && i.from !== undefined && (i.from === stage.name || i.from === String(stage.index))) for (const src of i.sources) paths.add(posix.normalize(src));
      }
    }
    return [...paths].sort();
  }

  config(plan: StagePlan): ImageConfig {
    return stageConfig(this.df, plan.stage);
  }

  /** The folder holding the stage's files (only those later stages copy out, unless full is set). */
  async materialize(plan: StagePlan, full: boolean): Promise<string> {
    const exported = this.exportedPaths(plan.stage);
    const outputKey = sha(plan.finalKey, JSON.stringify(exported));
    const cached = cacheDir('stages', outputKey);
    if (!full && existsSync(cached)) {
      touch(cached);
      return cached;
    }
    const memo = this.outputs.get(`${plan.stage.name}:${full}`);
    if (memo) return memo;

    const dir = join(this.work, `stage-${plan.stage.index}-${full ? 'full' : 'out'}`);
    const instructions = plan.stage.instructions;
    // Resume from the latest RUN whose result is cached.
    let start = 0;
    for (let n = instructions.length - 1; n >= 0; n--) {
      const snap = cacheDir('snapshots', plan.keys[n]!);
      if (instructions[n]!.kind === 'RUN' && existsSync(snap)) {
        touch(snap);
        await copyTree(snap, dir);
        start = n + 1;
        break;
      }
    }
    if (start === 0) {
      if (plan.parent) await copyTree(await this.materialize(plan.parent, true), dir);
      else mkdirSync(dir, { recursive: true });
    }
    let workingDir = start === 0 && plan.parent ? this.config(plan.parent).workingDir : '/';
    const vars: Record<string, string> = start === 0 && plan.parent ? { ...this.config(plan.parent).env } : {};
    for (let n = 0; n < instructions.length; n++) {
      const i = instructions[n]!;
      if (i.kind === 'WORKDIR') workingDir = posix.resolve(workingDir, i.path);
      if (i.kind === 'ENV') for (const [k, v] of i.vars) vars[k] = v;
      if (i.kind === 'ARG') vars[i.name] = i.value;
      if (n < start) continue;
      await this.apply(plan, i, dir, workingDir, vars);
      const laterRun = instructions.slice(n + 1).some((later) => later.kind === 'RUN');
      if (i.kind === 'RUN' && (laterRun || instructions.slice(n + 1).some((later) => later.kind === 'COPY'))) {
        await publishCopy(dir, cacheDir('snapshots', plan.keys[n]!));
      }
    }
    if (!full) {
      const out = join(this.work, `stage-${plan.stage.index}-export`);
      for (const path of exported) {
        const from = join(dir, path);
        if (!existsSync(from)) throw new Error(`${this.df.path}: a later stage copies ${path} from stage ${plan.stage.name}, which does not have it`);
        await copyTree(from, join(out, path));
      }
      mkdirSync(out, { recursive: true });
      publishMove(out, cached);
      this.outputs.set(`${plan.stage.name}:${full}`, cached);
      return cached;
    }
    this.outputs.set(`${plan.stage.name}:${full}`, dir);
    return dir;
  }

  private async apply(plan: StagePlan, i: Instruction, dir: string, workingDir: string, vars: Record<string, string>): Promise<void> {
    const at = `${this.df.path}:${i.line}`;
    switch (i.kind) {
      case 'WORKDIR':
        mkdirSync(join(dir, workingDir), { recursive: true });
        return;
      case 'COPY': {
        const destIsDir = i.dest.endsWith('/') || i.sources.length > 1;
        const dest = posix.resolve(workingDir, i.dest);
        for (const source of i.sources) {
          if (i.from === undefined) {
            const rel = posix.normalize(source).replace(/\/+$/, '');
            const isDir = statSync(join(this.ctx.dir, rel)).isDirectory();
            for (const entry of contextEntries(this.ctx, source)) {
              const inside = isDir ? posix.relative(rel === '.' ? '' : rel, entry) : posix.basename(entry);
              const target = isDir || destIsDir ? posix.join(dest, inside) : dest;
              copyEntry(join(this.ctx.dir, entry), join(dir, target));
            }
          } else {
            const fromDir = await this.materialize(this.plan(this.sourceStage(plan.stage, i.from, i.line)), false);
            const from = join(fromDir, posix.normalize(source));
            if (!existsSync(from)) throw new Error(`${at}: COPY --from=${i.from} ${source}: no such path in that stage`);
            const target = statSync(from).isDirectory() || !destIsDir ? dest : posix.join(dest, posix.basename(source));
            await copyTree(from, join(dir, target));
          }
        }
        return;
      }
      case 'RUN':
        await this.runStep(at, i.command, join(dir, workingDir), vars);
        return;
      default:
        return;
    }
  }

  private async runStep(at: string, command: string, cwd: string, vars: Record<string, string>): Promise<void> {
    const steps = runSteps(at, command);
    mkdirSync(cwd, { recursive: true });
    // npm's cache stands in for the one inside a Docker build: private to this step (so `npm cache clean`
    // touches nothing of the host's), seeded with hard links to the host cache's immutable content files so a
    // lockfile install needs no downloads when the host has installed the same packages.
    const npmCache = join(this.work, `npm-cache-${randomBytes(4).toString('hex')}`);
    const hostContent = join(process.env.npm_config_cache || join(process.env.HOME ?? '/root', '.npm'), '_cacache', 'content-v2');
    mkdirSync(join(npmCache, '_cacache'), { recursive: true });
    if (existsSync(hostContent)) await run('cp', ['-al', hostContent, join(npmCache, '_cacache', 'content-v2')]);
    process.stderr.write(`[images] ${at}: RUN ${command}\n`);
    try {
      await run('bash', ['-c', `set -e; ${steps.join(' && ')}`], {
        cwd,
        env: { ...process.env, ...vars, PATH: process.env.PATH, npm_config_cache: npmCache, npm_config_update_notifier: 'false' },
        showProgress: true,
      });
    } finally {
      rmSync(npmCache, { recursive: true, force: true });
    }
  }
}

function touch(path: string): void {
  const now = new Date();
  try {
    utimesSync(path, now, now);
  } catch {
    // pruned meanwhile; the caller has already read it
  }
}

// Two builds may race to publish the same key; the first rename wins and the content is the same.
function publishMove(from: string, to: string): void {
  mkdirSync(dirname(to), { recursive: true });
  try {
    renameSync(from, to);
  } catch {
    rmSync(from, { recursive: true, force: true });
  }
}

async function publishCopy(from: string, to: string): Promise<void> {
  if (existsSync(to)) return;
  const tmp = `${to}.tmp-${process.pid}`;
  await copyTree(from, tmp);
  publishMove(tmp, to);
}

/** Copies a file, or a folder's contents into a folder (merging, as COPY does); cp is far faster than fs.cpSync. */
async function copyTree(from: string, to: string): Promise<void> {
  if (statSync(from).isDirectory()) {
    mkdirSync(to, { recursive: true });
    await run('cp', ['-a', `${from}/.`, to]);
  } else {
    mkdirSync(dirname(to), { recursive: true });
    await run('cp', ['-a', from, to]);
  }
}

/** Keeps the most recently used entries of a cache folder, and any used in the last IN_USE_MS. */
function prune(folder: string, keep: number): void {
  if (!existsSync(folder)) return;
  const entries = readdirSync(folder)
    .filter((n) => !n.includes('.tmp-'))
    .map((n) => ({ path: join(folder, n), mtime: statSync(join(folder, n)).mtimeMs }))
    .sort((a, b) => b.mtime - a.mtime);
  const inUseSince = Date.now() - IN_USE_MS;
  for (const old of entries.slice(keep)) if (old.mtime < inUseSince) rmSync(old.path, { recursive: true, force: true });
}

async function baseLayer(base: Base, appDir: string, work: string): Promise<{ layer?: Layer; nodeVersion?: string }> {
  if (base.kind === 'scratch') return {};
  const node = await nodeBinary(base.major);
  const libraries = await sharedLibraries([node.path, ...nativeAddons(appDir)]);
  const nodeStat = statSync(node.path);
  const key = sha('base-layer', ASSEMBLER_VERSION, node.path, node.version, String(nodeStat.size), String(nodeStat.mtimeMs), JSON.stringify([...libraries]));
  const dir = cacheDir('bases', key);
  const layerPath = join(dir, 'layer.tar');
  if (!existsSync(join(dir, 'layer.json'))) {
    const tmp = join(work, 'base');
    mkdirSync(tmp, { recursive: true });
    writeBaseRootfs(join(tmp, 'rootfs'), node, libraries);
    const layer = await writeLayer(join(tmp, 'rootfs'), join(tmp, 'layer.tar'));
    rmSync(join(tmp, 'rootfs'), { recursive: true, force: true });
    writeFileSync(join(tmp, 'layer.json'), JSON.stringify({ digest: layer.digest, size: layer.size, nodeVersion: node.version, libraries: [...libraries.keys()] }));
    publishMove(tmp, dir);
  }
  touch(dir);
  const meta = JSON.parse(readFileSync(join(dir, 'layer.json'), 'utf8')) as { digest: string; size: number };
  return { layer: { path: layerPath, digest: meta.digest, size: meta.size }, nodeVersion: node.version };
}

/** Builds (or finds cached) the archive of one Dockerfile target. */
export async function buildImage(req: BuildRequest): Promise<BuiltImage> {
  const df = parseDockerfile(req.dockerfile, req.buildArgs);
  const ctx = openBuildContext(req.context, req.dockerfile);
  const work = cacheDir('work', `${process.pid}-${randomBytes(4).toString('hex')}`);
  mkdirSync(work, { recursive: true });
  try {
    const builder = new Builder(df, ctx, work);
    const plan = builder.plan(findStage(df, req.target));
    const config = builder.config(plan);
    const imageKey = sha('image', plan.finalKey, req.ref);
    const imageDir = cacheDir('oci', imageKey);
    const metaPath = join(imageDir, 'image.json');
    if (existsSync(metaPath)) {
      touch(imageDir);
      const meta = JSON.parse(readFileSync(metaPath, 'utf8')) as Omit<BuiltImage, 'archive' | 'config'>;
      return { ...meta, config, archive: join(imageDir, 'image.tar') };
    }
    const appDir = await builder.materialize(plan, true);
    const { layer: base, nodeVersion } = await baseLayer(plan.base, appDir, work);
    const tmp = join(work, 'oci');
    mkdirSync(tmp);
    const app = await writeLayer(appDir, join(tmp, 'app-layer.tar'));
    const layers = base ? [base, app] : [app];
    await writeOciArchive(join(tmp, 'image.tar'), req.ref, config, layers);
    const meta = { ref: req.ref, layers: layers.map((l) => ({ ...l, path: '' })), ...(nodeVersion ? { nodeVersion } : {}) };
    rmSync(join(tmp, 'app-layer.tar'));
    writeFileSync(join(tmp, 'image.json'), JSON.stringify(meta));
    publishMove(tmp, imageDir);
    return { ...meta, config, archive: join(imageDir, 'image.tar') };
  } finally {
    rmSync(work, { recursive: true, force: true });
    for (const [folder, keep] of Object.entries(KEEP_CACHE_ENTRIES)) prune(cacheDir(folder), keep);
  }
}
