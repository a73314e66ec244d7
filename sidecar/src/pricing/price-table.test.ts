import { describe, expect, it } from 'vitest';
import type { TokenUsage } from '../usage/usage.ts';
import { DEFAULT_CACHE_SETTINGS } from './default-cache.ts';
import { DEFAULT_PRICES } from './default-prices.ts';
import { normaliseModelId } from './model-id.ts';
import type { PriceEntry } from '../../../contracts/price-entry.ts';
import { mergePriceEntries, parsePriceEntry, PriceEntryError, PriceTable } from './price-table.ts';

const defaults = () => new PriceTable(mergePriceEntries(DEFAULT_PRICES, []), { ...DEFAULT_CACHE_SETTINGS });
const oneMillionIn: TokenUsage = {
  inputTokens: 1_000_000,
  outputTokens: 0,
  cacheReadTokens: 0,
  cacheWriteTokens: 0,
  cacheWrite1hTokens: 0,
  reasoningTokens: 0,
  totalTokens: 1_000_000,
};

describe('model id resolution', () => {
  it('resolves every id a model has on the different routes to one entry', () => {
    const table = defaults();
    const cases: [PriceEntry['provider'], string, string][] = [
      ['anthropic', 'claude-sonnet-4-20250514', 'claude-sonnet-4'], // gamma-direct
      ['anthropic', 'claude-sonnet-4@20250514', 'claude-sonnet-4'], // gamma / gamma-cloud (Vertex)
      ['anthropic', 'anthropic.claude-sonnet-4-20250514-v1:0', 'claude-sonnet-4'], // gamma-cloudb (Bedrock)
      ['anthropic', 'us.anthropic.claude-sonnet-4-20250514-v1:0', 'claude-sonnet-4'], // Bedrock inference profile
      ['anthropic', 'eu.anthropic.claude-sonnet-4-5-20250929-v1:0', 'claude-sonnet-4-5'],
      ['anthropic', 'anthropic.claude-sonnet-4-20250514-v1%3A0', 'claude-sonnet-4'], // as it appears in the path
      ['anthropic', 'arn:aws:bedrock:us-east-1:123456789012:inference-profile/us.anthropic.claude-opus-4-1-20250805-v1:0', 'claude-opus-4-1'],
      ['anthropic', 'claude-sonnet-4-5', 'claude-sonnet-4-5'],
      ['anthropic', 'claude-sonnet-4.5', 'claude-sonnet-4-5'],
      ['anthropic', 'claude-opus-4-0', 'claude-opus-4'],
      ['anthropic', 'claude-3-5-haiku-latest', 'claude-3-5-haiku'],
      ['anthropic', 'Claude-Haiku-4-5@20251001', 'claude-haiku-4-5'],
      ['google', 'gemini-2.5-flash', 'gemini-2.5-flash'],
      ['google', 'google/gemini-2.5-flash', 'gemini-2.5-flash'], // alpha-compat
      ['google', 'gemini-2.5-flash-001', 'gemini-2.5-flash'],
      ['google', 'gemini-2.5-flash-preview-05-20', 'gemini-2.5-flash'],
      ['google', 'gemini-2.5-flash-lite-preview-06-17', 'gemini-2.5-flash-lite'],
      ['google', 'publishers/google/models/gemini-2.5-pro', 'gemini-2.5-pro'],
      ['openai', 'gpt-4o-2024-08-06', 'gpt-4o'],
      ['openai', 'gpt-4o-mini-2024-07-18', 'gpt-4o-mini'],
      ['openai', 'o4-mini-2025-04-16', 'o4-mini'],
      // models without dated snapshots: one id on the Anthropic API and Vertex AI, -v1 on Bedrock
      ['anthropic', 'claude-opus-4-6', 'claude-opus-4-6'],
      ['anthropic', 'anthropic.claude-opus-4-6-v1', 'claude-opus-4-6'],
      ['anthropic', 'global.anthropic.claude-sonnet-4-6-v1:0', 'claude-sonnet-4-6'],
      ['anthropic', 'us.anthropic.claude-opus-4-7-v1', 'claude-opus-4-7'],
      ['anthropic', 'claude-sonnet-5-5', 'claude-sonnet-5-5'],
      ['google', 'gemini-3-pro-preview', 'gemini-3-pro'],
      ['google', 'google/gemini-3-flash-preview', 'gemini-3-flash'],
      ['google', 'gemini-3.1-flash-lite-preview', 'gemini-3.1-flash-lite'],
      ['openai', 'gpt-5-2025-08-07', 'gpt-5'],
      ['openai', 'gpt-5.1-codex', 'gpt-5.1'],
      ['openai', 'gpt-5.6', 'gpt-5.6-sol'],
    ];
    for (const [provider, id, model] of cases) expect(table.resolve(provider, id)?.model, id).toBe(model);
  });

  it('does not confuse neighbouring models', () => {
    const table = defaults();
    expect(table.resolve('google', 'gemini-2.5-flash-lite')?.model).toBe('gemini-2.5-flash-lite');
    expect(table.resolve('openai', 'gpt-4o-mini')?.model).toBe('gpt-4o-mini');
    expect(table.resolve('openai', 'gpt-4.1-nano')?.model).toBe('gpt-4.1-nano');
    expect(table.resolve('anthropic', 'claude-opus-4-5-20251101')?.model).toBe('claude-opus-4-5');
    expect(table.resolve('anthropic', 'claude-opus-4-20250514')?.model).toBe('claude-opus-4');
    expect(table.resolve('anthropic', 'claude-opus-5')?.model).toBe('claude-opus-5');
    expect(table.resolve('anthropic', 'claude-opus-5-5')?.model).toBe('claude-opus-5-5');
    expect(table.resolve('anthropic', 'claude-mythos-5-1')?.model).toBe('claude-mythos-5-1');
    expect(table.resolve('anthropic', 'claude-sonnet-5-5')?.cached_input_per_million).toBe(0.1);
    expect(table.resolve('openai', 'gpt-5-mini')?.model).toBe('gpt-5-mini');
    expect(table.resolve('openai', 'gpt-5.1-codex-mini')?.model).toBe('gpt-5.1-codex-mini');
    expect(table.resolve('openai', 'gpt-6-sol')?.model).toBe('gpt-6-sol');
    expect(table.resolve('openai', 'gpt-6.1-sol')?.model).toBe('gpt-6.1-sol');
    expect(table.resolve('openai', 'gpt-6.2-sol')?.model).toBe('gpt-6.2-sol');
    expect(table.resolve('openai', 'gpt-6.2-astra')?.model).toBe('gpt-6.2-astra');
    expect(table.resolve('openai', 'gpt-6')).toBeUndefined();
    expect(table.resolve('google', 'gemini-3.1-pro-preview')?.model).toBe('gemini-3.1-pro');
    expect(table.resolve('google', 'gemini-3.5-flash-lite')?.model).toBe('gemini-3.5-flash-lite');
    expect(table.resolve('google', 'gemini-3.5-flash')?.model).toBe('gemini-3.5-flash');
    expect(table.resolve('anthropic', 'claude-sonnet-3-7')).toBeUndefined();
    expect(table.resolve('anthropic', '')).toBeUndefined();
  });

  it('gives every built-in entry its own ids: each alias resolves to its entry and no two entries collide', () => {
    const table = defaults();
    const seen = new Map<string, string>();
    for (const entry of DEFAULT_PRICES) {
      for (const id of [entry.model, ...(entry.aliases ?? [])]) {
        expect(table.resolve(entry.provider, id)?.model, id).toBe(entry.model);
        const key = `${entry.provider}/${normaliseModelId(id)}`;
        expect(seen.get(key) ?? entry.model, key).toBe(entry.model);
        seen.set(key, entry.model);
      }
    }
  });
});

