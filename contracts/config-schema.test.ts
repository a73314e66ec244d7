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

describe('local', () => {
  it('takes the runtime command as a string split on spaces or as a list of words, never through a shell', () => {
    expect(parseRuntimeConfigPatch({ local: { runtime: { command: 'ollama  serve' } } }).local).toEqual({ runtime: { command: ['ollama', 'serve'] } });
    expect(parseRuntimeConfigPatch({ local: { runtime: { command: ['/opt/ollama/bin/ollama', 'serve'] } } }).local?.runtime?.command).toEqual(['/opt/ollama/bin/ollama', 'serve']);
    for (const bad of ['', [], ['ollama', ''], ['ollama', 'a b'], 42]) {
      expect(() => parseRuntimeConfigPatch({ local: { runtime: { command: bad } } }), JSON.stringify(bad)).toThrow(
        /^local\.runtime\.command must be a command such as "ollama serve"/,
      );
    }
  });

  it('names the bad field: the base URL, the port, enabled, an unknown key', () => {
    expect(parseRuntimeConfigPatch({ local: { enabled: false, lmstudioPort: 0, runtime: { baseUrl: 'http://127.0.0.1:11434/', startTimeoutMs: 5000 } } }).local).toEqual({
      enabled: false,
      lmstudioPort: 0,
      runtime: { baseUrl: 'http://127.0.0.1:11434', startTimeoutMs: 5000 },
    });
    expect(() => parseRuntimeConfigPatch({ local: { runtime: { baseUrl: 'ollama:11434' } } })).toThrow(/^local\.runtime\.baseUrl must be an http\(s\) URL/);
    expect(() => parseRuntimeConfigPatch({ local: { lmstudioPort: 70000 } })).toThrow('local.lmstudioPort must be an integer at least 0 and at most 65535 (got 70000)');
    expect(() => parseRuntimeConfigPatch({ local: { enabled: 'yes' } })).toThrow('local.enabled must be true or false (got "yes")');
    expect(() => parseRuntimeConfigPatch({ local: { runtime: { args: [] } } })).toThrow(/^local\.runtime\.args is not a known field/);
  });

  it('is not one of the sections the config API may change: the command is a program the proxy runs', () => {
    expect(() => parseRuntimeConfigPatch({ local: { runtime: { command: 'sh -c id' } } }, ['pricing', 'cache', 'upstreams', 'breaker', 'gateway'])).toThrow(
      'local is not a known field (expected one of: pricing, cache, upstreams, breaker, gateway)',
    );
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
