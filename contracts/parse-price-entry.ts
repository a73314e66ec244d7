// Validates one price entry from outside (config file, POST /_local/api/config, a rendered ProxyConfig).
// Every problem is a PriceEntryError naming the exact field, e.g.
// `pricing.models[2].input_per_million must be a non-negative number`. Unknown fields are rejected so a typo
// (`input_per_milion`) cannot silently leave a price at its default.

import { PROVIDERS } from './routes.ts';
import { MAX_PRICE_PER_MILLION, type PriceEntry } from './price-entry.ts';
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
  'long_context',
]);
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
