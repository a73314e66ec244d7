// Fake LLM upstreams for proxy tests: one loopback HTTP server per provider surface that speaks the
// provider's wire format and checks what it receives the way the real service would.
//
// Usage:
//   const up = await startFakeUpstream('anthropic', { expectApiKey: 'sk-ant-test' });
//   // point the route's upstream base URL at up.url, send a call through the proxy, then:
//   expect(up.requests[0]?.headers['x-api-key']).toBe('sk-ant-test');
//   up.behave({ usage: { input: 120, output: 40, cacheRead: 30 } });  // the next replies report this
//   up.behave({ status: 529 });                  // the provider's own error shape for 529
//   up.behave({ truncateStream: true });         // stream ends half-way, final events missing
//   up.reset();                                   // default behaviour, no recorded requests
//   await up.close();                             // (or up.drain(): the answers being written finish first)
//
// Kinds and what they serve (any other path answers 404 in the provider's error shape):
//   vertex    Gemini   /v1/projects/P/locations/L/publishers/google/models/M:generateContent
//                      ...:streamGenerateContent  (?alt=sse → SSE; without → a JSON array written progressively)
//                      ...:countTokens  (totalTokens = the behaviour's input + cacheRead)
//             compat   /v1/projects/P/locations/L/endpoints/openapi/chat/completions  (JSON or SSE)
//             Claude   /v1/projects/P/locations/L/publishers/anthropic/models/M:rawPredict | :streamRawPredict
//                      and .../models/count-tokens:rawPredict
//             Requires `Authorization: Bearer <expectBearer>` (any bearer when expectBearer is unset).
//   openai    /v1/chat/completions, /v1/models. Bearer key = expectApiKey ?? expectBearer.
//   anthropic /v1/messages, /v1/messages/count_tokens. Requires x-api-key (= expectApiKey) and anthropic-version.
//   bedrock   /model/{id}/invoke, /model/{id}/invoke-with-response-stream; /model/{id}/converse, converse-stream for
//             any model (llm-converse.ts, its body checked as Bedrock validates it). Verifies SigV4 with `aws`
//             credentials (signing name `bedrock`, canonical URI encoded twice) and answers Bedrock's 403 on mismatch.
//   Embeddings (llm-embeddings.ts): openai /v1/embeddings; vertex …/publishers/google/models/M:predict; bedrock
//             /model/{amazon.titan-embed-text-v2:0 | -v1 | cohere.embed-*-v3}/invoke. One token per word.
//   Audio (llm-audio.ts): openai /v1/audio/transcriptions and /translations (multipart, a WAV file), /v1/audio/speech.
//
// FakeUsage is provider-neutral; each fake writes it in its provider's own fields:
//   input = prompt tokens billed at the plain input rate (no cache reads or writes); cacheRead; cacheWrite
//   (5-minute) and cacheWrite1h (Anthropic formats only); output = visible generated tokens; reasoning =
//   thinking tokens. So Anthropic input_tokens = input, OpenAI prompt_tokens = input + cacheRead, Gemini
//   promptTokenCount = input + cacheRead with thoughtsTokenCount = reasoning beside candidatesTokenCount = output.
//   `expectedTokenUsage(usage, format)` gives the normalised TokenUsage a correct extractor must produce.
//
// Behaviour is replaced (not merged) by behave(); `forRequests: n` makes it apply to the next n requests only.
// Every request is recorded, rejected ones included, before any check.

