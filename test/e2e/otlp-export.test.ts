// The OTLP span export against a real OpenTelemetry Collector (test/otel-collector): over HTTP/protobuf and
// gRPC, each span arrives as a CLIENT span under the caller's trace with the GenAI attributes; a queue that
// overflows and a collector that cannot be reached lose spans only as counted drops.

import pino from 'pino';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { freePort } from '../control-plane/free-port.ts';
import { ensureCollectorBinary, startCollector, type Collector } from '../otel-collector/collector.ts';
import { sampleSpan } from '../support/sample-span.ts';
import { ConfigStore } from '../../sidecar/src/config/config-store.ts';
import { OtlpSpanExport } from '../../sidecar/src/spans/otlp-export.ts';
import { OtlpFollower } from '../../sidecar/src/spans/otlp-follower.ts';
import { resolveOtlpSettings } from '../../sidecar/src/spans/otlp-settings.ts';
import { sampleSum, sampleValue } from '../support/prometheus-text.ts';
import { waitFor } from '../support/wait-for.ts';
import { startProxyProcess, type ProxyProcess } from './proxy-process.ts';
import { startUpstreamBed, type UpstreamBed } from './upstream-bed.ts';

const silent = pino({ level: 'silent' });
let collector: Collector;

beforeAll(async () => {
  collector = await startCollector(await ensureCollectorBinary());
}, 15 * 60_000);

afterAll(async () => {
  await collector?.stop();
});

describe.each([
  ['http/protobuf', () => collector.httpEndpoint],
  ['grpc', () => collector.grpcEndpoint],
] as const)('OTLP export over %s', (protocol, endpoint) => {
  it("delivers each span under the caller's trace with the GenAI conventions", async () => {
    const settings = resolveOtlpSettings({ endpoint: endpoint(), protocol, scheduledDelayMs: 50 }, {})!;
    const exporter = new OtlpSpanExport({ settings, logger: silent, resource: { 'k8s.pod.name': 'shop-7d9f', 'k8s.namespace.name': 'shop' }, version: '0.1.0' });
    const traceId = protocol === 'grpc' ? '4bf92f3577b34da6a3ce929d0e0e4736' : '0af7651916cd43dd8448eb211c80319c';
    const ok = sampleSpan({
      traceId,
      spanId: protocol === 'grpc' ? '00f067aa0ba902b7' : 'b7ad6b7169203331',
      parentSpanId: 'a2fb4a1d1a96d312',
      name: 'chat claude-sonnet-4-5',
      model: 'claude-sonnet-4-5-20250929',
      responseModel: 'claude-sonnet-4-5-20250929',
      provider: 'anthropic',
      route: 'gamma-cloudb',
      userId: 'alice',
      inputTokens: 1500,
      outputTokens: 200,
      cachedTokens: 1024,
      cacheWriteTokens: 100,
      reasoningTokens: 0,
      costUsd: 0.0046,
      durationMs: 1234.5,
      startTime: '2026-11-23T10:00:00.000Z',
    });
    const failed = sampleSpan({ traceId, parentSpanId: 'a2fb4a1d1a96d312', status: 'error', statusCode: null, error: 'upstream_timeout: no answer in 60000 ms', userId: null });
    const before = collector.spans.length;
    exporter.record(ok, true);
    exporter.record(failed, true);
    exporter.record(sampleSpan({ traceId }), false); // the caller's trace is not sampled: not exported
    await exporter.shutdown();
    const spans = (await collector.waitForSpans(before + 2)).filter((s) => s.traceId === traceId);
    expect(spans).toHaveLength(2);
    const got = spans.find((s) => s.spanId === ok.spanId)!;
    expect(got).toMatchObject({
      parentSpanId: 'a2fb4a1d1a96d312',
      name: 'chat claude-sonnet-4-5',
      kind: 3, // SPAN_KIND_CLIENT
      startTimeUnixNano: '1795428000000000000',
      endTimeUnixNano: '1795428001234500000',
      scope: { name: 'tollgate', version: '0.1.0' },
    });
    expect(got.status.code ?? 0).toBe(0); // unset
    expect(got.attributes).toEqual({
      'gen_ai.operation.name': 'chat',
      'gen_ai.provider.name': 'aws.bedrock',
      'gen_ai.request.model': 'claude-sonnet-4-5-20250929',
      'gen_ai.response.model': 'claude-sonnet-4-5-20250929',
      'gen_ai.usage.input_tokens': 1500,
      'gen_ai.usage.output_tokens': 200,
      'gen_ai.usage.cache_read.input_tokens': 1024,
      'gen_ai.usage.cache_creation.input_tokens': 100,
      'http.response.status_code': 200,
      'enduser.id': 'alice',
      'tollgate.route': 'gamma-cloudb',
      'tollgate.provider': 'anthropic',
      'tollgate.status': 'ok',
      'tollgate.cost_usd': 0.0046,
      'tollgate.priced': true,
      'tollgate.request_id': 'req-1',
      'tollgate.project_id': 'proj-1',
      'tollgate.usage.reasoning_tokens': 0,
    });
    expect(got.resource).toMatchObject({ 'service.name': 'tollgate-proxy', 'k8s.pod.name': 'shop-7d9f', 'k8s.namespace.name': 'shop', 'telemetry.sdk.language': 'nodejs' });
    const error = spans.find((s) => s.spanId === failed.spanId)!;
    expect(error.status).toEqual({ code: 2, message: 'upstream_timeout: no answer in 60000 ms' });
    expect(error.attributes['error.type']).toBe('upstream_timeout');
    expect(exporter.stats()).toEqual({ exported: 2, dropped: 0, failed: 0, queued: 0 });
  });
});

