// Gathers the tool calls of one model answer, whole or in stream pieces, into what a span records: id, name and
// the SHA-256 of the arguments as canonical JSON (ADR 1603). The answer comes from a provider the proxy does not
// control, so everything kept is bounded: a hostile stream of a million calls or of gigabytes of arguments costs
// a fixed amount of memory.

import { createHash, type Hash } from 'node:crypto';
import type { SpanToolCall } from '../spans/span.ts';

/** Most tool calls one answer records; more are counted (`dropped`), not recorded. */
export const MAX_TOOL_CALLS = 128;
/** A longer name is cut to this many characters. */
export const MAX_TOOL_NAME_CHARS = 256;
/**
 * A longer id is cut to this many characters: providers' ids are tens of characters, and an id goes whole into
 * every span store and the export, so one answer's 128 ids of megabytes each must not.
 */
const MAX_TOOL_ID_CHARS = 256;
/** Argument text kept per call to canonicalize at the end; past it, the call's raw text is hashed as it comes. */
export const MAX_KEPT_ARGUMENT_BYTES = 1024 * 1024;
/** Argument text kept over all the calls of one answer, under the same rule. */
export const MAX_KEPT_ANSWER_BYTES = 4 * 1024 * 1024;

/** What an answer asked for: the calls recorded, and how many were left out past MAX_TOOL_CALLS. */
export interface AnswerToolCalls {
  calls: SpanToolCall[];
  dropped: number;
}

interface PendingCall {
  id: string | null;
  name: string;
  /** Streamed argument text while it is within the bounds; null once hashed incrementally. */
  pieces: string[] | null;
  keptBytes: number;
  hash: Hash | null;
  /** The arguments as a value (an object from Anthropic, Gemini, Converse), hashed as canonical JSON. */
  value: unknown;
  /** What the arguments are when no piece came (Anthropic's `input: {}` of a call without arguments). */
  empty: unknown;
}

const NO_VALUE = Symbol('no value');

export class ToolCallCollector {
  readonly #calls: PendingCall[] = [];
  readonly #byKey = new Map<string, PendingCall>();
  #dropped = 0;
  #keptBytes = 0;

  /** A whole call: `args` is the arguments' JSON text (OpenAI) or their value (an object). */
  whole(id: string | null, name: string, args: unknown): void {
    const call = this.#open(id, name, typeof args === 'string' ? NO_VALUE : (args ?? {}));
    if (call !== null && typeof args === 'string') this.#append(call, args);
  }

  /**
   * A streamed call begins (or a later fragment names it again): `key` ties its pieces together within the
   * answer. `empty` stands for the arguments when no piece comes.
   */
  start(key: string, id: string | null, name: string, empty?: unknown): void {
    const known = this.#byKey.get(key);
    if (known !== undefined) {
      known.id ??= cutId(id);
      if (known.name === '' && name !== '') known.name = cutName(name);
      return;
    }
    const call = this.#open(id, name, NO_VALUE);
    if (call === null) return;
    if (empty !== undefined) call.empty = empty;
    this.#byKey.set(key, call);
  }

  /** A piece of a streamed call's argument text; pieces of a call not recorded are ignored. */
  piece(key: string, text: string): void {
    const call = this.#byKey.get(key);
    if (call !== undefined && text.length > 0) this.#append(call, text);
  }

  /** The streamed call is complete and its whole arguments are known (OpenAI Responses' output_item.done). */
  complete(key: string, id: string | null, name: string, args: unknown): void {
    const call = this.#byKey.get(key);
    if (call === undefined) {
      if (this.#calls.length < MAX_TOOL_CALLS) this.whole(id, name, args);
      return;
    }
    this.#byKey.delete(key);
    call.id = cutId(id) ?? call.id;
    if (name !== '') call.name = cutName(name);
    this.#release(call);
    call.pieces = [];
    call.hash = null;
    if (typeof args === 'string') this.#append(call, args);
    else call.value = args ?? {};
  }

  result(): AnswerToolCalls {
    return { calls: this.#calls.map(finish), dropped: this.#dropped };
  }

  #open(id: string | null, name: string, value: unknown): PendingCall | null {
    if (this.#calls.length >= MAX_TOOL_CALLS) {
      this.#dropped++;
      return null;
    }
    const call: PendingCall = { id: cutId(id), name: cutName(name), pieces: [], keptBytes: 0, hash: null, value, empty: NO_VALUE };
    this.#calls.push(call);
    return call;
  }

  #append(call: PendingCall, text: string): void {
    if (call.hash !== null) {
      call.hash.update(text);
      return;
    }
    const bytes = Buffer.byteLength(text);
    if (call.keptBytes + bytes <= MAX_KEPT_ARGUMENT_BYTES && this.#keptBytes + bytes <= MAX_KEPT_ANSWER_BYTES) {
      call.pieces!.push(text);
      call.keptBytes += bytes;
      this.#keptBytes += bytes;
      return;
    }
    // Too long to keep: the raw text is hashed from here on, piece by piece, and never canonicalized.
    const hash = createHash('sha256');
    for (const kept of call.pieces!) hash.update(kept);
    hash.update(text);
    this.#release(call);
    call.pieces = null;
    call.hash = hash;
  }

  #release(call: PendingCall): void {
    this.#keptBytes -= call.keptBytes;
    call.keptBytes = 0;
  }
}

function cutName(name: string): string {
  return name.length > MAX_TOOL_NAME_CHARS ? name.slice(0, MAX_TOOL_NAME_CHARS) : name;
}

function cutId(id: string | null): string | null {
  return id !== null && id.length > MAX_TOOL_ID_CHARS ? id.slice(0, MAX_TOOL_ID_CHARS) : id;
}

function finish(call: PendingCall): SpanToolCall {
  return { id: call.id, name: call.name, argumentsSha256: argumentsDigest(call) };
}

function argumentsDigest(call: PendingCall): string {
  if (call.hash !== null) return call.hash.digest('hex');
  if (call.value !== NO_VALUE) return sha256(canonicalOrNull(call.value) ?? '');
  const text = call.pieces!.join('');
  if (text === '' && call.empty !== NO_VALUE) return sha256(canonicalOrNull(call.empty) ?? '');
  return sha256(canonicalText(text));
}

function sha256(text: string): string {
  return createHash('sha256').update(text).digest('hex');
}

/** The canonical JSON of argument text that parses, else the text as it came (a cut stream, bad JSON). */
export function canonicalText(text: string): string {
  let parsed: unknown;
  try {
    parsed = JSON.parse(text);
  } catch {
    return text;
  }
  return canonicalOrNull(parsed) ?? text;
}

/** Null when the value cannot be serialized (nesting deeper than the stack). */
function canonicalOrNull(value: unknown): string | null {
  try {
    return canonicalJson(value);
  } catch {
    return null;
  }
}

/** JSON with every object's keys sorted (by UTF-16 code units) and no whitespace. */
function canonicalJson(value: unknown): string {
  if (Array.isArray(value)) return `[${value.map((item) => (item === undefined ? 'null' : canonicalJson(item))).join(',')}]`;
  if (value !== null && typeof value === 'object') {
    const record = value as Record<string, unknown>;
    const parts: string[] = [];
    for (const key of Object.keys(record).sort()) {
      if (record[key] === undefined) continue;
      parts.push(`${JSON.stringify(key)}:${canonicalJson(record[key])}`);
    }
    return `{${parts.join(',')}}`;
  }
  return JSON.stringify(value) ?? 'null';
}
