// The span as the HTTP API shows it (GET /_local/api/traces): snake_case keys, short usage names.

import type { Span, SpanProcess, SpanStatus, SpanToolCall } from './span.ts';

export interface SpanJson {
  span_id: string;
  trace_id: string;
  parent_span_id: string | null;
  name: string;
  model: string;
  response_model: string | null;
  provider: string;
  route: string;
  user_id: string | null;
  project_id: string | null;
  request_id: string;
  input_tokens: number;
  output_tokens: number;
  total_tokens: number;
  cached_tokens: number;
  cache_write_tokens: number;
  reasoning_tokens: number;
  /** Billed units other than tokens (ADR 0910): images generated, seconds of input audio, characters of input text. */
  images: number;
  audio_seconds: number;
  characters: number;
  cost_usd: number;
  priced: boolean;
  /** The token counts are the proxy's estimate (the caller left before the provider's usage arrived). */
  usage_estimated: boolean;
  /** The model alias the caller named (docs/openai-gateway.md), or null. */
  alias: string | null;
  /** On an attempt of a call that fell back, its number; null on a call's own span. */
  attempt: number | null;
  /** Forwarded on a path the route's format cannot meter (the route allows it): usage and cost are not the bill. */
  unmetered: boolean;
  duration_ms: number;
  status: SpanStatus;
  status_code: number | null;
  error: string | null;
  /** ISO 8601 UTC start time. */
  timestamp: string;
  /** The process that opened the call's connection (docs/provenance.md); absent when provenance is off. */
  process?: SpanProcessJson;
  /** The tool calls the answer asked for, in answer order (docs/provenance.md); absent when provenance is off. */
  tool_calls?: SpanToolCallJson[];
}

export interface SpanToolCallJson {
  id: string | null;
  name: string;
  arguments_sha256: string;
}

export interface SpanProcessJson {
  attribution: SpanProcess['attribution'];
  pid: number | null;
  executable_path: string | null;
  command_args: string[] | null;
  parent_executables: string[];
  container_name: string | null;
  /** Tetragon's exec_id of the process; null when not known (from /proc, unattributed). */
  exec_id: string | null;
}

export function spanToJson(span: Span): SpanJson {
  return {
    span_id: span.spanId,
    trace_id: span.traceId,
    parent_span_id: span.parentSpanId,
    name: span.name,
    model: span.model,
    response_model: span.responseModel,
    provider: span.provider,
    route: span.route,
    user_id: span.userId,
    project_id: span.projectId,
    request_id: span.requestId,
    input_tokens: span.inputTokens,
    output_tokens: span.outputTokens,
    total_tokens: span.totalTokens,
    cached_tokens: span.cachedTokens,
    cache_write_tokens: span.cacheWriteTokens,
    reasoning_tokens: span.reasoningTokens,
    images: span.images,
    audio_seconds: span.audioSeconds,
    characters: span.characters,
    cost_usd: span.costUsd,
    priced: span.priced,
    usage_estimated: span.usageEstimated,
    alias: span.alias,
    attempt: span.attempt,
    unmetered: span.unmetered,
    duration_ms: span.durationMs,
    status: span.status,
    status_code: span.statusCode,
    error: span.error,
    timestamp: span.startTime,
    ...(span.process ? { process: processToJson(span.process) } : {}),
    ...(span.toolCalls ? { tool_calls: toolCallsToJson(span.toolCalls) } : {}),
  };
}

/** Tool calls under their snake_case names: the API's shape and the span stores' `tool_calls` column (ADR 1603). */
export function toolCallsToJson(calls: readonly SpanToolCall[]): SpanToolCallJson[] {
  return calls.map((c) => ({ id: c.id, name: c.name, arguments_sha256: c.argumentsSha256 }));
}

function processToJson(p: SpanProcess): SpanProcessJson {
  return {
    attribution: p.attribution,
    pid: p.pid,
    executable_path: p.executablePath,
    command_args: p.commandArgs,
    parent_executables: p.parentExecutables,
    container_name: p.containerName,
    exec_id: p.execId ?? null,
  };
}
