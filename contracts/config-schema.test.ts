import { describe, expect, it } from 'vitest';
import { parseRuntimeConfigPatch } from './config-schema.ts';

describe('upstream baseUrl', () => {
  it('refuses credentials in the URL, naming the field', () => {
    expect(() => parseRuntimeConfigPatch({ upstreams: { beta: { baseUrl: 'https://user:sk-secret@api.openai.com' } } })).toThrow(
      /^upstreams\.beta\.baseUrl must be an http\(s\) URL without user:password@/,
    );
  });

  it('keeps an @ in the path (Vertex model versions) and trims trailing slashes', () => {
    expect(parseRuntimeConfigPatch({ upstreams: { 'gamma-cloud': { baseUrl: 'https://gw.internal/models@v1/' } } }).upstreams).toEqual({
      'gamma-cloud': { baseUrl: 'https://gw.internal/models@v1' },
    });
  });
});

describe('pricing.models', () => {
  const entry = (model: string) => ({ provider: 'openai', model, input_per_million: 1, output_per_million: 2 });

  it('refuses two entries that differ only in case, as lookups ignore case', () => {
    expect(() => parseRuntimeConfigPatch({ pricing: { models: [entry('gpt-4o-mini'), entry('GPT-4o-mini')] } })).toThrow(
      'pricing.models[1] repeats provider openai model GPT-4o-mini (already at pricing.models[0] as gpt-4o-mini; model ids are matched without regard to case)',
    );
    expect(() => parseRuntimeConfigPatch({ pricing: { models: [entry('gpt-4o'), entry('gpt-4o')] } })).toThrow(
      'pricing.models[1] repeats provider openai model gpt-4o (already at pricing.models[0])',
    );
  });

  it('keeps the same id under two providers apart', () => {
    expect(parseRuntimeConfigPatch({ pricing: { models: [entry('m'), { ...entry('M'), provider: 'local' }] } }).pricing?.models).toHaveLength(2);
  });
});
