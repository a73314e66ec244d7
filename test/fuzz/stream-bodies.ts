// Upstream answers for the stream parsers: each wire format the routes read usage from (OpenAI SSE, Anthropic
// SSE, Gemini SSE and its JSON array, Bedrock's binary event stream, plain JSON), built valid and then, most of
// the time, damaged: usage numbers from the edges, bytes flipped, cut short, garbage inserted, events
// repeated, a huge event. The bytes are delivered in random pieces, so every split point gets exercised.

import { chunkFrame } from '../fakes/llm-bedrock.ts';
import type { Random } from './seeded-random.ts';

export type StreamFormat = 'openai-sse' | 'openai-json' | 'anthropic-sse' | 'anthropic-json' | 'gemini-sse' | 'gemini-array' | 'bedrock-stream';

export interface UpstreamAnswer {
  contentType: string | null;
  body: Buffer;
  /** The body cut into the pieces the fake upstream writes one by one. */
  pieces: Buffer[];
}

const COUNTS: readonly unknown[] = [0, 1, 12, 4096, 1e8, 1e8 + 1, 1.5, -3, 1e20, 1.7e308, '12', null, true, [], {}];

function count(random: Random): unknown {
  return random.chance(0.6) ? random.int(0, 5000) : random.pick(COUNTS);
}

function texts(random: Random): string[] {
  return Array.from({ length: random.int(1, 5) }, () => random.pick(['Hel', 'lo', ' wor', 'ld', '"', '\n', 'data: x', '\u2028', '😀']));
}

function sse(events: { event?: string; data: unknown }[], random: Random): string {
  const eol = random.chance(0.2) ? '\r\n' : '\n';
  return events.map((e) => `${e.event ? `event: ${e.event}${eol}` : ''}data: ${typeof e.data === 'string' ? e.data : JSON.stringify(e.data)}${eol}${eol}`).join('');
}

function openAiChunks(random: Random): { event?: string; data: unknown }[] {
  const chunk = (delta: unknown, extra: Record<string, unknown> = {}) => ({
    data: { id: 'c1', object: 'chat.completion.chunk', model: 'gpt-4o-mini', choices: [{ index: 0, delta, finish_reason: null }], ...extra },
  });
  return [
    ...texts(random).map((content) => chunk({ content })),
    {
      data: {
        id: 'c1',
        object: 'chat.completion.chunk',
        model: 'gpt-4o-mini',
        choices: [],
        usage: { prompt_tokens: count(random), completion_tokens: count(random), total_tokens: count(random), prompt_tokens_details: { cached_tokens: count(random) } },
      },
    },
    { data: '[DONE]' },
  ];
}

function anthropicEvents(random: Random): { event?: string; data: { type: string; [field: string]: unknown } }[] {
  const usage = { input_tokens: count(random), cache_read_input_tokens: count(random), cache_creation_input_tokens: count(random), output_tokens: count(random) };
  const events = [
    { type: 'message_start', message: { id: 'msg_1', type: 'message', role: 'assistant', model: 'claude-sonnet-4-20250514', content: [], usage } },
    { type: 'content_block_start', index: 0, content_block: { type: 'text', text: '' } },
    ...texts(random).map((text) => ({ type: 'content_block_delta', index: 0, delta: { type: 'text_delta', text } })),
    { type: 'content_block_stop', index: 0 },
    { type: 'message_delta', delta: { stop_reason: 'end_turn' }, usage: { output_tokens: count(random) } },
    { type: 'message_stop' },
  ];
  return events.map((data) => ({ event: data.type, data }));
}

function geminiChunks(random: Random): unknown[] {
  const pieces = texts(random);
  return pieces.map((text, i) => ({
    candidates: [{ content: { role: 'model', parts: [{ text }] }, ...(i === pieces.length - 1 ? { finishReason: 'STOP' } : {}) }],
    usageMetadata: {
      promptTokenCount: count(random),
      candidatesTokenCount: count(random),
      totalTokenCount: count(random),
      cachedContentTokenCount: count(random),
      thoughtsTokenCount: count(random),
    },
    modelVersion: 'gemini-2.5-flash',
  }));
}