describe('OTLP export of billed units other than tokens (ADR 0910)', () => {
  it('carries images, seconds of audio and characters on the spans that billed them', async () => {
    const settings = resolveOtlpSettings({ endpoint: collector.httpEndpoint, protocol: 'http/protobuf', scheduledDelayMs: 50 }, {})!;
    const exporter = new OtlpSpanExport({ settings, logger: silent });
    const image = sampleSpan({
      name: 'image_generation dall-e-3',
      operation: 'image_generation',
      model: 'dall-e-3',
      inputTokens: 0,
      outputTokens: 0,
      totalTokens: 0,
      images: 2,
      costUsd: 0.24,
    });
    const audio = sampleSpan({ traceId: image.traceId, operation: 'audio_transcription', model: 'whisper-1', audioSeconds: 61.5 });
    const speech = sampleSpan({ traceId: image.traceId, operation: 'audio_speech', model: 'tts-1', characters: 1234 });
    const before = collector.spans.length;
    for (const span of [image, audio, speech]) exporter.record(span, true);
    await exporter.shutdown();
    const spans = (await collector.waitForSpans(before + 3)).filter((s) => s.traceId === image.traceId);
    const attributes = (id: string) => spans.find((s) => s.spanId === id)!.attributes;
    expect(attributes(image.spanId)).toMatchObject({ 'gen_ai.operation.name': 'image_generation', 'tollgate.usage.images': 2, 'tollgate.cost_usd': 0.24 });
    expect(attributes(image.spanId)).not.toHaveProperty('tollgate.usage.audio_seconds');
    expect(attributes(audio.spanId)).toMatchObject({ 'tollgate.usage.audio_seconds': 61.5 });
    expect(attributes(audio.spanId)).not.toHaveProperty('tollgate.usage.images');
    expect(attributes(speech.spanId)).toMatchObject({ 'tollgate.usage.characters': 1234 });
  });
});

