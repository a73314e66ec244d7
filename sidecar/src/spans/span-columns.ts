// The span's columns, once for every store: SQLite and DuckDB tables, the BigQuery table and the fields of a
// Firestore document all carry these names (the OpenTelemetry GenAI attribute names with dots turned into
// underscores), so a query written against one store reads the same on another.
//
// Schema evolution is additive only (ADR 0401): a column a later version adds is nullable or has a default, and
// every reader fills a missing or null value with the column's `missing` value, so rows written by an older
// version read back whole.

import { isRecord } from '../../../contracts/json-record.ts';
import type { Span, SpanProcess, SpanStatus, SpanToolCall } from './span.ts';
import { toolCallsToJson } from './span-json.ts';

export type ColumnType = 'string' | 'int' | 'float' | 'bool' | 'timestamp';

export interface SpanColumn {
  name: string;
  type: ColumnType;
  /** NULL (or an absent field) is a value of its own, not "unknown". */
  nullable: boolean;
  /** Schema version that introduced the column. */
  since: number;
  /**
   * What a row written before the column existed reads back as. A SQL store also declares it as the column
   * default; columns present since version 1 that are NOT NULL without a default have none.
   */
  missing?: string | number | boolean | null;
}

/** The schema version of SPAN_COLUMNS (SQLite keeps it in PRAGMA user_version). */
export const SPAN_SCHEMA_VERSION = 7;

// Version 1 had the identity, timing, outcome, model and the basic token and cost columns; version 2 added
// project and request ids, the response model, cache and reasoning tokens and `priced`; version 3 added
// `usage_estimated`; version 4 added `alias` and `attempt` (model aliases and fallback) and `unmetered`;
// version 5 added the billed units other than tokens: images, seconds of audio, characters (ADR 0910); version 6
// added the calling process (ADR 1600); version 7 added the answer's tool calls and the process's exec_id (ADR 1603).
export const SPAN_COLUMNS: readonly SpanColumn[] = [
  { name: 'span_id', type: 'string', nullable: false, since: 1 },
  { name: 'trace_id', type: 'string', nullable: false, since: 1 },
  { name: 'parent_span_id', type: 'string', nullable: true, since: 1 },
  { name: 'name', type: 'string', nullable: false, since: 1, missing: '' },
  { name: 'start_time', type: 'timestamp', nullable: false, since: 1 },
  { name: 'duration_ms', type: 'float', nullable: false, since: 1, missing: 0 },
  { name: 'status', type: 'string', nullable: false, since: 1, missing: 'ok' },
  { name: 'status_code', type: 'int', nullable: true, since: 1 },
  { name: 'error', type: 'string', nullable: true, since: 1 },
  { name: 'user_id', type: 'string', nullable: true, since: 1 },
  { name: 'route', type: 'string', nullable: false, since: 1, missing: '' },
  { name: 'gen_ai_operation_name', type: 'string', nullable: false, since: 1, missing: '' },
  { name: 'gen_ai_provider_name', type: 'string', nullable: false, since: 1, missing: '' },
  { name: 'gen_ai_request_model', type: 'string', nullable: false, since: 1, missing: '' },
  { name: 'gen_ai_usage_input_tokens', type: 'int', nullable: false, since: 1, missing: 0 },
  { name: 'gen_ai_usage_output_tokens', type: 'int', nullable: false, since: 1, missing: 0 },
  { name: 'gen_ai_total_tokens', type: 'int', nullable: false, since: 1, missing: 0 },
  { name: 'gen_ai_cost_usd', type: 'float', nullable: false, since: 1, missing: 0 },
  { name: 'project_id', type: 'string', nullable: true, since: 2 },
  { name: 'request_id', type: 'string', nullable: false, since: 2, missing: '' },
  { name: 'gen_ai_response_model', type: 'string', nullable: true, since: 2 },
  { name: 'gen_ai_usage_cache_read_input_tokens', type: 'int', nullable: false, since: 2, missing: 0 },
  { name: 'gen_ai_usage_cache_creation_input_tokens', type: 'int', nullable: false, since: 2, missing: 0 },
  { name: 'gen_ai_usage_reasoning_tokens', type: 'int', nullable: false, since: 2, missing: 0 },
  // Rows from before this column were costed from the price table of their day; calling them all unpriced
  // would be a false alarm.
  { name: 'priced', type: 'bool', nullable: false, since: 2, missing: true },
  // Before this column a call's usage was always the provider's (or none).
  { name: 'usage_estimated', type: 'bool', nullable: false, since: 3, missing: false },
  // Before these columns there were no aliases, and every span was a call's.
  { name: 'alias', type: 'string', nullable: true, since: 4 },
  { name: 'attempt', type: 'int', nullable: true, since: 4 },
  // Before this column nothing was forwarded on a path its format could not meter.
  { name: 'unmetered', type: 'bool', nullable: false, since: 4, missing: false },
  // Before these columns every call was billed by tokens alone.
  { name: 'gen_ai_usage_images', type: 'int', nullable: false, since: 5, missing: 0 },
  { name: 'gen_ai_usage_audio_seconds', type: 'float', nullable: false, since: 5, missing: 0 },
  { name: 'gen_ai_usage_characters', type: 'int', nullable: false, since: 5, missing: 0 },
  // Null when provenance was off: the call was not looked up, which is not the same as `unattributed`.
  { name: 'process_attribution', type: 'string', nullable: true, since: 6 },
  { name: 'process_pid', type: 'int', nullable: true, since: 6 },
  { name: 'process_executable_path', type: 'string', nullable: true, since: 6 },
  // JSON arrays of strings: argv (redacted per provenance.arguments) and the parents' binaries, nearest first.
  { name: 'process_command_args', type: 'string', nullable: true, since: 6 },
  { name: 'process_parent_executables', type: 'string', nullable: true, since: 6 },
  { name: 'container_name', type: 'string', nullable: true, since: 6 },
  // A JSON array of {id, name, arguments_sha256}, `[]` for an answer without tool calls; null when provenance was off.
  { name: 'tool_calls', type: 'string', nullable: true, since: 7 },
  // Tetragon's exec_id of the calling process; null from /proc, unattributed, or provenance off.
  { name: 'process_exec_id', type: 'string', nullable: true, since: 7 },
];

