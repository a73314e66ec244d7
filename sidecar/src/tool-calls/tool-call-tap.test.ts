import { EventStreamCodec } from '@smithy/eventstream-codec';
import { describe, expect, it } from 'vitest';
import type { AnswerToolCalls } from './tool-call-collector.ts';
import { toolCallsOfAnswer, ToolCallTap } from './tool-call-tap.ts';

// Worked out by hand: printf '%s' '{"a":1,"b":"x"}' | sha256sum
const A1_BX = 'ecf9e98ec0641e23113ff3ce8bdc78d0ddd249886517fd4a7f68cc83d4e65667';
// printf '%s' '{"city":"Paris"}' | sha256sum
const PARIS = '6e1e312d537bc71b5410b0599f5a508142149e13174c6ee0d1671658845bc67d';
// printf '%s' '{"command":["ls","-l"],"type":"exec"}' | sha256sum
const LS_L = '3b400bfb7eb1dfe9aeee8e364ae8043ee337db0d2bc3720a6f3c1c1f20acfe1c';
// printf '%s' '{"commands":["ls -l"],"max_output_length":4096,"timeout_ms":120000}' | sha256sum
const SHELL_LS_L = '55b5b10c27793d93f8f250c7c3ab107e9a01926d72eb11aef2b202211c366a6f';
// printf '%s' "print('hi')" | sha256sum: a custom tool's free-text input, hashed as it is
const PRINT_HI = 'c2d0a5e0790d97a015387a995c0d0b5eb3e88138466586fc980787c9b1731eb8';
// printf '%s' '{}' | sha256sum
const EMPTY_OBJECT = '44136fa355b3678a1146ad16f7e8649e94fb4fc21fe77e8310c060f61caaff8a';
// printf '%s' '{"a":1,"b":' | sha256sum: a stream cut mid-arguments hashes the text that came
const CUT = '865d3b8e55bb7a252a87ff3080c2844055e6430a63d142e9161638551485a8bd';

function tap(contentType: string | undefined, chunks: (Buffer | string)[]): AnswerToolCalls {
  const reader = new ToolCallTap(contentType);
  for (const chunk of chunks) reader.write(chunk);
  return reader.end();
}

/** The bytes cut into pieces of `size`, as a network delivers them. */
function pieces(bytes: Buffer | string, size: number): Buffer[] {
  const buffer = Buffer.from(bytes);
  const out: Buffer[] = [];
  for (let i = 0; i < buffer.length; i += size) out.push(buffer.subarray(i, i + size));
  return out;
}

const sse = (...events: object[]): string => events.map((e) => `data: ${JSON.stringify(e)}\n\n`).join('');
const namedSse = (...events: ({ type: string } & Record<string, unknown>)[]): string => events.map((e) => `event: ${e.type}\ndata: ${JSON.stringify(e)}\n\n`).join('');

