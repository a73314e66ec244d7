// The three forms a Claude model id takes, one per place Claude is served, and how the /v1 gateway picks the
// id a route receives from a price entry's aliases. Each Claude route module names its form.

import type { PriceEntry } from '../../../contracts/price-entry.ts';
import { GatewayError } from '../translate/openai-error.ts';

export interface ClaudeIdForm {
  fits(id: string): boolean;
  /**
   * False on the Anthropic API: the bare family id of the price table (claude-sonnet-4) is not an API model
   * name there, so it is replaced and a dated snapshot alias is preferred.
   */
  canonicalIsApiId: boolean;
  /** For the refusal: `a Bedrock id ('anthropic.…' or a region prefix)`. */
  described: string;
}

export const isVertexClaudeId = (id: string): boolean => id.includes('@');
export const isBedrockClaudeId = (id: string): boolean => id.startsWith('arn:') || /^(?:[a-z]{2,6}(?:-[a-z]+)?\.)?anthropic\./.test(id);
export const isAnthropicApiClaudeId = (id: string): boolean => !isVertexClaudeId(id) && !isBedrockClaudeId(id);
const DATED = /-\d{8}$/;

/**
 * The model's id on a Claude route. A caller who sends an id of the route's form gets it as sent; otherwise
 * the first alias of that form.
 */
export function claudeModelId(route: string, form: ClaudeIdForm, requested: string, entry: PriceEntry): string {
  const isCanonical = requested.toLowerCase() === entry.model.toLowerCase();
  if (form.fits(requested) && (form.canonicalIsApiId || !isCanonical)) return requested;
  const ids = [entry.model, ...(entry.aliases ?? [])].filter((id) => form.fits(id));
  const chosen = form.canonicalIsApiId ? ids[0] : (ids.find((id) => DATED.test(id)) ?? ids[0]);
  if (chosen === undefined) {
    throw new GatewayError(400, `model ${requested} has no id for route ${route}: add ${form.described} to the aliases of its price entry, or send that id as the model`, {
      param: 'model',
      code: 'model_not_available',
    });
  }
  return chosen;
}
