import { describe, expect, it } from 'vitest';
import { checkPathSegments, planUpstreamRequest } from './native-plan.ts';

describe('checkPathSegments', () => {
  it.each(['/v1/../x', '/..', '/a/./b', '/v1/%2e%2e/x', '/v1/.%2E/x', '/v1/..%2F..%2Fadmin', '/v1/..\\x'])('refuses %s', (path) => {
    expect(() => checkPathSegments(path)).toThrow(/\. or \.\. segment/);
  });

  it.each([
    '/model/anthropic.claude-3%3A0/invoke',
    '/model/arn%3Aaws%3Abedrock%3Aus-east-1%3A1%3Ainference-profile%2Fus.anthropic.x/invoke',
    '/v1/a..b',
    '/v1/.well-known/x',
    '/v1/...',
    '/x/%zz/y',
  ])('passes %s', (path) => {
    expect(() => checkPathSegments(path)).not.toThrow();
  });

  it('refuses a raw "#" anywhere in the target, since the URL would cut the rest off (/..# is /..)', () => {
    for (const [rest, query] of [
      ['/..#', ''],
      ['/.#', ''],
      ['/..#x', ''],
      ['/v1/models#frag', ''],
      ['/v1/models', '?a=1#b'],
    ] as const) {
      expect(() => planUpstreamRequest('gamma-cloud', { method: 'GET', rest, query, body: null, upstream: undefined }), rest + query).toThrow(
        /has a raw "#"; send it percent-encoded \(%23\)/,
      );
    }
    expect(() => planUpstreamRequest('gamma-cloud', { method: 'GET', rest: '/v1/a%23b', query: '', body: null, upstream: undefined })).not.toThrow();
  });

  it('guards every route, the one that re-encodes its path included', () => {
    expect(() => planUpstreamRequest('gamma-cloudb', { method: 'POST', rest: '/model/%2e%2e/%2e%2e/admin', query: '', body: null, upstream: undefined })).toThrow(
      /invalid|segment/,
    );
    expect(() => planUpstreamRequest('alpha', { method: 'GET', rest: '/v1/../../admin', query: '?x=1', body: null, upstream: undefined })).toThrow(/segment/);
  });
});

describe('the Vertex project of a native call', () => {
  const call = { method: 'POST', rest: '/v1/messages', query: '', body: Buffer.from('{"model":"claude-sonnet-4@20250514","messages":[]}'), upstream: undefined };

  it('is read from the injected environment (GOOGLE_CLOUD_PROJECT, then the Anthropic Vertex SDK variable)', () => {
    expect(planUpstreamRequest('gamma', { ...call, env: { ANTHROPIC_VERTEX_PROJECT_ID: 'p2' } }).path).toBe(
      '/v1/projects/p2/locations/us-central1/publishers/anthropic/models/claude-sonnet-4@20250514:rawPredict',
    );
    expect(() => planUpstreamRequest('gamma', { ...call, env: {} })).toThrow(/upstreams\.gamma\.project or GOOGLE_CLOUD_PROJECT/);
  });

  it('gamma-cloudb refuses a path segment that is not valid percent-encoding', () => {
    expect(() => planUpstreamRequest('gamma-cloudb', { method: 'POST', rest: '/model/a%zz/invoke', query: '', body: null, upstream: undefined })).toThrow(
      /not valid percent-encoding/,
    );
  });
});
