// Fake Anthropic Message Batches: create, retrieve, results. A batch is `in_progress` at its first retrieve
// and `ended` from the second, when its results_url (on this fake) names its JSONL results: every request
// succeeded, with the usage the fake's behaviour had when the batch was created. The fake checks each request
// as the Messages API would and refuses the whole batch for one bad request, as Anthropic does.

import { anthropicRequestId, sendAnthropicError } from './llm-errors.ts';
import { randomId, usageOf } from './llm-reply-content.ts';
import { writeJson } from './llm-reply-writer.ts';
import { jsonObject } from './llm-request.ts';
import type { FakeExchange } from './llm-upstream.ts';

interface FakeBatch {
  id: string;
  createdAt: Date;
  retrieved: number;
  lines: string[];
}

const batches = new Map<string, FakeBatch>();
const CUSTOM_ID = /^[a-zA-Z0-9_-]{1,64}$/;
const RESULTS = /^\/v1\/messages\/batches\/([^/]+)\/results$/;
const BATCH = /^\/v1\/messages\/batches\/([^/]+)$/;

/** Handles a Message Batches path, or returns false for another path. `messagesProblem` checks one request's params. */
export function handleMessageBatches(x: FakeExchange, messagesProblem: (params: Record<string, unknown>) => string | undefined): boolean {
  const method = x.req.method;
  if (method === 'POST' && x.path === '/v1/messages/batches') return (createBatch(x, messagesProblem), true);
  const results = method === 'GET' ? RESULTS.exec(x.path) : null;
  if (results) return (sendResults(x, results[1]!), true);
  const batch = method === 'GET' ? BATCH.exec(x.path) : null;
  if (batch) return (retrieve(x, batch[1]!), true);
  return false;
}

function createBatch(x: FakeExchange, messagesProblem: (params: Record<string, unknown>) => string | undefined): void {
  const body = jsonObject(x.json);
  if (body === null) return sendAnthropicError(x.res, 400, 'The request body is not valid JSON.');
  const extra = Object.keys(body).find((key) => key !== 'requests');
  if (extra !== undefined) return sendAnthropicError(x.res, 400, `${extra}: Extra inputs are not permitted`);
  if (!Array.isArray(body.requests) || body.requests.length === 0) return sendAnthropicError(x.res, 400, 'requests: Field required');
  const seen = new Set<string>();
  for (const [i, item] of body.requests.entries()) {
    const request = jsonObject(item);
    const customId = request?.custom_id;
    if (typeof customId !== 'string' || !CUSTOM_ID.test(customId))
      return sendAnthropicError(x.res, 400, `requests.${i}.custom_id: String should match pattern '^[a-zA-Z0-9_-]{1,64}$'`);
    if (seen.has(customId)) return sendAnthropicError(x.res, 400, `requests.${i}: Duplicate custom_id ${customId}`);
    seen.add(customId);
    const params = jsonObject(request?.params);
    if (params === null) return sendAnthropicError(x.res, 400, `requests.${i}.params: Field required`);
    const problem = typeof params.model !== 'string' ? 'model: Field required' : params.stream === true ? 'stream: batch requests cannot stream' : messagesProblem(params);
    if (problem !== undefined) return sendAnthropicError(x.res, 400, `requests.${i}.params.${problem}`);
  }
  if (x.behaviour.status !== undefined) return sendAnthropicError(x.res, x.behaviour.status, 'the fake was told to refuse');
  const u = usageOf(x.behaviour);
  const lines = (body.requests as Record<string, unknown>[]).map((request) => {
    const params = request.params as Record<string, unknown>;
    const message = {
      id: randomId('msg_', 24),
      type: 'message',
      role: 'assistant',
      model: params.model,
      content: [{ type: 'text', text: `Batch answer to ${String(request.custom_id)}.` }],
      stop_reason: 'end_turn',
      stop_sequence: null,
      usage: { input_tokens: u.input, cache_creation_input_tokens: u.cacheWrite, cache_read_input_tokens: u.cacheRead, output_tokens: u.output },
    };
    return JSON.stringify({ custom_id: request.custom_id, result: { type: 'succeeded', message } });
  });
  const batch: FakeBatch = { id: randomId('msgbatch_', 24), createdAt: new Date(), retrieved: 0, lines };
  batches.set(batch.id, batch);
  writeJson(x.res, 200, status(x, batch, false), { 'request-id': anthropicRequestId() });
}

function retrieve(x: FakeExchange, id: string): void {
  const batch = batches.get(id);
  if (batch === undefined) return sendAnthropicError(x.res, 404, `message batch ${id} not found`);
  batch.retrieved++;
  writeJson(x.res, 200, status(x, batch, batch.retrieved > 1), { 'request-id': anthropicRequestId() });
}

function status(x: FakeExchange, batch: FakeBatch, ended: boolean): Record<string, unknown> {
  const count = batch.lines.length;
  return {
    id: batch.id,
    type: 'message_batch',
    processing_status: ended ? 'ended' : 'in_progress',
    request_counts: { processing: ended ? 0 : count, succeeded: ended ? count : 0, errored: 0, canceled: 0, expired: 0 },
    ended_at: ended ? new Date().toISOString() : null,
    created_at: batch.createdAt.toISOString(),
    expires_at: new Date(batch.createdAt.getTime() + 24 * 3600 * 1000).toISOString(),
    archived_at: null,
    cancel_initiated_at: null,
    results_url: ended ? `http://${x.req.headers.host}/v1/messages/batches/${batch.id}/results` : null,
  };
}

function sendResults(x: FakeExchange, id: string): void {
  const batch = batches.get(id);
  if (batch === undefined) return sendAnthropicError(x.res, 404, `message batch ${id} not found`);
  if (batch.retrieved < 2) return sendAnthropicError(x.res, 400, `message batch ${id} is still processing; its results are not available yet`);
  // Written a line at a time, chunked: a results file is read as it comes.
  x.res.writeHead(200, { 'content-type': 'application/binary', 'request-id': anthropicRequestId() });
  for (const line of batch.lines) x.res.write(`${line}\n`);
  x.res.end();
}
