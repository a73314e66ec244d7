// Validates one price entry from outside (config file, POST /_local/api/config, a rendered ProxyConfig).
// Every problem is a PriceEntryError naming the exact field, e.g.
// `pricing.models[2].input_per_million must be a non-negative number`. Unknown fields are rejected so a typo
// (`input_per_milion`) cannot silently leave a price at its default.

import { PROVIDERS } from './routes.ts';
import { MAX_PRICE_PER_MILLION, MAX_USD_PER_UNIT, type PriceEntry } from './price-entry.ts';
import { PriceEntryError } from './price-entry-error.ts';
import { isRecord } from './json-record.ts';

const ENTRY_FIELDS = new Set([
  'provider',
  'model',
  'aliases',
  'disabled',
  'input_per_million',
  'output_per_million',
  'cached_input_per_million',
  'cache_write_per_million',
  'cache_write_1h_per_million',
  'image_input_per_million',
  'image_prices',
  'audio_per_minute',
  'characters_per_million',
  'long_context',
]);
const IMAGE_PRICE_FIELDS = new Set(['size', 'quality', 'usd']);
const MAX_IMAGE_PRICES = 32;
// The CRD's pattern for a size, so every entrance accepts the same spellings.
const IMAGE_SIZE = /^([0-9]{2,5}x[0-9]{2,5}|auto)$/;
const LONG_CONTEXT_FIELDS = new Set(['threshold_tokens', 'input_per_million', 'output_per_million', 'cached_input_per_million']);

function rejectUnknown(value: Record<string, unknown>, known: Set<string>, path: string): void {
  for (const key of Object.keys(value)) {
    if (!known.has(key)) throw new PriceEntryError(`${path}.${key}`, `is not a known field (known: ${[...known].join(', ')})`);
  }
}

function price(value: unknown, path: string): number {
  if (typeof value !== 'number' || !Number.isFinite(value) || value < 0) {
    throw new PriceEntryError(path, 'must be a non-negative number');
  }
  if (value > MAX_PRICE_PER_MILLION) {
    throw new PriceEntryError(path, `must be at most ${MAX_PRICE_PER_MILLION} USD per million tokens (got ${value})`);
  }
  return value;
}

function optionalPrice(value: unknown, path: string): number | undefined {
  return value === undefined ? undefined : price(value, path);
}

/** USD per image, per minute of audio or per million characters (ADR 0910). */
function unitPrice(value: unknown, path: string, unit: string): number {
  if (typeof value !== 'number' || !Number.isFinite(value) || value < 0) {
    throw new PriceEntryError(path, 'must be a non-negative number');
  }
  if (value > MAX_USD_PER_UNIT) throw new PriceEntryError(path, `must be at most ${MAX_USD_PER_UNIT} USD per ${unit} (got ${value})`);
  return value;
}

function parseImagePrices(value: unknown, path: string): NonNullable<PriceEntry['image_prices']> {
  if (!Array.isArray(value)) throw new PriceEntryError(path, 'must be a list of { size, quality?, usd }');
  if (value.length > MAX_IMAGE_PRICES) throw new PriceEntryError(path, `must have at most ${MAX_IMAGE_PRICES} entries (got ${value.length})`);
  const seen = new Set<string>();
  return value.map((item: unknown, i) => {
    const at = `${path}[${i}]`;
    if (!isRecord(item)) throw new PriceEntryError(at, 'must be an object with size, quality (optional) and usd');
    rejectUnknown(item, IMAGE_PRICE_FIELDS, at);
    if (typeof item.size !== 'string' || !IMAGE_SIZE.test(item.size)) {
      throw new PriceEntryError(`${at}.size`, 'must be WIDTHxHEIGHT in pixels (e.g. 1024x1024) or auto');
    }
    const image: NonNullable<PriceEntry['image_prices']>[number] = { size: item.size, usd: unitPrice(item.usd, `${at}.usd`, 'image') };
    if (item.quality !== undefined) {
      if (typeof item.quality !== 'string' || item.quality.trim() === '' || item.quality.length > 16) {
        throw new PriceEntryError(`${at}.quality`, 'must be a non-empty string of at most 16 characters (e.g. standard, hd, low, medium, high)');
      }
      image.quality = item.quality.trim();
    }
    // Two prices for one (size, quality) would leave which one bills to the order of a list.
    const key = `${image.size}\u0000${image.quality ?? ''}`;
    if (seen.has(key)) throw new PriceEntryError(at, `repeats the price of size ${image.size}${image.quality !== undefined ? ` quality ${image.quality}` : ''}`);
    seen.add(key);
    return image;
  });
}

