import { spawn } from 'node:child_process';
import { existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, utimesSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { removeStaleRuns } from './stale-runs.ts';
import { waitFor } from '../support/wait-for.ts';

describe('removeStaleRuns', () => {
  const cleanups: (() => void)[] = [];
  afterEach(() => cleanups.splice(0).forEach((fn) => fn()));

  function parentWith(names: string[], ageMs: number): string {
    const parent = mkdtempSync(join(tmpdir(), 'stale-runs-test-'));
    cleanups.push(() => rmSync(parent, { recursive: true, force: true }));
    const when = new Date(Date.now() - ageMs);
    for (const name of names) {
      mkdirSync(join(parent, name));
      utimesSync(join(parent, name), when, when);
    }
    return parent;
  }

  it('removes old folders of dead runs, keeps those of live or young runs and anything not ours', async () => {
    const parent = parentWith(['tollgate-control-plane-dead01', 'tollgate-control-plane-dead01-etcd', 'tollgate-control-plane-live01-etcd', 'unrelated-folder'], 60 * 60_000);
    mkdirSync(join(parent, 'tollgate-control-plane-young1'));
    // A live process whose command line names the run, as etcd's --data-dir does.
    const holder = spawn('bash', ['-c', 'sleep 30; : tollgate-control-plane-live01'], { stdio: 'ignore' });
    cleanups.push(() => holder.kill('SIGKILL'));
    await waitFor('the holder to run under its name', () => readFileSync(`/proc/${holder.pid}/cmdline`, 'utf8').includes('tollgate-control-plane-live01'), 5_000);

    const removed = removeStaleRuns([parent]);

    expect(removed.sort()).toEqual([join(parent, 'tollgate-control-plane-dead01'), join(parent, 'tollgate-control-plane-dead01-etcd')].sort());
    expect(existsSync(join(parent, 'tollgate-control-plane-live01-etcd'))).toBe(true);
    expect(existsSync(join(parent, 'tollgate-control-plane-young1'))).toBe(true);
    expect(existsSync(join(parent, 'unrelated-folder'))).toBe(true);
  });

  it('ignores a parent folder that does not exist', () => {
    expect(removeStaleRuns([join(tmpdir(), 'no-such-parent-for-stale-runs')])).toEqual([]);
  });
});
