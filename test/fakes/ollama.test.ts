// The fake Ollama speaks Ollama's wire format: what its own API and its OpenAI-compatible API answer, in the
// shapes Ollama's documentation and its openai package give them.

import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startFakeOllama, type FakeOllama } from './ollama.ts';

let ollama: FakeOllama;
const post = (path: string, body: unknown) => fetch(`${ollama.url}${path}`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify(body) });

beforeAll(async () => {
  ollama = await startFakeOllama({ models: ['llama3.2'] });
});
afterAll(() => ollama.close());

describe('fake Ollama', () => {
  it('answers /, /api/version and /api/tags as Ollama does', async () => {
    expect(await (await fetch(ollama.url)).text()).toBe('Ollama is running');
    expect(await (await fetch(`${ollama.url}/api/version`)).json()).toEqual({ version: '0.12.6' });
    const tags = (await (await fetch(`${ollama.url}/api/tags`)).json()) as { models: Record<string, any>[] };
    expect(tags.models).toHaveLength(1);
    expect(tags.models[0]).toMatchObject({ name: 'llama3.2:latest', model: 'llama3.2:latest', details: { format: 'gguf', parameter_size: '3.2B' } });
    expect(tags.models[0]!.digest).toMatch(/^[0-9a-f]{64}$/);
  });

  it('streams a pull as NDJSON progress ending in success, and a model its library lacks as an error line', async () => {
    const lines = (await (await post('/api/pull', { model: 'qwen2.5-coder:7b' })).text())
      .trim()
      .split('\n')
      .map((line) => JSON.parse(line) as Record<string, unknown>);
    expect(lines[0]).toEqual({ status: 'pulling manifest' });
    expect(lines.filter((line) => line.digest !== undefined).every((line) => typeof line.total === 'number' && typeof line.completed === 'number')).toBe(true);
    expect(lines.slice(-3)).toEqual([{ status: 'verifying sha256 digest' }, { status: 'writing manifest' }, { status: 'success' }]);
    expect(ollama.models()).toContain('qwen2.5-coder:7b');
    expect((await (await post('/api/pull', { model: 'nope' })).text()).trim().split('\n')).toEqual([
      '{"status":"pulling manifest"}',
      '{"error":"pull model manifest: file does not exist"}',
    ]);
    const missing = await post('/api/pull', {});
    expect(missing.status).toBe(400);
    expect(await missing.json()).toEqual({ error: 'model is required' });
  });

  it('answers chat completions with usage, and a stream with the usage chunk only when asked', async () => {
    const reply = (await (await post('/v1/chat/completions', { model: 'llama3.2', messages: [{ role: 'user', content: 'hi' }] })).json()) as Record<string, any>;
    expect(reply).toMatchObject({
      object: 'chat.completion',
      model: 'llama3.2',
      system_fingerprint: 'fp_ollama',
      usage: { prompt_tokens: 26, completion_tokens: 9, total_tokens: 35 },
    });
    const events = async (body: Record<string, unknown>) =>
      (await (await post('/v1/chat/completions', { model: 'llama3.2', messages: [{ role: 'user', content: 'hi' }], stream: true, ...body })).text())
        .split('\n\n')
        .filter((event) => event !== '')
        .map((event) => event.slice('data: '.length));
    const withUsage = await events({ stream_options: { include_usage: true } });
    expect(withUsage.at(-1)).toBe('[DONE]');
    expect(JSON.parse(withUsage.at(-2)!)).toMatchObject({ choices: [], usage: { total_tokens: 35 } });
    const without = await events({});
    expect(without.slice(0, -1).every((event) => !('usage' in (JSON.parse(event) as object)))).toBe(true);
  });

  it('refuses an unknown model with its 404 in OpenAI shape', async () => {
    const res = await post('/v1/chat/completions', { model: 'llama9', messages: [{ role: 'user', content: 'hi' }] });
    expect(res.status).toBe(404);
    expect(await res.json()).toEqual({ error: { message: 'model "llama9" not found, try pulling it first', type: 'not_found_error', param: null, code: null } });
  });
});
