// A user's path through each span store: `tollgate proxy` with storage.kind sqlite, duckdb, bigquery (the BigQuery
// emulator) and firestore (the Firestore emulator); the same calls through the OpenAI route; the calls read back
// from /_local/api/traces; the spend report from /_local/api/spend and from `tollgate spend`, identical on all four
// stores and equal to the sums of the spans.

import { spawn } from 'node:child_process';
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { SpanJson } from '../../sidecar/src/spans/span-json.ts';
import type { SpendReport, SpendRow } from '../../sidecar/src/spans/spend.ts';
import { type BigQueryEmulator, startBigQueryEmulator } from '../emulators/bigquery.ts';
import { type FirestoreEmulator, startFirestoreEmulator } from '../emulators/firestore.ts';
import { type FakeUpstream, startFakeUpstream } from '../fakes/llm-upstream.ts';
import { startProxyProcess, type ProxyProcess } from './proxy-process.ts';

const CLI = resolve(import.meta.dirname, '../../cmd/tollgate.ts');
const OPENAI_KEY = 'sk-openai-stores';
const KINDS = ['sqlite', 'duckdb', 'bigquery', 'firestore'] as const;
type Kind = (typeof KINDS)[number];

/** The calls every proxy gets: who calls, on which project, with what usage. */
const CALLS = [
  { user: 'alice', project: 'shop', model: 'gpt-4o-mini', usage: { input: 1000, output: 200 } },
  { user: 'alice', project: 'shop', model: 'gpt-4o', usage: { input: 5000, output: 900, cacheRead: 1000 } },
  { user: 'bob', project: 'search', model: 'gpt-4o-mini', usage: { input: 333, output: 77 } },
  { user: 'alice', project: 'search', model: 'gpt-4o-mini', usage: { input: 10, output: 1 } },
  { user: null, project: null, model: 'gpt-4o', usage: { input: 123, output: 45 } },
  { user: 'bob', project: 'shop', model: 'gpt-4.1', usage: { input: 7000, output: 1200, cacheRead: 3000 } },
];

let upstream: FakeUpstream;
let bq: BigQueryEmulator;
let firestore: FirestoreEmulator;
const dirs: Record<Kind, string> = {} as Record<Kind, string>;
const proxies = {} as Record<Kind, ProxyProcess>;

function configYaml(kind: Kind): string {
  const storage: Record<Kind, string> = {
    sqlite: `{ kind: sqlite, path: "${join(dirs.sqlite, 'spans.db')}" }`,
    duckdb: `{ kind: duckdb, duckdb: { path: "${join(dirs.duckdb, 'spans.duckdb')}" } }`,
    bigquery: `{ kind: bigquery, bigquery: { projectId: ${bq.projectId}, dataset: tollgate, table: spans, apiEndpoint: "${bq.endpoint}" } }`,
    firestore: `{ kind: firestore, firestore: { projectId: ${firestore.projectId}, collection: journey } }`,
  };
  return `upstreams:\n  beta: { baseUrl: "${upstream.url}" }\nstorage: ${storage[kind]}\n`;
}

// No metadata server here: tell google-auth-library not to look for one (the emulators need no credentials).
const env = () => ({ OPENAI_API_KEY: OPENAI_KEY, FIRESTORE_EMULATOR_HOST: firestore.host, METADATA_SERVER_DETECTION: 'none' });

async function call(proxy: ProxyProcess, c: (typeof CALLS)[number]): Promise<void> {
  upstream.behave({ usage: c.usage });
  const res = await fetch(`${proxy.url}/proxy/beta/v1/chat/completions`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', ...(c.user ? { 'x-tollgate-user': c.user } : {}), ...(c.project ? { 'x-tollgate-project': c.project } : {}) },
    body: JSON.stringify({ model: c.model, messages: [{ role: 'user', content: 'hello' }] }),
  });
  expect(res.status).toBe(200);
  await res.arrayBuffer();
}

async function getJson<T>(url: string): Promise<{ status: number; body: T }> {
  const res = await fetch(url);
  return { status: res.status, body: (await res.json()) as T };
}