describe('mergePriceEntries', () => {
  it('replaces a default by an override matched through any of its ids, keeping the canonical id and aliases', () => {
    const override = parsePriceEntry({ provider: 'anthropic', model: 'claude-sonnet-4@20250514', input_per_million: 4, output_per_million: 20 }, 'pricing.models[0]');
    const merged = mergePriceEntries(DEFAULT_PRICES, [override]);
    expect(merged).toHaveLength(DEFAULT_PRICES.length);
    const table = new PriceTable(merged, { ...DEFAULT_CACHE_SETTINGS });
    for (const id of ['claude-sonnet-4', 'anthropic.claude-sonnet-4-20250514-v1:0', 'claude-sonnet-4-20250514']) {
      const entry = table.resolve('anthropic', id);
      expect(entry?.model).toBe('claude-sonnet-4');
      expect(entry?.input_per_million).toBe(4);
      // Prices are replaced as a whole: the default cached price is not mixed into the override.
      expect(entry?.cached_input_per_million).toBeUndefined();
    }
    expect(table.cost('anthropic', 'us.anthropic.claude-sonnet-4-20250514-v1:0', oneMillionIn)).toEqual({ costUsd: 4, priced: true, model: 'claude-sonnet-4' });
    // The defaults are not modified.
    expect(DEFAULT_PRICES.find((e) => e.model === 'claude-sonnet-4')?.input_per_million).toBe(3);
  });

  it('adds models the defaults do not have, and lets the later of two overrides win', () => {
    const merged = mergePriceEntries(DEFAULT_PRICES, [
      { provider: 'openai', model: 'gpt-5', input_per_million: 1.25, output_per_million: 10 },
      { provider: 'openai', model: 'gpt-5-2025-08-07', input_per_million: 1.5, output_per_million: 10, aliases: ['gpt5'] },
    ]);
    const table = new PriceTable(merged, { ...DEFAULT_CACHE_SETTINGS });
    expect(table.resolve('openai', 'gpt-5')?.input_per_million).toBe(1.5);
    expect(table.resolve('openai', 'gpt5')?.model).toBe('gpt-5');
    expect(table.models().filter((m) => m.model === 'gpt-5')).toHaveLength(1);
  });

  it('hides a disabled model from pricing and from the model list', () => {
    const disabled = parsePriceEntry({ provider: 'google', model: 'gemini-2.5-pro', disabled: true }, 'pricing.models[0]');
    const table = new PriceTable(mergePriceEntries(DEFAULT_PRICES, [disabled]), { ...DEFAULT_CACHE_SETTINGS });
    expect(table.resolve('google', 'gemini-2.5-pro')).toBeUndefined();
    expect(table.resolve('google', 'google/gemini-2.5-pro')).toBeUndefined();
    expect(table.cost('google', 'gemini-2.5-pro', oneMillionIn)).toEqual({ costUsd: 0, priced: false });
    expect(table.models().map((m) => m.model)).not.toContain('gemini-2.5-pro');
    expect(table.models()).toHaveLength(DEFAULT_PRICES.length - 1);
    // Enabling it again with new prices brings it back.
    const again = mergePriceEntries(DEFAULT_PRICES, [disabled, { provider: 'google', model: 'gemini-2.5-pro', input_per_million: 1, output_per_million: 8 }]);
    expect(new PriceTable(again, { ...DEFAULT_CACHE_SETTINGS }).cost('google', 'gemini-2.5-pro', oneMillionIn)).toEqual({ costUsd: 1, priced: true, model: 'gemini-2.5-pro' });
  });
});