import { createServer } from 'node:http';
import type { IncomingMessage, ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { setTimeout as sleep } from 'node:timers/promises';
import { handleVertex } from './llm-vertex.ts';
import { handleOpenAi } from './llm-openai.ts';
import { handleAnthropic } from './llm-anthropic.ts';
import { handleBedrock } from './llm-bedrock.ts';

export type FakeKind = 'vertex' | 'openai' | 'anthropic' | 'bedrock';

export interface FakeUsage {
  input: number;
  output: number;
  cacheRead?: number;
  cacheWrite?: number;
  cacheWrite1h?: number;
  reasoning?: number;
}

export interface RecordedRequest {
  method: string;
  path: string;
  query: string;
  headers: Record<string, string | string[] | undefined>;
  body: Buffer;
  json: unknown;
}

export interface FakeBehaviour {
  /** Usage the fake reports, written in the provider's own fields (see the header comment). */
  usage?: FakeUsage;
  /** Reply with this HTTP status in the provider's error shape (`errorBody` replaces the body verbatim). */
  status?: number;
  errorBody?: unknown;
  /** Headers to add to an error reply (one that quotes the request it refused, say). */
  errorHeaders?: Record<string, string>;
  /** Wait this long before sending headers. */
  delayMs?: number;
  /** Hold each reply until this settles (the request is recorded first), to have calls in flight at once on cue. */
  hold?: Promise<unknown>;
  /**
   * Write a stream's content, then hold its final events (finish reason, usage, stop) until this settles: a
   * provider whose usage comes after a caller may already have hung up.
   */
  holdTail?: Promise<unknown>;
  /** End a stream cleanly half-way through the content, without the final event(s). */
  truncateStream?: boolean;
  /** Destroy the connection half-way through a stream (headers already sent). */
  abortStream?: boolean;
  /** Emit one garbage event after the first content event (Bedrock: a frame with a bad message CRC). */
  malformedStream?: boolean;
  /** Emit the provider's in-stream error event half-way through a stream, then end. */
  streamError?: boolean;
  /** Write stream bytes in tiny pieces and coalesce several events in one write. */
  splitFrames?: boolean;
  /** Number of content events in a stream (default 4). */
  chunkCount?: number;
  /** Reply text (default: a short sentence naming the fake). */
  text?: string;
  /** Reply with about this many bytes of text, generated lazily and written with backpressure. */
  bigBodyBytes?: number;
  /** Reply with a tool call instead of text. */
  toolCall?: { name: string; arguments: Record<string, unknown> };
  /** Drop the connection without any response. */
  destroySocket?: boolean;
  /** Apply this behaviour to the next n requests only, then return to the default. */
  forRequests?: number;
}

export interface FakeUpstreamOptions {
  /** Where to listen (default 127.0.0.1 and a free port); a fake running in a pod listens on 0.0.0.0. */
  host?: string;
  port?: number;
  expectBearer?: string;
  expectApiKey?: string;
  /** openai: the key arrives bare in this header (Azure OpenAI's `api-key`) instead of `Authorization: Bearer`. */
  apiKeyHeader?: string;
  /** openai: a local server that takes no credential and refuses a request carrying one (a leaked caller key). */
  anonymous?: boolean;
  aws?: { accessKeyId: string; secretAccessKey: string; sessionToken?: string; region: string };
}

export interface FakeUpstream {
  kind: FakeKind;
  url: string;
  requests: RecordedRequest[];
  behave(b: FakeBehaviour): void;
  reset(): void;
  close(): Promise<void>;
  /**
   * Stops taking connections and closes idle ones; resolves once the answers being written have finished and
   * their connections closed: a server shutting down gracefully, as a pod does on SIGTERM.
   */
  drain(): Promise<void>;
}

/** What a provider handler gets for one request. */
export interface FakeExchange {
  req: IncomingMessage;
  res: ServerResponse;
  /** Path as received (still percent-encoded). */
  path: string;
  /** Query string as received, without `?`. */
  rawQuery: string;
  query: URLSearchParams;
  body: Buffer;
  json: unknown;
  behaviour: FakeBehaviour;
  opts: FakeUpstreamOptions;
}

export type FakeHandler = (x: FakeExchange) => Promise<void>;

const handlers: Record<FakeKind, FakeHandler> = {
  vertex: handleVertex,
  openai: handleOpenAi,
  anthropic: handleAnthropic,
  bedrock: handleBedrock,
};

const maxRequestBytes = 64 * 1024 * 1024;

export async function startFakeUpstream(kind: FakeKind, opts: FakeUpstreamOptions = {}): Promise<FakeUpstream> {
  if (kind === 'bedrock' && opts.aws === undefined) throw new Error('the bedrock fake needs opts.aws to verify SigV4 signatures');
  const requests: RecordedRequest[] = [];
  let behaviour: FakeBehaviour = {};
  let remaining = Infinity;

  const nextBehaviour = (): FakeBehaviour => {
    const current = behaviour;
    remaining -= 1;
    if (remaining <= 0) {
      behaviour = {};
      remaining = Infinity;
    }
    return current;
  };

  // Answers being written, and whether drain() has begun: from then on every connection closes after its answer.
  const answering = new Set<ServerResponse>();
  let draining = false;
  const closeWhenAnswered = (res: ServerResponse) => {
    if (!res.headersSent) res.shouldKeepAlive = false;
    // Headers that already promised keep-alive: the connection is closed once it is idle again.
    else res.once('finish', () => setImmediate(() => server.closeIdleConnections()));
  };

  const server = createServer((req, res) => {
    answering.add(res);
    res.once('close', () => answering.delete(res));
    if (draining) closeWhenAnswered(res);
    serve(req, res).catch((err: unknown) => {
      // A bug in a fake must surface in the test, not as a hung request.
      if (!res.headersSent) {
        res.writeHead(500, { 'content-type': 'text/plain' });
        res.end(`fake ${kind} upstream failed: ${String(err)}`);
      } else {
        res.destroy();
      }
    });
  });

  const serve = async (req: IncomingMessage, res: ServerResponse): Promise<void> => {
    const body = await readBody(req);
    const [rawPath = '/', rawQuery = ''] = (req.url ?? '/').split(/\?(.*)/s);
    const json = parseJson(body);
    requests.push({
      method: req.method ?? 'GET',
      path: rawPath,
      query: rawQuery,
      headers: { ...req.headers },
      body,
      json,
    });
    const b = nextBehaviour();
    if (b.destroySocket) {
      req.socket.destroy();
      return;
    }
    if (b.delayMs) await sleep(b.delayMs);
    if (b.hold) await b.hold.catch(() => undefined);
    const query = new URLSearchParams(rawQuery);
    await handlers[kind]({ req, res, path: rawPath, rawQuery, query, body, json, behaviour: b, opts });
  };

  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(opts.port ?? 0, opts.host ?? '127.0.0.1', () => resolve());
  });
  const { port } = server.address() as AddressInfo;

  return {
    kind,
    url: `http://${opts.host ?? '127.0.0.1'}:${port}`,
    requests,
    behave(b) {
      behaviour = { ...b };
      remaining = b.forRequests ?? Infinity;
    },
    reset() {
      behaviour = {};
      remaining = Infinity;
      requests.length = 0;
    },
    close() {
      return new Promise<void>((resolve) => {
        server.close(() => resolve());
        server.closeAllConnections();
      });
    },
    drain() {
      draining = true;
      for (const res of answering) closeWhenAnswered(res);
      return new Promise<void>((resolve) => {
        server.close(() => resolve());
        server.closeIdleConnections();
      });
    },
  };
}

async function readBody(req: IncomingMessage): Promise<Buffer> {
  const chunks: Buffer[] = [];
  let size = 0;
  for await (const chunk of req as AsyncIterable<Buffer>) {
    size += chunk.length;
    if (size > maxRequestBytes) throw new Error(`request body over ${maxRequestBytes} bytes`);
    chunks.push(chunk);
  }
  return Buffer.concat(chunks);
}

function parseJson(body: Buffer): unknown {
  if (body.length === 0) return undefined;
  try {
    return JSON.parse(body.toString('utf8'));
  } catch {
    return undefined;
  }
}

export { expectedTokenUsage } from './llm-reply-content.ts';