function valid(format: StreamFormat, random: Random): { contentType: string; body: Buffer } {
  switch (format) {
    case 'openai-sse':
      return { contentType: 'text/event-stream', body: Buffer.from(sse(openAiChunks(random), random)) };
    case 'openai-json':
      return {
        contentType: 'application/json',
        body: Buffer.from(
          JSON.stringify({
            id: 'c1',
            object: 'chat.completion',
            model: 'gpt-4o-mini',
            choices: [{ index: 0, message: { role: 'assistant', content: texts(random).join('') } }],
            usage: { prompt_tokens: count(random), completion_tokens: count(random), total_tokens: count(random) },
          }),
        ),
      };
    case 'anthropic-sse':
      return { contentType: 'text/event-stream', body: Buffer.from(sse(anthropicEvents(random), random)) };
    case 'anthropic-json':
      return {
        contentType: 'application/json',
        body: Buffer.from(
          JSON.stringify({
            id: 'msg_1',
            type: 'message',
            role: 'assistant',
            model: 'claude-sonnet-4-20250514',
            content: [{ type: 'text', text: texts(random).join('') }],
            usage: { input_tokens: count(random), output_tokens: count(random) },
          }),
        ),
      };
    case 'gemini-sse':
      return {
        contentType: 'text/event-stream',
        body: Buffer.from(
          sse(
            geminiChunks(random).map((data) => ({ data })),
            random,
          ),
        ),
      };
    case 'gemini-array':
      return {
        contentType: 'application/json',
        body: Buffer.from(
          `[${geminiChunks(random)
            .map((c) => JSON.stringify(c))
            .join(',\r\n')}]`,
        ),
      };
    case 'bedrock-stream':
      return { contentType: 'application/vnd.amazon.eventstream', body: Buffer.concat(anthropicEvents(random).map((e) => chunkFrame(e.data))) };
  }
}

function damage(body: Buffer, random: Random): Buffer {
  const roll = random.next();
  if (roll < 0.45) return body; // valid (with edge-case usage numbers)
  if (roll < 0.6) {
    const out = Buffer.from(body);
    for (let i = random.int(1, 6); i > 0 && out.length > 0; i--) out[random.int(0, out.length - 1)] = random.int(0, 255);
    return out;
  }
  if (roll < 0.72) return body.subarray(0, random.int(0, body.length));
  if (roll < 0.82) {
    const at = random.int(0, body.length);
    const junk = Buffer.from(
      random.pick([
        '\n\n',
        'data: {"usage":',
        'event: message_delta\ndata: {"type":"message_delta","usage":{"output_tokens":1e308}}\n\n',
        ']',
        '\u0000\u0000\u0000\u0010',
        'data: [DONE]\n\n',
      ]),
    );
    return Buffer.concat([body.subarray(0, at), junk, body.subarray(at)]);
  }
  if (roll < 0.92) return Buffer.concat([body, body.subarray(Math.floor(body.length / 2))]);
  // one event far over the extractor's per-event memory bound (ADR 0200)
  const at = random.int(0, body.length);
  return Buffer.concat([body.subarray(0, at), Buffer.from(`data: {"pad":"${'x'.repeat(random.int(70_000, 300_000))}"}\n\n`), body.subarray(at)]);
}

function cut(body: Buffer, random: Random): Buffer[] {
  if (random.chance(0.3)) return [body];
  const pieces: Buffer[] = [];
  for (let at = 0; at < body.length;) {
    const size = random.chance(0.5) ? random.int(1, 8) : random.int(9, 4096);
    pieces.push(body.subarray(at, at + size));
    at += size;
  }
  return pieces;
}

export function upstreamAnswer(format: StreamFormat, random: Random): UpstreamAnswer {
  const { contentType, body: validBody } = valid(format, random);
  const body = damage(validBody, random);
  // Now and then no Content-Type at all: the extractor then goes by the first byte.
  return { contentType: random.chance(0.1) ? null : contentType, body, pieces: cut(body, random) };
}
