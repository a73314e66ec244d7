// Built-in list prices, USD per million tokens, standard tier (not batch, flex or priority), as the providers'
// own pages state them; checked on 2026-11-23 (the table and its sources: docs/spans-and-pricing.md). One entry
// per model; `aliases` lists its ids on other routes that normaliseModelId does not reduce to the canonical id
// by itself, plus the dated ids for readability.
//
// Anthropic 5-minute cache writes cost 1.25× the input price and 1-hour writes 2×; the pricing page lists both.
// OpenAI bills a GPT-5.4-or-newer request whose prompt exceeds 272K tokens at 2× input and 1.5× output, and
// Google a Gemini Pro request over 200K at its long-context rates: both are `long_context` tiers here.

import type { PriceEntry } from '../../../contracts/price-entry.ts';

interface ClaudePrices {
  input: number;
  cached: number;
  write5m: number;
  write1h: number;
  output: number;
}

function claudeRates(prices: ClaudePrices): Omit<PriceEntry, 'provider' | 'model'> {
  return {
    input_per_million: prices.input,
    cached_input_per_million: prices.cached,
    cache_write_per_million: prices.write5m,
    cache_write_1h_per_million: prices.write1h,
    output_per_million: prices.output,
  };
}

/** Claude models up to 4.5 carry a dated snapshot in every id. */
function claude(model: string, snapshot: string, prices: ClaudePrices, extraAliases: string[] = []): PriceEntry {
  return {
    provider: 'anthropic',
    model,
    aliases: [
      `${model}-${snapshot}`, // Anthropic API
      `${model}@${snapshot}`, // Vertex AI
      `anthropic.${model}-${snapshot}-v1:0`, // Bedrock
      `us.anthropic.${model}-${snapshot}-v1:0`, // Bedrock cross-region inference profile
      ...extraAliases,
    ],
    ...claudeRates(prices),
  };
}

/**
 * Claude models from 4.6 on have no dated snapshot: one id on the Anthropic API and Vertex AI, and
 * `anthropic.<id>-v1` on Bedrock (its geography prefixes and a `:0` revision normalise to it).
 */
function claudeUndated(model: string, prices: ClaudePrices, extraAliases: string[] = []): PriceEntry {
  return { provider: 'anthropic', model, aliases: [`anthropic.${model}-v1`, ...extraAliases], ...claudeRates(prices) };
}

function gemini(model: string, input: number, cached: number, output: number, extra: Partial<PriceEntry> = {}): PriceEntry {
  return {
    provider: 'google',
    model,
    aliases: [`google/${model}`, `${model}-001`],
    input_per_million: input,
    cached_input_per_million: cached,
    output_per_million: output,
    ...extra,
  };
}

/** Gemini Pro past 200K prompt tokens: 2× input and cached, 1.5× output. */
function geminiLong(input: number, cached: number, output: number): Partial<PriceEntry> {
  return { long_context: { threshold_tokens: 200_000, input_per_million: input * 2, cached_input_per_million: cached * 2, output_per_million: output * 1.5 } };
}

/** An OpenAI model: its prices, then its other ids and, for GPT-5.4 and newer, the long-context tier. */
function openai(model: string, input: number, cached: number, output: number, more: { aliases?: string[]; long?: boolean } = {}): PriceEntry {
  const entry: PriceEntry = { provider: 'openai', model, aliases: more.aliases ?? [], input_per_million: input, cached_input_per_million: cached, output_per_million: output };
  return more.long === true ? { ...entry, ...openaiLong(input, cached, output) } : entry;
}

/** GPT-5.4 and newer past 272K prompt tokens: 2× input and cached, 1.5× output, for the whole request. */
function openaiLong(input: number, cached: number, output: number): Partial<PriceEntry> {
  return { long_context: { threshold_tokens: 272_000, input_per_million: input * 2, cached_input_per_million: cached * 2, output_per_million: output * 1.5 } };
}

/** An embedding model: input tokens only, since an embedding generates none (ADR 0903). */
function embedding(provider: PriceEntry['provider'], model: string, input: number): PriceEntry {
  return { provider, model, input_per_million: input, output_per_million: 0 };
}

/**
 * An image model billed per image by size and quality (dall-e-*): no tokens to price, so its token prices are 0
 * (ADR 0910). `sizes`: size → USD per image, per quality (`any` for a size-only price).
 */
function perImage(model: string, sizes: Record<string, Record<string, number>>, provider: PriceEntry['provider'] = 'openai'): PriceEntry {
  const image_prices = Object.entries(sizes).flatMap(([size, byQuality]) =>
    Object.entries(byQuality).map(([quality, usd]) => (quality === 'any' ? { size, usd } : { size, quality, usd })),
  );
  return { provider, model, input_per_million: 0, output_per_million: 0, image_prices };
}

