import { describe, expect, it } from 'vitest';
import { formatTraceparent, newSpanId, newTraceId, parseTraceparent, startSpanContext } from './trace-context.ts';

// Example ids from the W3C Trace Context recommendation.
const TRACE = '0af7651916cd43dd8448eb211c80319c';
const PARENT = 'b7ad6b7169203331';
const VALID = `00-${TRACE}-${PARENT}-01`;

describe('parseTraceparent', () => {
  it('accepts a valid version 00 header', () => {
    expect(parseTraceparent(VALID)).toEqual({ version: '00', traceId: TRACE, parentId: PARENT, flags: '01' });
    expect(parseTraceparent(`00-${TRACE}-${PARENT}-00`)?.flags).toBe('00');
  });

  it.each([
    ['uppercase trace id', `00-${TRACE.toUpperCase()}-${PARENT}-01`],
    ['uppercase parent id', `00-${TRACE}-${PARENT.toUpperCase()}-01`],
    ['uppercase flags', `00-${TRACE}-${PARENT}-0A`],
    ['uppercase version', `0A-${TRACE}-${PARENT}-01`],
    ['all-zero trace id', `00-${'0'.repeat(32)}-${PARENT}-01`],
    ['all-zero parent id', `00-${TRACE}-${'0'.repeat(16)}-01`],
    ['version ff', `ff-${TRACE}-${PARENT}-01`],
    ['version 00 with extra fields', `00-${TRACE}-${PARENT}-01-extra`],
    ['version 00 with a trailing char', `${VALID}x`],
    ['one char short', VALID.slice(0, 54)],
    ['empty', ''],
    ['non-hex trace id', `00-${TRACE.slice(0, 31)}g-${PARENT}-01`],
    ['wrong separator', `00_${TRACE}-${PARENT}-01`],
    ['trace id one char short, parent one char long', `00-${TRACE.slice(0, 31)}-${PARENT}0-01`],
    ['future version followed by a non-dash', `01-${TRACE}-${PARENT}-01x`],
    ['two headers joined by the HTTP layer', `${VALID}, ${VALID}`],
  ])('rejects %s', (_case, header) => {
    expect(parseTraceparent(header)).toBeNull();
  });

  it('rejects a missing header', () => {
    expect(parseTraceparent(undefined)).toBeNull();
  });

  it('parses the first four fields of a future version', () => {
    expect(parseTraceparent(`01-${TRACE}-${PARENT}-01-what-the-future-holds`)).toEqual({
      version: '01',
      traceId: TRACE,
      parentId: PARENT,
      flags: '01',
    });
    // Exactly 55 chars is fine for a future version too.
    expect(parseTraceparent(`cc-${TRACE}-${PARENT}-01`)?.traceId).toBe(TRACE);
  });
});

describe('startSpanContext', () => {
  it('joins a valid caller trace: same trace id, caller span as parent, new span id, tracestate kept', () => {
    const ctx = startSpanContext(VALID, 'congo=t61rcWkgMzE,rojo=00f067aa0ba902b7');
    expect(ctx.traceId).toBe(TRACE);
    expect(ctx.parentSpanId).toBe(PARENT);
    expect(ctx.spanId).toMatch(/^[0-9a-f]{16}$/);
    expect(ctx.spanId).not.toBe(PARENT);
    expect(ctx.flags).toBe('01');
    expect(ctx.tracestate).toBe('congo=t61rcWkgMzE,rojo=00f067aa0ba902b7');
  });

  it('starts a new trace and drops tracestate when traceparent is invalid', () => {
    const ctx = startSpanContext(`00-${TRACE.toUpperCase()}-${PARENT}-01`, 'rojo=00f067aa0ba902b7');
    expect(ctx.traceId).toMatch(/^[0-9a-f]{32}$/);
    expect(ctx.traceId).not.toBe(TRACE.toUpperCase().toLowerCase());
    expect(ctx.parentSpanId).toBeNull();
    expect(ctx.tracestate).toBeNull();
    expect(ctx.flags).toBe('01');
  });

  it('starts a new trace when there is no traceparent, ignoring a lone tracestate', () => {
    const ctx = startSpanContext(undefined, 'rojo=00f067aa0ba902b7');
    expect(ctx.parentSpanId).toBeNull();
    expect(ctx.tracestate).toBeNull();
  });

  it('keeps the sampled flag as the caller set it and clears flags version 00 does not define', () => {
    expect(startSpanContext(`00-${TRACE}-${PARENT}-00`, undefined).flags).toBe('00');
    expect(startSpanContext(`00-${TRACE}-${PARENT}-ff`, undefined).flags).toBe('01');
    expect(startSpanContext(`00-${TRACE}-${PARENT}-fe`, undefined).flags).toBe('00');
  });

  it('treats an empty tracestate as absent', () => {
    expect(startSpanContext(VALID, '').tracestate).toBeNull();
    expect(startSpanContext(VALID, undefined).tracestate).toBeNull();
  });

  it('joins a future-version trace and sends it on as version 00', () => {
    const ctx = startSpanContext(`01-${TRACE}-${PARENT}-01-extra`, 'a=b');
    expect(ctx.traceId).toBe(TRACE);
    expect(formatTraceparent(ctx)).toBe(`00-${TRACE}-${ctx.spanId}-01`);
  });
});

describe('formatTraceparent', () => {
  it('puts the proxy span in the parent-id field, and the result parses back', () => {
    const ctx = startSpanContext(VALID, undefined);
    const header = formatTraceparent(ctx);
    expect(header).toBe(`00-${TRACE}-${ctx.spanId}-01`);
    expect(parseTraceparent(header)).toEqual({ version: '00', traceId: TRACE, parentId: ctx.spanId, flags: '01' });
  });
});

describe('new ids', () => {
  it('are lowercase hex of the right length, non-zero, and do not repeat across pool refills', () => {
    const seen = new Set<string>();
    // 2,000 span ids cross several refills of the random pool.
    for (let i = 0; i < 2000; i++) {
      const id = newSpanId();
      expect(id).toMatch(/^[0-9a-f]{16}$/);
      expect(id).not.toBe('0'.repeat(16));
      seen.add(id);
    }
    expect(seen.size).toBe(2000);
    expect(newTraceId()).toMatch(/^[0-9a-f]{32}$/);
  });
});
