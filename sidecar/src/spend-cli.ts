// `tollgate spend`: the spend report from the command line, read from the configured span store directly (the
// same query the store runs for GET /_local/api/spend). A DuckDB file can be open in one process only; while a
// proxy holds it, the report is asked of that proxy's /_local/api/spend instead.

import { parseArgs } from 'node:util';
import pino from 'pino';
import { ConfigError } from '../../contracts/config-error.ts';
import { loadConfigFile } from './config/config-file.ts';
import type { RuntimeConfigPatch } from '../../contracts/config-schema.ts';
import type { RuntimeConfig } from '../../contracts/runtime-config.ts';
import { ConfigStore } from './config/config-store.ts';
import { SnapshotCache } from './config/snapshot-cache.ts';
import { applyPodDefaults } from './pod-defaults.ts';
import { PROXY_ENV } from '../../contracts/sidecar-env.ts';
import { isDuckDbLockConflict } from './spans/duckdb-span-store.ts';
import { openSpanStore } from './spans/open-span-store.ts';
import { SpanStoreOpenError } from './spans/span-store.ts';
import { parseSpendQuery, SPEND_PARAMETERS, type SpendGroup, type SpendQuery, type SpendReport, SpendQueryError } from './spans/spend.ts';

const HELP = `usage: tollgate spend [--config FILE] [--since 7d] [--until TIME] [--group-by user] [--bucket hour|day]
                      [--format table|json|csv] [--limit N] [--url URL]

Cost, calls and tokens per user (or model, project, provider) from the configured span store.

  --config FILE     the proxy's YAML config file (storage.kind and its settings); default: built-in defaults
                    (SQLite ./tollgate.db)
  --since WHEN      start of the window: a duration back from now (30m, 24h, 7d, 2w) or an ISO 8601 time
                    (default 7d)
  --until WHEN      end of the window, same forms (default: now)
  --group-by KEY    user, model, project or provider (default user)
  --bucket SIZE     hour or day: one row per key and UTC hour or day
  --format FORMAT   table (default), json (the /_local/api/spend body) or csv
  --limit N         most rows, 1 to 10000 (default 1000)
  --url URL         ask a running proxy (http://127.0.0.1:8181) instead of reading the store; needed for a
                    DuckDB file that a proxy listening elsewhere than server.host:port (or TOLLGATE_PORT) holds

In a pod (TOLLGATE_STATE_DIR set) the storage settings of the operator's last snapshot apply.
`;

const FORMATS = ['table', 'json', 'csv'] as const;
type Format = (typeof FORMATS)[number];

/** Ends the command with a message on stderr and an exit code: 2 for bad input, 1 for a report that failed. */
class SpendExit extends Error {
  readonly code: number;
  constructor(code: number, message: string) {
    super(message);
    this.code = code;
  }
}

type SpendParams = Record<(typeof SPEND_PARAMETERS)[number], string | undefined>;

/** The command line, checked: what to report, in which format, from where. */
interface SpendRequest {
  format: Format;
  params: SpendParams;
  query: SpendQuery;
  config: RuntimeConfig;
  url: string | undefined;
}

export async function main(argv: string[], out: NodeJS.WritableStream = process.stdout, err: NodeJS.WritableStream = process.stderr): Promise<number> {
  let args;
  try {
    args = parseSpendArgs(argv);
  } catch (error) {
    err.write(`tollgate spend: ${(error as Error).message}\n\n${HELP}`);
    return 2;
  }
  if (args.help) {
    out.write(HELP);
    return 0;
  }
  try {
    const request = await spendRequest(args);
    const report = request.url !== undefined ? await fetchOrExit(request.url.replace(/\/$/, ''), request.params) : await reportFromStore(request, err);
    out.write(render(report, request.format));
    return 0;
  } catch (error) {
    if (!(error instanceof SpendExit)) throw error;
    err.write(`tollgate spend: ${error.message}\n`);
    return error.code;
  }
}