describe('OpenAI Chat Completions', () => {
  const whole = {
    id: 'chatcmpl-B9MHDbslfkBeAs8l4bebGdFOJ6PeG',
    object: 'chat.completion',
    model: 'gpt-4o-2024-08-06',
    choices: [
      {
        index: 0,
        message: {
          role: 'assistant',
          content: null,
          tool_calls: [
            { id: 'call_mszuSIzqtI65i1wAUOE8w5H4', type: 'function', function: { name: 'get_weather', arguments: '{"city": "Paris"}' } },
            { id: 'call_2', type: 'function', function: { name: 'probe', arguments: '{\n  "b": "x",\n  "a": 1\n}' } },
          ],
        },
        finish_reason: 'tool_calls',
      },
    ],
    usage: { prompt_tokens: 82, completion_tokens: 17, total_tokens: 99 },
  };

  it('records each tool call of a whole answer with its id, name and the hash of its canonical arguments', () => {
    expect(tap('application/json', pieces(JSON.stringify(whole), 37))).toEqual({
      calls: [
        { id: 'call_mszuSIzqtI65i1wAUOE8w5H4', name: 'get_weather', argumentsSha256: PARIS },
        { id: 'call_2', name: 'probe', argumentsSha256: A1_BX },
      ],
      dropped: 0,
    });
  });

  it('hashes a streamed answer (arguments in pieces, other whitespace and key order) like the whole one', () => {
    const chunk = (delta: object, finish: string | null = null) => ({ id: 'chatcmpl-1', object: 'chat.completion.chunk', choices: [{ index: 0, delta, finish_reason: finish }] });
    const body =
      sse(
        chunk({ role: 'assistant', content: null, tool_calls: [{ index: 0, id: 'call_2', type: 'function', function: { name: 'probe', arguments: '' } }] }),
        chunk({ tool_calls: [{ index: 0, function: { arguments: '{"a":' } }] }),
        chunk({ tool_calls: [{ index: 0, function: { arguments: '1,"b"' } }] }),
        chunk({ tool_calls: [{ index: 0, function: { arguments: ':"x"}' } }] }),
        chunk({}, 'tool_calls'),
      ) + 'data: [DONE]\n\n';
    expect(tap('text/event-stream', pieces(body, 11))).toEqual({ calls: [{ id: 'call_2', name: 'probe', argumentsSha256: A1_BX }], dropped: 0 });
  });

  it('still records a call whose stream was cut mid-arguments, hashing the text that came', () => {
    const body = sse(
      { choices: [{ index: 0, delta: { tool_calls: [{ index: 0, id: 'call_9', type: 'function', function: { name: 'probe', arguments: '{"a":1,' } }] } }] },
      { choices: [{ index: 0, delta: { tool_calls: [{ index: 0, function: { arguments: '"b":' } }] } }] },
    );
    expect(tap('text/event-stream', [body]).calls).toEqual([{ id: 'call_9', name: 'probe', argumentsSha256: CUT }]);
  });

  it('records nothing for an answer without tool calls', () => {
    const answer = { choices: [{ index: 0, message: { role: 'assistant', content: 'Hello' }, finish_reason: 'stop' }] };
    expect(tap('application/json', [JSON.stringify(answer)])).toEqual({ calls: [], dropped: 0 });
  });
});

