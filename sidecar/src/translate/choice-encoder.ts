// What the Responses and Messages stream encoders share: each chat chunk's first choice read part by part in
// one order (thinking, text, tool calls), its finish reason and the usage kept for the stream's last events.
// Each encoder writes the parts as its API's events.

import type { ChunkEncoder } from './chat-stream.ts';
import type { ChatChunk, ChatUsage, ChunkToolCallDelta, FinishReason, ThinkingDelta } from './openai-chat.ts';

export abstract class ChoiceEncoder implements ChunkEncoder {
  protected finish: FinishReason | null = null;
  protected usage: ChatUsage | null = null;

  chunk(chunk: ChatChunk): string {
    let out = this.begin(chunk.model);
    const choice = chunk.choices[0];
    if (choice !== undefined) {
      const delta = choice.delta;
      if (delta.thinking !== undefined) out += this.thinking(delta.thinking);
      if (typeof delta.content === 'string' && delta.content !== '') out += this.text(delta.content);
      for (const call of delta.tool_calls ?? []) out += this.toolCall(call);
      if (choice.finish_reason) this.finish = choice.finish_reason;
    }
    if (chunk.usage) this.usage = chunk.usage;
    return out;
  }

  abstract end(): string;
  abstract fail(route: string, message: string, code: string | null): string;

  /** The stream's first events, once (`model` is the upstream's); '' after. */
  protected abstract begin(model: string): string;
  protected abstract thinking(delta: ThinkingDelta): string;
  protected abstract text(text: string): string;
  protected abstract toolCall(call: ChunkToolCallDelta): string;
}
