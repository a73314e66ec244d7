// A complete, realistic span for tests and benchmarks; override what the case is about.

import type { Span } from '../../sidecar/src/spans/span.ts';
import { newSpanId, newTraceId } from '../../sidecar/src/spans/trace-context.ts';

export function sampleSpan(overrides: Partial<Span> = {}): Span {
  return {
    spanId: newSpanId(),
    traceId: newTraceId(),
    parentSpanId: null,
    name: 'chat gpt-4o-mini',
    operation: 'chat',
    model: 'gpt-4o-mini',
    responseModel: 'gpt-4o-mini-2024-07-18',
    provider: 'openai',
    route: 'beta',
    userId: 'alice',
    projectId: 'proj-1',
    requestId: 'req-1',
    inputTokens: 1200,
    outputTokens: 300,
    totalTokens: 1500,
    cachedTokens: 200,
    cacheWriteTokens: 0,
    reasoningTokens: 64,
    images: 0,
    audioSeconds: 0,
    characters: 0,
    costUsd: 0.000345,
    priced: true,
    usageEstimated: false,
    alias: null,
    attempt: null,
    unmetered: false,
    durationMs: 123.5,
    status: 'ok',
    statusCode: 200,
    error: null,
    startTime: '2026-01-15T10:00:00.000Z',
    ...overrides,
  };
}