describe('OpenAI Responses', () => {
  const functionCall = {
    type: 'function_call',
    id: 'fc_67ca09c6bedc8190a7abfec07b1a1332',
    call_id: 'call_unLAR8MvFNptuiZK6K6HCy5k',
    name: 'probe',
    arguments: '{"b":"x","a":1}',
    status: 'completed',
  };
  const shellCall = {
    type: 'local_shell_call',
    id: 'lsh_1',
    call_id: 'call_shell',
    action: { type: 'exec', command: ['ls', '-l'] },
    status: 'completed',
  };

  it('records function_call items by call_id, and local_shell_call as local_shell with its action as the arguments', () => {
    const answer = { id: 'resp_1', object: 'response', status: 'completed', output: [{ type: 'message', id: 'msg_1', content: [] }, functionCall, shellCall] };
    expect(tap('application/json', [JSON.stringify(answer)]).calls).toEqual([
      { id: 'call_unLAR8MvFNptuiZK6K6HCy5k', name: 'probe', argumentsSha256: A1_BX },
      { id: 'call_shell', name: 'local_shell', argumentsSha256: LS_L },
    ]);
  });

  it('reads a stream from its output items, once each, not again from response.completed', () => {
    const body = namedSse(
      { type: 'response.created', response: { id: 'resp_1', output: [] } },
      { type: 'response.output_item.added', output_index: 0, item: { ...functionCall, arguments: '', status: 'in_progress' } },
      { type: 'response.function_call_arguments.delta', output_index: 0, item_id: functionCall.id, delta: '{"b":"x",' },
      { type: 'response.function_call_arguments.delta', output_index: 0, item_id: functionCall.id, delta: '"a":1}' },
      { type: 'response.output_item.done', output_index: 0, item: functionCall },
      { type: 'response.output_item.done', output_index: 1, item: shellCall },
      { type: 'response.completed', response: { id: 'resp_1', output: [functionCall, shellCall] } },
    );
    expect(tap('text/event-stream; charset=utf-8', pieces(body, 64)).calls).toEqual([
      { id: 'call_unLAR8MvFNptuiZK6K6HCy5k', name: 'probe', argumentsSha256: A1_BX },
      { id: 'call_shell', name: 'local_shell', argumentsSha256: LS_L },
    ]);
  });

  // The shell tool's call (provenance.md §8.1 FunctionShellCall): the commands the caller runs, most worth a span.
  const functionShellCall = {
    type: 'shell_call',
    id: 'sh_1',
    call_id: 'call_sh',
    action: { timeout_ms: 120000, commands: ['ls -l'], max_output_length: 4096 },
    status: 'completed',
  };

  it('records a shell_call as shell with its action as the arguments, whole and streamed', () => {
    const answer = { id: 'resp_2', object: 'response', status: 'completed', output: [functionShellCall] };
    expect(tap('application/json', [JSON.stringify(answer)]).calls).toEqual([{ id: 'call_sh', name: 'shell', argumentsSha256: SHELL_LS_L }]);
    const body = namedSse(
      { type: 'response.output_item.added', output_index: 0, item: { ...functionShellCall, action: { commands: [] }, status: 'in_progress' } },
      { type: 'response.shell_call_command.delta', output_index: 0, command_index: 0, delta: 'ls -l' },
      { type: 'response.output_item.done', output_index: 0, item: functionShellCall },
      { type: 'response.completed', response: { id: 'resp_2', output: [functionShellCall] } },
    );
    expect(tap('text/event-stream', pieces(body, 64)).calls).toEqual([{ id: 'call_sh', name: 'shell', argumentsSha256: SHELL_LS_L }]);
  });
  // A custom tool (type custom, free-form input): the call carries `input` text, not JSON `arguments`.
  const customToolCall = { type: 'custom_tool_call', id: 'ctc_1', call_id: 'call_code', name: 'code_exec', input: "print('hi')", status: 'completed' };

  it('records a custom_tool_call by its name, hashing its input text, whole and streamed', () => {
    const answer = { id: 'resp_3', object: 'response', status: 'completed', output: [customToolCall] };
    expect(tap('application/json', [JSON.stringify(answer)]).calls).toEqual([{ id: 'call_code', name: 'code_exec', argumentsSha256: PRINT_HI }]);
    const body = namedSse(
      { type: 'response.output_item.added', output_index: 0, item: { ...customToolCall, input: '', status: 'in_progress' } },
      { type: 'response.custom_tool_call_input.delta', output_index: 0, item_id: 'ctc_1', delta: 'print(' },
      { type: 'response.custom_tool_call_input.delta', output_index: 0, item_id: 'ctc_1', delta: "'hi')" },
      { type: 'response.custom_tool_call_input.done', output_index: 0, item_id: 'ctc_1', input: "print('hi')" },
      { type: 'response.completed', response: { id: 'resp_3', output: [customToolCall] } },
    );
    // No output_item.done: the call is whole from its deltas alone, as when a stream ends without it.
    expect(tap('text/event-stream', pieces(body, 40)).calls).toEqual([{ id: 'call_code', name: 'code_exec', argumentsSha256: PRINT_HI }]);
  });
});

