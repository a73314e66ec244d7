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
