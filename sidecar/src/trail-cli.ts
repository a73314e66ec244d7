// `tollgate trail <trace-id>`: the causal trail of one trace (ADR 1604), asked of a running proxy's
// GET /_local/api/trail/<trace-id>: the trail lives in that proxy's memory only, so there is no store to read.

import { parseArgs } from 'node:util';
import { PROXY_ENV } from '../../contracts/sidecar-env.ts';
import type { TrailActionJson, TrailCallJson, TrailJson } from './provenance/trail-view.ts';

const HELP = `usage: tollgate trail <trace-id> [--url URL] [--format text|json]

What the calling process tree did after each answer of a trace: call -> answer -> tool calls -> execs, with
each exec's connects, file writes and exit under it. Kept in the proxy's memory while provenance.trail is on
(docs/provenance.md#the-causal-trail).

  --url URL         the proxy to ask (default http://127.0.0.1:8181, or the port in TOLLGATE_PORT)
  --format FORMAT   text (default, an indented tree) or json (the /_local/api/trail body)
`;

const FORMATS = ['text', 'json'] as const;

/** Ends the command: 2 for bad input, 1 for a trail that could not be had. */
class TrailExit extends Error {
  readonly code: number;
  constructor(code: number, message: string) {
    super(message);
    this.code = code;
  }
}

export async function main(argv: string[], out: NodeJS.WritableStream = process.stdout, err: NodeJS.WritableStream = process.stderr): Promise<number> {
  let parsed;
  try {
    parsed = parseArgs({
      args: argv,
      options: { url: { type: 'string' }, format: { type: 'string' }, help: { type: 'boolean', short: 'h' } },
      allowPositionals: true,
      strict: true,
    });
  } catch (error) {
    err.write(`tollgate trail: ${(error as Error).message}\n\n${HELP}`);
    return 2;
  }
  if (parsed.values.help) {
    out.write(HELP);
    return 0;
  }
  try {
    const { traceId, url, format } = trailRequest(parsed.values, parsed.positionals);
    const trail = await fetchTrail(url, traceId);
    out.write(format === 'json' ? `${JSON.stringify(trail, null, 2)}\n` : renderTrail(trail));
    return 0;
  } catch (error) {
    if (!(error instanceof TrailExit)) throw error;
    err.write(`tollgate trail: ${error.message}\n`);
    return error.code;
  }
}

function trailRequest(values: { url?: string | undefined; format?: string | undefined }, positionals: string[]) {
  if (positionals.length !== 1) throw new TrailExit(2, `give one trace id, as in a span's trace_id (got ${positionals.length})\n\n${HELP}`);
  const format = values.format ?? 'text';
  if (!(FORMATS as readonly string[]).includes(format)) throw new TrailExit(2, `--format must be one of ${FORMATS.join(', ')} (got ${JSON.stringify(format)})`);
  const url = values.url ?? `http://127.0.0.1:${process.env[PROXY_ENV.port] ?? '8181'}`;
  if (!/^https?:\/\/[^\s/?#@]+\/?$/.test(url)) throw new TrailExit(2, `--url must be the proxy's http(s)://host:port (got ${JSON.stringify(url)})`);
  return { traceId: positionals[0]!, url: url.replace(/\/$/, ''), format };
}

async function fetchTrail(base: string, traceId: string): Promise<TrailJson> {
  let res: Response;
  try {
    res = await fetch(`${base}/_local/api/trail/${encodeURIComponent(traceId)}`, { signal: AbortSignal.timeout(30_000) });
  } catch (error) {
    const cause = (error as { cause?: { code?: string; message?: string } }).cause;
    throw new TrailExit(1, `cannot reach the proxy at ${base} (${cause?.code ?? cause?.message ?? (error as Error).message}); pass --url with its address`);
  }
  const body = (await res.json()) as TrailJson & { error?: { message: string } };
  if (res.status === 400) throw new TrailExit(2, body.error?.message ?? JSON.stringify(body));
  if (!res.ok) throw new TrailExit(1, `the proxy answered ${res.status}: ${body.error?.message ?? JSON.stringify(body)}`);
  return body;
}

/** argv as a shell would need it typed: arguments with spaces in double quotes. */
function commandLine(binary: string, args: string[] | null | undefined): string {
  if (!args || args.length === 0) return binary;
  return args.map((arg) => (/\s/.test(arg) || arg === '' ? `"${arg}"` : arg)).join(' ');
}

function seconds(fromMs: number, at: string): string {
  return `+${((Date.parse(at) - fromMs) / 1000).toFixed(3)}s`;
}

function actionLine(action: TrailActionJson, endedMs: number): string {
  const head = `${seconds(endedMs, action.time)} ${action.kind} pid ${action.pid ?? '?'}`;
  switch (action.kind) {
    case 'exec':
      return `${head} ${commandLine(action.binary, action.arguments)}`;
    case 'connect':
      return `${head} ${action.binary} -> ${action.destination ?? '?'}`;
    case 'file':
      return `${head} ${action.binary} wrote ${action.path ?? '?'}`;
    default:
      return `${head} ${action.binary} exit code ${action.exit_code ?? '?'}${action.signal ? ` (${action.signal})` : ''}`;
  }
}

function actionLines(actions: TrailActionJson[], endedMs: number, indent: string): string[] {
  return actions.flatMap((a) => [`${indent}${actionLine(a, endedMs)}`, ...actionLines(a.children, endedMs, `${indent}  `)]);
}

function callLines(call: TrailCallJson): string[] {
  const endedMs = Date.parse(call.ended);
  const caller = call.process;
  const lines = [
    `call ${call.span_id}: ${call.model} on ${call.route}, ${call.started} to ${call.ended}`,
    `  caller pid ${caller.pid ?? '?'} ${commandLine(caller.executable_path ?? '?', caller.command_args)}${caller.container_name ? ` (container ${caller.container_name})` : ''}`,
    `  answer: ${call.tool_calls.length === 1 ? '1 tool call' : `${call.tool_calls.length} tool calls`}`,
    ...call.tool_calls.map((tool) => `    tool call ${tool.name}${tool.id ? ` ${tool.id}` : ''} arguments sha256 ${tool.arguments_sha256.slice(0, 12)}`),
  ];
  if (call.actions.length === 0) return [...lines, '  then: nothing seen'];
  return [...lines, '  then:', ...actionLines(call.actions, endedMs, '    ')];
}

/** The trail as an indented tree, times relative to the end of each answer. */
export function renderTrail(trail: TrailJson): string {
  const lines = [`trace ${trail.trace_id} (actions up to ${trail.window_ms / 1000}s after each answer)`, ...trail.calls.flatMap(callLines)];
  return `${lines.join('\n')}\n`;
}