/**
 * An Imagen model on Vertex AI (ADR 0915): one price per image whatever its size, listed at each size Imagen
 * renders (a /v1 call's) and at `auto` (a native :predict, whose body the route passes through unread).
 */
function imagen(model: string, usd: number): PriceEntry {
  const sizes = ['1024x1024', '896x1280', '1280x896', '768x1408', '1408x768', 'auto'];
  return perImage(model, Object.fromEntries(sizes.map((size) => [size, { any: usd }])), 'google');
}

/** A GPT image model: text input, image input and image output tokens, each at its own price (ADR 0910). */
function gptImage(model: string, textInput: number, imageInput: number, output: number): PriceEntry {
  return { provider: 'openai', model, input_per_million: textInput, image_input_per_million: imageInput, output_per_million: output };
}

/** A Bedrock model other than Claude, by its Bedrock id, priced in gamma-cloudb's namespace (ADR 0903, 0914). */
function bedrockModel(model: string, input: number, cached: number, output: number): PriceEntry {
  return { provider: 'anthropic', model, input_per_million: input, cached_input_per_million: cached, output_per_million: output };
}

const OPUS_4 = { input: 15, cached: 1.5, write5m: 18.75, write1h: 30, output: 75 };
const OPUS_4_5 = { input: 5, cached: 0.5, write5m: 6.25, write1h: 10, output: 25 };
const SONNET_4 = { input: 3, cached: 0.3, write5m: 3.75, write1h: 6, output: 15 };
const SONNET_5 = { input: 2, cached: 0.2, write5m: 2.5, write1h: 4, output: 10 };
const FABLE_5 = { input: 10, cached: 1, write5m: 12.5, write1h: 20, output: 50 };

