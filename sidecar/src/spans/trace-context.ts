// W3C Trace Context (https://www.w3.org/TR/trace-context/): parse the caller's `traceparent`, decide whether
// the proxy joins that trace or starts a new one, and format the header sent upstream.

import { randomFillSync } from 'node:crypto';

export interface TraceContext {
  traceId: string;
  /** The proxy's own span id: the parent-id of the upstream call. */
  spanId: string;
  /** The caller's span (its traceparent parent-id); null when the proxy started the trace. */
  parentSpanId: string | null;
  /** Two lowercase hex chars; only the sampled bit (0x01) is kept. */
  flags: string;
  /** Forwarded unchanged when the caller's trace is joined; null otherwise. */
  tracestate: string | null;
}

export interface Traceparent {
  version: string;
  traceId: string;
  parentId: string;
  flags: string;
}

const TRACEPARENT_LENGTH = 55;

/** Parses a traceparent header; null when it is invalid (the caller then starts a new trace). */
export function parseTraceparent(header: string | undefined): Traceparent | null {
  if (typeof header !== 'string' || header.length < TRACEPARENT_LENGTH) return null;
  if (!isLowerHex(header, 0, 2, false)) return null;
  const version = header.slice(0, 2);
  if (version === 'ff') return null;
  // Version 00 is exactly 55 chars; a later version may append fields, but only after a '-'.
  if (version === '00' ? header.length !== TRACEPARENT_LENGTH : header.length > TRACEPARENT_LENGTH && header[55] !== '-') {
    return null;
  }
  if (header[2] !== '-' || header[35] !== '-' || header[52] !== '-') return null;
  if (!isLowerHex(header, 3, 35, true) || !isLowerHex(header, 36, 52, true) || !isLowerHex(header, 53, 55, false)) {
    return null;
  }
  return {
    version,
    traceId: header.slice(3, 35),
    parentId: header.slice(36, 52),
    flags: header.slice(53, 55),
  };
}

/**
 * The context of the proxy's span for one call: joins a valid caller trace (tracestate kept), else starts
 * a new sampled trace (tracestate dropped, as the spec requires when traceparent is unusable).
 */
export function startSpanContext(traceparent: string | undefined, tracestate: string | undefined): TraceContext {
  const parent = parseTraceparent(traceparent);
  if (parent === null) {
    return { traceId: newTraceId(), spanId: newSpanId(), parentSpanId: null, flags: '01', tracestate: null };
  }
  return {
    traceId: parent.traceId,
    spanId: newSpanId(),
    parentSpanId: parent.parentId,
    // We send version 00, where every flag but `sampled` is reserved and must be zero.
    flags: (hexValue(parent.flags.charCodeAt(1)) & 1) === 1 ? '01' : '00',
    tracestate: tracestate === undefined || tracestate.trim() === '' ? null : tracestate,
  };
}

/** `00-{traceId}-{spanId}-{flags}`: the header for the upstream call, with the proxy's span as parent. */
export function formatTraceparent(ctx: TraceContext): string {
  return `00-${ctx.traceId}-${ctx.spanId}-${ctx.flags}`;
}

export function newTraceId(): string {
  return randomHex(16);
}

export function newSpanId(): string {
  return randomHex(8);
}

// One crypto call per 256 ids instead of one per id: ids are minted on every request.
const POOL_BYTES = 4096;
const pool = Buffer.allocUnsafe(POOL_BYTES);
let poolOffset = POOL_BYTES;

function randomHex(bytes: number): string {
  for (;;) {
    if (poolOffset + bytes > POOL_BYTES) {
      randomFillSync(pool);
      poolOffset = 0;
    }
    const start = poolOffset;
    poolOffset += bytes;
    // An all-zero id is invalid; retry on that (2^-64 at worst) outcome.
    for (let i = start; i < poolOffset; i++) {
      if (pool[i] !== 0) return pool.toString('hex', start, poolOffset);
    }
  }
}

/** True when s[from, to) is lowercase hex; with `nonZero`, at least one digit must be non-zero. */
function isLowerHex(s: string, from: number, to: number, nonZero: boolean): boolean {
  let seenNonZero = !nonZero;
  for (let i = from; i < to; i++) {
    const c = s.charCodeAt(i);
    const v = hexValue(c);
    if (v < 0) return false;
    if (v !== 0) seenNonZero = true;
  }
  return seenNonZero;
}

function hexValue(c: number): number {
  if (c >= 48 && c <= 57) return c - 48; // 0-9
  if (c >= 97 && c <= 102) return c - 87; // a-f
  return -1;
}
