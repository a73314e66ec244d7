import type { Provider } from '../providers/routes.ts';

/**
 * Highest price accepted, USD per million tokens, wherever prices enter (config file, config API, ProxyConfig:
 * the CRD's schema uses this same bound). Far above any list price, low enough to catch a typo, and it keeps
 * every rate a small exact integer in the cost arithmetic (ADRs 0203 and 1001).
 */
export const MAX_PRICE_PER_MILLION = 100_000;

/** USD per million tokens for one model. Field names match the config file and the ProxyConfig CRD. */
export interface PriceEntry {
  provider: Provider;
  /** Canonical model id, e.g. `claude-sonnet-4`, `gemini-2.5-flash`, `gpt-4o`. */
  model: string;
  /** Other ids of the same model on other routes (`claude-sonnet-4@20250514`, `anthropic.claude-...-v1:0`). */
  aliases?: string[];
  /** In an override: hide this model (a built-in default included) from pricing and from GET /v1/models. */
  disabled?: boolean;
  input_per_million: number;
  output_per_million: number;
  /** Price of cached-read input tokens; when absent, input price × the provider's cached multiplier. */
  cached_input_per_million?: number;
  /** Price of cache writes (Anthropic 5-minute writes); when absent, the input price. */
  cache_write_per_million?: number;
  /** Price of 1-hour cache writes (Anthropic); when absent, cache_write_per_million. */
  cache_write_1h_per_million?: number;
  /** Long-context tier (Gemini 2.5 Pro): when the prompt exceeds the threshold, the whole request uses it. */
  long_context?: {
    threshold_tokens: number;
    input_per_million: number;
    output_per_million: number;
    cached_input_per_million?: number;
  };
}

/** Per-provider prompt-cache settings held in the runtime config. */
export interface CacheSettings {
  /** Cache time-to-live the proxy assumes/reports for this provider, in seconds. */
  ttl_seconds: number;
  /** Cached-read price as a fraction of the input price, used when an entry has no explicit cached price. */
  cached_multiplier: number;
}
