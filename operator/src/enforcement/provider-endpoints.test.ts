import { describe, expect, it } from 'vitest';
import { providerEndpoints } from './provider-endpoints.ts';

describe('provider endpoints of a ProxyConfig', () => {
  it('without a spec: nothing, since a built-in route the ProxyConfig does not set up is not its provider', () => {
    // api.openai.com sits on a CDN's shared anycast addresses: listing it unasked would stop unrelated sites.
    expect(providerEndpoints(undefined)).toEqual({ endpoints: [], unknown: [] });
    expect(providerEndpoints({ provenance: { enforcement: 'enforce' } })).toEqual({ endpoints: [], unknown: [] });
  });

  it("a built-in route with its credential but no upstreams entry: the route's public endpoint, or unknown when it needs a setting", () => {
    const ref = { secretName: 'keys', key: 'k' };
    expect(providerEndpoints({ credentials: { anthropicApiKey: ref, googleServiceAccount: ref } })).toEqual({
      endpoints: [{ host: 'api.anthropic.com', port: 443 }],
      // alpha, alpha-compat, gamma and gamma-cloud all use the Google credential and share one default.
      unknown: ['https://{location}-aiplatform.googleapis.com'],
    });
  });

  it('takes overrides, endpoints, locations, regions, configured routes and extraHosts, once each', () => {
    const { endpoints, unknown } = providerEndpoints({
      upstreams: {
        alpha: {
          location: 'europe-west4',
          endpoints: [
            { name: 'us', location: 'us-east5' },
            { name: 'same', location: 'europe-west4' },
          ],
        },
        'alpha-compat': { location: 'global' },
        gamma: { location: 'europe-west4' },
        'gamma-cloud': { baseUrl: 'https://vertex.internal.example:8443' },
        beta: { baseUrl: 'http://10.20.0.7:8080', endpoints: [{ name: 'eu', baseUrl: 'https://eu.api.openai.com' }, { name: 'default' }] },
        'gamma-cloudb': { region: 'eu-central-1' },
      },
      routes: [{ name: 'mistral', format: 'openai-chat', baseUrl: 'https://api.mistral.ai', credential: { kind: 'none' } }],
      provenance: { bypass: { extraHosts: ['api.openai.com:443', '[2001:db8::7]:8443', 'llm.example.com:9000'] } },
    });
    expect(endpoints).toEqual([
      { host: 'europe-west4-aiplatform.googleapis.com', port: 443 },
      { host: 'us-east5-aiplatform.googleapis.com', port: 443 },
      { host: 'aiplatform.googleapis.com', port: 443 },
      { host: '10.20.0.7', port: 8080 },
      { host: 'eu.api.openai.com', port: 443 },
      { host: 'vertex.internal.example', port: 8443 },
      { host: 'bedrock-runtime.eu-central-1.amazonaws.com', port: 443 },
      { host: 'api.mistral.ai', port: 443 },
      { host: 'api.openai.com', port: 443 },
      { host: '2001:db8::7', port: 8443 },
      { host: 'llm.example.com', port: 9000 },
    ]);
    expect(unknown).toEqual([]);
  });
});
