// Fake OpenAI Files and Batch APIs: POST /v1/files (a multipart upload, purpose "batch" checked line by line),
// GET /v1/files/{id}/content, POST /v1/batches, GET /v1/batches/{id}. A batch is `in_progress` at its first
// retrieve and `completed` from the second, naming its output file: one line per request, each a chat
// completion with the usage the fake's behaviour had when the batch was created.

import { randomBytes } from 'node:crypto';
import { sendOpenAiError } from './llm-errors.ts';
import { randomId, usageOf } from './llm-reply-content.ts';
import { writeJson } from './llm-reply-writer.ts';
import { jsonObject, requestHeader } from './llm-request.ts';
import type { FakeExchange } from './llm-upstream.ts';

interface FakeFile {
  id: string;
  filename: string;
  purpose: string;
  content: Buffer;
  createdAt: number;
}

interface FakeBatch {
  id: string;
  request: Record<string, unknown>;
  createdAt: number;
  retrieved: number;
  lines: Record<string, unknown>[];
  output: FakeFile | null;
  usage: ReturnType<typeof usageOf>;
}

const files = new Map<string, FakeFile>();
const batches = new Map<string, FakeBatch>();
const PURPOSES = new Set(['assistants', 'batch', 'fine-tune', 'vision', 'user_data', 'evals']);
const ENDPOINTS = new Set(['/v1/chat/completions', '/v1/responses', '/v1/embeddings', '/v1/completions']);
const FILE_CONTENT = /^\/v1\/files\/([^/]+)\/content$/;
const BATCH = /^\/v1\/batches\/([^/]+)$/;

/** Handles a Files or Batch API path, or returns false for another path. */
export async function handleOpenAiBatches(x: FakeExchange): Promise<boolean> {
  const method = x.req.method;
  if (method === 'POST' && x.path === '/v1/files') return (await upload(x), true);
  if (method === 'POST' && x.path === '/v1/batches') return (createBatch(x), true);
  const content = method === 'GET' ? FILE_CONTENT.exec(x.path) : null;
  if (content) return (fileContent(x, content[1]!), true);
  const batch = method === 'GET' ? BATCH.exec(x.path) : null;
  if (batch) return (retrieve(x, batch[1]!), true);
  return false;
}

async function upload(x: FakeExchange): Promise<void> {
  const contentType = requestHeader(x.req, 'content-type') ?? '';
  if (!contentType.startsWith('multipart/form-data')) return sendOpenAiError(x.res, 400, 'Invalid file format: expected multipart/form-data', { param: null, code: null });
  const form = await new Response(new Uint8Array(x.body), { headers: { 'content-type': contentType } }).formData();
  const purpose = form.get('purpose');
  const file = form.get('file');
  if (typeof purpose !== 'string' || !PURPOSES.has(purpose))
    return sendOpenAiError(x.res, 400, `Invalid value for 'purpose': ${typeof purpose === 'string' ? purpose : 'a file'}.`, { param: 'purpose', code: 'invalid_value' });
  if (file === null || typeof file === 'string') return sendOpenAiError(x.res, 400, "Missing required parameter: 'file'.", { param: 'file', code: 'missing_required_parameter' });
  const content = Buffer.from(await file.arrayBuffer());
  if (purpose === 'batch') {
    const problem = batchInputProblem(content);
    if (problem !== undefined) return sendOpenAiError(x.res, 400, problem, { param: 'file', code: 'invalid_file' });
  }
  const stored: FakeFile = { id: randomId('file-', 22), filename: file.name, purpose, content, createdAt: Math.floor(Date.now() / 1000) };
  files.set(stored.id, stored);
  writeJson(x.res, 200, fileObject(stored));
}

/** OpenAI's checks of a batch input file: JSONL of {custom_id, method, url, body}, custom ids unique, one model. */
function batchInputProblem(content: Buffer): string | undefined {
  const seen = new Set<string>();
  const models = new Set<unknown>();
  const lines = content
    .toString('utf8')
    .split('\n')
    .filter((line) => line.trim() !== '');
  if (lines.length === 0) return 'The batch input file is empty.';
  for (const [i, text] of lines.entries()) {
    let line: Record<string, unknown> | null;
    try {
      line = jsonObject(JSON.parse(text));
    } catch {
      line = null;
    }
    if (line === null) return `Line ${i + 1}: not valid JSON.`;
    if (typeof line.custom_id !== 'string' || seen.has(line.custom_id)) return `Line ${i + 1}: custom_id must be a unique string.`;
    seen.add(line.custom_id);
    if (line.method !== 'POST' || typeof line.url !== 'string' || !ENDPOINTS.has(line.url)) return `Line ${i + 1}: method must be POST and url a batch endpoint.`;
    const body = jsonObject(line.body);
    if (body === null || typeof body.model !== 'string') return `Line ${i + 1}: body must be an object naming its model.`;
    models.add(body.model);
  }
  return models.size > 1 ? 'A batch input file can only include requests to a single model.' : undefined;
}

function fileObject(file: FakeFile): Record<string, unknown> {
  return {
    id: file.id,
    object: 'file',
    bytes: file.content.length,
    created_at: file.createdAt,
    filename: file.filename,
    purpose: file.purpose,
    status: 'processed',
    expires_at: null,
    status_details: null,
  };
}

