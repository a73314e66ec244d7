import { describe, expect, it } from 'vitest';
import { estimateInputTokens, estimateUsage } from './usage-estimate.ts';

describe('the estimate charged for a stream cut before its usage', () => {
  it('counts a request at four bytes a token, and an inline base64 blob as 1,000 tokens whatever its size', () => {
    const text = JSON.stringify({ messages: [{ role: 'user', content: 'x'.repeat(400) }] });
    expect(estimateInputTokens(text, text.length)).toBe(Math.ceil(text.length / 4));
    const blob = 'A'.repeat(200_000);
    const withImage = JSON.stringify({ messages: [{ role: 'user', content: [{ type: 'image_url', image_url: { url: `data:image/png;base64,${blob}` } }] }] });
    const blobJson = `"data:image/png;base64,${blob}"`.length;
    expect(estimateInputTokens(Buffer.from(withImage), withImage.length)).toBe(Math.ceil((withImage.length - blobJson) / 4) + 1000);
    expect(estimateInputTokens(null, 4001)).toBe(1001);
  });

  it('keeps what the stream reported and fills in the rest', () => {
    const partial = { inputTokens: 700, outputTokens: 1, cacheReadTokens: 100, cacheWriteTokens: 0, cacheWrite1hTokens: 0, reasoningTokens: 0, totalTokens: 701 };
    expect(estimateUsage(partial, () => 5, 12)).toEqual({ ...partial, outputTokens: 12, totalTokens: 712 });
    expect(estimateUsage(null, () => 40, 3)).toMatchObject({ inputTokens: 40, outputTokens: 3, totalTokens: 43, cacheReadTokens: 0 });
  });
});