describe('Anthropic Messages', () => {
  const toolUse = { type: 'tool_use', id: 'toolu_01A09q90qw90lq917835lq9', name: 'probe', input: { b: 'x', a: 1 } };

  it('records the tool_use blocks of a whole answer, hashing the input object canonically', () => {
    const answer = {
      id: 'msg_1',
      type: 'message',
      role: 'assistant',
      content: [{ type: 'text', text: 'Let me look.' }, toolUse],
      stop_reason: 'tool_use',
      usage: { input_tokens: 10, output_tokens: 5 },
    };
    expect(tap('application/json', [JSON.stringify(answer)]).calls).toEqual([{ id: 'toolu_01A09q90qw90lq917835lq9', name: 'probe', argumentsSha256: A1_BX }]);
  });

  it('joins a stream input_json_delta pieces by block index; a tool without arguments hashes as {}', () => {
    const body = namedSse(
      { type: 'message_start', message: { id: 'msg_1', type: 'message', role: 'assistant', content: [], usage: { input_tokens: 10, output_tokens: 1 } } },
      { type: 'content_block_start', index: 0, content_block: { type: 'text', text: '' } },
      { type: 'content_block_delta', index: 0, delta: { type: 'text_delta', text: 'Let me look "tool_use".' } },
      { type: 'content_block_stop', index: 0 },
      { type: 'content_block_start', index: 1, content_block: { type: 'tool_use', id: 'toolu_1', name: 'probe', input: {} } },
      { type: 'content_block_delta', index: 1, delta: { type: 'input_json_delta', partial_json: '' } },
      { type: 'content_block_delta', index: 1, delta: { type: 'input_json_delta', partial_json: '{"a": 1, ' } },
      { type: 'content_block_delta', index: 1, delta: { type: 'input_json_delta', partial_json: '"b": "x"}' } },
      { type: 'content_block_stop', index: 1 },
      { type: 'content_block_start', index: 2, content_block: { type: 'tool_use', id: 'toolu_2', name: 'now', input: {} } },
      { type: 'content_block_stop', index: 2 },
      { type: 'message_delta', delta: { stop_reason: 'tool_use' }, usage: { output_tokens: 30 } },
      { type: 'message_stop' },
    );
    expect(tap('text/event-stream', pieces(body, 50)).calls).toEqual([
      { id: 'toolu_1', name: 'probe', argumentsSha256: A1_BX },
      { id: 'toolu_2', name: 'now', argumentsSha256: EMPTY_OBJECT },
    ]);
  });
});

describe('Gemini', () => {
  const candidate = (parts: object[]) => ({ candidates: [{ content: { role: 'model', parts }, finishReason: 'STOP' }], modelVersion: 'gemini-2.5-flash' });

  it('records functionCall parts with a null id unless the part has one', () => {
    const answer = candidate([{ functionCall: { name: 'probe', args: { b: 'x', a: 1 } } }, { functionCall: { id: 'fc-7', name: 'get_weather', args: { city: 'Paris' } } }]);
    expect(tap('application/json', [JSON.stringify(answer)]).calls).toEqual([
      { id: null, name: 'probe', argumentsSha256: A1_BX },
      { id: 'fc-7', name: 'get_weather', argumentsSha256: PARIS },
    ]);
  });

  it('reads each chunk of an SSE stream and of a JSON array stream', () => {
    const first = { candidates: [{ content: { role: 'model', parts: [{ text: 'Looking' }] } }] };
    const second = candidate([{ functionCall: { name: 'probe', args: { a: 1, b: 'x' } } }]);
    const expected = [{ id: null, name: 'probe', argumentsSha256: A1_BX }];
    expect(tap('text/event-stream', pieces(sse(first, second), 9)).calls).toEqual(expected);
    expect(tap('application/json; charset=UTF-8', pieces(`[${JSON.stringify(first)}\r\n,${JSON.stringify(second)}]`, 9)).calls).toEqual(expected);
  });
});

