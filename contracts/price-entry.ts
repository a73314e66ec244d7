import type { PriceModelSpec } from './generated/price-entry-types.ts';
import type { CacheSpec } from './generated/runtime-config-types.ts';

/**
 * Highest price accepted, USD per million tokens, wherever prices enter (config file, config API, ProxyConfig:
 * the CRD's schema uses this same bound). Far above any list price, low enough to catch a typo, and it keeps
 * every rate a small exact integer in the cost arithmetic (ADRs 0203 and 1001).
 */
export const MAX_PRICE_PER_MILLION = 100_000;

/**
 * Highest price accepted for one billed unit other than a million tokens: one image, one minute of audio, a
 * million characters (USD). List prices are cents; 100 still catches a price typed per thousand images, and keeps
 * every unit price a safe integer of pico-dollars (ADR 0910).
 */
export const MAX_USD_PER_UNIT = 100;

/**
 * USD per million tokens for one model, as the config file, the config API and the ProxyConfig CRD all spell it.
 * The CRD's schema (crds/proxy-config.ts) is the one source: this is its generated type (written into
 * contracts/generated/, so contracts/ imports nothing outside itself, ADR 1204), and a field added there
 * reaches the validator's type here without a hand copy.
 */
export type PriceEntry = Omit<PriceModelSpec, 'provider'> & {
  /** A built-in provider (the CRD's enum), or in the runtime config also a configured route's provider. */
  provider: PriceModelSpec['provider'] | (string & {});
};

/** Per-provider prompt-cache settings held in the runtime config (runtime-config-schema.ts, ADR 0602). */
export type CacheSettings = Required<CacheSpec>;