/** The fields of an entry priced per unit other than tokens (images, audio minutes, characters). */
function parseUnitPrices(value: Record<string, unknown>, path: string, entry: PriceEntry): void {
  const imageInput = optionalPrice(value.image_input_per_million, `${path}.image_input_per_million`);
  if (imageInput !== undefined) entry.image_input_per_million = imageInput;
  if (value.image_prices !== undefined) entry.image_prices = parseImagePrices(value.image_prices, `${path}.image_prices`);
  if (value.audio_per_minute !== undefined) entry.audio_per_minute = unitPrice(value.audio_per_minute, `${path}.audio_per_minute`, 'minute of audio');
  if (value.characters_per_million !== undefined) {
    entry.characters_per_million = unitPrice(value.characters_per_million, `${path}.characters_per_million`, 'million characters');
  }
}

function nonEmptyString(value: unknown, path: string): string {
  if (typeof value !== 'string' || value.trim() === '') throw new PriceEntryError(path, 'must be a non-empty string');
  return value.trim();
}

/** `providers`: the providers an entry may name: the built-in ones, and those of configured routes. */
export function parsePriceEntry(value: unknown, path: string, providers: readonly string[] = PROVIDERS): PriceEntry {
  if (!isRecord(value)) throw new PriceEntryError(path, 'must be an object');
  rejectUnknown(value, ENTRY_FIELDS, path);
  if (typeof value.provider !== 'string' || !providers.includes(value.provider)) {
    throw new PriceEntryError(`${path}.provider`, `must be one of ${providers.join(', ')}`);
  }
  const provider = value.provider;
  const model = nonEmptyString(value.model, `${path}.model`);
  if (value.disabled !== undefined && typeof value.disabled !== 'boolean') {
    throw new PriceEntryError(`${path}.disabled`, 'must be true or false');
  }
  const disabled = value.disabled === true;
  // A disabled entry only hides a model: its prices may be left out.
  const required = (field: 'input_per_million' | 'output_per_million'): number => (disabled && value[field] === undefined ? 0 : price(value[field], `${path}.${field}`));
  const entry: PriceEntry = {
    provider,
    model,
    input_per_million: required('input_per_million'),
    output_per_million: required('output_per_million'),
  };
  if (value.aliases !== undefined) {
    if (!Array.isArray(value.aliases)) throw new PriceEntryError(`${path}.aliases`, 'must be a list of model ids');
    entry.aliases = value.aliases.map((alias, i) => nonEmptyString(alias, `${path}.aliases[${i}]`));
  }
  if (value.disabled !== undefined) entry.disabled = disabled;
  const cached = optionalPrice(value.cached_input_per_million, `${path}.cached_input_per_million`);
  if (cached !== undefined) entry.cached_input_per_million = cached;
  const write = optionalPrice(value.cache_write_per_million, `${path}.cache_write_per_million`);
  if (write !== undefined) entry.cache_write_per_million = write;
  const write1h = optionalPrice(value.cache_write_1h_per_million, `${path}.cache_write_1h_per_million`);
  if (write1h !== undefined) entry.cache_write_1h_per_million = write1h;
  parseUnitPrices(value, path, entry);
  if (value.long_context !== undefined) entry.long_context = parseLongContext(value.long_context, `${path}.long_context`);
  return entry;
}

function parseLongContext(value: unknown, path: string): NonNullable<PriceEntry['long_context']> {
  if (!isRecord(value)) throw new PriceEntryError(path, 'must be an object');
  rejectUnknown(value, LONG_CONTEXT_FIELDS, path);
  const threshold = value.threshold_tokens;
  if (typeof threshold !== 'number' || !Number.isSafeInteger(threshold) || threshold <= 0) {
    throw new PriceEntryError(`${path}.threshold_tokens`, 'must be a positive integer');
  }
  const tier: NonNullable<PriceEntry['long_context']> = {
    threshold_tokens: threshold,
    input_per_million: price(value.input_per_million, `${path}.input_per_million`),
    output_per_million: price(value.output_per_million, `${path}.output_per_million`),
  };
  const cached = optionalPrice(value.cached_input_per_million, `${path}.cached_input_per_million`);
  if (cached !== undefined) tier.cached_input_per_million = cached;
  return tier;
}
