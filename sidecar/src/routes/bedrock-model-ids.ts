// Bedrock names a model `<vendor>.<model>` (amazon.nova-pro-v1:0, meta.llama3-3-70b-instruct-v1:0), and a
// cross-region inference profile puts a geography first (us.amazon.nova-pro-v1:0). Claude's vendor is
// `anthropic`; the /v1 gateway sends Claude through InvokeModel in Anthropic's format and every other vendor's
// model through Converse, on the Bedrock route only (ADR 0914).

import type { PriceEntry } from '../../../contracts/price-entry.ts';

// A geography, then the vendor: us.anthropic.…, global.amazon.…; tried first, since `us.` alone reads as a vendor.
const GEOGRAPHY_VENDOR = /^[a-z]{2,6}(?:-[a-z]+)?\.([a-z][a-z0-9]*)\./;
const VENDOR = /^([a-z][a-z0-9]*)\.[a-z0-9]/;

/** The vendor of a Bedrock model id (an ARN's last segment), or undefined when the id is not of that form. */
export function bedrockVendor(id: string): string | undefined {
  const bare = id.toLowerCase().slice(id.lastIndexOf('/') + 1);
  return (GEOGRAPHY_VENDOR.exec(bare) ?? VENDOR.exec(bare))?.[1];
}

/** A Bedrock id of the route's form: `<vendor>.<model>`, with or without a geography, or an ARN. */
export const isBedrockModelId = (id: string): boolean => id.startsWith('arn:') || bedrockVendor(id) !== undefined;

/**
 * A model Bedrock serves that is not Claude: one of its price entry's ids is another vendor's Bedrock id. /v1
 * reaches it through Converse on the Bedrock route; Claude's other routes do not serve it.
 */
export function isConverseModel(entry: PriceEntry): boolean {
  return [entry.model, ...(entry.aliases ?? [])].some((id) => {
    const vendor = bedrockVendor(id);
    return vendor !== undefined && vendor !== 'anthropic';
  });
}

/**
 * Bedrock models whose InvokeModel answers carry nothing Tollgate can bill: Stability's image models and Titan
 * Image Generator v1 answer images with no usage and no per-image price here; Nova Reel and Luma answer video
 * (through an asynchronous invoke elsewhere). Matched by id, a geography prefix allowed; an ARN says nothing.
 */
const UNMETERED_INVOKE = /^(?:[a-z]{2,6}(?:-[a-z]+)?\.)?(?:stability\.|luma\.|amazon\.titan-image-generator-v1|amazon\.nova-reel)/;

/** Why a native InvokeModel of `id` cannot be metered, or undefined when its answer can be. */
export function unmeteredInvoke(id: string): string | undefined {
  if (!UNMETERED_INVOKE.test(id.toLowerCase())) return undefined;
  return `${id} answers without token counts and is not an image model Tollgate counts (Nova Canvas, Titan Image Generator v2)`;
}
