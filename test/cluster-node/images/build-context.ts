// The build context as `docker build` sees it: the repository folder minus what the .dockerignore excludes.
// BuildKit reads `<Dockerfile>.dockerignore` beside a Dockerfile in preference to the context's .dockerignore;
// so does this.

import { createHash } from 'node:crypto';
import { copyFileSync, existsSync, lstatSync, mkdirSync, readdirSync, readFileSync, readlinkSync, symlinkSync } from 'node:fs';
import { dirname, join, matchesGlob, normalize, relative, sep } from 'node:path';

export interface BuildContext {
  dir: string;
  ignoreFile?: string;
  isIgnored(relPath: string): boolean;
  /** Some `!pattern` re-includes paths, so an excluded folder must still be searched. */
  hasExceptions: boolean;
}

interface IgnoreRule {
  pattern: string;
  exception: boolean;
}

function parseIgnore(text: string): IgnoreRule[] {
  return text
    .split('\n')
    .map((l) => l.trim())
    .filter((l) => l !== '' && !l.startsWith('#'))
    .map((l) => {
      const exception = l.startsWith('!');
      const pattern = normalize((exception ? l.slice(1) : l).trim())
        .replace(/^\/+/, '')
        .replace(/\/+$/, '');
      return { pattern, exception };
    });
}

export function openBuildContext(dir: string, dockerfilePath: string): BuildContext {
  const candidates = [`${dockerfilePath}.dockerignore`, join(dir, '.dockerignore')];
  const ignoreFile = candidates.find((c) => existsSync(c));
  const rules = ignoreFile === undefined ? [] : parseIgnore(readFileSync(ignoreFile, 'utf8'));
  // Docker matches each pattern against the path and every parent folder: excluding `test` excludes all of it.
  const isIgnored = (relPath: string): boolean => {
    const parts = relPath.split(sep);
    let ignored = false;
    for (const rule of rules) {
      for (let n = 1; n <= parts.length; n++) {
        if (matchesGlob(parts.slice(0, n).join('/'), rule.pattern)) {
          ignored = !rule.exception;
          break;
        }
      }
    }
    return ignored;
  };
  return { dir, ...(ignoreFile !== undefined ? { ignoreFile } : {}), isIgnored, hasExceptions: rules.some((r) => r.exception) };
}

/** Every file and symlink under relSource that the context includes, as paths relative to the context. */
export function contextEntries(ctx: BuildContext, relSource: string): string[] {
  const rel = normalize(relSource)
    .replace(/^(\.\/)+/, '')
    .replace(/\/+$/, '');
  if (rel.startsWith('..') || rel.startsWith('/')) throw new Error(`COPY source ${JSON.stringify(relSource)} is outside the build context`);
  const root = join(ctx.dir, rel);
  if (rel !== '.' && ctx.isIgnored(rel)) throw new Error(`COPY source ${JSON.stringify(relSource)} is excluded by ${ctx.ignoreFile}`);
  if (!existsSync(root)) throw new Error(`COPY source ${JSON.stringify(relSource)} does not exist in ${ctx.dir}`);
  const out: string[] = [];
  const walk = (path: string) => {
    const relPath = relative(ctx.dir, path);
    const ignored = relPath !== '' && relPath !== rel && ctx.isIgnored(relPath);
    const st = lstatSync(path);
    if (st.isDirectory()) {
      if (ignored && !ctx.hasExceptions) return;
      for (const name of readdirSync(path).sort()) walk(join(path, name));
    } else if (!ignored) {
      out.push(relPath);
    }
  };
  walk(root);
  return out;
}

/** A digest of the named context entries: paths, modes and contents. */
export function digestEntries(ctx: BuildContext, entries: string[]): string {
  const hash = createHash('sha256');
  for (const entry of entries) {
    const path = join(ctx.dir, entry);
    const st = lstatSync(path);
    hash.update(`${entry}\0${st.mode}\0`);
    hash.update(st.isSymbolicLink() ? readlinkSync(path) : readFileSync(path));
    hash.update('\0');
  }
  return hash.digest('hex');
}

export function copyEntry(fromPath: string, toPath: string): void {
  mkdirSync(dirname(toPath), { recursive: true });
  const st = lstatSync(fromPath);
  if (st.isSymbolicLink()) symlinkSync(readlinkSync(fromPath), toPath);
  else copyFileSync(fromPath, toPath);
}
