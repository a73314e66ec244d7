// Start-up failures must say which process failed and why, and leave nothing behind. Uses stand-in
// binaries that fail the way a broken build or a port clash would, so no real control plane is needed.

import { chmodSync, mkdtempSync, readdirSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startControlPlane } from './control-plane.ts';

describe('startControlPlane failing', () => {
  const binDir = mkdtempSync(join(tmpdir(), 'fake-control-plane-bin-'));
  afterAll(() => rmSync(binDir, { recursive: true, force: true }));

  function script(name: string, body: string): void {
    writeFileSync(join(binDir, name), `#!/bin/sh\n${body}\n`);
    chmodSync(join(binDir, name), 0o755);
  }

  // A temporary folder of this file's own: the cluster tests, running at the same time, start real control planes
  // whose run folders would otherwise appear in the shared one while this test looks.
  const ownTmp = mkdtempSync(join(tmpdir(), 'startup-failure-'));
  const sharedTmp = process.env.TMPDIR;
  beforeAll(() => {
    process.env.TMPDIR = ownTmp;
  });
  afterAll(() => {
    if (sharedTmp === undefined) delete process.env.TMPDIR;
    else process.env.TMPDIR = sharedTmp;
    rmSync(ownTmp, { recursive: true, force: true });
  });
  const runFolders = () => readdirSync(ownTmp).filter((name) => name.startsWith('tollgate-control-plane-'));

  it('names the process, its exit code and its last log lines, and removes its folders', async () => {
    script('etcd', 'echo "listen tcp 127.0.0.1: bind: address already in use" >&2; exit 3');
    script('kube-apiserver', 'exit 1');
    script('kubectl', 'exit 1');
    script('helm', 'exit 1');
    const before = runFolders();

    const failure = startControlPlane({ binDir });

    await expect(failure).rejects.toThrow(/etcd exited with code 3 before healthy \/health/);
    await expect(failure).rejects.toThrow(/address already in use/);
    // (A sweep of stale folders may remove older ones; none may be added.)
    expect(runFolders().filter((name) => !before.includes(name))).toEqual([]);
  });

  it('refuses a binary folder that lacks a binary, naming it', async () => {
    rmSync(join(binDir, 'helm'));
    await expect(startControlPlane({ binDir })).rejects.toThrow(/lacks helm/);
  });
});