describe('parsePriceEntry', () => {
  const good = { provider: 'openai', model: 'gpt-4o', input_per_million: 2.5, output_per_million: 10, cached_input_per_million: 1.25 };

  it('accepts a valid entry and returns a clean copy', () => {
    expect(parsePriceEntry({ ...good, aliases: [' gpt-4o-2024-08-06 '] }, 'pricing.models[0]')).toEqual({ ...good, aliases: ['gpt-4o-2024-08-06'] });
  });

  it('names the field that is wrong', () => {
    const cases: [unknown, string][] = [
      [{ ...good, input_per_million: -1 }, 'pricing.models[2].input_per_million must be a non-negative number'],
      [{ ...good, input_per_million: '2.5' }, 'pricing.models[2].input_per_million must be a non-negative number'],
      [{ ...good, output_per_million: undefined }, 'pricing.models[2].output_per_million must be a non-negative number'],
      [{ ...good, cached_input_per_million: Number.NaN }, 'pricing.models[2].cached_input_per_million must be a non-negative number'],
      [{ ...good, provider: 'azure' }, 'pricing.models[2].provider must be one of google, openai, anthropic, local'],
      [{ ...good, model: '' }, 'pricing.models[2].model must be a non-empty string'],
      [{ ...good, aliases: ['ok', 7] }, 'pricing.models[2].aliases[1] must be a non-empty string'],
      [{ ...good, aliases: 'gpt-4o' }, 'pricing.models[2].aliases must be a list of model ids'],
      [{ ...good, disabled: 'yes' }, 'pricing.models[2].disabled must be true or false'],
      [
        { ...good, long_context: { threshold_tokens: 0, input_per_million: 1, output_per_million: 2 } },
        'pricing.models[2].long_context.threshold_tokens must be a positive integer',
      ],
      [{ ...good, long_context: { threshold_tokens: 1000, input_per_million: 1 } }, 'pricing.models[2].long_context.output_per_million must be a non-negative number'],
      ['gpt-4o', 'pricing.models[2] must be an object'],
      // bounded like the CRD: a price past it is a typo, and 2e302 once crashed the first call it costed
      [{ ...good, input_per_million: 2e302 }, 'pricing.models[2].input_per_million must be at most 100000 USD per million tokens (got 2e+302)'],
      [{ ...good, cache_write_per_million: 100_000.5 }, 'pricing.models[2].cache_write_per_million must be at most 100000 USD per million tokens (got 100000.5)'],
      [
        { ...good, long_context: { threshold_tokens: 1000, input_per_million: 1, output_per_million: 1e6 } },
        'pricing.models[2].long_context.output_per_million must be at most 100000 USD per million tokens (got 1000000)',
      ],
      [{ ...good, image_prices: [{ size: '1024', usd: 0.04 }] }, 'pricing.models[2].image_prices[0].size must be WIDTHxHEIGHT in pixels (e.g. 1024x1024) or auto'],
      [{ ...good, image_prices: [{ size: 'auto', usd: 101 }] }, 'pricing.models[2].image_prices[0].usd must be at most 100 USD per image (got 101)'],
      [
        { ...good, image_prices: [{ size: '1024x1024', quality: 'ultra-super-high-def', usd: 1 }] },
        'pricing.models[2].image_prices[0].quality must be a non-empty string of at most 16 characters (e.g. standard, hd, low, medium, high)',
      ],
      [{ ...good, image_prices: [{ size: '1024x1024', price: 1 }] }, 'pricing.models[2].image_prices[0].price is not a known field (known: size, quality, usd)'],
      [
        {
          ...good,
          image_prices: [
            { size: '1024x1024', quality: 'hd', usd: 0.08 },
            { size: '1024x1024', quality: 'hd', usd: 0.12 },
          ],
        },
        'pricing.models[2].image_prices[1] repeats the price of size 1024x1024 quality hd',
      ],
      [{ ...good, image_prices: { size: '1024x1024', usd: 1 } }, 'pricing.models[2].image_prices must be a list of { size, quality?, usd }'],
      [{ ...good, audio_per_minute: -0.006 }, 'pricing.models[2].audio_per_minute must be a non-negative number'],
      [{ ...good, characters_per_million: 150 }, 'pricing.models[2].characters_per_million must be at most 100 USD per million characters (got 150)'],
      [{ ...good, image_input_per_million: 'ten' }, 'pricing.models[2].image_input_per_million must be a non-negative number'],
    ];
    for (const [value, message] of cases) {
      let thrown: unknown;
      try {
        parsePriceEntry(value, 'pricing.models[2]');
      } catch (error) {
        thrown = error;
      }
      expect(thrown, message).toBeInstanceOf(PriceEntryError);
      expect((thrown as Error).message).toBe(message);
    }
  });

  it('accepts prices per image, per minute of audio and per million characters', () => {
    const units = {
      image_input_per_million: 10,
      image_prices: [
        { size: '1024x1024', quality: ' hd ', usd: 0.08 },
        { size: 'auto', usd: 0.04 },
      ],
      audio_per_minute: 0.006,
      characters_per_million: 15,
    };
    expect(parsePriceEntry({ ...good, ...units }, 'pricing.models[0]')).toEqual({
      ...good,
      ...units,
      image_prices: [
        { size: '1024x1024', quality: 'hd', usd: 0.08 },
        { size: 'auto', usd: 0.04 },
      ],
    });
  });

  it('rejects unknown fields, so a typo cannot leave a price unset', () => {
    expect(() => parsePriceEntry({ ...good, input_per_milion: 3 }, 'pricing.models[0]')).toThrow(/^pricing\.models\[0\]\.input_per_milion is not a known field/);
  });
});

