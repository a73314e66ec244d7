import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startFakeOllama, type FakeOllama } from '../../../test/fakes/ollama.ts';
import { LocalModelCatalog, sameModelName } from './local-models.ts';
import { OllamaApi } from './ollama-api.ts';

let ollama: FakeOllama;
const api = new OllamaApi();

beforeAll(async () => {
  ollama = await startFakeOllama({ models: ['llama3.2:latest', 'qwen2.5-coder:7b'] });
});
afterAll(async () => {
  await ollama.close();
  await api.close();
});

describe('sameModelName', () => {
  it('matches a name without its tag to :latest, and ignores case; other tags are other models', () => {
    expect(sameModelName('llama3.2', 'llama3.2:latest')).toBe(true);
    expect(sameModelName('Llama3.2:latest', 'llama3.2')).toBe(true);
    expect(sameModelName('qwen2.5-coder', 'qwen2.5-coder:7b')).toBe(false);
    expect(sameModelName('llama3', 'llama3.2:latest')).toBe(false);
  });
});

describe('LocalModelCatalog', () => {
  it("asks the runtime at most once per ttl, concurrent callers sharing the request; a pull's invalidate asks again", async () => {
    let now = 1_000;
    const catalog = new LocalModelCatalog({ api, baseUrl: () => ollama.url, ttlMs: 2_000, now: () => now });
    const tags = () => ollama.requests.filter((request) => request.path === '/api/tags').length;
    const before = tags();
    const [a, b] = await Promise.all([catalog.find('llama3.2'), catalog.find('qwen2.5-coder:7b')]);
    expect(a.model?.name).toBe('llama3.2:latest');
    expect(b.model).toMatchObject({ name: 'qwen2.5-coder:7b', family: 'llama', parameterSize: '3.2B', quantization: 'Q4_K_M' });
    expect(tags() - before).toBe(1);
    now += 1_999;
    expect((await catalog.find('llama9')).model).toBeUndefined();
    expect(tags() - before).toBe(1);
    now += 1;
    await catalog.listing();
    expect(tags() - before).toBe(2);
    catalog.invalidate();
    await catalog.listing();
    expect(tags() - before).toBe(3);
  });

  it('lists nothing, and says why, when the runtime does not answer', async () => {
    const catalog = new LocalModelCatalog({ api, baseUrl: () => 'http://127.0.0.1:9' });
    const listing = await catalog.listing();
    expect(listing.models).toEqual([]);
    expect(listing.problem).toMatch(/^the local runtime at http:\/\/127\.0\.0\.1:9 did not list its models: .*ECONNREFUSED/);
  });
});