export const SPAN_COLUMN_NAMES: readonly string[] = SPAN_COLUMNS.map((c) => c.name);

/** A span under its column names, with JavaScript values (start_time an ISO 8601 UTC string). */
export interface SpanRecord {
  span_id: string;
  trace_id: string;
  parent_span_id: string | null;
  name: string;
  start_time: string;
  duration_ms: number;
  status: string;
  status_code: number | null;
  error: string | null;
  user_id: string | null;
  route: string;
  gen_ai_operation_name: string;
  gen_ai_provider_name: string;
  gen_ai_request_model: string;
  gen_ai_usage_input_tokens: number;
  gen_ai_usage_output_tokens: number;
  gen_ai_total_tokens: number;
  gen_ai_cost_usd: number;
  project_id: string | null;
  request_id: string;
  gen_ai_response_model: string | null;
  gen_ai_usage_cache_read_input_tokens: number;
  gen_ai_usage_cache_creation_input_tokens: number;
  gen_ai_usage_reasoning_tokens: number;
  priced: boolean;
  usage_estimated: boolean;
  alias: string | null;
  attempt: number | null;
  unmetered: boolean;
  gen_ai_usage_images: number;
  gen_ai_usage_audio_seconds: number;
  gen_ai_usage_characters: number;
  process_attribution: string | null;
  process_pid: number | null;
  process_executable_path: string | null;
  process_command_args: string | null;
  process_parent_executables: string | null;
  container_name: string | null;
  tool_calls: string | null;
  process_exec_id: string | null;
}

export function spanToRecord(s: Span): SpanRecord {
  return {
    span_id: s.spanId,
    trace_id: s.traceId,
    parent_span_id: s.parentSpanId,
    name: s.name,
    start_time: s.startTime,
    duration_ms: s.durationMs,
    status: s.status,
    status_code: s.statusCode,
    error: s.error,
    user_id: s.userId,
    route: s.route,
    gen_ai_operation_name: s.operation,
    gen_ai_provider_name: s.provider,
    gen_ai_request_model: s.model,
    gen_ai_usage_input_tokens: s.inputTokens,
    gen_ai_usage_output_tokens: s.outputTokens,
    gen_ai_total_tokens: s.totalTokens,
    gen_ai_cost_usd: s.costUsd,
    project_id: s.projectId,
    request_id: s.requestId,
    gen_ai_response_model: s.responseModel,
    gen_ai_usage_cache_read_input_tokens: s.cachedTokens,
    gen_ai_usage_cache_creation_input_tokens: s.cacheWriteTokens,
    gen_ai_usage_reasoning_tokens: s.reasoningTokens,
    priced: s.priced,
    usage_estimated: s.usageEstimated,
    alias: s.alias,
    attempt: s.attempt,
    unmetered: s.unmetered,
    gen_ai_usage_images: s.images,
    gen_ai_usage_audio_seconds: s.audioSeconds,
    gen_ai_usage_characters: s.characters,
    process_attribution: s.process?.attribution ?? null,
    process_pid: s.process?.pid ?? null,
    process_executable_path: s.process?.executablePath ?? null,
    process_command_args: s.process?.commandArgs ? JSON.stringify(s.process.commandArgs) : null,
    process_parent_executables: s.process ? JSON.stringify(s.process.parentExecutables) : null,
    container_name: s.process?.containerName ?? null,
    tool_calls: s.toolCalls ? JSON.stringify(toolCallsToJson(s.toolCalls)) : null,
    process_exec_id: s.process?.execId ?? null,
  };
}

