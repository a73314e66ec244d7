// Every top-level parameter of an OpenAI chat-completions request, and what each translated target does with
// it: map it, ignore it (harmless, with the reason), or reject it with a 400 naming it. A parameter set to the
// value that changes nothing (n: 1, logprobs: false, store: false …) is accepted everywhere. A parameter not
// in this table is refused the way OpenAI refuses it. docs/openai-gateway.md shows this table to users.

import { GatewayError, unsupportedParameter } from './openai-error.ts';
import { isRecord } from '../../../contracts/json-record.ts';

export type TranslatedTarget = 'anthropic' | 'gemini' | 'converse';

export type Handling =
  | { readonly do: 'map'; readonly how: string }
  | { readonly do: 'ignore'; readonly why: string }
  | { readonly do: 'reject'; readonly why: string; readonly harmless?: (value: unknown) => boolean };

export const map = (how: string): Handling => ({ do: 'map', how });
export const ignore = (why: string): Handling => ({ do: 'ignore', why });
export const reject = (why: string, harmless?: (value: unknown) => boolean): Handling => (harmless ? { do: 'reject', why, harmless } : { do: 'reject', why });
const all = (handling: Handling): Record<TranslatedTarget, Handling> => ({ anthropic: handling, gemini: handling, converse: handling });

export const isZero = (v: unknown) => v === 0;
const isOne = (v: unknown) => v === 1;
export const isFalse = (v: unknown) => v === false;
const isTrue = (v: unknown) => v === true;
const isEmptyObject = (v: unknown) => isRecord(v) && Object.keys(v).length === 0;

