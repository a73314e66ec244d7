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

describe('metrics and tracing', () => {
  it('accepts the sections the docs show', () => {
    expect(
      parseRuntimeConfigPatch({
        metrics: { perUser: { enabled: true, maxUsers: 200 } },
        tracing: { otlp: { endpoint: 'http://otel-collector.observability:4318', protocol: 'grpc', compression: 'gzip', maxQueueSize: 4096, maxExportBatchSize: 512 } },
      }),
    ).toEqual({
      metrics: { perUser: { enabled: true, maxUsers: 200 } },
      tracing: { otlp: { endpoint: 'http://otel-collector.observability:4318', protocol: 'grpc', compression: 'gzip', maxQueueSize: 4096, maxExportBatchSize: 512 } },
    });
  });

  it('names the field that is wrong', () => {
    const cases: [unknown, string][] = [
      [{ metrics: { perUser: { enabled: 'yes' } } }, 'metrics.perUser.enabled must be true or false'],
      [{ metrics: { perUser: { maxUsers: 0 } } }, 'metrics.perUser.maxUsers'],
      [{ metrics: { users: true } }, 'metrics.users is not a known field'],
      [{ tracing: { otlp: { endpoint: 'otel-collector:4318' } } }, 'tracing.otlp.endpoint must be an http:// or https:// URL'],
      [{ tracing: { otlp: { endpoint: 'https://user:secret@collector.example' } } }, 'tracing.otlp.endpoint must not carry credentials; set OTEL_EXPORTER_OTLP_HEADERS instead'],
      [{ tracing: { otlp: { endpoint: 'http://collector:4318/?token=x' } } }, 'tracing.otlp.endpoint must be a base URL without query or fragment'],
      [{ tracing: { otlp: { protocol: 'http/json' } } }, 'tracing.otlp.protocol'],
      [{ tracing: { otlp: { maxQueueSize: 10, maxExportBatchSize: 100 } } }, 'tracing.otlp.maxExportBatchSize must not exceed maxQueueSize (10)'],
      [{ tracing: { jaeger: {} } }, 'tracing.jaeger is not a known field'],
    ];
    for (const [input, message] of cases) expect(() => parseRuntimeConfigPatch(input), JSON.stringify(input)).toThrow(message);
  });

  it('cannot be changed through the unauthenticated config API: whoever could would get every span', () => {
    const api = ['pricing', 'cache', 'upstreams', 'breaker', 'gateway'];
    expect(() => parseRuntimeConfigPatch({ tracing: { otlp: { endpoint: 'http://attacker.example:4318' } } }, api)).toThrow('tracing is not a known field');
    expect(() => parseRuntimeConfigPatch({ metrics: { perUser: { enabled: true } } }, api)).toThrow('metrics is not a known field');
  });
});
