// Whose formula prices a provider's calls (ADR 1700): a built-in provider's is in its facts (contracts/routes.ts),
// a configured route's provider is priced by its route's wire format. The one place that knows a provider can
// be free: budgets, the meter and the price table ask here rather than compare names.

import { isBuiltInProvider, PROVIDER_FACTS, type WireFormat } from '../../../contracts/routes.ts';

/** The formula pricing `provider`'s calls; `wire` is a configured route's wire format (default openai). */
export function pricingOf(provider: string, wire?: WireFormat): WireFormat | 'free' {
  return isBuiltInProvider(provider) ? PROVIDER_FACTS[provider].pricing : (wire ?? 'openai');
}

/** Nothing bills this provider's calls: they are recorded at 0 USD as priced, never reserved nor refused by a budget. */
export function costsNothing(provider: string): boolean {
  return isBuiltInProvider(provider) && PROVIDER_FACTS[provider].pricing === 'free';
}
