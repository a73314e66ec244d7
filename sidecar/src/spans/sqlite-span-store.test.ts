import { describeSpanStoreConformance } from '../../../test/support/span-store-conformance.ts';
import { existsSync, mkdtempSync, rmSync, statfsSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import Database from 'better-sqlite3';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { sampleSpan } from '../../../test/support/sample-span.ts';
import type { LocalSpanStore as SpanStore } from './span-store.ts';
import { SPAN_SCHEMA_VERSION } from './sqlite-span-schema.ts';
import { INLINE_ROWS_PER_TURN, openSqliteSpanStore } from './sqlite-span-store.ts';

let dir: string;
const open: SpanStore[] = [];

beforeEach(() => {
  dir = mkdtempSync(join(tmpdir(), 'tollgate-spans-'));
});
afterEach(async () => {
  for (const s of open.splice(0)) await s.close();
  rmSync(dir, { recursive: true, force: true });
});

function openStore(path: string, writes?: 'worker' | 'inline'): SpanStore {
  const store = openSqliteSpanStore(path, writes ? { writes } : {});
  open.push(store);
  return store;
}

describe.each(['worker', 'inline'] as const)('SQLite span store, writes %s', (writes) => {
  it('round-trips every span field, and the data survives reopening', async () => {
    const path = join(dir, 'spans.db');
    const store = openStore(path, writes);
    const full = sampleSpan({ parentSpanId: 'b7ad6b7169203331', error: null });
    const failed = sampleSpan({
      status: 'error',
      statusCode: null,
      error: 'upstream unreachable: connect ECONNREFUSED',
      responseModel: null,
      userId: null,
      projectId: null,
      priced: false,
      costUsd: 0,
      route: 'gamma-cloudb',
      provider: 'anthropic',
      startTime: '2026-01-15T10:00:01.000Z',
    });
    await store.insertBatch([full, failed]);
    expect(store.count()).toBe(2);
    expect(store.recent(10)).toEqual([failed, full]);
    await store.close();

    const again = openStore(path, writes);
    expect(again.count()).toBe(2);
    expect(again.recent(10)).toEqual([failed, full]);
  });

  it('returns the newest first by start time, honouring the limit', async () => {
    const store = openStore(join(dir, 'spans.db'), writes);
    const spans = ['10:00:02', '10:00:00', '10:00:03', '10:00:01'].map((t, i) => sampleSpan({ requestId: `r${i}`, startTime: `2026-01-15T${t}.000Z` }));
    await store.insertBatch(spans.slice(0, 2));
    await store.insertBatch(spans.slice(2));
    expect(store.recent(3).map((s) => s.startTime)).toEqual(['2026-01-15T10:00:03.000Z', '2026-01-15T10:00:02.000Z', '2026-01-15T10:00:01.000Z']);
    expect(store.recent(0)).toEqual([]);
    expect(store.count()).toBe(4);
  });
});

describe('SQLite span store file', () => {
  it('is in WAL mode with the documented column names and indexes', async () => {
    const path = join(dir, 'spans.db');
    const store = openStore(path);
    await store.insertBatch([sampleSpan()]);
    const db = new Database(path, { readonly: true });
    try {
      expect(db.pragma('journal_mode', { simple: true })).toBe('wal');
      expect(db.pragma('user_version', { simple: true })).toBe(SPAN_SCHEMA_VERSION);
      const columns = (db.pragma('table_info(spans)') as { name: string }[]).map((c) => c.name);
      expect(columns.sort()).toEqual(
        [
          'span_id',
          'trace_id',
          'parent_span_id',
          'name',
          'start_time',
          'duration_ms',
          'status',
          'status_code',
          'error',
          'user_id',
          'project_id',
          'request_id',
          'route',
          'gen_ai_operation_name',
          'gen_ai_provider_name',
          'gen_ai_request_model',
          'gen_ai_response_model',
          'gen_ai_usage_input_tokens',
          'gen_ai_usage_output_tokens',
          'gen_ai_total_tokens',
          'gen_ai_usage_cache_read_input_tokens',
          'gen_ai_usage_cache_creation_input_tokens',
          'gen_ai_usage_reasoning_tokens',
          'gen_ai_cost_usd',
          'priced',
          'usage_estimated',
          'alias',
          'attempt',
          'unmetered',
          'gen_ai_usage_images',
          'gen_ai_usage_audio_seconds',
          'gen_ai_usage_characters',
          'process_attribution',
          'process_pid',
          'process_executable_path',
          'process_command_args',
          'process_parent_executables',
          'container_name',
          'tool_calls',
          'process_exec_id',
        ].sort(),
      );
      const row = db.prepare('SELECT user_id, gen_ai_cost_usd, gen_ai_total_tokens, start_time, gen_ai_provider_name FROM spans').get();
      expect(row).toEqual({
        user_id: 'alice',
        gen_ai_cost_usd: 0.000345,
        gen_ai_total_tokens: 1500,
        start_time: '2026-01-15T10:00:00.000Z',
        gen_ai_provider_name: 'openai',
      });
      const indexed = (db.prepare("SELECT sql FROM sqlite_master WHERE type = 'index' AND tbl_name = 'spans'").all() as { sql: string }[]).map((r) => r.sql).join('\n');
      expect(indexed).toMatch(/\(start_time\)/);
      expect(indexed).toMatch(/\(user_id, start_time\)/);
      expect(indexed).toMatch(/\(trace_id\)/);
    } finally {
      db.close();
    }
  });

  it('upgrades a version 1 file: adds the new columns, old rows read back with defaults, new rows written', async () => {
    const path = join(dir, 'v1.db');
    // A file as version 1 wrote it: fewer columns, user_version 1.
    const v1 = new Database(path);
    v1.pragma('journal_mode = WAL');
    v1.exec(`CREATE TABLE spans (
      span_id TEXT NOT NULL, trace_id TEXT NOT NULL, parent_span_id TEXT, name TEXT NOT NULL DEFAULT '',
      start_time TEXT NOT NULL, duration_ms REAL NOT NULL DEFAULT 0, status TEXT NOT NULL DEFAULT 'ok',
      status_code INTEGER, error TEXT, user_id TEXT, route TEXT NOT NULL DEFAULT '',
      gen_ai_operation_name TEXT NOT NULL DEFAULT '', gen_ai_provider_name TEXT NOT NULL DEFAULT '',
      gen_ai_request_model TEXT NOT NULL DEFAULT '', gen_ai_usage_input_tokens INTEGER NOT NULL DEFAULT 0,
      gen_ai_usage_output_tokens INTEGER NOT NULL DEFAULT 0, gen_ai_total_tokens INTEGER NOT NULL DEFAULT 0,
      gen_ai_cost_usd REAL NOT NULL DEFAULT 0)`);
    v1.exec('CREATE INDEX spans_start_time ON spans (start_time)');
    v1.prepare(
      `INSERT INTO spans VALUES ('00f067aa0ba902b7', '4bf92f3577b34da6a3ce929d0e0e4736', NULL, 'chat claude-sonnet-4-5',
        '2025-06-01T08:00:00.000Z', 812.5, 'ok', 200, NULL, 'bob', 'gamma', 'chat', 'anthropic',
        'claude-sonnet-4-5', 1000, 200, 1200, 0.006)`,
    ).run();
    v1.pragma('user_version = 1');
    v1.close();

    const store = openStore(path);
    expect(store.count()).toBe(1);
    const [old] = store.recent(10);
    expect(old).toEqual({
      spanId: '00f067aa0ba902b7',
      traceId: '4bf92f3577b34da6a3ce929d0e0e4736',
      parentSpanId: null,
      name: 'chat claude-sonnet-4-5',
      operation: 'chat',
      model: 'claude-sonnet-4-5',
      responseModel: null,
      provider: 'anthropic',
      route: 'gamma',
      userId: 'bob',
      projectId: null,
      requestId: '',
      inputTokens: 1000,
      outputTokens: 200,
      totalTokens: 1200,
      cachedTokens: 0,
      cacheWriteTokens: 0,
      reasoningTokens: 0,
      images: 0,
      audioSeconds: 0,
      characters: 0,
      costUsd: 0.006,
      priced: true,
      usageEstimated: false,
      alias: null,
      attempt: null,
      unmetered: false,
      durationMs: 812.5,
      status: 'ok',
      statusCode: 200,
      error: null,
      startTime: '2025-06-01T08:00:00.000Z',
    });

    // A version 6 span: the calling process, with its arguments and parents, reads back whole.
    const fresh = sampleSpan({
      cachedTokens: 300,
      cacheWriteTokens: 50,
      projectId: 'p2',
      images: 2,
      audioSeconds: 61.5,
      characters: 1234,
      process: {
        attribution: 'tetragon',
        pid: 4242,
        executablePath: '/usr/bin/python3',
        commandArgs: ['/usr/bin/python3', 'agent.py'],
        parentExecutables: ['/bin/sh'],
        containerName: 'app',
      },
    });
    await store.insertBatch([fresh]);
    expect(store.recent(10)).toEqual([fresh, old]);
    await store.close();

    const db = new Database(path, { readonly: true });
    expect(db.pragma('user_version', { simple: true })).toBe(SPAN_SCHEMA_VERSION);
    db.close();
  });

  it('upgrades a version 6 file to 7: tool_calls and process_exec_id added, a v6 row reads back without them', async () => {
    const path = join(dir, 'v6.db');
    const process = { attribution: 'tetragon' as const, pid: 4242, executablePath: '/usr/bin/python3', commandArgs: null, parentExecutables: ['/bin/sh'], containerName: 'app' };
    const old = sampleSpan({ spanId: '00f067aa0ba902b7', startTime: '2025-06-01T08:00:00.000Z', process });
    const first = openStore(path);
    await first.insertBatch([old]);
    await first.close();
    open.splice(open.indexOf(first), 1);
    // The file as version 6 left it: the same table without the two columns version 7 adds.
    const v6 = new Database(path);
    v6.exec('ALTER TABLE spans DROP COLUMN tool_calls');
    v6.exec('ALTER TABLE spans DROP COLUMN process_exec_id');
    v6.pragma('user_version = 6');
    v6.close();

    const store = openStore(path);
    expect(store.recent(10)).toEqual([old]);
    expect(store.recent(10)[0]!.toolCalls).toBeUndefined();
    const fresh = sampleSpan({
      process: { ...process, execId: 'OjEyMzQ1Njc4OTo0MjQy' },
      toolCalls: [
        { id: 'call_mszuSIzqtI65i1wAUOE8w5H4', name: 'get_weather', argumentsSha256: '6e1e312d537bc71b5410b0599f5a508142149e13174c6ee0d1671658845bc67d' },
        { id: null, name: 'probe', argumentsSha256: 'ecf9e98ec0641e23113ff3ce8bdc78d0ddd249886517fd4a7f68cc83d4e65667' },
      ],
    });
    const none = sampleSpan({ spanId: 'aaaaaaaaaaaaaaaa', startTime: '2025-06-01T07:00:00.000Z', process, toolCalls: [] });
    await store.insertBatch([fresh, none]);
    expect(store.recent(10)).toEqual([fresh, old, none]);
    await store.close();

    const db = new Database(path, { readonly: true });
    expect(db.pragma('user_version', { simple: true })).toBe(7);
    // What an analyst's query sees: the calls as JSON text, [] for none, null where provenance was off.
    const rows = db.prepare('SELECT tool_calls, process_exec_id FROM spans ORDER BY start_time DESC').all();
    expect(rows).toEqual([
      {
        tool_calls:
          '[{"id":"call_mszuSIzqtI65i1wAUOE8w5H4","name":"get_weather","arguments_sha256":"6e1e312d537bc71b5410b0599f5a508142149e13174c6ee0d1671658845bc67d"},{"id":null,"name":"probe","arguments_sha256":"ecf9e98ec0641e23113ff3ce8bdc78d0ddd249886517fd4a7f68cc83d4e65667"}]',
        process_exec_id: 'OjEyMzQ1Njc4OTo0MjQy',
      },
      { tool_calls: null, process_exec_id: null },
      { tool_calls: '[]', process_exec_id: null },
    ]);
    db.close();
  });

  it('creates the directory of a new file', async () => {
    const store = openStore(join(dir, 'nested', 'deeper', 'spans.db'));
    await store.insertBatch([sampleSpan()]);
    expect(store.count()).toBe(1);
  });

  it('refuses a file that is not a database, naming it, and leaves it untouched', () => {
    const path = join(dir, 'not-a-db.db');
    writeFileSync(path, 'this is not sqlite, just some text long enough to have a header.'.repeat(10));
    expect(() => openSqliteSpanStore(path)).toThrow(`cannot open span store ${path}: file is not a database`);
  });

  it('rejects a batch the file cannot take and keeps the spans already stored', async () => {
    const path = join(dir, 'spans.db');
    const store = openStore(path);
    await store.insertBatch([sampleSpan({ requestId: 'kept' })]);
    // A span without an id violates NOT NULL: the whole batch fails, nothing of it is stored.
    const broken = sampleSpan({ spanId: null as unknown as string });
    await expect(store.insertBatch([sampleSpan({ requestId: 'lost' }), broken])).rejects.toThrow(/NOT NULL/);
    expect(store.count()).toBe(1);
    expect(store.recent(10).map((s) => s.requestId)).toEqual(['kept']);
  });
});

describe.each(['worker', 'inline'] as const)('span retention, writes %s', (writes) => {
  it('keeps only the newest maxSpans spans, so a pod volume cannot fill up', async () => {
    const path = join(dir, 'spans.db');
    const store = openSqliteSpanStore(path, { writes, maxSpans: 5 });
    open.push(store);
    for (let batch = 0; batch < 4; batch++) {
      await store.insertBatch(
        Array.from({ length: 3 }, (_, i) => sampleSpan({ requestId: `r${batch * 3 + i}`, startTime: `2026-01-15T10:00:${String(batch * 3 + i).padStart(2, '0')}.000Z` })),
      );
    }
    expect(store.count()).toBe(5);
    expect(store.recent(100).map((s) => s.requestId)).toEqual(['r11', 'r10', 'r9', 'r8', 'r7']);
    const db = new Database(path, { readonly: true });
    try {
      expect((db.prepare('SELECT count(*) AS n FROM spans').get() as { n: number }).n).toBe(5);
    } finally {
      db.close();
    }
  });
});

describe('where SQLite writes run by default', () => {
  // /dev/shm is tmpfs on Linux, as a pod's state volume (an emptyDir with medium: Memory) is.
  it.runIf(existsSync('/dev/shm'))('on the event loop for a file in memory, where a commit waits on no disk: a large batch a slice per turn, all or none', async () => {
    const shm = mkdtempSync('/dev/shm/tollgate-spans-');
    try {
      const store = openSqliteSpanStore(join(shm, 'spans.db'));
      // a small batch is written before insertBatch returns: no worker round trip
      expect(store.insertBatch([sampleSpan({ requestId: 'in-memory' })])).toBeUndefined();
      expect(store.recent(1).map((s) => s.requestId)).toEqual(['in-memory']);

      const large = Array.from({ length: INLINE_ROWS_PER_TURN * 3 + 1 }, (_, i) => sampleSpan({ requestId: `slice-${i}` }));
      const written = store.insertBatch(large);
      expect(written).toBeInstanceOf(Promise);
      // the first slice is in before the event loop gets a turn; the rest follows, one slice per turn
      expect(store.recent(200)).toHaveLength(1 + INLINE_ROWS_PER_TURN);
      await written;
      expect(store.count()).toBe(large.length + 1);

      // a batch that fails half-way leaves nothing of itself behind
      const broken = [...large.slice(0, INLINE_ROWS_PER_TURN + 2).map((s) => ({ ...s, requestId: `${s.requestId}-again` })), { ...large[0]!, spanId: null as unknown as string }];
      await expect(store.insertBatch(broken)).rejects.toThrow(/NOT NULL/);
      expect(store.recent(500).filter((s) => s.requestId.endsWith('-again'))).toEqual([]);
      await store.close();
    } finally {
      rmSync(shm, { recursive: true, force: true });
    }
  });

  it.runIf(statfsSync(tmpdir()).type !== 0x01021994)('in a worker thread for a file on a disk, where a commit can wait on fsync', async () => {
    const store = openStore(join(dir, 'spans.db'));
    const written = store.insertBatch([sampleSpan({ requestId: 'on-disk' })]);
    expect(written).toBeInstanceOf(Promise);
    await written;
    expect(store.recent(1).map((s) => s.requestId)).toEqual(['on-disk']);
  });
});

for (const writes of ['worker', 'inline'] as const) {
  describeSpanStoreConformance(`SQLite, writes ${writes}`, () => {
    const path = join(mkdtempSync(join(tmpdir(), 'tollgate-spans-')), 'spans.db');
    return openSqliteSpanStore(path, { writes });
  });
}

describe('SQLite span store for a report', () => {
  it('refuses to create a file that is not there', () => {
    expect(() => openSqliteSpanStore(join(dir, 'absent.db'), { mustExist: true })).toThrow(/absent\.db: no such file/);
  });
});
