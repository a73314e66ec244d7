// What a call is charged when its caller left a stream and the provider's usage did not arrive within the
// bounds the relay keeps reading for (ADR 1305). The provider bills the call all the same, so charging 0 would
// let a caller who hangs up before the last event spend for free. The estimate is deliberately simple and
// marked as such on the span (usage_estimated):
//   - input: what the stream already reported (Anthropic's message_start, Gemini's running usageMetadata),
//     else the request's bytes at four per token, with each inline base64 blob (an image, a PDF) counted as
//     a flat INLINE_DATA_TOKENS rather than by its size, which would overcharge a hundredfold;
//   - output: what the stream already reported, or one token per stream event it carried, whichever is more
//     (OpenAI and Bedrock send about one token an event; Anthropic and Gemini more, so this errs low there).

import type { TokenUsage } from './usage.ts';

const BYTES_PER_TOKEN = 4;
/** A JSON string this long made only of base64 characters is a binary blob, not text. */
const INLINE_DATA = /"(?:data:[^";,]{1,100};base64,)?[A-Za-z0-9+/=_-]{1024,}"/g;
const INLINE_DATA_TOKENS = 1_000;

/** Input tokens a request body stands for, by the rule above; `body` null: only its size is known (a streamed body). */
export function estimateInputTokens(body: Buffer | string | null, bytes: number): number {
  if (body === null) return Math.ceil(bytes / BYTES_PER_TOKEN);
  const text = typeof body === 'string' ? body : body.toString('latin1');
  let textBytes = text.length;
  let blobs = 0;
  for (const match of text.matchAll(INLINE_DATA)) {
    textBytes -= match[0].length;
    blobs++;
  }
  return Math.ceil(textBytes / BYTES_PER_TOKEN) + blobs * INLINE_DATA_TOKENS;
}

/** The usage charged for a cut stream: what it reported, filled in where it reported nothing. */
export function estimateUsage(partial: TokenUsage | null, inputTokens: () => number, streamEvents: number): TokenUsage {
  const input = partial !== null && partial.inputTokens > 0 ? partial.inputTokens : inputTokens();
  const output = Math.max(partial?.outputTokens ?? 0, streamEvents);
  return {
    inputTokens: input,
    outputTokens: output,
    cacheReadTokens: partial !== null ? Math.min(partial.cacheReadTokens, input) : 0,
    cacheWriteTokens: partial !== null ? Math.min(partial.cacheWriteTokens, input) : 0,
    cacheWrite1hTokens: partial !== null ? Math.min(partial.cacheWrite1hTokens, input) : 0,
    reasoningTokens: partial !== null ? Math.min(partial.reasoningTokens, output) : 0,
    totalTokens: input + output,
  };
}
