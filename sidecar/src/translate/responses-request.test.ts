import { readFileSync } from 'node:fs';
import { resolve } from 'node:path';
import { describe, expect, it } from 'vitest';
import { refusal } from './testdata/refusal.ts';
import { decodeThinking, encodeThinking, RESPONSES_PARAMETERS, responsesToChat, type ResponseItem } from './responses-request.ts';

const signed = encodeThinking({ kind: 'thinking', thinking: 'Check the weather tool.', signature: 'c2lnbmVk' });

describe('Responses request → chat completions', () => {
  it("turns an agent's items into chat turns, the signed thinking beside its assistant turn", () => {
    const out = responsesToChat(
      {
        model: 'claude-sonnet-4',
        instructions: 'You are terse.',
        input: [
          {
            role: 'user',
            content: [
              { type: 'input_text', text: 'Weather here?' },
              { type: 'input_image', image_url: 'data:image/png;base64,AAAA', detail: 'low' },
            ],
          },
          { type: 'reasoning', id: 'rs_1', summary: [{ type: 'summary_text', text: 'Check the weather tool.' }], encrypted_content: signed },
          { type: 'message', role: 'assistant', content: [{ type: 'output_text', text: 'Looking it up.' }] },
          { type: 'function_call', id: 'fc_1', call_id: 'call_1', name: 'get_weather', arguments: '{"city":"Paris"}' },
          {
            type: 'function_call_output',
            call_id: 'call_1',
            output: [
              { type: 'input_text', text: 'sunny' },
              { type: 'input_image', image_url: 'https://example.com/sky.png' },
            ],
          },
          { role: 'user', content: 'Thanks' },
        ],
        max_output_tokens: 500,
        tools: [{ type: 'function', name: 'get_weather', parameters: { type: 'object' }, strict: true }],
        tool_choice: { type: 'function', name: 'get_weather' },
        parallel_tool_calls: false,
        reasoning: { effort: 'high', summary: 'auto' },
        text: { format: { type: 'json_schema', name: 'weather', schema: { type: 'object' } } },
        stream: true,
        store: false,
        include: ['reasoning.encrypted_content'],
        metadata: { team: 'a' },
        prompt_cache_key: 'k',
      },
      [],
    );
    expect(out.chat).toEqual({
      model: 'claude-sonnet-4',
      messages: [
        { role: 'system', content: 'You are terse.' },
        {
          role: 'user',
          content: [
            { type: 'text', text: 'Weather here?' },
            { type: 'image_url', image_url: { url: 'data:image/png;base64,AAAA', detail: 'low' } },
          ],
        },
        { role: 'assistant', content: 'Looking it up.', tool_calls: [{ id: 'call_1', type: 'function', function: { name: 'get_weather', arguments: '{"city":"Paris"}' } }] },
        { role: 'tool', tool_call_id: 'call_1', content: 'sunny' },
        // chat's tool messages hold text only: the output's image follows them as the user's
        { role: 'user', content: [{ type: 'image_url', image_url: { url: 'https://example.com/sky.png' } }] },
        { role: 'user', content: 'Thanks' },
      ],
      max_completion_tokens: 500,
      tools: [{ type: 'function', function: { name: 'get_weather', parameters: { type: 'object' }, strict: true } }],
      tool_choice: { type: 'function', function: { name: 'get_weather' } },
      response_format: { type: 'json_schema', json_schema: { name: 'weather', schema: { type: 'object' } } },
      stream: true,
      stream_options: { include_usage: true },
    });
    expect(out.extensions).toMatchObject({ reasoning: { budget: 24576, effort: 'high', summaries: true }, returnReasoning: true, singleToolCall: true });
    expect([...out.extensions.thinking!]).toEqual([[2, [{ kind: 'thinking', thinking: 'Check the weather tool.', signature: 'c2lnbmVk' }]]]);
    expect(out.origins).toEqual(['instructions', 'input[0]', 'input[2]', 'input[4]', 'input[4]', 'input[5]']);
  });

  it('puts a stored conversation before the input, and names its items by previous_response_id', () => {
    const history: ResponseItem[] = [
      { type: 'message', role: 'user', content: 'Hi' },
      { id: 'msg_1', type: 'message', status: 'completed', role: 'assistant', content: [{ type: 'output_text', text: 'Hello!', annotations: [] }] },
    ];
    const out = responsesToChat({ model: 'm', input: 'And now?' }, history);
    expect(out.chat.messages).toEqual([
      { role: 'user', content: 'Hi' },
      { role: 'assistant', content: 'Hello!' },
      { role: 'user', content: 'And now?' },
    ]);
    expect(out.origins).toEqual(['previous_response_id', 'previous_response_id', 'input[0]']);
    expect(out.items).toHaveLength(3);
    expect(out.extensions).toEqual({ reasoning: undefined, thinking: new Map(), returnReasoning: false, singleToolCall: false });
  });

  it("drops reasoning it cannot send back: a summary alone, OpenAI's own encrypted content, thinking no model turn followed", () => {
    const out = responsesToChat(
      {
        model: 'm',
        input: [
          { role: 'user', content: 'Hi' },
          { type: 'reasoning', id: 'rs_1', summary: [{ type: 'summary_text', text: 'hmm' }] },
          { type: 'reasoning', id: 'rs_2', summary: [], encrypted_content: 'gAAAAABo-openai' },
          { type: 'message', role: 'assistant', content: 'Hello' },
          { type: 'reasoning', id: 'rs_3', summary: [], encrypted_content: signed },
          { role: 'user', content: 'Again' },
        ],
      },
      [],
    );
    expect(out.extensions.thinking!.size).toBe(0);
    expect((out.chat.messages as unknown[]).length).toBe(3);
  });

  it.each([
    [{ tools: [{ type: 'web_search' }] }, 'tools[0].type'],
    [{ tools: [{ type: 'custom', name: 'apply_patch' }] }, 'tools[0].type'],
    [{ input: [{ type: 'item_reference', id: 'msg_1' }] }, 'input[0].type'],
    [{ input: [{ role: 'user', content: [{ type: 'input_file', file_id: 'file_1' }] }] }, 'input[0].content[0].type'],
    [{ input: [{ role: 'user', content: [{ type: 'input_image', file_id: 'file_1' }] }] }, 'input[0].content[0].image_url'],
    [{ input: [{ type: 'function_call_output', output: 'x' }] }, 'input[0].call_id'],
    [{ include: ['file_search_call.results'] }, 'include[0]'],
    [{ truncation: 'auto' }, 'truncation'],
    [{ background: true }, 'background'],
    [{ conversation: 'conv_1' }, 'conversation'],
    [{ text: { verbosity: 'low' } }, 'text.verbosity'],
    [{ reasoning: { effort: 'extreme' } }, 'reasoning.effort'],
    [{ tool_choice: { type: 'allowed_tools', tools: [] } }, 'tool_choice'],
    [{ temprature: 1 }, 'temprature'],
  ])('refuses %j with a 400 naming %s', (extra, param) => {
    const error = refusal(() => responsesToChat({ model: 'm', input: 'Hi', ...extra }, []));
    expect(error.statusCode).toBe(400);
    expect(error.param).toBe(param);
  });

  it('accepts parameters at the value that changes nothing', () => {
    const out = responsesToChat({ model: 'm', input: 'Hi', truncation: 'disabled', background: false, top_logprobs: 0, service_tier: 'auto', text: { verbosity: 'medium' } }, []);
    expect(out.chat).toEqual({ model: 'm', messages: [{ role: 'user', content: 'Hi' }], service_tier: 'auto' });
  });
});