describe('embedding models', () => {
  it("prices Bedrock's Titan V1 and V2 apart: their -vN is a generation, not a version", () => {
    const table = defaults();
    expect(normaliseModelId('amazon.titan-embed-text-v2:0')).toBe('titan-embed-text-v2');
    expect(normaliseModelId('amazon.titan-embed-text-v1')).toBe('titan-embed-text-v1');
    // 1M tokens: V2 at 0.02, V1 at 0.10; Cohere v3 at 0.10.
    expect(table.cost('anthropic', 'amazon.titan-embed-text-v2:0', oneMillionIn)).toEqual({ costUsd: 0.02, priced: true, model: 'amazon.titan-embed-text-v2:0' });
    expect(table.cost('anthropic', 'amazon.titan-embed-text-v1', oneMillionIn).costUsd).toBe(0.1);
    expect(table.cost('anthropic', 'cohere.embed-multilingual-v3', oneMillionIn).costUsd).toBe(0.1);
    // A generation the table does not have is unpriced, not priced as another.
    expect(table.cost('anthropic', 'amazon.titan-embed-text-v3:0', oneMillionIn)).toEqual({ costUsd: 0, priced: false });
  });

  it("prices OpenAI's and Vertex AI's embedding models per input token", () => {
    const table = defaults();
    // 1M tokens: 0.02 / 0.13 / 0.10 (OpenAI), 0.15 (gemini-embedding-001), 0.10 (text-embedding-005, and -004 with it).
    expect(table.cost('openai', 'text-embedding-3-small', oneMillionIn).costUsd).toBe(0.02);
    expect(table.cost('openai', 'text-embedding-3-large', oneMillionIn).costUsd).toBe(0.13);
    expect(table.cost('openai', 'text-embedding-ada-002', oneMillionIn).costUsd).toBe(0.1);
    expect(table.cost('google', 'gemini-embedding-001', oneMillionIn).costUsd).toBe(0.15);
    expect(table.cost('google', 'text-embedding-004', oneMillionIn)).toEqual({ costUsd: 0.1, priced: true, model: 'text-embedding-005' });
  });
});
