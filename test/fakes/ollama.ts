// A fake Ollama server for the local runtime's tests: its own HTTP API (/api/version, /api/tags, /api/ps,
// /api/pull with its NDJSON progress stream) and its OpenAI-compatible /v1 (chat completions with usage,
// streamed with stream_options.include_usage, tool calls; embeddings; completions; models), in the shapes
// Ollama writes them (docs/api.md and openai/openai.go of the Ollama repository). It checks what it receives
// the way Ollama does: an unknown model is its 404, a pull of a model the library lacks ends with an error
// line, a body that is not JSON is a 400.
//
//   const ollama = await startFakeOllama({ models: ['llama3.2:latest'] });
//   // point local.runtime.baseUrl at ollama.url; then:
//   ollama.requests            every request, recorded before any check
//   ollama.models()            the models on its "disk" (a pull adds one)
//   ollama.behave({ usage: { prompt: 30, completion: 7 } })   the next replies report this usage
//
// Tool calls: a chat request with `tools` whose messages hold no tool result yet is answered with a call of
// its first tool (arguments `{"city":"Paris"}` unless behave() says otherwise); once a tool result is in the
// messages, the answer is text. That is an agent's loop, which tests can run through a proxy both ways.

import { createServer, type IncomingMessage, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { randomBytes } from 'node:crypto';
import { setImmediate as tick } from 'node:timers/promises';

export interface FakeOllamaBehaviour {
  usage?: { prompt: number; completion: number };
  text?: string;
  toolArguments?: Record<string, unknown>;
  /** Pieces a streamed answer is cut into (default 3). */
  chunkCount?: number;
}

export interface FakeOllamaOptions {
  host?: string;
  port?: number;
  /** Models already pulled, as /api/tags names them (`llama3.2:latest`). */
  models?: string[];
  /** What /api/pull can fetch (names without tags; any tag of them pulls). */
  library?: string[];
  version?: string;
}

export interface OllamaRequest {
  method: string;
  path: string;
  headers: IncomingMessage['headers'];
  body: string;
  json: unknown;
}

export interface FakeOllama {
  url: string;
  requests: OllamaRequest[];
  models(): string[];
  behave(behaviour: FakeOllamaBehaviour): void;
  close(): Promise<void>;
}

export const FAKE_OLLAMA_VERSION = '0.12.6';
const DEFAULT_LIBRARY = ['llama3.2', 'qwen2.5-coder', 'nomic-embed-text', 'all-minilm'];
const DEFAULT_USAGE = { prompt: 26, completion: 9 };

function withTag(name: string): string {
  return name.includes(':') ? name : `${name}:latest`;
}

function digest(name: string, layer: number): string {
  let hash = 0;
  for (const ch of `${name}/${layer}`) hash = (hash * 31 + ch.charCodeAt(0)) >>> 0;
  return `sha256:${hash.toString(16).padStart(8, '0').repeat(8)}`;
}

function sendJson(res: ServerResponse, status: number, body: unknown): void {
  const text = JSON.stringify(body);
  res.writeHead(status, { 'content-type': 'application/json; charset=utf-8', 'content-length': Buffer.byteLength(text) });
  res.end(text);
}

/** Ollama's own API answers errors as {"error": "..."}; its OpenAI-compatible API in OpenAI's shape. */
function openAiError(res: ServerResponse, status: number, message: string): void {
  const type = status === 400 ? 'invalid_request_error' : status === 404 ? 'not_found_error' : 'api_error';
  sendJson(res, status, { error: { message, type, param: null, code: null } });
}

function sse(res: ServerResponse, event: unknown): boolean {
  return res.write(`data: ${typeof event === 'string' ? event : JSON.stringify(event)}\n\n`);
}

function split(text: string, count: number): string[] {
  const size = Math.max(1, Math.ceil(text.length / count));
  const pieces: string[] = [];
  for (let i = 0; i < text.length; i += size) pieces.push(text.slice(i, i + size));
  return pieces;
}

export async function startFakeOllama(opts: FakeOllamaOptions = {}): Promise<FakeOllama> {
  const models = new Map<string, string>(); // name -> modified_at
  for (const name of opts.models ?? ['llama3.2:latest']) models.set(withTag(name), '2026-10-01T09:30:00.000000000Z');
  const library = new Set(opts.library ?? DEFAULT_LIBRARY);
  const loaded = new Set<string>();
  const requests: OllamaRequest[] = [];
  let behaviour: FakeOllamaBehaviour = {};

  const find = (requested: unknown): string | undefined => {
    if (typeof requested !== 'string') return undefined;
    const name = withTag(requested.toLowerCase());
    return models.has(name) ? name : undefined;
  };
  const usage = () => {
    const u = behaviour.usage ?? DEFAULT_USAGE;
    return { prompt_tokens: u.prompt, completion_tokens: u.completion, total_tokens: u.prompt + u.completion };
  };

  const server = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (chunk: Buffer) => chunks.push(chunk));
    req.on('end', () => {
      const body = Buffer.concat(chunks).toString('utf8');
      let json: unknown;
      try {
        json = body === '' ? undefined : JSON.parse(body);
      } catch {
        json = undefined;
      }
      const path = (req.url ?? '/').split('?')[0]!;
      requests.push({ method: req.method ?? 'GET', path, headers: req.headers, body, json });
      handle(req.method ?? 'GET', path, body, json, res).catch((error: unknown) => {
        if (!res.headersSent) sendJson(res, 500, { error: `fake ollama failed: ${String(error)}` });
        else res.destroy();
      });
    });
  });

  async function handle(method: string, path: string, raw: string, json: unknown, res: ServerResponse): Promise<void> {
    const body = typeof json === 'object' && json !== null && !Array.isArray(json) ? (json as Record<string, unknown>) : null;
    if (method === 'GET' && path === '/') {
      res.writeHead(200, { 'content-type': 'text/plain; charset=utf-8' }).end('Ollama is running');
      return;
    }
    if (method === 'GET' && path === '/api/version') return sendJson(res, 200, { version: opts.version ?? FAKE_OLLAMA_VERSION });
    if (method === 'GET' && path === '/api/tags') return sendJson(res, 200, { models: [...models].map(([name, modifiedAt]) => tagEntry(name, modifiedAt)) });
    if (method === 'GET' && path === '/api/ps')
      return sendJson(res, 200, { models: [...loaded].map((name) => ({ ...tagEntry(name, models.get(name) ?? ''), expires_at: '2026-12-01T00:00:00Z', size_vram: 0 })) });
    if (method === 'POST' && path === '/api/pull') return pull(body, raw, res);
    if (method === 'GET' && path === '/v1/models') {
      return sendJson(res, 200, {
        object: 'list',
        data: [...models].map(([id, at]) => ({ id, object: 'model', created: Math.floor(Date.parse(at) / 1000), owned_by: 'library' })),
      });
    }
    if (method === 'POST' && path.startsWith('/v1/')) {
      if (body === null) return openAiError(res, 400, raw === '' ? 'missing request body' : 'invalid character in request body');
      const model = find(body.model);
      if (model === undefined) return openAiError(res, 404, `model "${String(body.model)}" not found, try pulling it first`);
      loaded.add(model);
      if (path === '/v1/chat/completions') return chat(body, res);
      if (path === '/v1/embeddings') return embeddings(body, res);
      if (path === '/v1/completions') return completions(body, res);
    }
    res.writeHead(404, { 'content-type': 'text/plain; charset=utf-8' }).end('404 page not found');
  }

  function tagEntry(name: string, modifiedAt: string) {
    return {
      name,
      model: name,
      modified_at: modifiedAt,
      size: 2_019_393_189,
      digest: digest(name, 0).slice('sha256:'.length),
      details: { parent_model: '', format: 'gguf', family: 'llama', families: ['llama'], parameter_size: '3.2B', quantization_level: 'Q4_K_M' },
    };
  }

  async function pull(body: Record<string, unknown> | null, raw: string, res: ServerResponse): Promise<void> {
    const requested = body?.model ?? body?.name;
    if (typeof requested !== 'string' || requested === '') return sendJson(res, 400, { error: raw === '' ? 'missing request body' : 'model is required' });
    res.writeHead(200, { 'content-type': 'application/x-ndjson' });
    const line = async (value: unknown) => {
      res.write(`${JSON.stringify(value)}\n`);
      await tick();
    };
    await line({ status: 'pulling manifest' });
    const name = withTag(requested.toLowerCase());
    if (!library.has(name.split(':')[0]!)) {
      await line({ error: 'pull model manifest: file does not exist' });
      res.end();
      return;
    }
    for (const [layer, total] of [
      [1, 2_019_377_376],
      [2, 1_429],
    ] as const) {
      const layerDigest = digest(name, layer);
      const label = `pulling ${layerDigest.slice('sha256:'.length, 'sha256:'.length + 12)}`;
      for (const completed of [0, Math.floor(total / 3), Math.floor((2 * total) / 3), total]) {
        await line({ status: label, digest: layerDigest, total, completed });
      }
    }
    await line({ status: 'verifying sha256 digest' });
    await line({ status: 'writing manifest' });
    models.set(name, new Date().toISOString());
    await line({ status: 'success' });
    res.end();
  }

  const common = (model: unknown, object: string) => ({
    id: `${object === 'chat.completion' || object === 'chat.completion.chunk' ? 'chatcmpl' : 'cmpl'}-${randomBytes(3).readUIntBE(0, 3) % 1000}`,
    object,
    created: Math.floor(Date.now() / 1000),
    model,
    system_fingerprint: 'fp_ollama',
  });

  async function chat(body: Record<string, unknown>, res: ServerResponse): Promise<void> {
    const messages = Array.isArray(body.messages) ? body.messages : [];
    if (messages.length === 0) return openAiError(res, 400, 'messages is required');
    const tools = Array.isArray(body.tools) ? (body.tools as { function?: { name?: string } }[]) : [];
    const answered = messages.some((message) => (message as { role?: string }).role === 'tool');
    const toolName = tools.length > 0 && !answered ? (tools[0]?.function?.name ?? 'tool') : null;
    const toolCall =
      toolName === null
        ? null
        : {
            id: `call_${randomBytes(6).toString('hex')}`,
            index: 0,
            type: 'function',
            function: { name: toolName, arguments: JSON.stringify(behaviour.toolArguments ?? { city: 'Paris' }) },
          };
    const text = toolCall ? '' : (behaviour.text ?? (answered ? 'It is sunny in Paris.' : 'Hello from the fake Ollama.'));
    const finish = toolCall ? 'tool_calls' : 'stop';
    if (body.stream !== true) {
      return sendJson(res, 200, {
        ...common(body.model, 'chat.completion'),
        choices: [{ index: 0, message: { role: 'assistant', content: text, ...(toolCall ? { tool_calls: [toolCall] } : {}) }, finish_reason: finish }],
        usage: usage(),
      });
    }
    res.writeHead(200, { 'content-type': 'text/event-stream', 'cache-control': 'no-cache' });
    const head = common(body.model, 'chat.completion.chunk');
    const pieces = toolCall ? [] : split(text, behaviour.chunkCount ?? 3);
    for (const piece of pieces) {
      sse(res, { ...head, choices: [{ index: 0, delta: { role: 'assistant', content: piece }, finish_reason: null }] });
      await tick();
    }
    if (toolCall) sse(res, { ...head, choices: [{ index: 0, delta: { role: 'assistant', content: '', tool_calls: [toolCall] }, finish_reason: null }] });
    sse(res, { ...head, choices: [{ index: 0, delta: { role: 'assistant', content: '' }, finish_reason: finish }] });
    if (includeUsage(body)) sse(res, { ...head, choices: [], usage: usage() });
    sse(res, '[DONE]');
    res.end();
  }

  function includeUsage(body: Record<string, unknown>): boolean {
    const options = body.stream_options;
    return typeof options === 'object' && options !== null && (options as { include_usage?: unknown }).include_usage === true;
  }

  function embeddings(body: Record<string, unknown>, res: ServerResponse): void {
    const inputs = typeof body.input === 'string' ? [body.input] : Array.isArray(body.input) ? body.input : null;
    if (inputs === null || inputs.length === 0) return openAiError(res, 400, 'invalid input type');
    const tokens = inputs.reduce((total: number, input) => total + String(input).split(/\s+/).length, 0);
    sendJson(res, 200, {
      object: 'list',
      data: inputs.map((input, index) => ({ object: 'embedding', embedding: [...String(input)].slice(0, 8).map((ch) => (ch.charCodeAt(0) % 97) / 97), index })),
      model: body.model,
      usage: { prompt_tokens: tokens, total_tokens: tokens },
    });
  }

  async function completions(body: Record<string, unknown>, res: ServerResponse): Promise<void> {
    if (typeof body.prompt !== 'string') return openAiError(res, 400, 'prompt must be a string');
    const text = behaviour.text ?? ' return a + b';
    if (body.stream !== true) {
      return sendJson(res, 200, { ...common(body.model, 'text_completion'), choices: [{ text, index: 0, finish_reason: 'stop' }], usage: usage() });
    }
    res.writeHead(200, { 'content-type': 'text/event-stream', 'cache-control': 'no-cache' });
    const head = common(body.model, 'text_completion');
    for (const piece of split(text, behaviour.chunkCount ?? 3)) {
      sse(res, { ...head, choices: [{ text: piece, index: 0, finish_reason: null }] });
      await tick();
    }
    sse(res, { ...head, choices: [{ text: '', index: 0, finish_reason: 'stop' }] });
    if (includeUsage(body)) sse(res, { ...head, choices: [], usage: usage() });
    sse(res, '[DONE]');
    res.end();
  }

  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(opts.port ?? 0, opts.host ?? '127.0.0.1', resolve);
  });
  const { port } = server.address() as AddressInfo;
  return {
    url: `http://${opts.host ?? '127.0.0.1'}:${port}`,
    requests,
    models: () => [...models.keys()],
    behave(next) {
      behaviour = { ...next };
    },
    close: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}
