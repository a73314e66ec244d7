import { describe, expect, it } from 'vitest';
import { ConfigError } from '../../contracts/config-error.ts';
import { referencedSecrets, render, resolveCredentials } from './render.ts';

describe('render', () => {
  it('turns a full spec into the runtime config patch the sidecar runs', () => {
    const { patch, credentialRefs } = render({
      pricing: {
        models: [
          { provider: 'openai', model: 'gpt-4o', input_per_million: 2.5, output_per_million: 10, cached_input_per_million: 1.25 },
          { provider: 'anthropic', model: 'claude-sonnet-4', aliases: ['claude-sonnet-4@20250514'], input_per_million: 3, output_per_million: 15 },
        ],
      },
      cache: { anthropic: { ttl_seconds: 3600, cached_multiplier: 0.1 } },
      upstreams: { beta: { baseUrl: 'http://127.0.0.1:9999/', timeoutMs: 5000 }, alpha: { project: 'my-proj', location: 'us-central1' } },
      breaker: { consecutiveFailures: 3, openMs: 2000 },
      storage: { kind: 'memory', bufferSize: 100, maxSpans: 5000 },
      gateway: { anthropicRoute: 'gamma-cloudb', googleRoute: 'alpha-compat' },
      credentials: { openaiApiKey: { secretName: 'llm-keys', key: 'openai' } },
    });
    expect(patch.pricing?.models).toEqual([
      { provider: 'openai', model: 'gpt-4o', input_per_million: 2.5, output_per_million: 10, cached_input_per_million: 1.25 },
      { provider: 'anthropic', model: 'claude-sonnet-4', aliases: ['claude-sonnet-4@20250514'], input_per_million: 3, output_per_million: 15 },
    ]);
    expect(patch.cache).toEqual({ anthropic: { ttl_seconds: 3600, cached_multiplier: 0.1 } });
    expect(patch.upstreams).toEqual({ beta: { baseUrl: 'http://127.0.0.1:9999', timeoutMs: 5000 }, alpha: { project: 'my-proj', location: 'us-central1' } });
    expect(patch.breaker).toEqual({ consecutiveFailures: 3, openMs: 2000 });
    expect(patch.storage).toEqual({ kind: 'memory', bufferSize: 100, maxSpans: 5000 });
    expect(patch.gateway).toEqual({ anthropicRoute: 'gamma-cloudb', googleRoute: 'alpha-compat' });
    // Credentials never enter the patch; only the references come out.
    expect(patch.credentials).toBeUndefined();
    expect(credentialRefs).toEqual([{ name: 'openaiApiKey', field: 'credentials.openaiApiKey', secretName: 'llm-keys', key: 'openai' }]);
  });

  it('renders span store settings, their key files as credential references the sidecar turns into files', () => {
    const spec = {
      storage: {
        kind: 'bigquery' as const,
        bigquery: { projectId: 'acme-prod', dataset: 'llm', table: 'spans', partitionExpirationDays: 400, credentials: { secretName: 'warehouse', key: 'sa.json' } },
        firestore: { collection: 'calls', credentials: { secretName: 'fs-key', key: 'key.json' } },
      },
    };
    const { patch, credentialRefs } = render(spec);
    expect(patch.storage).toEqual({
      kind: 'bigquery',
      bigquery: { projectId: 'acme-prod', dataset: 'llm', table: 'spans', partitionExpirationDays: 400 },
      firestore: { collection: 'calls' },
    });
    expect(credentialRefs).toEqual([
      { name: 'storage.bigquery.credentials', field: 'storage.bigquery.credentials', secretName: 'warehouse', key: 'sa.json' },
      { name: 'storage.firestore.credentials', field: 'storage.firestore.credentials', secretName: 'fs-key', key: 'key.json' },
    ]);
    expect(referencedSecrets(spec)).toEqual(['warehouse', 'fs-key']);
    expect(() => render({ storage: { kind: 'bigquery', bigquery: { dataset: 'has-dash' } } })).toThrow(
      'storage.bigquery.dataset must be letters, digits and underscores (got "has-dash")',
    );
  });

  it('renders an empty or absent spec as an empty patch (the built-in defaults)', () => {
    expect(render(undefined)).toEqual({ patch: {}, credentialRefs: [] });
    expect(render({})).toEqual({ patch: {}, credentialRefs: [] });
  });

  it("keeps the operator's enforcement fields out of the sidecar's provenance section (ADR 1602)", () => {
    const { patch } = render({ provenance: { enforcement: 'enforce', enforcementAction: 'override', arguments: 'redacted', bypass: { extraHosts: ['llm.example.com:443'] } } });
    expect(patch.provenance).toMatchObject({ arguments: 'redacted', bypass: { extraHosts: ['llm.example.com:443'] } });
    expect(Object.keys(patch.provenance!)).not.toContain('enforcement');
    expect(Object.keys(patch.provenance!)).not.toContain('enforcementAction');
  });

  it('renders the metrics and tracing sections as the sidecar reads them', () => {
    const spec = { metrics: { perUser: { enabled: true, maxUsers: 50 } }, tracing: { otlp: { endpoint: 'http://otel-collector.observability:4317', protocol: 'grpc' as const } } };
    expect(render(spec).patch).toEqual(spec);
    expect(() => render({ tracing: { otlp: { endpoint: 'https://u:p@collector:4318' } } })).toThrow(/tracing\.otlp\.endpoint must not carry credentials/);
  });

  it('refuses what the sidecar would refuse, naming the field', () => {
    const twice = { provider: 'openai' as const, model: 'gpt-4o', input_per_million: 1, output_per_million: 2 };
    expect(() => render({ pricing: { models: [twice, twice] } })).toThrow(ConfigError);
    expect(() => render({ pricing: { models: [twice, twice] } })).toThrow(/pricing\.models\[1\]/);
    expect(() => render({ upstreams: { beta: { baseUrl: 'ftp://x' } } })).toThrow(/upstreams\.beta\.baseUrl/);
  });

  it("renders a ProxyConfig's prices per image, minute of audio and character, and refuses a bad one naming it (ADR 0910)", () => {
    const dalle = {
      provider: 'openai' as const,
      model: 'dall-e-3',
      input_per_million: 0,
      output_per_million: 0,
      image_prices: [
        { size: '1024x1024', quality: 'hd', usd: 0.08 },
        { size: '1792x1024', usd: 0.1 },
      ],
    };
    const whisper = { provider: 'openai' as const, model: 'whisper-1', input_per_million: 0, output_per_million: 0, audio_per_minute: 0.006 };
    const tts = { provider: 'openai' as const, model: 'tts-1', input_per_million: 0, output_per_million: 0, characters_per_million: 15 };
    expect(render({ pricing: { models: [dalle, whisper, tts] } }).patch.pricing?.models).toEqual([dalle, whisper, tts]);
    expect(() => render({ pricing: { models: [{ ...dalle, image_prices: [{ size: 'big', usd: 1 }] }] } })).toThrow(
      'pricing.models[0].image_prices[0].size must be WIDTHxHEIGHT in pixels (e.g. 1024x1024) or auto',
    );
    expect(() => render({ pricing: { models: [whisper, { ...tts, characters_per_million: 1000 }] } })).toThrow(
      'pricing.models[1].characters_per_million must be at most 100 USD per million characters (got 1000)',
    );
  });

  it('expands AWS references with default key names', () => {
    const { credentialRefs } = render({ credentials: { aws: { secretName: 'aws' } } });
    expect(credentialRefs.map((r) => [r.name, r.secretName, r.key])).toEqual([
      ['awsAccessKeyId', 'aws', 'AWS_ACCESS_KEY_ID'],
      ['awsSecretAccessKey', 'aws', 'AWS_SECRET_ACCESS_KEY'],
    ]);
  });
});