export const DEFAULT_PRICES: readonly PriceEntry[] = [
  // Google: ai.google.dev/gemini-api/docs/pricing, cloud.google.com/vertex-ai/generative-ai/pricing.
  gemini('gemini-2.5-pro', 1.25, 0.125, 10, { long_context: { threshold_tokens: 200_000, input_per_million: 2.5, output_per_million: 15, cached_input_per_million: 0.25 } }),
  gemini('gemini-2.5-flash', 0.3, 0.03, 2.5),
  gemini('gemini-2.5-flash-lite', 0.1, 0.01, 0.4),
  gemini('gemini-3-pro', 2, 0.2, 12, geminiLong(2, 0.2, 12)),
  gemini('gemini-3.1-pro', 2, 0.2, 12, geminiLong(2, 0.2, 12)),
  gemini('gemini-3-flash', 0.5, 0.05, 3),
  gemini('gemini-3.1-flash-lite', 0.25, 0.025, 1.5),
  gemini('gemini-3.5-flash', 1.5, 0.15, 9),
  gemini('gemini-3.5-flash-lite', 0.3, 0.03, 2.5),
  // Introductory price through 2026-12-31; from 2027-01-01 the page gives 1.5 / 7.5.
  gemini('gemini-3.8-flash', 0.75, 0.075, 3.75),
  // Embeddings on Vertex AI (:predict). The text-embedding models are billed per character, $0.025 per million
  // (billableCharacterCount); price entries count tokens, so they are priced at four characters a token, $0.10 per
  // million tokens (docs/known-limitations.md). text-embedding-004 normalises to -005's entry, at the same price.
  embedding('google', 'gemini-embedding-001', 0.15),
  embedding('google', 'text-embedding-005', 0.1),
  embedding('google', 'text-multilingual-embedding-002', 0.1),
  // Imagen on Vertex AI, per image (ADR 0915). Not read from Google's pricing page, which the docs index reachable
  // here did not hold: the list prices several third-party summaries quoting it agree on (docs/spans-and-pricing.md).
  imagen('imagen-4.0-generate-001', 0.04),
  imagen('imagen-4.0-fast-generate-001', 0.02),
  imagen('imagen-4.0-ultra-generate-001', 0.06),
  imagen('imagen-3.0-generate-002', 0.04),

  // OpenAI: developers.openai.com/api/docs/pricing and each model's page.
  openai('gpt-4o', 2.5, 1.25, 10, { aliases: ['gpt-4o-2024-08-06', 'gpt-4o-2024-11-20'] }),
  openai('gpt-4o-mini', 0.15, 0.075, 0.6, { aliases: ['gpt-4o-mini-2024-07-18'] }),
  openai('gpt-4.1', 2, 0.5, 8, { aliases: ['gpt-4.1-2025-04-14'] }),
  openai('gpt-4.1-mini', 0.4, 0.1, 1.6, { aliases: ['gpt-4.1-mini-2025-04-14'] }),
  openai('gpt-4.1-nano', 0.1, 0.025, 0.4, { aliases: ['gpt-4.1-nano-2025-04-14'] }),
  openai('o3', 2, 0.5, 8, { aliases: ['o3-2025-04-16'] }),
  openai('o4-mini', 1.1, 0.275, 4.4, { aliases: ['o4-mini-2025-04-16'] }),
  openai('gpt-5', 1.25, 0.125, 10, { aliases: ['gpt-5-2025-08-07', 'gpt-5-chat-latest', 'gpt-5-codex'] }),
  openai('gpt-5-mini', 0.25, 0.025, 2, { aliases: ['gpt-5-mini-2025-08-07'] }),
  openai('gpt-5-nano', 0.05, 0.005, 0.4, { aliases: ['gpt-5-nano-2025-08-07'] }),
  openai('gpt-5.1', 1.25, 0.125, 10, { aliases: ['gpt-5.1-chat-latest', 'gpt-5.1-codex', 'gpt-5.1-codex-max'] }),
  openai('gpt-5.1-codex-mini', 0.25, 0.025, 2),
  openai('gpt-5.2', 1.75, 0.175, 14, { aliases: ['gpt-5.2-chat-latest', 'gpt-5.2-codex'] }),
  openai('gpt-5.4', 2.5, 0.25, 15, { long: true }),
  openai('gpt-5.4-mini', 0.75, 0.075, 4.5, { long: true }),
  openai('gpt-5.5', 5, 0.5, 30, { long: true }),
  // Sol's page states a promotional price "at least until November 21, 2026"; its list price is 5 / 0.5 / 30.
  openai('gpt-5.6-sol', 4, 0.4, 20, { aliases: ['gpt-5.6'], long: true }),
  openai('gpt-5.6-terra', 2, 0.2, 12, { long: true }),
  openai('gpt-5.6-luna', 0.2, 0.02, 1.2, { long: true }),
  // GPT-6: gpt-6.2-sol from its model page, the others as several sources quote OpenAI's pages (docs/spans-and-pricing.md).
  openai('gpt-6-astra', 10, 1, 50, { long: true }),
  openai('gpt-6-sol', 2, 0.2, 10, { long: true }),
  openai('gpt-6-luna', 0.1, 0.01, 0.5, { long: true }),
  openai('gpt-6.1-sol', 2, 0.1, 10, { long: true }),
  openai('gpt-6.1-terra', 1, 0.05, 5, { long: true }),
  openai('gpt-6.2-astra', 8, 0.4, 40, { long: true }),
  openai('gpt-6.2-sol', 2, 0.1, 10, { long: true }),
  embedding('openai', 'text-embedding-3-small', 0.02),
  embedding('openai', 'text-embedding-3-large', 0.13),
  embedding('openai', 'text-embedding-ada-002', 0.1),
  // Moderation: "All OpenAI moderation models and endpoints are free of charge" (ADR 0912). Priced at 0, so a
  // /v1/moderations call is found by its model and recorded as priced, not unpriced.
  { provider: 'openai', model: 'omni-moderation-latest', aliases: ['omni-moderation-2024-09-26'], input_per_million: 0, output_per_million: 0 },
  { provider: 'openai', model: 'text-moderation-latest', aliases: ['text-moderation-stable', 'text-moderation-007'], input_per_million: 0, output_per_million: 0 },
  // Images (developers.openai.com/api/docs/pricing, image generation): GPT image models by tokens, DALL·E per image.
  gptImage('gpt-image-1', 5, 10, 40),
  gptImage('gpt-image-1-mini', 2, 2.5, 8),
  perImage('dall-e-3', {
    '1024x1024': { standard: 0.04, hd: 0.08 },
    '1024x1792': { standard: 0.08, hd: 0.12 },
    '1792x1024': { standard: 0.08, hd: 0.12 },
  }),
  perImage('dall-e-2', { '256x256': { any: 0.016 }, '512x512': { any: 0.018 }, '1024x1024': { any: 0.02 } }),
  // Audio (developers.openai.com/api/docs/pricing, ADR 0911): whisper-1 per second of input audio, tts-1 per
  // character, the gpt-4o models by tokens. A transcribe model's input is priced at its audio rate (2.5 and 1.25
  // for text, 6 and 3 for audio): its only text input is the optional prompt, and an entry has one input price.
  { provider: 'openai', model: 'whisper-1', input_per_million: 0, output_per_million: 0, audio_per_minute: 0.006 },
  { provider: 'openai', model: 'gpt-4o-transcribe', input_per_million: 6, output_per_million: 10 },
  { provider: 'openai', model: 'gpt-4o-mini-transcribe', input_per_million: 3, output_per_million: 5 },
  { provider: 'openai', model: 'tts-1', input_per_million: 0, output_per_million: 0, characters_per_million: 15 },
  { provider: 'openai', model: 'tts-1-hd', input_per_million: 0, output_per_million: 0, characters_per_million: 30 },
  { provider: 'openai', model: 'gpt-4o-mini-tts', input_per_million: 0.6, output_per_million: 12 },

  // Anthropic: platform.claude.com/docs/en/about-claude/pricing and each model's overview page.
  claude('claude-opus-4', '20250514', OPUS_4, ['claude-opus-4-0', 'claude-4-opus']),
  claude('claude-opus-4-1', '20250805', OPUS_4, ['claude-opus-4.1']),
  claude('claude-sonnet-4', '20250514', SONNET_4, ['claude-sonnet-4-0', 'claude-4-sonnet']),
  claude('claude-sonnet-4-5', '20250929', SONNET_4, ['claude-sonnet-4.5']),
  claude('claude-haiku-4-5', '20251001', { input: 1, cached: 0.1, write5m: 1.25, write1h: 2, output: 5 }, ['claude-haiku-4.5']),
  claude('claude-3-5-haiku', '20241022', { input: 0.8, cached: 0.08, write5m: 1, write1h: 1.6, output: 4 }, ['claude-3.5-haiku']),
  claude('claude-opus-4-5', '20251101', OPUS_4_5, ['claude-opus-4.5']),
  claudeUndated('claude-opus-4-6', OPUS_4_5, ['claude-opus-4.6']),
  claudeUndated('claude-sonnet-4-6', SONNET_4, ['claude-sonnet-4.6']),
  claudeUndated('claude-opus-4-7', OPUS_4_5, ['claude-opus-4.7']),
  claudeUndated('claude-opus-4-8', OPUS_4_5, ['claude-opus-4.8']),
  claudeUndated('claude-opus-5', OPUS_4_5),
  claudeUndated('claude-sonnet-5', SONNET_5),
  claudeUndated('claude-opus-5-5', { input: 4, cached: 0.2, write5m: 5, write1h: 8, output: 20 }, ['claude-opus-5.5']),
  // Sonnet 5.5's cache reads were cut to 0.05× input on 2026-10-07.
  claudeUndated('claude-sonnet-5-5', { ...SONNET_5, cached: 0.1 }, ['claude-sonnet-5.5']),
  claudeUndated('claude-fable-5', FABLE_5),
  claudeUndated('claude-fable-5-1', { ...FABLE_5, cached: 0.25 }, ['claude-fable-5.1']),
  // Mythos (limited availability) is priced as Fable of the same version.
  claudeUndated('claude-mythos-5', FABLE_5),
  claudeUndated('claude-mythos-5-1', { ...FABLE_5, cached: 0.25 }, ['claude-mythos-5.1']),

  // Bedrock's embedding models (aws.amazon.com/bedrock/pricing, per 1,000 tokens: Titan V2 0.00002, Titan V1 and
  // Cohere Embed v3 0.0001), under provider anthropic: the price namespace of route gamma-cloudb, whose native
  // calls and /v1 calls price them alike (ADR 0903). The embedding prices were added on 2026-11-29
  // (docs/spans-and-pricing.md says from where).
  embedding('anthropic', 'amazon.titan-embed-text-v2:0', 0.02),
  embedding('anthropic', 'amazon.titan-embed-text-v1', 0.1),
  embedding('anthropic', 'cohere.embed-english-v3', 0.1),
  embedding('anthropic', 'cohere.embed-multilingual-v3', 0.1),
  // Amazon Nova on Bedrock, reached on /v1 through Converse (ADR 0914), under provider anthropic as above. Not read
  // from AWS's own page: the prices several third-party summaries of it agree on (docs/spans-and-pricing.md), cache
  // reads at a quarter of the input price (75 % off, as they state).
  bedrockModel('amazon.nova-micro-v1:0', 0.035, 0.00875, 0.14),
  bedrockModel('amazon.nova-lite-v1:0', 0.06, 0.015, 0.24),
  bedrockModel('amazon.nova-pro-v1:0', 0.8, 0.2, 3.2),
  // Bedrock's image models, per image by quality and size tier (ADR 0915): an image is priced at the smallest tier
  // its pixels fit in. Not read from AWS's own page either: the list prices third-party summaries agree on.
  perImage('amazon.nova-canvas-v1:0', { '1024x1024': { standard: 0.04, premium: 0.06 }, '2048x2048': { standard: 0.06, premium: 0.08 } }, 'anthropic'),
  perImage('amazon.titan-image-generator-v2:0', { '512x512': { standard: 0.008, premium: 0.01 }, '1024x1024': { standard: 0.01, premium: 0.012 } }, 'anthropic'),
];