describe("Claude's thinking in encrypted_content", () => {
  it('reads back what it wrote, and nothing else', () => {
    const redacted = encodeThinking({ kind: 'redacted', data: 'EuYBCkQYAiJA' });
    expect(decodeThinking(redacted)).toEqual({ kind: 'redacted', data: 'EuYBCkQYAiJA' });
    expect(decodeThinking(signed)).toEqual({ kind: 'thinking', thinking: 'Check the weather tool.', signature: 'c2lnbmVk' });
    expect(decodeThinking('gAAAAABo-openai')).toBeUndefined();
    expect(decodeThinking('tollgate.thinking.v1.bm90IGpzb24')).toBeUndefined();
    // an unsigned block (Gemini's thoughts) is never written, and would not be read
    expect(decodeThinking(encodeThinking({ kind: 'thinking', thinking: 'x', signature: '' }))).toBeUndefined();
  });
});

describe('the Responses parameter table', () => {
  it('is documented for users: every parameter appears in docs/responses-and-messages.md', () => {
    const doc = readFileSync(resolve(import.meta.dirname, '../../../docs/responses-and-messages.md'), 'utf8');
    expect(Object.keys(RESPONSES_PARAMETERS).filter((name) => !doc.includes(`\`${name}\``))).toEqual([]);
  });
});
