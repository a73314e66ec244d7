// What the Responses and Messages APIs can ask of a provider that a chat-completions request cannot say:
// thinking with a budget, the signed thinking of earlier turns, the thinking of this answer back, at most one
// tool call. They travel beside the chat request the gateway translates those APIs into (ADR 0901), never
// inside it, so a /v1/chat/completions caller cannot set them; each chat → provider translation reads them.

/** OpenAI's reasoning efforts (the Responses API's `reasoning.effort`). */
export const REASONING_EFFORTS = ['none', 'minimal', 'low', 'medium', 'high', 'xhigh', 'max'] as const;
export type ReasoningEffort = (typeof REASONING_EFFORTS)[number];

/**
 * Thinking tokens per effort, as Google maps efforts to Gemini's thinking budget on its own OpenAI surface;
 * the efforts above `high` get the largest budget every Gemini 2.5 model and Claude accept.
 */
export const EFFORT_BUDGETS: Readonly<Record<ReasoningEffort, number>> = { none: 0, minimal: 0, low: 1024, medium: 8192, high: 24576, xhigh: 24576, max: 24576 };

/** The effort nearest a thinking budget (a Messages caller names budgets), for upstreams that take efforts. */
export function effortForBudget(budget: number): ReasoningEffort {
  if (budget <= 0) return 'none';
  if (budget <= EFFORT_BUDGETS.low) return 'low';
  if (budget <= EFFORT_BUDGETS.medium) return 'medium';
  return 'high';
}

/** Thinking the caller asked for, in a form every provider's setting is made from. */
export interface ReasoningRequest {
  /** Thinking tokens: 0 turns thinking off, `dynamic` lets the model decide. */
  budget: number | 'dynamic';
  /** The effort, for upstreams that take one (OpenAI's format); null: the model's default. */
  effort: ReasoningEffort | null;
  /** Ask the provider for its thinking text (Gemini returns thought summaries only when asked). */
  summaries: boolean;
}

/** Thinking of an earlier assistant turn as Claude returned it, sent back so a tool loop keeps its reasoning. */
export type ThinkingBlock = { kind: 'thinking'; thinking: string; signature: string } | { kind: 'redacted'; data: string };

export interface ChatExtensions {
  reasoning?: ReasoningRequest | undefined;
  /** Thinking of earlier assistant messages, by the message's index in the chat request. */
  thinking?: ReadonlyMap<number, readonly ThinkingBlock[]> | undefined;
  /** Return this answer's thinking (ChatMessageOut.thinking, ChunkDelta.thinking) for the inbound API to show. */
  returnReasoning: boolean;
  /** At most one tool call per answer: the provider is told where it can be, the gateway keeps the first elsewhere. */
  singleToolCall: boolean;
}
