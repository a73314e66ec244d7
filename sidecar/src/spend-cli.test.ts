import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import pino from 'pino';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { runCli } from '../../test/support/cli-run.ts';
import { SnapshotCache } from './config/snapshot-cache.ts';
import { main } from './spend-cli.ts';
import { openDuckDbSpanStore } from './spans/duckdb-span-store.ts';
import { expectedSampleReport, SAMPLE_SINCE, SAMPLE_UNTIL, sampleCallSpans } from '../../test/support/sample-calls.ts';
import { sampleSpan } from '../../test/support/sample-span.ts';
import type { SpendReport } from './spans/spend.ts';
import { openSqliteSpanStore } from './spans/sqlite-span-store.ts';

let dir: string;
beforeEach(() => {
  dir = mkdtempSync(join(tmpdir(), 'tollgate-spend-cli-'));
});
afterEach(() => {
  rmSync(dir, { recursive: true, force: true });
});

function spend(args: string[]): Promise<{ code: number; stdout: string; stderr: string }> {
  return runCli(main, args);
}

const window = ['--since', SAMPLE_SINCE.toISOString(), '--until', SAMPLE_UNTIL.toISOString()];

async function sqliteWithCalls(): Promise<string> {
  const path = join(dir, 'spans.db');
  const store = openSqliteSpanStore(path, { writes: 'inline' });
  await store.insertBatch(sampleCallSpans());
  await store.close();
  const config = join(dir, 'tollgate.yaml');
  writeFileSync(config, `storage: { kind: sqlite, path: "${path}" }\n`);
  return config;
}

describe('tollgate spend', () => {
  it('prints the report of the configured store as JSON, the same rows the store computes', async () => {
    const config = await sqliteWithCalls();
    const { code, stdout, stderr } = await spend(['--config', config, ...window, '--group-by', 'model', '--format', 'json']);
    expect({ code, stderr }).toEqual({ code: 0, stderr: '' });
    const report = JSON.parse(stdout) as SpendReport;
    expect(report.rows).toEqual(expectedSampleReport({ since: SAMPLE_SINCE, until: SAMPLE_UNTIL, groupBy: 'model', bucket: null, limit: 1000 }));
  });

  it('prints a table per day with a total that is the exact sum', async () => {
    const config = await sqliteWithCalls();
    const { code, stdout } = await spend(['--config', config, ...window, '--bucket', 'day']);
    expect(code).toBe(0);
    const lines = stdout.trimEnd().split('\n');
    expect(lines[0]).toBe(`spend by user, ${SAMPLE_SINCE.toISOString()} to ${SAMPLE_UNTIL.toISOString()}`);
    expect(lines[1]).toMatch(/^DAY \(UTC\)\s+USER\s+COST USD\s+CALLS\s+TOKENS$/);
    expect(lines[2]).toMatch(/^2026-03-10\s+alice\s+0\.60\s+3\s+3003$/);
    // 0.1 + 0.2 + 0.3 + 120 × 0.0000000001 + 1234.5678901234 + … : every cost of the window, summed exactly
    expect(lines.at(-1)).toMatch(/^\s+TOTAL\s+1236\.6805893643\s+132\s+909254$/);
  });

  it('quotes CSV fields that need it and leaves a missing key empty', async () => {
    const path = join(dir, 'spans.db');
    const store = openSqliteSpanStore(path, { writes: 'inline' });
    await store.insertBatch([
      sampleSpan({ userId: 'Doe, "J"', startTime: new Date().toISOString(), costUsd: 0.5 }),
      sampleSpan({ userId: null, startTime: new Date().toISOString(), costUsd: 0.25 }),
    ]);
    await store.close();
    writeFileSync(join(dir, 'c.yaml'), `storage: { kind: sqlite, path: "${path}" }\n`);
    const { stdout } = await spend(['--config', join(dir, 'c.yaml'), '--format', 'csv']);
    expect(stdout).toBe('key,cost_usd,calls,total_tokens\n"Doe, ""J""",0.5,1,1500\n,0.25,1,1500\n');
  });

  it('in a pod, reads the store of the operator’s last snapshot', async () => {
    const stateDir = join(dir, 'state');
    const cache = new SnapshotCache(stateDir, pino({ level: 'silent' }));
    await cache.commit(await cache.prepare({ version: 'v7', source: 'shop/default', configJson: JSON.stringify({ storage: { kind: 'duckdb' } }), credentials: {} }));
    const store = await openDuckDbSpanStore(join(stateDir, 'spans.duckdb'));
    await store.insertBatch(sampleCallSpans());
    await store.close();
    const before = process.env.TOLLGATE_STATE_DIR;
    process.env.TOLLGATE_STATE_DIR = stateDir;
    try {
      const { code, stdout, stderr } = await spend([...window, '--group-by', 'provider', '--format', 'json']);
      expect({ code, stderr }).toEqual({ code: 0, stderr: '' });
      expect((JSON.parse(stdout) as SpendReport).rows).toEqual(expectedSampleReport({ since: SAMPLE_SINCE, until: SAMPLE_UNTIL, groupBy: 'provider', bucket: null, limit: 1000 }));
    } finally {
      if (before === undefined) delete process.env.TOLLGATE_STATE_DIR;
      else process.env.TOLLGATE_STATE_DIR = before;
    }
  });

  it('refuses bad flags and a missing store with exit 2 and a message naming them', async () => {
    expect(await spend(['--bucket', 'week'])).toMatchObject({ code: 2, stderr: 'tollgate spend: --bucket must be one of hour, day (got "week")\n' });
    expect(await spend(['--format', 'xml'])).toMatchObject({ code: 2, stderr: 'tollgate spend: --format must be one of table, json, csv (got "xml")\n' });
    writeFileSync(join(dir, 'c.yaml'), `storage: { kind: sqlite, path: "${join(dir, 'nothing.db')}" }\n`);
    const missing = await spend(['--config', join(dir, 'c.yaml')]);
    expect(missing.code).toBe(2);
    expect(missing.stderr).toMatch(/nothing\.db: no such file/);
  });
});
