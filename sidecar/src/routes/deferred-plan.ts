// Which native calls submit or read a result the provider bills when it is known (ADR 0913), and what their
// reservation is estimated from. Anthropic's Message Batches are billed at half the model's token prices;
// a background response at its full prices.

import { isRecord } from '../../../contracts/json-record.ts';
import { ProxyError } from '../errors.ts';
import { anthropicBatchLine, openAiBatchLine, type ResultLineReader } from '../wire-formats/batch-results.ts';
import type { UpstreamRequestPlan } from './route-module.ts';

/** How long a background response holds its reservation when nothing reads it: OpenAI names no expiry. */
export const BACKGROUND_HOLD_MS = 24 * 60 * 60 * 1000;

/** Anthropic's batch price: 50 % of the model's input and output token prices. */
export const ANTHROPIC_BATCH_DISCOUNT = 0.5;

/** One request of a submission, which its share of the reservation is estimated from. */
export interface DeferredRequest {
  model: string;
  body: Record<string, unknown>;
}

export type DeferredPlan =
  /**
   * Work billed when its result is known: admitted holding the reservation of all its requests (at the
   * discount), kept under the id the answer names (`idPrefix`…) until it is charged or its hold ends:
   * `expires_at` of the answer (plus a grace), or `holdMs` after submission. `inputFile`: the requests are in
   * a file at the provider (OpenAI's Batch API), read from `path` to reserve for them.
   */
  | { step: 'submit'; requests: DeferredRequest[]; discount: number; idPrefix: string; holdMs?: number; inputFile?: { id: string; path: string } }
  /** Reads a batch's results, each line charged at the discount to the submitter, once. */
  | { step: 'results'; id: string; discount: number; lines: ResultLineReader }
  /** Reads a background response: charged to the submitter, once, when the answer shows its usage. */
  | { step: 'poll'; id: string }
  /**
   * Reads a batch's status: Anthropic's results_url is pointed back through the proxy, so results are read
   * there (`resultsUrl`); OpenAI's output_file_id is remembered as the batch's results.
   */
  | { step: 'status'; id: string; resultsUrl: boolean };

const MESSAGE_BATCH = /^\/v1\/messages\/batches\/([^/]+)$/;
const MESSAGE_BATCH_RESULTS = /^\/v1\/messages\/batches\/([^/]+)\/results$/;

/** Anthropic's Message Batches: submission, status, results. */
export function anthropicDeferred(method: string, rest: string, json: Record<string, unknown> | null): DeferredPlan | undefined {
  if (method === 'POST' && rest === '/v1/messages/batches') {
    return { step: 'submit', requests: batchRequests(json), discount: ANTHROPIC_BATCH_DISCOUNT, idPrefix: 'msgbatch_' };
  }
  if (method !== 'GET') return undefined;
  const results = MESSAGE_BATCH_RESULTS.exec(rest);
  if (results) return { step: 'results', id: results[1]!, discount: ANTHROPIC_BATCH_DISCOUNT, lines: anthropicBatchLine };
  const status = MESSAGE_BATCH.exec(rest);
  return status ? { step: 'status', id: status[1]!, resultsUrl: true } : undefined;
}

const STORED_RESPONSE = /^\/v1\/responses\/((?!input_tokens$)[^/]+)$/;

/** OpenAI's Batch API at the same discount as Anthropic's: 50 % of input and output token prices. */
export const OPENAI_BATCH_DISCOUNT = 0.5;
const OPENAI_BATCH = /^\/v1\/batches\/([^/]+)$/;
const FILE_CONTENT = /^\/v1\/files\/([^/]+)\/content$/;

/**
 * OpenAI's background responses (submitted with `background: true`, billed when they finish) and its Batch
 * API: a batch is reserved from its input file (read from OpenAI when it is created) and charged when its
 * output file is read.
 */
export function openAiDeferred(method: string, rest: string, json: Record<string, unknown> | null): DeferredPlan | undefined {
  if (method === 'POST' && rest === '/v1/responses' && json?.background === true) {
    const model = typeof json.model === 'string' && json.model !== '' ? json.model : 'unknown';
    return { step: 'submit', requests: [{ model, body: json }], discount: 1, idPrefix: 'resp_', holdMs: BACKGROUND_HOLD_MS };
  }
  if (method === 'POST' && rest === '/v1/batches') {
    const input = json?.input_file_id;
    if (typeof input !== 'string' || input === '')
      throw new ProxyError('invalid_request', 'a batch must name its "input_file_id": the file of requests uploaded with purpose "batch"');
    return { step: 'submit', requests: [], discount: OPENAI_BATCH_DISCOUNT, idPrefix: 'batch_', inputFile: { id: input, path: `/v1/files/${encodeURIComponent(input)}/content` } };
  }
  if (method !== 'GET') return undefined;
  const stored = STORED_RESPONSE.exec(rest);
  if (stored) return { step: 'poll', id: stored[1]! };
  const batch = OPENAI_BATCH.exec(rest);
  if (batch) return { step: 'status', id: batch[1]!, resultsUrl: false };
  const content = FILE_CONTENT.exec(rest);
  return content ? { step: 'results', id: content[1]!, discount: OPENAI_BATCH_DISCOUNT, lines: openAiBatchLine } : undefined;
}

/** An OpenAI-format plan marked for what it submits or reads of a deferred result; a batch's calls are operation `batch`. */
export function withOpenAiDeferred(plan: UpstreamRequestPlan, method: string, rest: string, json: Record<string, unknown> | null): UpstreamRequestPlan {
  const deferred = openAiDeferred(method, rest, json);
  const background = deferred?.step === 'poll' || (deferred?.step === 'submit' && deferred.inputFile === undefined);
  return withDeferred(plan, deferred, background ? undefined : 'batch');
}

/** An upload to the Files API: passed through unread (its multipart body is the file); free at OpenAI. */
export function isFileUpload(method: string, rest: string): boolean {
  return method === 'POST' && rest === '/v1/files';
}

/** The plan, marked as submitting or reading a deferred result when it does. */
export function withDeferred(plan: UpstreamRequestPlan, deferred: DeferredPlan | undefined, operation?: string): UpstreamRequestPlan {
  if (deferred === undefined) return plan;
  plan.deferred = deferred;
  if (operation !== undefined) plan.operation = operation;
  if (deferred.step === 'submit') plan.model = submissionModel(deferred.requests);
  return plan;
}

/** The model a submission's span names: its requests' one model, or `mixed`. */
function submissionModel(requests: readonly DeferredRequest[]): string {
  const models = new Set(requests.map((request) => request.model));
  return models.size === 1 ? [...models][0]! : 'mixed';
}

/** A Message Batch's requests, each `{custom_id, params}` with params a Messages body naming its model. */
function batchRequests(json: Record<string, unknown> | null): DeferredRequest[] {
  const requests = json?.requests;
  if (!Array.isArray(requests) || requests.length === 0) {
    throw new ProxyError('invalid_request', 'a message batch must have "requests": a non-empty array of {"custom_id", "params"}');
  }
  return requests.map((request: unknown, i) => {
    const params = isRecord(request) ? request.params : undefined;
    if (!isRecord(params) || typeof params.model !== 'string' || params.model === '') {
      throw new ProxyError('invalid_request', `requests[${i}].params must be a Messages request with a string "model"`);
    }
    return { model: params.model, body: params };
  });
}
