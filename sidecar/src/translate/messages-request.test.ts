import { readFileSync } from 'node:fs';
import { resolve } from 'node:path';
import { describe, expect, it } from 'vitest';
import { MESSAGES_PARAMETERS, messagesToChat } from './messages-request.ts';
import { refusal } from './testdata/refusal.ts';

describe('Messages request → chat completions', () => {
  it("turns Claude Code's turns into chat turns: tool results first, their images after, thinking dropped", () => {
    const out = messagesToChat({
      model: 'gpt-5',
      max_tokens: 32000,
      system: [
        { type: 'text', text: 'You are Claude Code.', cache_control: { type: 'ephemeral' } },
        { type: 'text', text: 'Be brief.' },
      ],
      messages: [
        { role: 'user', content: [{ type: 'text', text: 'Read the screenshot.', cache_control: { type: 'ephemeral' } }] },
        {
          role: 'assistant',
          content: [
            { type: 'thinking', thinking: 'I should read it.', signature: '' },
            { type: 'text', text: 'Reading.' },
            { type: 'tool_use', id: 'call_1', name: 'Read', input: { path: 'a.png' } },
            { type: 'tool_use', id: 'call_2', name: 'Read', input: { path: 'b.txt' } },
          ],
        },
        {
          role: 'user',
          content: [
            {
              type: 'tool_result',
              tool_use_id: 'call_1',
              content: [
                { type: 'text', text: 'An image:' },
                { type: 'image', source: { type: 'base64', media_type: 'image/png', data: 'AAAA' } },
              ],
            },
            { type: 'tool_result', tool_use_id: 'call_2', content: 'no such file', is_error: true },
            { type: 'text', text: 'What does it show?' },
          ],
        },
      ],
      tools: [{ name: 'Read', description: 'Read a file', input_schema: { type: 'object', properties: { path: { type: 'string' } } }, cache_control: { type: 'ephemeral' } }],
      tool_choice: { type: 'auto', disable_parallel_tool_use: true },
      metadata: { user_id: 'user_1' },
      stop_sequences: ['END'],
      temperature: 1,
      thinking: { type: 'enabled', budget_tokens: 4000 },
      stream: true,
      service_tier: 'auto',
      cache_control: { type: 'ephemeral' },
    });
    expect(out.chat).toEqual({
      model: 'gpt-5',
      messages: [
        { role: 'system', content: 'You are Claude Code.' },
        { role: 'system', content: 'Be brief.' },
        { role: 'user', content: [{ type: 'text', text: 'Read the screenshot.' }] },
        {
          role: 'assistant',
          content: 'Reading.',
          tool_calls: [
            { id: 'call_1', type: 'function', function: { name: 'Read', arguments: '{"path":"a.png"}' } },
            { id: 'call_2', type: 'function', function: { name: 'Read', arguments: '{"path":"b.txt"}' } },
          ],
        },
        { role: 'tool', tool_call_id: 'call_1', content: 'An image:' },
        { role: 'tool', tool_call_id: 'call_2', content: 'Error: no such file' },
        { role: 'user', content: [{ type: 'image_url', image_url: { url: 'data:image/png;base64,AAAA' } }] },
        { role: 'user', content: [{ type: 'text', text: 'What does it show?' }] },
      ],
      max_completion_tokens: 32000,
      stop: ['END'],
      temperature: 1,
      user: 'user_1',
      tools: [{ type: 'function', function: { name: 'Read', description: 'Read a file', parameters: { type: 'object', properties: { path: { type: 'string' } } } } }],
      tool_choice: 'auto',
      stream: true,
      stream_options: { include_usage: true },
    });
    expect(out.extensions).toEqual({ reasoning: { budget: 4000, effort: 'medium', summaries: true }, returnReasoning: true, singleToolCall: true });
    expect(out.origins).toEqual(['system[0]', 'system[1]', 'messages[0]', 'messages[1]', 'messages[2]', 'messages[2]', 'messages[2]', 'messages[2]']);
  });

  it('maps tool choices, structured output, and the thinking settings', () => {
    const base = { model: 'm', max_tokens: 10, messages: [{ role: 'user', content: 'x' }] };
    const choice = (tool_choice: unknown) => messagesToChat({ ...base, tool_choice }).chat.tool_choice;
    expect([choice({ type: 'auto' }), choice({ type: 'any' }), choice({ type: 'none' }), choice({ type: 'tool', name: 'f' })]).toEqual([
      'auto',
      'required',
      'none',
      { type: 'function', function: { name: 'f' } },
    ]);
    const schema = { type: 'object', properties: { a: { type: 'number' } } };
    expect(messagesToChat({ ...base, output_config: { format: { type: 'json_schema', schema } } }).chat.response_format).toEqual({
      type: 'json_schema',
      json_schema: { name: 'response', schema },
    });
    expect(messagesToChat({ ...base, thinking: { type: 'adaptive' } }).extensions.reasoning).toEqual({ budget: 'dynamic', effort: null, summaries: true });
    expect(messagesToChat({ ...base, thinking: { type: 'disabled' } }).extensions).toMatchObject({ reasoning: { budget: 0, effort: null }, returnReasoning: false });
    expect(messagesToChat({ ...base, output_config: { effort: 'low' } }).extensions.reasoning).toEqual({ budget: 1024, effort: 'low', summaries: true });
  });

  it.each([
    [{ tools: [{ type: 'web_search_20250305', name: 'web_search' }] }, 'tools[0].type'],
    [{ tools: [{ name: 'f' }] }, 'tools[0].input_schema'],
    [{ top_k: 40 }, 'top_k'],
    [{ container: 'c' }, 'container'],
    [{ mcp_servers: [] }, 'mcp_servers'],
    [{ max_tokens: 0 }, 'max_tokens'],
    [{ messages: [{ role: 'user', content: [{ type: 'document', source: { type: 'base64', media_type: 'application/pdf', data: 'x' } }] }] }, 'messages[0].content[0].type'],
    [{ messages: [{ role: 'user', content: [{ type: 'image', source: { type: 'file', file_id: 'f' } }] }] }, 'messages[0].content[0].source'],
    [{ messages: [{ role: 'system', content: 'x' }] }, 'messages[0].role'],
    [{ messages: [{ role: 'assistant', content: [{ type: 'server_tool_use', id: 's', name: 'web_search', input: {} }] }] }, 'messages[0].content[0].type'],
    [{ thinking: { type: 'enabled' } }, 'thinking.budget_tokens'],
    [{ made_up: 1 }, 'made_up'],
  ])('refuses %j with a 400 naming %s', (extra, param) => {
    const error = refusal(() => messagesToChat({ model: 'm', max_tokens: 10, messages: [{ role: 'user', content: 'x' }], ...extra }));
    expect(error.statusCode).toBe(400);
    expect(error.param).toBe(param);
  });
});

describe('the Messages parameter table', () => {
  it('is documented for users: every parameter appears in docs/responses-and-messages.md', () => {
    const doc = readFileSync(resolve(import.meta.dirname, '../../../docs/responses-and-messages.md'), 'utf8');
    expect(Object.keys(MESSAGES_PARAMETERS).filter((name) => !doc.includes(`\`${name}\``))).toEqual([]);
  });
});
