// The wire formats the engine reads, one adapter each (ADR 1700). Adding one is its folder and its line here;
// WireFormat (contracts/routes.ts) and this registry must agree, or tsc refuses the build.

import type { WireFormat } from '../../../contracts/routes.ts';
import { anthropicWire } from './anthropic/index.ts';
import { bedrockWire } from './bedrock/index.ts';
import { geminiWire } from './gemini/index.ts';
import { openAiWire } from './openai/index.ts';
import type { WireAdapter } from './wire-adapter.ts';

export const WIRE_ADAPTERS = {
  openai: openAiWire,
  gemini: geminiWire,
  anthropic: anthropicWire,
  bedrock: bedrockWire,
} as const satisfies Record<WireFormat, WireAdapter>;