describe('Bedrock', () => {
  const codec = new EventStreamCodec(
    (bytes) => Buffer.from(bytes).toString('utf8'),
    (text) => Buffer.from(text, 'utf8'),
  );
  const frame = (type: string, payload: object): Buffer =>
    Buffer.from(
      codec.encode({
        headers: {
          ':event-type': { type: 'string', value: type },
          ':content-type': { type: 'string', value: 'application/json' },
          ':message-type': { type: 'string', value: 'event' },
        },
        body: Buffer.from(JSON.stringify(payload)),
      }),
    );
  const chunkFrame = (event: object): Buffer => frame('chunk', { bytes: Buffer.from(JSON.stringify(event)).toString('base64'), p: 'abc' });

  it('records Converse toolUse blocks of a whole answer', () => {
    const answer = {
      output: {
        message: { role: 'assistant', content: [{ text: 'Checking.' }, { toolUse: { toolUseId: 'tooluse_kZJMlvQmRJ6eAyJE5GIl7Q', name: 'probe', input: { a: 1, b: 'x' } } }] },
      },
      stopReason: 'tool_use',
      usage: { inputTokens: 30, outputTokens: 20, totalTokens: 50 },
    };
    expect(tap('application/json', [JSON.stringify(answer)]).calls).toEqual([{ id: 'tooluse_kZJMlvQmRJ6eAyJE5GIl7Q', name: 'probe', argumentsSha256: A1_BX }]);
  });

  it('joins a ConverseStream toolUse input pieces by content block', () => {
    const body = Buffer.concat([
      frame('messageStart', { role: 'assistant', p: 'ab' }),
      frame('contentBlockStart', { contentBlockIndex: 0, start: { toolUse: { toolUseId: 'tooluse_1', name: 'probe' } }, p: 'abc' }),
      frame('contentBlockDelta', { contentBlockIndex: 0, delta: { toolUse: { input: '{"b": "x",' } }, p: 'a' }),
      frame('contentBlockDelta', { contentBlockIndex: 0, delta: { toolUse: { input: ' "a": 1}' } }, p: 'a' }),
      frame('contentBlockStop', { contentBlockIndex: 0, p: 'ab' }),
      frame('messageStop', { stopReason: 'tool_use', p: 'ab' }),
      frame('metadata', { usage: { inputTokens: 30, outputTokens: 20, totalTokens: 50 }, metrics: { latencyMs: 300 }, p: 'ab' }),
    ]);
    expect(tap('application/vnd.amazon.eventstream', pieces(body, 40)).calls).toEqual([{ id: 'tooluse_1', name: 'probe', argumentsSha256: A1_BX }]);
  });

  it('reads the Anthropic events inside an InvokeModelWithResponseStream', () => {
    const body = Buffer.concat([
      chunkFrame({ type: 'content_block_start', index: 0, content_block: { type: 'tool_use', id: 'toolu_bdrk_1', name: 'probe', input: {} } }),
      chunkFrame({ type: 'content_block_delta', index: 0, delta: { type: 'input_json_delta', partial_json: '{"a":1,"b":"x"}' } }),
      chunkFrame({ type: 'message_stop' }),
    ]);
    expect(tap('application/vnd.amazon.eventstream', [body]).calls).toEqual([{ id: 'toolu_bdrk_1', name: 'probe', argumentsSha256: A1_BX }]);
  });
});

describe('an answer the gateway built (translated into the caller API)', () => {
  it('reads a chat completion object as the caller receives it', () => {
    const answer = {
      object: 'chat.completion',
      choices: [{ index: 0, message: { role: 'assistant', tool_calls: [{ id: 'call_x', type: 'function', function: { name: 'probe', arguments: '{"a":1,"b":"x"}' } }] } }],
    };
    expect(toolCallsOfAnswer(answer)).toEqual({ calls: [{ id: 'call_x', name: 'probe', argumentsSha256: A1_BX }], dropped: 0 });
  });

  it('sniffs a body sent without a Content-Type', () => {
    expect(tap(undefined, ['\n', JSON.stringify({ content: [{ type: 'tool_use', id: 'toolu_1', name: 'probe', input: { a: 1, b: 'x' } }] })]).calls).toHaveLength(1);
  });
});
