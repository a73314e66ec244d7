/**
 * How a proxied call ended:
 * - `ok`: the upstream answered 2xx/3xx and the response reached the caller whole.
 * - `upstream_error`: the upstream answered 4xx/5xx (its status is in statusCode).
 * - `error`: the proxy could not complete the call (upstream unreachable, timeout, open breaker, credential
 *   failure, malformed or truncated stream); `error` names the cause.
 * - `client_aborted`: the caller went away before the response was complete.
 * - `rejected`: the proxy refused the call before contacting the upstream (bad request, budget).
 */
export type SpanStatus = 'ok' | 'upstream_error' | 'error' | 'client_aborted' | 'rejected';

export interface Span {
  spanId: string;
  traceId: string;
  parentSpanId: string | null;
  /** `{operation} {model}` per the OpenTelemetry GenAI conventions. */
  name: string;
  operation: string;
  model: string;
  responseModel: string | null;
  /** `unknown` only for a /v1 call refused before its model named a provider (bad JSON, unknown model). */
  provider: string;
  /** A route's name, or `v1` for a /v1 call refused before it reached one. */
  route: string;
  userId: string | null;
  projectId: string | null;
  requestId: string;
  inputTokens: number;
  outputTokens: number;
  totalTokens: number;
  cachedTokens: number;
  cacheWriteTokens: number;
  reasoningTokens: number;
  /** Images generated or edited (images API); 0 on other calls. */
  images: number;
  /** Seconds of input audio billed (transcriptions, translations); 0 on other calls. */
  audioSeconds: number;
  /** Characters of input text billed (text to speech); 0 on other calls. */
  characters: number;
  costUsd: number;
  /** False when no price entry matched the model (cost is then 0). */
  priced: boolean;
  /**
   * True when the token counts are the proxy's estimate, not the provider's: the caller left a stream and the
   * provider's usage did not arrive within the bounds the proxy keeps reading for (ADR 1305).
   */
  usageEstimated: boolean;
  /** The model alias the caller named on /v1 (docs/openai-gateway.md), or null; `model` is the target's id. */
  alias: string | null;
  /**
   * On an attempt's span, its number (1, 2, …): a child of the call's span recording one upstream attempt of a
   * call that fell back, with its outcome and no usage (the call's own span carries what was charged). Null on
   * a call's span, so reports of calls and spend leave attempts out.
   */
  attempt: number | null;
  /**
   * Forwarded on a path its route's format cannot meter, because the route allows unmetered calls: whatever it
   * cost, its usage and cost here are not the provider's bill (docs/routes.md#what-a-route-forwards).
   */
  unmetered: boolean;
  durationMs: number;
  status: SpanStatus;
  /** Upstream HTTP status; null when the upstream was never reached. */
  statusCode: number | null;
  error: string | null;
  /** ISO 8601 UTC start time. */
  startTime: string;
  /** The process in the pod that opened the call's connection; absent when provenance is off (ADR 1600). */
  process?: SpanProcess | undefined;
  /**
   * The tool calls in the model's answer, in answer order; absent when provenance is off, empty when the answer
   * asked for none (ADR 1603).
   */
  toolCalls?: SpanToolCall[] | undefined;
}

/** One tool call the model's answer asked the caller to make: what a causal trail starts from (ADR 1603). */
export interface SpanToolCall {
  /** The provider's id for it (`call_…`, `toolu_…`), which the caller's tool result echoes; null where the format has none. */
  id: string | null;
  /** The function (or built-in tool, e.g. `local_shell`) name. */
  name: string;
  /** SHA-256, hex, of the arguments as canonical JSON (object keys sorted), so a streamed and a whole answer hash alike. */
  argumentsSha256: string;
}

/** Who made a call: what Tetragon or /proc said about the process behind the connection the sidecar accepted. */
export interface SpanProcess {
  /** Where the answer came from; `unattributed` when nothing matched within the attribution window. */
  attribution: 'tetragon' | 'procfs' | 'unattributed';
  /** Host PID namespace for Tetragon, the sidecar's view for /proc. */
  pid: number | null;
  executablePath: string | null;
  /** argv with argv[0], redacted per provenance.arguments; null when arguments are not recorded. */
  commandArgs: string[] | null;
  /** The parents' binaries, nearest first. */
  parentExecutables: string[];
  containerName: string | null;
  /** Tetragon's exec_id of the process (unique across the node's lifetime); null from /proc or unattributed. */
  execId?: string | null | undefined;
}
