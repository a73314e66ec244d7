import { describe, expect, it } from 'vitest';
import type { PriceEntry } from '../../../contracts/price-entry.ts';
import type { BilledUnits, TokenUsage } from '../usage/usage.ts';
import { DEFAULT_CACHE_SETTINGS } from './default-cache.ts';
import { DEFAULT_PRICES } from './default-prices.ts';
import { PriceTable } from './price-table.ts';

const table = new PriceTable([...DEFAULT_PRICES], { ...DEFAULT_CACHE_SETTINGS });

function usage(units: BilledUnits, tokens: Partial<TokenUsage> = {}): TokenUsage {
  const u = { inputTokens: 0, outputTokens: 0, cacheReadTokens: 0, cacheWriteTokens: 0, cacheWrite1hTokens: 0, reasoningTokens: 0, totalTokens: 0, ...tokens, units };
  u.totalTokens = u.inputTokens + u.outputTokens;
  return u;
}

function house(fields: Partial<PriceEntry>): PriceTable {
  return new PriceTable([{ provider: 'openai', model: 'house-model', input_per_million: 0, output_per_million: 0, ...fields }], { ...DEFAULT_CACHE_SETTINGS });
}

// Expected values are worked by hand from OpenAI's list prices (ADR 0910).
describe('billed units other than tokens', () => {
  it('prices images by size and quality: 2 HD 1024x1792 dall-e-3 images at 0.12 cost 0.24 USD', () => {
    expect(table.cost('openai', 'dall-e-3', usage({ images: 2, imageSize: '1024x1792', imageQuality: 'hd' }))).toEqual({ costUsd: 0.24, priced: true, model: 'dall-e-3' });
    // 1 standard 1024x1024: 0.04; 3 standard 1792x1024: 3 × 0.08 = 0.24
    expect(table.cost('openai', 'dall-e-3', usage({ images: 1, imageSize: '1024x1024', imageQuality: 'standard' })).costUsd).toBe(0.04);
    expect(table.cost('openai', 'dall-e-3', usage({ images: 3, imageSize: '1792x1024', imageQuality: 'standard' })).costUsd).toBe(0.24);
  });

  it('a size-only price matches any quality; an exact (size, quality) price wins over it', () => {
    // dall-e-2 has size-only prices: 3 × 0.018 = 0.054, whatever the quality
    expect(table.cost('openai', 'dall-e-2', usage({ images: 3, imageSize: '512x512', imageQuality: 'standard' })).costUsd).toBe(0.054);
    expect(table.cost('openai', 'dall-e-2', usage({ images: 1, imageSize: '256x256' })).costUsd).toBe(0.016);
    const prices = house({
      image_prices: [
        { size: '1024x1024', usd: 0.05 },
        { size: '1024x1024', quality: 'hd', usd: 0.09 },
      ],
    });
    expect(prices.cost('openai', 'house-model', usage({ images: 1, imageSize: '1024x1024', imageQuality: 'hd' })).costUsd).toBe(0.09);
    expect(prices.cost('openai', 'house-model', usage({ images: 1, imageSize: '1024x1024', imageQuality: 'low' })).costUsd).toBe(0.05);
  });

  it('an image whose size and quality have no price leaves the call unpriced with a problem naming them, not free', () => {
    const cost = table.cost('openai', 'dall-e-3', usage({ images: 1, imageSize: '512x512', imageQuality: 'standard' }));
    expect(cost).toEqual({ costUsd: 0, priced: false, model: 'dall-e-3', problem: 'dall-e-3 has no price for images of size 512x512 and quality standard' });
  });

  it('prices audio per second: 61 s of whisper at 0.006 per minute cost 0.0061 USD', () => {
    const whisper = house({ audio_per_minute: 0.006 });
    expect(whisper.cost('openai', 'house-model', usage({ audioSeconds: 61 })).costUsd).toBe(0.0061);
    // half a second: 0.006 / 60 / 2 = 0.00005
    expect(whisper.cost('openai', 'house-model', usage({ audioSeconds: 0.5 })).costUsd).toBe(0.00005);
  });

  it('prices characters per million: 1,234 characters at 15 USD per million cost 0.01851 USD', () => {
    expect(house({ characters_per_million: 15 }).cost('openai', 'house-model', usage({ characters: 1234 })).costUsd).toBe(0.01851);
  });

  it('adds units to the token cost', () => {
    // 1000 tokens × 2 µ$ + 1234 characters × 15 µ$ = 2000 + 18510 = 20510 µ$
    const prices = house({ input_per_million: 2, characters_per_million: 15 });
    expect(prices.cost('openai', 'house-model', usage({ characters: 1234 }, { inputTokens: 1000 })).costUsd).toBe(0.02051);
  });

  it('gpt-image-1 bills text input, image input and output tokens at their own prices, not per image', () => {
    // 50 text × 5 + 200 image × 10 + 4160 output × 40 = 250 + 2000 + 166400 = 168650 µ$
    const u = usage({ images: 1, imageSize: '1024x1024', imageQuality: 'high', imageInputTokens: 200 }, { inputTokens: 250, outputTokens: 4160 });
    expect(table.cost('openai', 'gpt-image-1', u)).toEqual({ costUsd: 0.16865, priced: true, model: 'gpt-image-1' });
    // mini: 50 × 2 + 200 × 2.5 + 4160 × 8 = 100 + 500 + 33280 = 33880 µ$
    expect(table.cost('openai', 'gpt-image-1-mini', u).costUsd).toBe(0.03388);
  });

  it('a unit the entry has no price for, on a call without tokens, is unpriced rather than free', () => {
    const tokensOnly = house({ input_per_million: 2 });
    expect(tokensOnly.cost('openai', 'house-model', usage({ audioSeconds: 30 }))).toMatchObject({ costUsd: 0, priced: false });
    expect(tokensOnly.cost('openai', 'house-model', usage({ characters: 100 }))).toMatchObject({ costUsd: 0, priced: false });
    expect(tokensOnly.cost('openai', 'house-model', usage({ images: 1, imageSize: '1024x1024' }))).toMatchObject({ costUsd: 0, priced: false });
  });
});