describe('OTLP export of the calling process (ADR 1600) and the tool calls (ADR 1603)', () => {
  it('carries process.pid, process.executable.path, process.command_args, container.name, the exec_id and the tool calls when provenance found them', async () => {
    const settings = resolveOtlpSettings({ endpoint: collector.httpEndpoint, protocol: 'http/protobuf', scheduledDelayMs: 50 }, {})!;
    const exporter = new OtlpSpanExport({ settings, logger: silent });
    const attributed = sampleSpan({
      process: {
        attribution: 'tetragon',
        pid: 52699,
        executablePath: '/usr/bin/python3',
        commandArgs: ['/usr/bin/python3', 'agent.py'],
        parentExecutables: ['/bin/sh'],
        containerName: 'app',
        execId: 'OjEyMzQ1Njc4OTo1MjY5OQ==',
      },
      toolCalls: [
        { id: 'call_mszuSIzqtI65i1wAUOE8w5H4', name: 'get_weather', argumentsSha256: '6e1e312d537bc71b5410b0599f5a508142149e13174c6ee0d1671658845bc67d' },
        { id: null, name: 'probe', argumentsSha256: 'ecf9e98ec0641e23113ff3ce8bdc78d0ddd249886517fd4a7f68cc83d4e65667' },
      ],
    });
    const unattributed = sampleSpan({
      traceId: attributed.traceId,
      process: { attribution: 'unattributed', pid: null, executablePath: null, commandArgs: null, parentExecutables: [], containerName: null },
      toolCalls: [],
    });
    const off = sampleSpan({ traceId: attributed.traceId });
    const before = collector.spans.length;
    for (const span of [attributed, unattributed, off]) exporter.record(span, true);
    await exporter.shutdown();
    const spans = (await collector.waitForSpans(before + 3)).filter((s) => s.traceId === attributed.traceId);
    const attributes = (id: string) => spans.find((s) => s.spanId === id)!.attributes;
    expect(attributes(attributed.spanId)).toMatchObject({
      'tollgate.process.attribution': 'tetragon',
      'process.pid': 52699,
      'process.executable.path': '/usr/bin/python3',
      'process.command_args': ['/usr/bin/python3', 'agent.py'],
      'tollgate.process.parent_executables': ['/bin/sh'],
      'container.name': 'app',
      'tollgate.process.exec_id': 'OjEyMzQ1Njc4OTo1MjY5OQ==',
      // ADR 1603: three parallel arrays, a call without an id as "".
      'tollgate.tool_calls.names': ['get_weather', 'probe'],
      'tollgate.tool_calls.ids': ['call_mszuSIzqtI65i1wAUOE8w5H4', ''],
      'tollgate.tool_calls.arguments_sha256': [
        '6e1e312d537bc71b5410b0599f5a508142149e13174c6ee0d1671658845bc67d',
        'ecf9e98ec0641e23113ff3ce8bdc78d0ddd249886517fd4a7f68cc83d4e65667',
      ],
    });
    expect(attributes(unattributed.spanId)['tollgate.process.attribution']).toBe('unattributed');
    expect(attributes(unattributed.spanId)).not.toHaveProperty('process.pid');
    expect(attributes(unattributed.spanId)).not.toHaveProperty('tollgate.process.exec_id');
    expect(attributes(unattributed.spanId)['tollgate.tool_calls.names']).toEqual([]);
    expect(attributes(off.spanId)).not.toHaveProperty('tollgate.process.attribution');
    expect(attributes(off.spanId)).not.toHaveProperty('tollgate.tool_calls.names');
  });
});

