// wrk (Debian's package) as the one load generator of the side-by-side benchmark: closed loop, C connections,
// one thread, a POST of the same chat-completions body to whichever path is measured. Its report is parsed into
// requests per second and latency percentiles in milliseconds.

import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { run } from '../test/kind/host-command.ts';

export interface WrkResult {
  requestsPerSecond: number;
  p50Ms: number;
  p99Ms: number;
  requests: number;
  /** Non-2xx answers and socket errors: a run with any is not a measurement. */
  errors: number;
}

const UNIT_MS: Record<string, number> = { us: 0.001, ms: 1, s: 1000, m: 60_000 };

function durationMs(text: string): number {
  const m = /^([\d.]+)(us|ms|s|m)$/.exec(text);
  if (!m) throw new Error(`wrk: cannot read the duration ${JSON.stringify(text)}`);
  return Number(m[1]) * UNIT_MS[m[2]!]!;
}

export function parseWrk(output: string): WrkResult {
  const percentile = (p: string) => durationMs(new RegExp(`^\\s+${p}%\\s+(\\S+)`, 'm').exec(output)?.[1] ?? 'NaNms');
  const socket = /Socket errors: connect (\d+), read (\d+), write (\d+), timeout (\d+)/.exec(output);
  const non2xx = Number(/Non-2xx or 3xx responses: (\d+)/.exec(output)?.[1] ?? 0);
  const socketErrors = socket ? socket.slice(1).reduce((sum, n) => sum + Number(n), 0) : 0;
  return {
    requestsPerSecond: Number(/Requests\/sec:\s+([\d.]+)/.exec(output)?.[1] ?? NaN),
    p50Ms: percentile('50'),
    p99Ms: percentile('99'),
    requests: Number(/(\d+) requests in/.exec(output)?.[1] ?? NaN),
    errors: non2xx + socketErrors,
  };
}

/** POSTs `body` to `url` over `connections` keep-alive connections for `seconds`. */
export async function wrk(url: string, opts: { connections: number; seconds: number; body: string; headers?: Record<string, string> }): Promise<WrkResult> {
  const dir = mkdtempSync(join(tmpdir(), 'tollgate-wrk-'));
  try {
    const script = join(dir, 'post.lua');
    const headers = { 'content-type': 'application/json', ...opts.headers };
    writeFileSync(
      script,
      [
        'wrk.method = "POST"',
        `wrk.body = ${JSON.stringify(opts.body)}`,
        ...Object.entries(headers).map(([k, v]) => `wrk.headers[${JSON.stringify(k)}] = ${JSON.stringify(v)}`),
        '',
      ].join('\n'),
    );
    const r = await run('wrk', ['-t1', `-c${opts.connections}`, `-d${opts.seconds}s`, '--latency', '--timeout', '10s', '-s', script, url]);
    return parseWrk(r.stdout);
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}