function fileContent(x: FakeExchange, id: string): void {
  const file = files.get(id);
  if (file === undefined) return sendOpenAiError(x.res, 404, `No such File object: ${id}`, { param: 'id', code: null });
  // Written a line at a time, chunked: a large file is read as it comes.
  x.res.writeHead(200, { 'content-type': 'application/octet-stream', 'x-request-id': `req_${randomBytes(16).toString('hex')}` });
  for (const line of file.content.toString('utf8').split(/(?<=\n)/)) x.res.write(line);
  x.res.end();
}

function createBatch(x: FakeExchange): void {
  const body = jsonObject(x.json);
  if (body === null) return sendOpenAiError(x.res, 400, 'We could not parse the JSON body of your request.', { param: null, code: 'invalid_json' });
  const input = typeof body.input_file_id === 'string' ? files.get(body.input_file_id) : undefined;
  if (input === undefined || input.purpose !== 'batch')
    return sendOpenAiError(x.res, 400, `Invalid 'input_file_id': ${String(body.input_file_id)}.`, { param: 'input_file_id', code: 'invalid_value' });
  if (typeof body.endpoint !== 'string' || !ENDPOINTS.has(body.endpoint))
    return sendOpenAiError(x.res, 400, `Invalid 'endpoint': ${String(body.endpoint)}.`, { param: 'endpoint', code: 'invalid_value' });
  if (body.completion_window !== '24h')
    return sendOpenAiError(x.res, 400, "Invalid 'completion_window': only '24h' is supported.", { param: 'completion_window', code: 'invalid_value' });
  const lines = input.content
    .toString('utf8')
    .split('\n')
    .filter((line) => line.trim() !== '')
    .map((line) => JSON.parse(line) as Record<string, unknown>);
  if (lines.some((line) => line.url !== body.endpoint))
    return sendOpenAiError(x.res, 400, "Every request's url must be the batch's endpoint.", { param: 'endpoint', code: 'invalid_value' });
  const batch: FakeBatch = { id: randomId('batch_', 24), request: body, createdAt: Math.floor(Date.now() / 1000), retrieved: 0, lines, output: null, usage: usageOf(x.behaviour) };
  batches.set(batch.id, batch);
  writeJson(x.res, 200, batchObject(batch, 'validating'));
}

function retrieve(x: FakeExchange, id: string): void {
  const batch = batches.get(id);
  if (batch === undefined) return sendOpenAiError(x.res, 404, `No batch found with id '${id}'.`, { param: null, code: null });
  batch.retrieved++;
  if (batch.retrieved > 1 && batch.output === null) batch.output = outputFile(batch);
  writeJson(x.res, 200, batchObject(batch, batch.output === null ? 'in_progress' : 'completed'));
}

/** One line per request: its custom_id and a chat completion with the batch's usage. */
function outputFile(batch: FakeBatch): FakeFile {
  const u = batch.usage;
  const content = batch.lines
    .map((line) => {
      const body = line.body as Record<string, unknown>;
      const completion = {
        id: randomId('chatcmpl-', 29),
        object: 'chat.completion',
        created: batch.createdAt,
        model: body.model,
        choices: [{ index: 0, message: { role: 'assistant', content: `Batch answer to ${String(line.custom_id)}.`, refusal: null }, logprobs: null, finish_reason: 'stop' }],
        usage: {
          prompt_tokens: u.input,
          completion_tokens: u.output,
          total_tokens: u.input + u.output,
          prompt_tokens_details: { cached_tokens: 0 },
          completion_tokens_details: { reasoning_tokens: 0 },
        },
      };
      const response = { status_code: 200, request_id: randomBytes(16).toString('hex'), body: completion };
      return `${JSON.stringify({ id: randomId('batch_req_', 24), custom_id: line.custom_id, response, error: null })}\n`;
    })
    .join('');
  const file: FakeFile = {
    id: randomId('file-', 22),
    filename: 'batch_output.jsonl',
    purpose: 'batch_output',
    content: Buffer.from(content),
    createdAt: Math.floor(Date.now() / 1000),
  };
  files.set(file.id, file);
  return file;
}

function batchObject(batch: FakeBatch, status: string): Record<string, unknown> {
  const done = status === 'completed';
  const total = batch.lines.length;
  return {
    id: batch.id,
    object: 'batch',
    endpoint: batch.request.endpoint,
    errors: null,
    input_file_id: batch.request.input_file_id,
    completion_window: '24h',
    status,
    output_file_id: done ? batch.output!.id : null,
    error_file_id: null,
    created_at: batch.createdAt,
    in_progress_at: status === 'validating' ? null : batch.createdAt,
    expires_at: batch.createdAt + 24 * 3600,
    finalizing_at: done ? batch.createdAt : null,
    completed_at: done ? batch.createdAt : null,
    failed_at: null,
    expired_at: null,
    cancelling_at: null,
    cancelled_at: null,
    request_counts: { total, completed: done ? total : 0, failed: 0 },
    metadata: batch.request.metadata ?? null,
  };
}