describe('OTLP export: bounds and failures', () => {
  it('drops what does not fit the queue and counts spans the collector never got', async () => {
    const closed = await freePort(); // nothing listens there
    const settings = resolveOtlpSettings({ endpoint: `http://127.0.0.1:${closed}`, maxQueueSize: 2, maxExportBatchSize: 2, scheduledDelayMs: 60_000, timeoutMs: 2000 }, {})!;
    const exporter = new OtlpSpanExport({ settings, logger: silent });
    for (let i = 0; i < 5; i++) exporter.record(sampleSpan(), true);
    expect(exporter.stats()).toEqual({ exported: 0, dropped: 3, failed: 0, queued: 2 });
    await exporter.shutdown();
    expect(exporter.stats()).toEqual({ exported: 0, dropped: 3, failed: 2, queued: 0 });
  });

  it('holds the spans that finish while the exporter loads, up to the queue size, and logs what it drops', async () => {
    const lines: { msg: string; dropped?: number }[] = [];
    const logger = pino({ level: 'info' }, { write: (line: string) => lines.push(JSON.parse(line) as { msg: string }) });
    const store = new ConfigStore({ tracing: { otlp: { endpoint: collector.httpEndpoint, maxQueueSize: 3, scheduledDelayMs: 50 } } });
    // The exporter's module is imported when export turns on; these calls finish before that import settles.
    const follower = new OtlpFollower({ store, env: {}, logger });
    const timings = { start: 0, upstreamStart: 0, upstreamHeaders: 0, upstreamEnd: 0 };
    const spans = Array.from({ length: 5 }, () => sampleSpan());
    for (const span of spans) follower.callFinished(span, null, timings, true);
    follower.callFinished(sampleSpan(), null, timings, false); // not sampled: never held
    expect(follower.stats()).toEqual({ exported: 0, dropped: 2, failed: 0, queued: 3 });
    expect(lines.filter((l) => l.msg === 'span processor buffer full')).toMatchObject([{ sink: 'otlp', dropped: 1 }]);

    await follower.close();
    expect(follower.stats()).toEqual({ exported: 3, dropped: 2, failed: 0, queued: 0 });
    for (const span of spans.slice(0, 3)) await waitForSpan(span.spanId);
    expect(collector.spans.some((s) => s.spanId === spans[3]!.spanId || s.spanId === spans[4]!.spanId)).toBe(false);
    // Every drop is in a `span processor buffer full` line, the last one at close at the latest.
    expect(lines.filter((l) => l.msg === 'span processor buffer full').at(-1)).toMatchObject({ dropped: 2 });
  });

  it('sends the spans held for a collector the config replaced while the exporter loaded to that collector', async () => {
    const store = new ConfigStore({ tracing: { otlp: { endpoint: collector.httpEndpoint, scheduledDelayMs: 50 } } });
    const follower = new OtlpFollower({ store, env: {}, logger: silent });
    const timings = { start: 0, upstreamStart: 0, upstreamHeaders: 0, upstreamEnd: 0 };
    const overHttp = [sampleSpan(), sampleSpan()];
    for (const span of overHttp) follower.callFinished(span, null, timings, true);
    store.setLayer('operator', { tracing: { otlp: { endpoint: collector.grpcEndpoint, protocol: 'grpc', scheduledDelayMs: 50 } } });
    const overGrpc = sampleSpan();
    follower.callFinished(overGrpc, null, timings, true);
    expect(follower.stats()).toEqual({ exported: 0, dropped: 0, failed: 0, queued: 3 }); // both held, neither lost from the totals
    await follower.close();
    expect(follower.stats()).toEqual({ exported: 3, dropped: 0, failed: 0, queued: 0 });
    for (const span of [...overHttp, overGrpc]) await waitForSpan(span.spanId);
  });

  it('takes the endpoint, protocol and service name from the OTEL_* variables when the config names none', async () => {
    expect(resolveOtlpSettings(undefined, {})).toBeNull();
    expect(resolveOtlpSettings({}, { OTEL_EXPORTER_OTLP_ENDPOINT: 'http://collector:4318', OTEL_TRACES_EXPORTER: 'none' })).toBeNull();
    expect(resolveOtlpSettings({}, { OTEL_EXPORTER_OTLP_ENDPOINT: 'http://collector:4317', OTEL_EXPORTER_OTLP_PROTOCOL: 'grpc' })).toEqual({
      protocol: 'grpc',
      maxQueueSize: 2048,
      maxExportBatchSize: 512,
      scheduledDelayMs: 1000,
    });
    // The config wins, field by field.
    expect(resolveOtlpSettings({ endpoint: 'http://mine:4318/', timeoutMs: 5000 }, { OTEL_EXPORTER_OTLP_PROTOCOL: 'grpc' })).toMatchObject({
      protocol: 'grpc',
      url: 'http://mine:4318/',
    });
    expect(resolveOtlpSettings({ endpoint: 'http://mine:4318/', protocol: 'http/protobuf' }, {})).toMatchObject({ url: 'http://mine:4318/v1/traces' });

    // The exporter itself reads the endpoint variable (and OTEL_SERVICE_NAME goes into the resource).
    const saved = { ...process.env };
    process.env.OTEL_EXPORTER_OTLP_TRACES_ENDPOINT = `${collector.httpEndpoint}/v1/traces`;
    process.env.OTEL_SERVICE_NAME = 'checkout-llm-proxy';
    try {
      const settings = resolveOtlpSettings(undefined, process.env)!;
      const exporter = new OtlpSpanExport({ settings: { ...settings, scheduledDelayMs: 50 }, logger: silent });
      const span = sampleSpan();
      exporter.record(span, true);
      await exporter.shutdown();
      const got = await collector.waitForSpans(1).then(() => waitForSpan(span.spanId));
      expect(got.resource['service.name']).toBe('checkout-llm-proxy');
    } finally {
      process.env = saved;
    }
  });
});

