import type { PriceEntry } from '../../../../contracts/price-entry.ts';
import type { TokenUsage } from '../../usage/usage.ts';
import { picoPerToken, tokens, type TokenRates } from '../token-rates.ts';

/**
 * OpenAI: (prompt − cached − image input) × input + cached × cached price + image input × image input price
 * + completion (reasoning included) × output. Image input tokens (gpt-image-*) are 0 on every other call.
 */
export function openAiPico(usage: TokenUsage, rates: TokenRates, entry: PriceEntry): bigint {
  const prompt = tokens(usage.inputTokens);
  const cached = tokens(Math.min(usage.cacheReadTokens, usage.inputTokens));
  let images = tokens(usage.units?.imageInputTokens ?? 0);
  if (images > prompt - cached) images = prompt - cached;
  const imageRate = entry.image_input_per_million !== undefined ? picoPerToken(entry.image_input_per_million) : rates.input;
  return (prompt - cached - images) * rates.input + images * imageRate + cached * rates.cachedRead + tokens(usage.outputTokens) * rates.output;
}