export const CHAT_PARAMETERS: Readonly<Record<string, Readonly<Record<TranslatedTarget, Handling>>>> = {
  model: all(map('picks the price entry, its provider and the route; the route-specific id goes upstream')),
  messages: {
    anthropic: map('system/developer → `system`; user/assistant turns; tool results → `tool_result` blocks; same-role turns merged'),
    gemini: map('system/developer → `systemInstruction`; user → `user`, assistant → `model`; tool results → `functionResponse`'),
    converse: map('system/developer → `system`; user/assistant turns of `content` blocks; tool results → `toolResult` blocks; same-role turns merged'),
  },
  max_tokens: {
    anthropic: map('`max_tokens` (default 4096 when neither limit is set: Anthropic requires one)'),
    gemini: map('`generationConfig.maxOutputTokens`'),
    converse: map("`inferenceConfig.maxTokens` (unset: the model's own default)"),
  },
  max_completion_tokens: {
    anthropic: map('`max_tokens` (wins over max_tokens)'),
    gemini: map('`generationConfig.maxOutputTokens` (wins over max_tokens)'),
    converse: map('`inferenceConfig.maxTokens` (wins over max_tokens)'),
  },
  stop: { anthropic: map('`stop_sequences`'), gemini: map('`generationConfig.stopSequences`'), converse: map('`inferenceConfig.stopSequences`') },
  temperature: {
    anthropic: map('`temperature` (Anthropic accepts 0–1: larger values are refused)'),
    gemini: map('`generationConfig.temperature`'),
    converse: map('`inferenceConfig.temperature` (Converse accepts 0–1: larger values are refused)'),
  },
  top_p: { anthropic: map('`top_p`'), gemini: map('`generationConfig.topP`'), converse: map('`inferenceConfig.topP`') },
  n: {
    anthropic: reject('Anthropic returns one completion per request', isOne),
    gemini: map('`generationConfig.candidateCount`'),
    converse: reject('Converse returns one completion per request', isOne),
  },
  stream: {
    anthropic: map('`stream` (direct, Vertex AI) or the streaming path (Vertex AI, Bedrock)'),
    gemini: map('`:streamGenerateContent?alt=sse`'),
    converse: map('`/converse-stream` instead of `/converse`'),
  },
  stream_options: all(map('`include_usage` adds the final usage chunk; `include_obfuscation` is accepted and has no effect (nothing is padded)')),
  tools: {
    anthropic: map('`tools[].{name, description, input_schema}`; only `function` tools'),
    gemini: map('`tools[].functionDeclarations[].{name, description, parametersJsonSchema}`; only `function` tools'),
    converse: map('`toolConfig.tools[].toolSpec.{name, description, inputSchema.json}`; only `function` tools'),
  },
  tool_choice: {
    anthropic: map('auto → `auto`, required → `any`, named → `tool`, none → `none`'),
    gemini: map('`toolConfig.functionCallingConfig.mode` AUTO / ANY / NONE (+ `allowedFunctionNames`)'),
    converse: map('auto → `auto`, required → `any`, named → `tool`; none → the tools are left out (refused when the conversation holds tool calls)'),
  },
  parallel_tool_calls: {
    anthropic: map('false → `tool_choice.disable_parallel_tool_use: true`'),
    gemini: reject('Gemini cannot be told to call at most one function', isTrue),
    converse: reject('Converse cannot be told to call at most one tool', isTrue),
  },
  response_format: {
    anthropic: map('json_object / json_schema → one forced tool whose input is the JSON, returned as the message content'),
    gemini: map('`responseMimeType: application/json` (+ `responseJsonSchema` for json_schema)'),
    converse: reject('Converse has no JSON response mode', (v) => isRecord(v) && v.type === 'text'),
  },
  frequency_penalty: {
    anthropic: reject('Anthropic has no frequency penalty', isZero),
    gemini: map('`generationConfig.frequencyPenalty`'),
    converse: reject('Converse has no frequency penalty', isZero),
  },
  presence_penalty: {
    anthropic: reject('Anthropic has no presence penalty', isZero),
    gemini: map('`generationConfig.presencePenalty`'),
    converse: reject('Converse has no presence penalty', isZero),
  },
  seed: { anthropic: reject('Anthropic has no sampling seed'), gemini: map('`generationConfig.seed`'), converse: reject('Converse has no sampling seed') },
  reasoning_effort: {
    anthropic: reject("Claude's extended thinking needs its signed thinking blocks sent back on later turns, which chat completions cannot carry"),
    gemini: map('`generationConfig.thinkingConfig.thinkingBudget`: minimal/none 0, low 1024, medium 8192, high 24576'),
    converse: reject("each model family on Bedrock takes its own thinking settings, which Converse's common fields do not carry"),
  },
  user: {
    anthropic: map("`metadata.user_id`; also the span's user when no X-Tollgate-User header is sent"),
    gemini: ignore("Gemini has no end-user field; the value is still the span's user when no X-Tollgate-User header is sent"),
    converse: ignore("Converse has no end-user field; the value is still the span's user when no X-Tollgate-User header is sent"),
  },
  safety_identifier: all(ignore("an abuse-monitoring id for OpenAI only; it is recorded as the span's user when neither X-Tollgate-User nor user is sent")),
  metadata: all(ignore("tags for OpenAI's stored-completions dashboard; nothing reaches another provider's output")),
  prompt_cache_key: all(ignore("a routing hint for OpenAI's prompt cache; it never changes the output, and the other providers cache on their own terms")),
  prompt_cache_retention: all(ignore("OpenAI's prompt-cache lifetime; it never changes the output")),
  service_tier: all(reject('only OpenAI offers flex, scale and priority tiers', (v) => v === 'auto' || v === 'default')),
  store: all(reject('stored completions exist only at OpenAI', isFalse)),
  logprobs: all(reject('log probabilities are not translated', isFalse)),
  top_logprobs: all(reject('log probabilities are not translated', isZero)),
  logit_bias: all(reject('none of the translated providers takes token biases', isEmptyObject)),
  modalities: all(reject('only text output is translated', (v) => Array.isArray(v) && v.length === 1 && v[0] === 'text')),
  audio: all(reject('audio output is not translated')),
  prediction: all(reject('predicted outputs exist only at OpenAI')),
  verbosity: all(reject('only OpenAI reasoning models take a verbosity', (v) => v === 'medium')),
  web_search_options: all(reject('web search is not translated')),
  functions: all(reject('deprecated by OpenAI: send `tools`')),
  function_call: all(reject('deprecated by OpenAI: send `tool_choice`')),
};

/** Refuses a request whose parameters `target` cannot honour; returns nothing when every one is fine. */
export function checkChatParameters(body: Record<string, unknown>, target: TranslatedTarget, provider: string): void {
  checkParameters(body, (name) => CHAT_PARAMETERS[name]?.[target], `for ${provider} models through this gateway`);
}

/**
 * Refuses the first parameter a table rejects at the value sent, or that it does not know (`where` ends the
 * refusal: `for Gemini models through this gateway`). A parameter sent as null is not set.
 */
export function checkParameters(body: Record<string, unknown>, handling: (name: string) => Handling | undefined, where: string): void {
  for (const [name, value] of Object.entries(body)) {
    if (value === null || value === undefined) continue;
    const entry = handling(name);
    if (entry === undefined) {
      throw new GatewayError(400, `Unrecognized request argument supplied: ${name}`, { param: name, code: 'unknown_parameter' });
    }
    if (entry.do === 'reject' && !(entry.harmless?.(value) ?? false)) {
      throw unsupportedParameter(name, `${name} is not supported ${where}: ${entry.why}`);
    }
  }
}