async function waitForSpan(spanId: string) {
  return waitFor(`span ${spanId} at the collector`, () => collector.spans.find((s) => s.spanId === spanId), 20_000);
}

describe('a `tollgate proxy` process exporting its spans', () => {
  let bed: UpstreamBed;
  beforeAll(async () => {
    bed = await startUpstreamBed();
  });
  afterAll(async () => {
    await bed?.close();
  });

  const call = async (proxy: ProxyProcess, traceparent: string) => {
    bed.openai.behave({ usage: { input: 1000, cacheRead: 500, output: 200 } });
    const res = await fetch(`${proxy.url}/proxy/beta/v1/chat/completions`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', traceparent, 'x-tollgate-user': 'alice' },
      body: JSON.stringify({ model: 'gpt-4o-mini', messages: [{ role: 'user', content: 'hi' }] }),
    });
    expect(res.status).toBe(200);
    await res.text();
    return res.headers.get('x-proxy-span-id')!;
  };

  it("nests each call under the caller's trace at the collector (config file, HTTP/protobuf)", async () => {
    const proxy = await startProxyProcess({
      configYaml: bed.configYaml(`tracing: { otlp: { endpoint: "${collector.httpEndpoint}", scheduledDelayMs: 50 } }\n`),
      env: { ...bed.env, TOLLGATE_POD_NAME: 'checkout-7d9f', TOLLGATE_POD_NAMESPACE: 'shop' },
    });
    try {
      const traceId = '5b8aa5a2d2c872e8321cf37308d69df2';
      const callerSpan = '051581bf3cb55c13';
      const spanId = await call(proxy, `00-${traceId}-${callerSpan}-01`);
      const got = await waitForSpan(spanId);
      expect(got).toMatchObject({ traceId, parentSpanId: callerSpan, name: 'chat gpt-4o-mini', kind: 3 });
      expect(got.attributes).toMatchObject({
        'gen_ai.provider.name': 'openai',
        'gen_ai.request.model': 'gpt-4o-mini',
        'gen_ai.response.model': 'gpt-4o-mini-2024-07-18',
        'gen_ai.usage.input_tokens': 1500,
        'gen_ai.usage.cache_read.input_tokens': 500,
        'gen_ai.usage.output_tokens': 200,
        'tollgate.cost_usd': 0.0003075,
        'enduser.id': 'alice',
      });
      expect(got.resource).toMatchObject({ 'service.name': 'tollgate-proxy', 'k8s.pod.name': 'checkout-7d9f', 'k8s.namespace.name': 'shop' });
      // The caller said "not sampled": the span stays in the store only.
      const unsampled = await call(proxy, `00-${traceId}-${callerSpan}-00`);
      const metrics = await waitFor('the export counted', async () => {
        const body = await (await fetch(`${proxy.url}/metrics`)).text();
        return sampleValue(body, 'tollgate_otlp_spans_exported_total') === 1 ? body : undefined;
      });
      expect(sampleSum(metrics, 'tollgate_otlp_spans_dropped_total')).toBe(0);
      expect(collector.spans.some((s) => s.spanId === unsampled)).toBe(false);
    } finally {
      await proxy.stop();
    }
  });

  it("exports each attempt of an alias call that fell back as a child of the call's span", async () => {
    const proxy = await startProxyProcess({
      configYaml: bed.configYaml(`tracing: { otlp: { endpoint: "${collector.httpEndpoint}", scheduledDelayMs: 50 } }
models:
  mini:
    targets:
      - { route: beta, model: gpt-4o-mini }
      - { route: gamma-direct, model: claude-haiku-4-5, priority: 1 }
`),
      env: bed.env,
    });
    try {
      bed.openai.behave({ status: 503, forRequests: 1 });
      bed.anthropic.behave({ usage: { input: 1000, output: 200 } });
      const traceId = '7c1e2f3a4b5c6d7e8f90a1b2c3d4e5f6';
      const res = await fetch(`${proxy.url}/v1/chat/completions`, {
        method: 'POST',
        headers: { 'content-type': 'application/json', traceparent: `00-${traceId}-0123456789abcdef-01` },
        body: JSON.stringify({ model: 'mini', messages: [{ role: 'user', content: 'hi' }] }),
      });
      expect(res.status).toBe(200);
      await res.text();
      const callSpan = res.headers.get('x-proxy-span-id')!;
      const got = await waitForSpan(callSpan);
      expect(got.attributes).toMatchObject({ 'tollgate.route': 'gamma-direct', 'tollgate.alias': 'mini' });
      const attempts = await waitFor('both attempt spans at the collector', () => {
        const children = collector.spans.filter((s) => s.traceId === traceId && s.parentSpanId === callSpan);
        return children.length === 2 ? children : undefined;
      });
      const byAttempt = attempts.sort((a, b) => Number(a.attributes['tollgate.attempt']) - Number(b.attributes['tollgate.attempt']));
      expect(byAttempt.map((s) => [s.attributes['tollgate.attempt'], s.attributes['tollgate.route'], s.attributes['tollgate.cost_usd']])).toEqual([
        [1, 'beta', 0],
        [2, 'gamma-direct', 0],
      ]);
    } finally {
      await proxy.stop();
    }
  });

  it('takes the collector from OTEL_EXPORTER_OTLP_ENDPOINT and OTEL_EXPORTER_OTLP_PROTOCOL=grpc', async () => {
    const proxy = await startProxyProcess({
      configYaml: bed.configYaml(),
      env: { ...bed.env, OTEL_EXPORTER_OTLP_ENDPOINT: collector.grpcEndpoint, OTEL_EXPORTER_OTLP_PROTOCOL: 'grpc', OTEL_SERVICE_NAME: 'llm-gateway' },
    });
    try {
      const traceId = '0af7651916cd43dd8448eb211c80319c';
      const spanId = await call(proxy, `00-${traceId}-b7ad6b7169203331-01`);
      // A span is sent at the next scheduled batch (1 s by default) or when the proxy stops and flushes.
      const stopped = proxy.stop();
      const got = await waitForSpan(spanId);
      await stopped;
      expect(got).toMatchObject({ traceId, parentSpanId: 'b7ad6b7169203331' });
      expect(got.resource['service.name']).toBe('llm-gateway');
    } finally {
      await proxy.stop().catch(() => undefined);
    }
  });
});
