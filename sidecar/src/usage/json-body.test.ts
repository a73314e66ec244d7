import { describe, expect, it } from 'vitest';
import { BoundedJsonBody } from './json-body.ts';
import { findJsonValue } from './json-scan.ts';

describe('findJsonValue', () => {
  it('finds a key holding an object, string or number; the last or the first occurrence', () => {
    const text = '{"model":"a","content":[{"input":{"usage":{"x":1}}}],"usage":{"input_tokens":5,"note":"} ]"},"n":12}';
    expect(findJsonValue(text, 'usage', true)).toEqual({ input_tokens: 5, note: '} ]' });
    expect(findJsonValue(text, 'usage', false)).toEqual({ x: 1 });
    expect(findJsonValue(text, 'model', false)).toBe('a');
    expect(findJsonValue(text, 'n', true)).toBe(12);
  });

  it('ignores a key quoted inside a string value and values cut by the window', () => {
    expect(findJsonValue('{"text":"say \\"usage\\": {\\"a\\":1}"}', 'usage', true)).toBeUndefined();
    expect(findJsonValue('ens":3},"usage":{"input_tokens":', 'usage', true)).toBeUndefined();
    expect(findJsonValue('tokens":3}, "usage" : {"input_tokens":7}}', 'usage', true)).toEqual({ input_tokens: 7 });
  });
});

describe('BoundedJsonBody', () => {
  it('parses a body within the budget whole', () => {
    const body = new BoundedJsonBody({ maxBytes: 1024 });
    body.write(Buffer.from('{"model":"m",'));
    body.write(Buffer.from('"usage":{"output_tokens":3}}'));
    expect(body.overflowed).toBe(false);
    expect(body.document({ head: [], tail: [] })).toEqual({ model: 'm', usage: { output_tokens: 3 } });
  });

  it('keeps only head and tail of a larger body and reads the fields from them', () => {
    // An Anthropic message whose tool input has its own `usage` key, far before the real one.
    const message = {
      id: 'msg_1',
      type: 'message',
      model: 'claude-sonnet-4-20250514',
      content: [
        { type: 'tool_use', id: 'toolu_1', name: 'report', input: { usage: { input_tokens: 1 }, model: 'not-this' } },
        { type: 'text', text: 'y'.repeat(200_000) },
      ],
      usage: { input_tokens: 10, output_tokens: 20 },
    };
    const bytes = Buffer.from(JSON.stringify(message));
    const body = new BoundedJsonBody({ maxBytes: 64 * 1024, tailBytes: 4096 });
    for (let at = 0; at < bytes.length; at += 1000) body.write(bytes.subarray(at, at + 1000));
    expect(body.overflowed).toBe(true);
    expect(body.document({ head: ['model'], tail: ['usage'] })).toEqual({ model: 'claude-sonnet-4-20250514', usage: { input_tokens: 10, output_tokens: 20 } });
  });

  it('reads fields from a body cut short', () => {
    const body = new BoundedJsonBody();
    body.write(Buffer.from('{"model":"gpt-4o","usage":{"prompt_tokens":4,"completion_tokens":2},"choices":[{"mess'));
    expect(body.document({ head: ['model'], tail: ['usage'] })).toEqual({ model: 'gpt-4o', usage: { prompt_tokens: 4, completion_tokens: 2 } });
  });
});
