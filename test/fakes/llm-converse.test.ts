// The fake Converse refuses what Bedrock's validation refuses, so a translation that sends it is caught.

import { describe, expect, it } from 'vitest';
import { converseProblem } from './llm-converse.ts';

const user = { role: 'user', content: [{ text: 'Hi' }] };
const toolUse = { role: 'assistant', content: [{ toolUse: { toolUseId: 't1', name: 'f', input: {} } }] };
const toolResult = { role: 'user', content: [{ toolResult: { toolUseId: 't1', content: [{ text: '42' }] } }] };
const tools = { tools: [{ toolSpec: { name: 'f', inputSchema: { json: { type: 'object' } } } }] };

describe('the fake Converse checks the body it receives', () => {
  it('takes a well-formed request', () => {
    expect(
      converseProblem({
        messages: [user, toolUse, toolResult],
        system: [{ text: 'Be terse.' }],
        inferenceConfig: { maxTokens: 10, temperature: 1 },
        toolConfig: { ...tools, toolChoice: { any: {} } },
      }),
    ).toBeUndefined();
  });

  it.each([
    [{ messages: [user], max_tokens: 10 }, 'extraneous key [max_tokens]'],
    [{ messages: [toolUse] }, 'must start with a user message'],
    [{ messages: [user, user] }, 'must alternate between user and assistant'],
    [{ messages: [{ role: 'user', content: [{ text: ' ' }] }] }, 'is blank'],
    [{ messages: [{ role: 'user', content: [{ text: 'a', image: {} }] }] }, 'exactly one known member'],
    [{ messages: [{ role: 'user', content: [{ image: { format: 'heic', source: { bytes: 'AAAA' } } }] }] }, "'messages.0.content.0.image' is not a valid image"],
    [{ messages: [user, toolUse, toolResult] }, 'toolConfig field must be defined'],
    [{ messages: [user, toolUse, { role: 'user', content: [{ toolResult: { toolUseId: 'other', content: [] } }] }], toolConfig: tools }, 'does not match a toolUse'],
    [{ messages: [user], inferenceConfig: { max_tokens: 5 } }, 'extraneous key [max_tokens]'],
    [{ messages: [user], inferenceConfig: { temperature: 1.5 } }, "'inferenceConfig.temperature' must be from 0 to 1"],
    [{ messages: [user], toolConfig: { ...tools, toolChoice: { none: {} } } }, 'must be one of auto, any or tool'],
  ])('refuses %j: %s', (body, problem) => {
    expect(converseProblem(body)).toContain(problem);
  });
});
