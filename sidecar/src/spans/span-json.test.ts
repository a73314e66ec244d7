import { describe, expect, it } from 'vitest';
import { sampleSpan } from '../../../test/support/sample-span.ts';
import { spanToJson } from './span-json.ts';

describe('spanToJson', () => {
  it('maps every span field to its snake_case API name', () => {
    const span = sampleSpan({ parentSpanId: 'b7ad6b7169203331', cacheWriteTokens: 40, error: 'x', statusCode: 502, status: 'upstream_error' });
    expect(spanToJson(span)).toEqual({
      span_id: span.spanId,
      trace_id: span.traceId,
      parent_span_id: 'b7ad6b7169203331',
      name: 'chat gpt-4o-mini',
      model: 'gpt-4o-mini',
      response_model: 'gpt-4o-mini-2024-07-18',
      provider: 'openai',
      route: 'beta',
      user_id: 'alice',
      project_id: 'proj-1',
      request_id: 'req-1',
      input_tokens: 1200,
      output_tokens: 300,
      total_tokens: 1500,
      cached_tokens: 200,
      cache_write_tokens: 40,
      reasoning_tokens: 64,
      images: 0,
      audio_seconds: 0,
      characters: 0,
      cost_usd: 0.000345,
      priced: true,
      usage_estimated: false,
      alias: null,
      attempt: null,
      unmetered: false,
      duration_ms: 123.5,
      status: 'upstream_error',
      status_code: 502,
      error: 'x',
      timestamp: '2026-01-15T10:00:00.000Z',
    });
  });

  it('shows the process exec_id and the tool calls when provenance is on, and neither key when it is off (ADR 1603)', () => {
    const span = sampleSpan({
      process: { attribution: 'procfs', pid: 31, executablePath: '/usr/bin/node', commandArgs: null, parentExecutables: [], containerName: null },
      toolCalls: [{ id: null, name: 'probe', argumentsSha256: 'ecf9e98ec0641e23113ff3ce8bdc78d0ddd249886517fd4a7f68cc83d4e65667' }],
    });
    const json = spanToJson(span);
    expect(json.process?.exec_id).toBeNull();
    expect(json.tool_calls).toEqual([{ id: null, name: 'probe', arguments_sha256: 'ecf9e98ec0641e23113ff3ce8bdc78d0ddd249886517fd4a7f68cc83d4e65667' }]);
    expect(spanToJson(sampleSpan({ process: { ...span.process!, execId: 'OjEy' }, toolCalls: [] }))).toMatchObject({ process: { exec_id: 'OjEy' }, tool_calls: [] });
    const off = spanToJson(sampleSpan());
    expect(off).not.toHaveProperty('tool_calls');
    expect(off).not.toHaveProperty('process');
  });
});