function parseSpendArgs(argv: string[]) {
  const options = {
    config: { type: 'string' },
    since: { type: 'string' },
    until: { type: 'string' },
    'group-by': { type: 'string' },
    bucket: { type: 'string' },
    format: { type: 'string' },
    limit: { type: 'string' },
    url: { type: 'string' },
    help: { type: 'boolean', short: 'h' },
  } as const;
  return parseArgs({ args: argv, options, strict: true }).values;
}

async function spendRequest(args: ReturnType<typeof parseSpendArgs>): Promise<SpendRequest> {
  const format = (args.format ?? 'table') as Format;
  if (!FORMATS.includes(format)) throw new SpendExit(2, `--format must be one of ${FORMATS.join(', ')} (got ${JSON.stringify(args.format)})`);
  const params: SpendParams = { since: args.since, until: args.until, groupBy: args['group-by'], bucket: args.bucket, limit: args.limit };
  const flag: Record<(typeof SPEND_PARAMETERS)[number], string> = { since: '--since', until: '--until', groupBy: '--group-by', bucket: '--bucket', limit: '--limit' };
  try {
    const query = parseSpendQuery(params);
    const config = await loadConfig(args.config);
    if (args.url !== undefined && !/^https?:\/\/[^\s/?#@]+\/?$/.test(args.url)) {
      throw new SpendExit(2, `--url must be the proxy's http(s)://host:port (got ${JSON.stringify(args.url)})`);
    }
    return { format, params, query, config, url: args.url };
  } catch (error) {
    if (error instanceof SpendQueryError) throw new SpendExit(2, error.message.replace(error.parameter, flag[error.parameter as keyof typeof flag] ?? error.parameter));
    if (error instanceof ConfigError) throw new SpendExit(2, error.message);
    throw error;
  }
}

async function fetchOrExit(base: string, params: SpendParams): Promise<SpendReport> {
  try {
    return await fetchReport(base, params);
  } catch (fetchError) {
    throw new SpendExit(1, (fetchError as Error).message);
  }
}

/** The report from the span store the config names; a DuckDB file a running proxy holds is asked through that proxy. */
async function reportFromStore(request: SpendRequest, err: NodeJS.WritableStream): Promise<SpendReport> {
  const { config } = request;
  const logger = pino({ level: process.env[PROXY_ENV.logLevel] ?? 'warn', base: { component: 'spend' } }, pino.destination(2));
  try {
    const opened = await openSpanStore(config.storage, { logger, env: process.env, purpose: 'report' });
    try {
      return await opened.store.spend(request.query);
    } finally {
      await opened.store.close();
    }
  } catch (error) {
    if (config.storage.kind === 'duckdb' && isDuckDbLockConflict(error)) {
      // The proxy that holds the file answers the same report over its management API.
      const { host } = config.server;
      const port = process.env[PROXY_ENV.port] ?? String(config.server.port);
      const base = `http://${host === '0.0.0.0' || host === '::' ? '127.0.0.1' : host.includes(':') ? `[${host}]` : host}:${port}`;
      err.write(`tollgate spend: the DuckDB file is open in a running proxy; asking it at ${base}/_local/api/spend\n`);
      return fetchOrExit(base, request.params);
    }
    if (error instanceof SpanStoreOpenError || error instanceof ConfigError) throw new SpendExit(2, error.message);
    throw new SpendExit(1, `cannot read spend from the ${config.storage.kind} span store: ${(error as Error).message}`);
  }
}

async function loadConfig(file: string | undefined) {
  const patch: RuntimeConfigPatch = file ? loadConfigFile(file) : {};
  applyPodDefaults(patch, process.env);
  const store = new ConfigStore(patch);
  const stateDir = process.env[PROXY_ENV.stateDir];
  if (stateDir) {
    // The sidecar's storage comes from the operator: its last snapshot is on disk.
    const snapshot = await new SnapshotCache(stateDir, pino({ level: 'silent' })).load().catch(() => undefined);
    if (snapshot) store.setLayer('operator', snapshot.patch);
  }
  return store.get();
}

async function fetchReport(base: string, params: Record<string, string | undefined>): Promise<SpendReport> {
  const search = new URLSearchParams(Object.entries(params).filter((e): e is [string, string] => e[1] !== undefined));
  const url = `${base}/_local/api/spend?${search.toString()}`;
  let res: Response;
  try {
    res = await fetch(url, { signal: AbortSignal.timeout(60_000) });
  } catch (error) {
    const cause = (error as { cause?: { code?: string; message?: string } }).cause;
    throw new Error(`cannot reach the proxy at ${base} (${cause?.code ?? cause?.message ?? (error as Error).message}); pass --url with its address`);
  }
  const body = (await res.json()) as SpendReport & { error?: { message: string } };
  if (!res.ok) throw new Error(`the proxy answered ${res.status}: ${body.error?.message ?? JSON.stringify(body)}`);
  const { pending: _pending, ...report } = body as SpendReport & { pending?: number };
  return report;
}

/** Up to 10 decimals, no trailing zeros, at least 2 (12.50, 0.00000855). */
function usd(value: number): string {
  const fixed = value.toFixed(10).replace(/0+$/, '');
  const [whole, fraction = ''] = fixed.split('.');
  return `${whole}.${fraction.padEnd(2, '0')}`;
}

const KEY_HEADER: Record<SpendGroup, string> = { user: 'USER', model: 'MODEL', project: 'PROJECT', provider: 'PROVIDER' };

function csvField(value: string): string {
  return /[",\r\n]/.test(value) ? `"${value.replaceAll('"', '""')}"` : value;
}

export function render(report: SpendReport, format: Format): string {
  if (format === 'json') return `${JSON.stringify(report, null, 2)}\n`;
  const bucketed = report.bucket !== null;
  if (format === 'csv') {
    const lines = [[...(bucketed ? ['bucket'] : []), 'key', 'cost_usd', 'calls', 'total_tokens'].join(',')];
    for (const r of report.rows) {
      lines.push([...(bucketed ? [r.bucket ?? ''] : []), csvField(r.key ?? ''), String(r.cost_usd), String(r.calls), String(r.total_tokens)].join(','));
    }
    return `${lines.join('\n')}\n`;
  }
  const header = [...(bucketed ? [report.bucket === 'hour' ? 'HOUR (UTC)' : 'DAY (UTC)'] : []), KEY_HEADER[report.groupBy], 'COST USD', 'CALLS', 'TOKENS'];
  const rows = report.rows.map((r) => [
    ...(bucketed ? [report.bucket === 'hour' ? (r.bucket ?? '').slice(0, 16).replace('T', ' ') : (r.bucket ?? '').slice(0, 10)] : []),
    r.key ?? '(none)',
    usd(r.cost_usd),
    String(r.calls),
    String(r.total_tokens),
  ]);
  const totalUnits = report.rows.reduce((sum, r) => sum + BigInt(Math.round(r.cost_usd * 1e10)), 0n);
  rows.push([
    ...(bucketed ? [''] : []),
    'TOTAL',
    usd(Number(totalUnits) / 1e10),
    String(report.rows.reduce((sum, r) => sum + r.calls, 0)),
    String(report.rows.reduce((sum, r) => sum + r.total_tokens, 0)),
  ]);
  const numeric = (i: number) => i >= header.length - 3;
  const widths = header.map((h, i) => Math.max(h.length, ...rows.map((r) => r[i]!.length)));
  const line = (cells: string[]) =>
    cells
      .map((c, i) => (numeric(i) ? c.padStart(widths[i]!) : c.padEnd(widths[i]!)))
      .join('  ')
      .trimEnd();
  const window = `${report.since} to ${report.until ?? 'now'}`;
  const notes = report.rows.length === 0 ? ['no calls in this window'] : report.truncated ? [`first ${report.rows.length} rows; more matched (--limit)`] : [];
  return `${[`spend by ${report.groupBy}, ${window}`, line(header), ...rows.map(line), ...notes].join('\n')}\n`;
}
