// What a fake replies with, independent of the wire format: the text pieces a stream is cut into, the
// usage to report, and realistic-looking ids. Pure apart from the random ids.

import { randomBytes } from 'node:crypto';
import type { TokenUsage } from '../../sidecar/src/usage/usage.ts';
import type { FakeBehaviour, FakeUsage } from './llm-upstream.ts';

export const defaultUsage: FakeUsage = { input: 21, output: 9 };

export interface ReplyContent {
  /** Number of content pieces a stream carries. */
  count: number;
  /** The pieces, generated lazily (a big body is never held whole). */
  pieces(): Iterable<string>;
  /** Whole text, or null for a big body (write it with the pieces instead). */
  text: string | null;
  toolCall?: { name: string; arguments: Record<string, unknown> } | undefined;
}

const bigPieceChars = 16 * 1024;
const filler = 'The quick brown fox jumps over the lazy dog. ';

export function replyContent(b: FakeBehaviour, defaultText: string): ReplyContent {
  const toolCall = b.toolCall;
  if (b.bigBodyBytes !== undefined) {
    const total = b.bigBodyBytes;
    const count = Math.max(1, Math.ceil(total / bigPieceChars));
    const piece = filler.repeat(Math.ceil(bigPieceChars / filler.length)).slice(0, bigPieceChars);
    return {
      count,
      text: null,
      toolCall,
      *pieces() {
        for (let i = 0; i < count; i++) yield i < count - 1 ? piece : piece.slice(0, total - i * bigPieceChars);
      },
    };
  }
  const text = b.text ?? defaultText;
  const pieces = splitText(text, b.chunkCount ?? 4);
  return { count: pieces.length, text, toolCall, pieces: () => pieces };
}

/** Cuts text into n pieces of near-equal length (fewer when the text is shorter than n). */
export function splitText(text: string, n: number): string[] {
  const count = Math.max(1, Math.min(n, text.length));
  const out: string[] = [];
  for (let i = 0; i < count; i++) {
    out.push(text.slice(Math.floor((i * text.length) / count), Math.floor(((i + 1) * text.length) / count)));
  }
  return out;
}

export function usageOf(b: FakeBehaviour): Required<FakeUsage> {
  const u = b.usage ?? defaultUsage;
  return {
    input: u.input,
    output: u.output,
    cacheRead: u.cacheRead ?? 0,
    cacheWrite: u.cacheWrite ?? 0,
    cacheWrite1h: u.cacheWrite1h ?? 0,
    reasoning: u.reasoning ?? 0,
  };
}

/**
 * The normalised usage a correct extractor derives from what the fake reports in `format`.
 * OpenAI and Gemini formats have no cache writes, so cacheWrite/cacheWrite1h are not reported there.
 */
export function expectedTokenUsage(usage: FakeUsage, format: 'anthropic' | 'openai' | 'gemini'): TokenUsage {
  const u = usageOf({ usage });
  const writes = format === 'anthropic' ? u.cacheWrite + u.cacheWrite1h : 0;
  const inputTokens = u.input + u.cacheRead + writes;
  const outputTokens = u.output + u.reasoning;
  return {
    inputTokens,
    outputTokens,
    cacheReadTokens: u.cacheRead,
    cacheWriteTokens: writes,
    cacheWrite1hTokens: format === 'anthropic' ? u.cacheWrite1h : 0,
    reasoningTokens: u.reasoning,
    totalTokens: inputTokens + outputTokens,
  };
}

const base62 = 'ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789';

/** A random id in the providers' style: prefix + base62 characters. */
export function randomId(prefix: string, length: number): string {
  const bytes = randomBytes(length);
  let out = prefix;
  for (const byte of bytes) out += base62[byte % base62.length];
  return out;
}

export function* mapLazy<T, U>(items: Iterable<T>, f: (item: T) => U): Iterable<U> {
  for (const item of items) yield f(item);
}