describe('resolveCredentials', () => {
  const refs = render({
    credentials: { openaiApiKey: { secretName: 'keys', key: 'openai' }, anthropicApiKey: { secretName: 'keys', key: 'anthropic' } },
  }).credentialRefs;

  it('decodes the referenced values', () => {
    const result = resolveCredentials(refs, () => ({ data: { openai: Buffer.from('sk-o').toString('base64'), anthropic: Buffer.from('sk-a').toString('base64') } }));
    expect(result.ok).toBe(true);
    if (result.ok) expect(Object.fromEntries(Object.entries(result.values).map(([k, v]) => [k, v.toString()]))).toEqual({ openaiApiKey: 'sk-o', anthropicApiKey: 'sk-a' });
  });

  it('names the missing Secret or key', () => {
    expect(resolveCredentials(refs, () => undefined)).toEqual({
      ok: false,
      reason: 'SecretNotFound',
      message: 'credentials.openaiApiKey: Secret "keys" not found in the namespace, or not labelled tollgate.dev/credentials=true',
    });
    expect(resolveCredentials(refs, () => ({ data: { openai: 'eA==' } }))).toEqual({
      ok: false,
      reason: 'SecretKeyNotFound',
      message: 'credentials.anthropicApiKey: Secret "keys" has no key "anthropic"',
    });
  });

  it('reports a key named like an object built-in (valid in the CRD) as missing, not as a crash', () => {
    const builtin = render({ credentials: { openaiApiKey: { secretName: 'keys', key: 'constructor' } } }).credentialRefs;
    expect(resolveCredentials(builtin, () => ({ data: { openai: 'eA==' } }))).toEqual({
      ok: false,
      reason: 'SecretKeyNotFound',
      message: 'credentials.openaiApiKey: Secret "keys" has no key "constructor"',
    });
  });
});

describe('referencedSecrets', () => {
  it('lists each referenced Secret once', () => {
    expect(referencedSecrets({ credentials: { openaiApiKey: { secretName: 'a', key: 'x' }, anthropicApiKey: { secretName: 'a', key: 'y' }, aws: { secretName: 'b' } } })).toEqual([
      'a',
      'b',
    ]);
    expect(referencedSecrets(undefined)).toEqual([]);
  });
});
