import { describe, expect, it } from 'vitest';
import { downstreamResponseHeaders, upstreamRequestHeaders } from './proxy-headers.ts';

describe('upstreamRequestHeaders', () => {
  it('drops credentials, framing, Expect and the headers Connection names; keeps end-to-end ones', () => {
    const out = upstreamRequestHeaders(
      {
        connection: 'keep-alive, X-Hop-A,x-hop-b',
        'x-hop-a': '1',
        'x-hop-b': '2',
        expect: '100-continue',
        authorization: 'Bearer caller',
        'x-api-key': 'caller',
        'content-length': '10',
        'x-tollgate-user': 'ann',
        'anthropic-version': '2023-06-01',
        'x-request-id': 'r1',
      },
      false,
    );
    expect(out).toEqual({ 'anthropic-version': '2023-06-01', 'x-request-id': 'r1', 'accept-encoding': 'identity' });
  });

  it('drops the billing choices (project, organisation), other key headers and where a browser request came from', () => {
    const out = upstreamRequestHeaders(
      {
        'x-goog-user-project': 'someone-elses-project',
        'openai-organization': 'org-someone-else',
        'openai-project': 'proj_someone_else',
        'api-key': 'caller-azure-key',
        origin: 'http://evil.example',
        referer: 'http://evil.example/page',
        'sec-fetch-site': 'cross-site',
        'sec-fetch-mode': 'cors',
        'sec-fetch-dest': 'empty',
        'content-type': 'application/json',
      },
      false,
    );
    expect(out).toEqual({ 'content-type': 'application/json', 'accept-encoding': 'identity' });
  });

  it('keeps content-length only for a body passed through unchanged', () => {
    expect(upstreamRequestHeaders({ 'content-length': '10' }, true)['content-length']).toBe('10');
  });
});

describe('downstreamResponseHeaders', () => {
  it('drops framing, cookies and the headers Connection names', () => {
    const out = downstreamResponseHeaders(
      { connection: 'x-internal', 'x-internal': 'a', 'transfer-encoding': 'chunked', 'set-cookie': ['a=1'], 'content-length': '5', 'x-request-id': 'u1' },
      false,
    );
    expect(out).toEqual({ 'content-length': '5', 'x-request-id': 'u1' });
    expect(downstreamResponseHeaders({ 'content-length': '5' }, true)).toEqual({});
  });
});
