import { Writable } from 'node:stream';
import pino from 'pino';
import { describe, expect, it } from 'vitest';
import { DEFAULT_CACHE_SETTINGS } from '../pricing/default-cache.ts';
import { PriceTable } from '../pricing/price-table.ts';
import { CallMeter } from '../metering/call-meter.ts';
import type { Span } from '../spans/span.ts';
import { startSpanContext } from '../spans/trace-context.ts';
import { ConnectionTracker } from './connection-tracker.ts';
import { SpanGate } from './span-gate.ts';

// Tool calls on the span follow provenance (ADR 1603): the gate tells the meter whether answers are read for them,
// and gives every span it lets through while provenance is on a list, empty when the answer asked for none.

function setUp() {
  const lines: Record<string, unknown>[] = [];
  const logger = pino(
    { level: 'info' },
    new Writable({
      write(chunk: Buffer, _enc, done) {
        for (const line of chunk.toString().split('\n')) if (line) lines.push(JSON.parse(line) as Record<string, unknown>);
        done();
      },
    }),
  );
  const written: Span[] = [];
  const gate = new SpanGate({ record: (span) => written.push(span) });
  return { gate, meter: new CallMeter(gate, logger), written, lines };
}

const tracker = () =>
  new ConnectionTracker({
    aheadMs: 0,
    describe: (e) => ({ attribution: 'tetragon', pid: e.pid, executablePath: e.binary, commandArgs: null, parentExecutables: e.parents, containerName: e.containerName }),
  });
const prices = new PriceTable([], { ...DEFAULT_CACHE_SETTINGS });
const call = { route: 'beta', provider: 'openai', model: 'gpt-4o-mini', operation: 'chat', userId: null, projectId: null, requestId: 'r1' } as const;
const PROBE = { id: 'call_1', name: 'probe', argumentsSha256: 'ecf9e98ec0641e23113ff3ce8bdc78d0ddd249886517fd4a7f68cc83d4e65667' };

describe('tool calls through the span gate', () => {
  it('with provenance off: answers are not read, and a span carries no tool calls', () => {
    const { gate, meter, written } = setUp();
    const metered = meter.start({ ...call, trace: startSpanContext(undefined, undefined) });
    expect(metered.recordsToolCalls).toBe(false);
    // A call read while provenance was on, finished after it was turned off.
    metered.finish({ prices, usage: null, status: 'ok', statusCode: 200, toolCalls: { calls: [PROBE], dropped: 0 } });
    expect(gate.recordsToolCalls).toBe(false);
    expect(written[0]!.toolCalls).toBeUndefined();
    expect(written[0]!.process).toBeUndefined();
  });

  it('with provenance on: the calls read, [] for a call without, and the calls past the bound counted in the llm call line', () => {
    const { gate, meter, written, lines } = setUp();
    gate.follow(tracker(), 0);
    const withCalls = meter.start({ ...call, trace: startSpanContext(undefined, undefined) });
    expect(withCalls.recordsToolCalls).toBe(true);
    withCalls.finish({ prices, usage: null, status: 'ok', statusCode: 200, toolCalls: { calls: [PROBE], dropped: 3 } });
    meter.start({ ...call, requestId: 'r2', trace: startSpanContext(undefined, undefined) }).finish({ prices, usage: null, status: 'rejected', statusCode: null });
    expect(written.map((s) => s.toolCalls)).toEqual([[PROBE], []]);
    expect(lines.filter((l) => l.msg === 'llm call').map((l) => l.tool_calls_dropped)).toEqual([3, undefined]);
  });
});
