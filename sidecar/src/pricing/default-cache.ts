// Prompt-cache settings per provider, used when the runtime config sets none:
// - ttl_seconds: the cache lifetime the provider applies by default (Gemini implicit/explicit caches 1 h,
//   OpenAI's automatic prompt cache 5–10 min, Anthropic's ephemeral cache 5 min).
// - cached_multiplier: cached-read price ÷ input price, for price entries without an explicit cached price
//   (Gemini and Anthropic bill reads at 10 %, OpenAI at 50 % for its older models).

import type { Provider } from '../../../contracts/routes.ts';
import type { CacheSettings } from '../../../contracts/price-entry.ts';

export const DEFAULT_CACHE_SETTINGS: Readonly<Record<Provider, Readonly<CacheSettings>>> = {
  google: { ttl_seconds: 3600, cached_multiplier: 0.1 },
  openai: { ttl_seconds: 300, cached_multiplier: 0.5 },
  anthropic: { ttl_seconds: 300, cached_multiplier: 0.1 },
  local: { ttl_seconds: 0, cached_multiplier: 0 },
};
