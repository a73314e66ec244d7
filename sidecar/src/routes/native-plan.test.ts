import { describe, expect, it } from 'vitest';
import { checkPathSegments, planUpstreamRequest } from './native-plan.ts';

describe('checkPathSegments', () => {
  it.each(['/v1/../x', '/..', '/a/./b', '/v1/%2e%2e/x', '/v1/.%2E/x', '/v1/..%2F..%2Fadmin', '/v1/..\\x'])('refuses %s', (path) => {
    expect(() => checkPathSegments(path)).toThrow(/\. or \.\. segment/);
  });

  it.each(['/model/anthropic.claude-3%3A0/invoke', '/model/arn%3Aaws%3Abedrock%3Aus-east-1%3A1%3Ainference-profile%2Fus.anthropic.x/invoke', '/v1/a..b', '/v1/.well-known/x', '/v1/...', '/x/%zz/y'])('passes %s', (path) => {
    expect(() => checkPathSegments(path)).not.toThrow();
  });

  it('refuses a raw "#" anywhere in the target, since the URL would cut the rest off (/..# is /..)', () => {
    for (const [rest, query] of [['/..#', ''], ['/.#', ''], ['/..#x', ''], ['/v1/models#frag', ''], ['/v1/models', '?a=1#b']] as const) {
      expect(() => planUpstreamRequest('gamma-cloud', 'GET', rest, query, null, undefined), rest + query).toThrow(/has a raw "#"; send it percent-encoded \(%23\)/);
    }
    expect(() => planUpstreamRequest('gamma-cloud', 'GET', '/v1/a%23b', '', null, undefined)).not.toThrow();
  });

  it('guards every route, the one that re-encodes its path included', () => {
    expect(() => planUpstreamRequest('gamma-cloudb', 'POST', '/model/%2e%2e/%2e%2e/admin', '', null, undefined)).toThrow(/invalid|segment/);
    expect(() => planUpstreamRequest('alpha', 'GET', '/v1/../../admin', '?x=1', null, undefined)).toThrow(/segment/);
  });
});