/** `tollgate spend …` as a user runs it; resolves with its exit code and output. */
function spendCli(args: string[], extraEnv: NodeJS.ProcessEnv = {}): Promise<{ code: number | null; stdout: string; stderr: string }> {
  return new Promise((done) => {
    const child = spawn(process.execPath, [CLI, 'spend', ...args], { env: { PATH: process.env.PATH, HOME: tmpdir(), ...extraEnv }, stdio: ['ignore', 'pipe', 'pipe'] });
    let stdout = '';
    let stderr = '';
    child.stdout.setEncoding('utf8').on('data', (t: string) => (stdout += t));
    child.stderr.setEncoding('utf8').on('data', (t: string) => (stderr += t));
    child.once('exit', (code) => done({ code, stdout, stderr }));
  });
}

/** Per-user totals worked out from the spans themselves, in integer 10^-10 USD units. */
function totalsFromSpans(spans: SpanJson[]): SpendRow[] {
  const groups = new Map<string | null, { units: bigint; calls: number; tokens: number }>();
  for (const s of spans) {
    const g = groups.get(s.user_id) ?? { units: 0n, calls: 0, tokens: 0 };
    g.units += BigInt(Math.round(s.cost_usd * 1e10));
    g.calls += 1;
    g.tokens += s.total_tokens;
    groups.set(s.user_id, g);
  }
  return [...groups.entries()].map(([key, g]) => ({ key, cost_usd: Number(g.units) / 1e10, calls: g.calls, total_tokens: g.tokens })).sort((a, b) => b.cost_usd - a.cost_usd);
}

beforeAll(async () => {
  [upstream, bq, firestore] = await Promise.all([startFakeUpstream('openai', { expectApiKey: OPENAI_KEY }), startBigQueryEmulator(), startFirestoreEmulator()]);
  for (const kind of KINDS) dirs[kind] = mkdtempSync(join(tmpdir(), `tollgate-${kind}-`));
  for (const kind of KINDS) {
    proxies[kind] = await startProxyProcess({ configYaml: configYaml(kind), env: env() });
    for (const c of CALLS) await call(proxies[kind], c);
  }
}, 300_000);

afterAll(async () => {
  for (const proxy of Object.values(proxies)) await proxy.stop();
  await Promise.all([upstream?.close(), bq?.stop(), firestore?.stop()]);
});