/** The tool calls of a stored row, or undefined for a row written with provenance off (or before v7). */
function recordToToolCalls(text: unknown): SpanToolCall[] | undefined {
  if (typeof text !== 'string') return undefined;
  let parsed: unknown;
  try {
    parsed = JSON.parse(text);
  } catch {
    return undefined;
  }
  if (!Array.isArray(parsed)) return undefined;
  return parsed.filter(isRecord).map((c) => ({
    id: typeof c.id === 'string' ? c.id : null,
    name: typeof c.name === 'string' ? c.name : '',
    argumentsSha256: typeof c.arguments_sha256 === 'string' ? c.arguments_sha256 : '',
  }));
}

function stringList(text: unknown): string[] | null {
  if (typeof text !== 'string') return null;
  try {
    const parsed: unknown = JSON.parse(text);
    return Array.isArray(parsed) ? parsed.map(String) : null;
  } catch {
    return null;
  }
}

/** The calling process of a stored row, or undefined for a row written with provenance off (or before v6). */
function recordToProcess(row: Readonly<Record<string, unknown>>): SpanProcess | undefined {
  const attribution = row.process_attribution;
  if (typeof attribution !== 'string') return undefined;
  const pid = row.process_pid;
  const text = (name: string): string | null => {
    const v = row[name];
    return typeof v === 'string' ? v : null;
  };
  return {
    attribution: attribution as SpanProcess['attribution'],
    pid: pid === null || pid === undefined ? null : Number(pid),
    executablePath: text('process_executable_path'),
    commandArgs: stringList(row.process_command_args),
    parentExecutables: stringList(row.process_parent_executables) ?? [],
    containerName: text('container_name'),
    // Only a known exec_id is set: a span recorded without one reads back as it was written.
    ...(text('process_exec_id') !== null ? { execId: text('process_exec_id') } : {}),
  };
}

const MISSING: Readonly<Record<string, unknown>> = Object.fromEntries(SPAN_COLUMNS.map((c) => [c.name, c.missing ?? null]));

/**
 * A stored row or document back to a span. Values a store returns in its own types (bigint counts, 0/1
 * booleans) are normalised; absent or null values of columns that are not nullable read as the column's
 * `missing` value (a row written before the column existed). `start_time` must already be an ISO string.
 */
export function recordToSpan(row: Readonly<Record<string, unknown>>): Span {
  const value = (name: string): unknown => {
    const v = row[name];
    return v === undefined || v === null ? MISSING[name] : v;
  };
  const text = (name: string) => value(name) as string;
  const nullableText = (name: string) => (value(name) ?? null) as string | null;
  const num = (name: string) => Number(value(name));
  const nullableNum = (name: string) => {
    const v = value(name);
    return v === null ? null : Number(v);
  };
  const flag = (name: string) => {
    const v = value(name);
    return v === true || (v !== false && Number(v) !== 0);
  };
  const process = recordToProcess(row);
  const toolCalls = recordToToolCalls(row.tool_calls);
  return {
    ...(process ? { process } : {}),
    ...(toolCalls ? { toolCalls } : {}),
    spanId: text('span_id'),
    traceId: text('trace_id'),
    parentSpanId: nullableText('parent_span_id'),
    name: text('name'),
    operation: text('gen_ai_operation_name'),
    model: text('gen_ai_request_model'),
    responseModel: nullableText('gen_ai_response_model'),
    provider: text('gen_ai_provider_name'),
    route: text('route'),
    userId: nullableText('user_id'),
    projectId: nullableText('project_id'),
    requestId: text('request_id'),
    inputTokens: num('gen_ai_usage_input_tokens'),
    outputTokens: num('gen_ai_usage_output_tokens'),
    totalTokens: num('gen_ai_total_tokens'),
    cachedTokens: num('gen_ai_usage_cache_read_input_tokens'),
    cacheWriteTokens: num('gen_ai_usage_cache_creation_input_tokens'),
    reasoningTokens: num('gen_ai_usage_reasoning_tokens'),
    images: num('gen_ai_usage_images'),
    audioSeconds: num('gen_ai_usage_audio_seconds'),
    characters: num('gen_ai_usage_characters'),
    costUsd: num('gen_ai_cost_usd'),
    priced: flag('priced'),
    usageEstimated: flag('usage_estimated'),
    alias: nullableText('alias'),
    attempt: nullableNum('attempt'),
    unmetered: flag('unmetered'),
    durationMs: num('duration_ms'),
    status: text('status') as SpanStatus,
    statusCode: nullableNum('status_code'),
    error: nullableText('error'),
    startTime: text('start_time'),
  };
}