describe('span stores, end to end', () => {
  it.each(KINDS)('%s: /_local/api/traces shows the calls newest first, within the limit', async (kind) => {
    const all = await getJson<{ spans: SpanJson[]; count: number }>(`${proxies[kind].url}/_local/api/traces?limit=200`);
    expect(all.status).toBe(200);
    expect(all.body.count).toBe(CALLS.length);
    expect(all.body.spans.map((s) => s.user_id)).toEqual(CALLS.map((c) => c.user).reverse());
    expect(all.body.spans.every((s) => s.priced && s.cost_usd > 0)).toBe(true);
    const two = await getJson<{ spans: SpanJson[] }>(`${proxies[kind].url}/_local/api/traces?limit=2`);
    expect(two.body.spans.map((s) => s.span_id)).toEqual(all.body.spans.slice(0, 2).map((s) => s.span_id));
    expect((await getJson(`${proxies[kind].url}/_local/api/traces?limit=500`)).status).toBe(400);
  });

  it('/_local/api/spend gives the same rows on all four stores, equal to the sums of the spans', async () => {
    const reports: Record<string, SpendRow[]> = {};
    for (const kind of KINDS) {
      const { status, body } = await getJson<SpendReport>(`${proxies[kind].url}/_local/api/spend?since=7d&groupBy=user`);
      expect(status).toBe(200);
      reports[kind] = body.rows;
      const spans = (await getJson<{ spans: SpanJson[] }>(`${proxies[kind].url}/_local/api/traces?limit=200`)).body.spans;
      expect(body.rows).toEqual(totalsFromSpans(spans));
    }
    // Costs differ per store only if a store summed differently: the calls and prices are the same.
    expect(reports.duckdb).toEqual(reports.sqlite);
    expect(reports.bigquery).toEqual(reports.sqlite);
    expect(reports.firestore).toEqual(reports.sqlite);
    expect(reports.sqlite!.map((r) => [r.key, r.calls])).toEqual([
      ['bob', 2],
      ['alice', 3],
      [null, 1],
    ]);
    for (const groupBy of ['model', 'project', 'provider']) {
      const rows = await Promise.all(KINDS.map(async (kind) => (await getJson<SpendReport>(`${proxies[kind].url}/_local/api/spend?groupBy=${groupBy}&bucket=day`)).body.rows));
      for (const other of rows.slice(1)) expect(other).toEqual(rows[0]);
      expect(rows[0]!.every((r) => /^\d{4}-\d{2}-\d{2}T00:00:00\.000Z$/.test(r.bucket!))).toBe(true);
    }
  });

  it('/_local/api/spend refuses a bad parameter with a 400 naming it', async () => {
    const url = proxies.sqlite.url;
    const cases: [string, RegExp][] = [
      ['groupBy=team', /^groupBy must be one of user, model, project, provider \(got "team"\)$/],
      ['since=yesterday', /^since must be a duration like 7d/],
      ['bucket=week', /^bucket must be one of hour, day/],
      ['group_by=user', /^group_by is not a known parameter \(expected one of: since, until, groupBy, bucket, limit\)$/],
      ['limit=0', /^limit must be an integer from 1 to 10000/],
      ['since=7d&since=2d', /^since must be given once$/],
    ];
    for (const [query, message] of cases) {
      const { status, body } = await getJson<{ error: { code: string; message: string } }>(`${url}/_local/api/spend?${query}`);
      expect({ query, status, code: body.error.code }).toEqual({ query, status: 400, code: 'invalid_request' });
      expect(body.error.message).toMatch(message);
    }
  });

  it('tollgate spend reads each store directly and prints what the API returns', async () => {
    const api = (await getJson<SpendReport>(`${proxies.sqlite.url}/_local/api/spend?since=7d&groupBy=user`)).body.rows;
    for (const kind of ['sqlite', 'bigquery', 'firestore'] as const) {
      const config = join(dirs[kind], 'cli.yaml');
      writeFileSync(config, configYaml(kind));
      const json = await spendCli(['--config', config, '--since', '7d', '--format', 'json'], env());
      expect({ kind, code: json.code, stderr: json.stderr }).toEqual({ kind, code: 0, stderr: '' });
      expect((JSON.parse(json.stdout) as SpendReport).rows).toEqual(api);
    }
    const config = join(dirs.sqlite, 'cli.yaml');
    const table = await spendCli(['--config', config, '--since', '7d']);
    expect(table.code).toBe(0);
    const lines = table.stdout.trimEnd().split('\n');
    expect(lines[1]).toMatch(/^USER\s+COST USD\s+CALLS\s+TOKENS$/);
    expect(lines.slice(2).map((l) => l.split(/\s{2,}/)[0])).toEqual(['bob', 'alice', '(none)', 'TOTAL']);
    const csv = await spendCli(['--config', config, '--format', 'csv', '--group-by', 'project']);
    expect(csv.stdout.split('\n')[0]).toBe('key,cost_usd,calls,total_tokens');
    expect(csv.stdout.trimEnd().split('\n')).toHaveLength(4);
    const bad = await spendCli(['--config', config, '--group-by', 'team']);
    expect(bad).toMatchObject({ code: 2, stderr: 'tollgate spend: --group-by must be one of user, model, project, provider (got "team")\n' });
    // Six CLI processes, each loading a store's client: a loaded CI machine needs more than the default 20 s.
  }, 90_000);

  it('tollgate spend on a DuckDB file asks the proxy that holds it, and reads the file itself once the proxy stops', async () => {
    const config = join(dirs.duckdb, 'cli.yaml');
    writeFileSync(config, `server: { port: ${proxies.duckdb.port} }\n${configYaml('duckdb')}`);
    const expected = (await getJson<SpendReport>(`${proxies.duckdb.url}/_local/api/spend?since=7d`)).body.rows;
    const held = await spendCli(['--config', config, '--format', 'json']);
    expect(held.code).toBe(0);
    expect(held.stderr).toMatch(/the DuckDB file is open in a running proxy; asking it at http:\/\/127\.0\.0\.1:\d+\/_local\/api\/spend/);
    expect((JSON.parse(held.stdout) as SpendReport).rows).toEqual(expected);
    await proxies.duckdb.stop();
    const direct = await spendCli(['--config', config, '--format', 'json']);
    expect({ code: direct.code, stderr: direct.stderr }).toEqual({ code: 0, stderr: '' });
    expect((JSON.parse(direct.stdout) as SpendReport).rows).toEqual(expected);
  }, 90_000);
});
