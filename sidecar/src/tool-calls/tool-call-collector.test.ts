import { createHash } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import { MAX_KEPT_ARGUMENT_BYTES, MAX_TOOL_CALLS, MAX_TOOL_NAME_CHARS, ToolCallCollector } from './tool-call-collector.ts';

// printf '%s' '{"a":1,"b":"x"}' | sha256sum
const A1_BX = 'ecf9e98ec0641e23113ff3ce8bdc78d0ddd249886517fd4a7f68cc83d4e65667';
// printf '%s' '{"a":[{"y":2,"z":1}],"b":{"c":null}}' | sha256sum
const NESTED = '9cb354fdf09a5688c5055cf15a8cbb953160b7dfc5bcf1077abb5d87473539b8';
// printf '%s' 'not json' | sha256sum: text that does not parse is hashed as it came
const NOT_JSON = '7ccfa1fbf3940e6f0c0375d87c0f9235a50514e14cb427bdfaf5077987b26ccf';

describe('tool call collector', () => {
  it('hashes arguments with keys sorted at every depth and no whitespace', () => {
    const calls = new ToolCallCollector();
    calls.whole('call_1', 'probe', { b: 'x', a: 1 });
    calls.whole('call_2', 'nested', ' { "b" : { "c" : null }, "a" : [ { "z" : 1, "y" : 2 } ] } ');
    calls.whole('call_3', 'broken', 'not json');
    const { calls: recorded } = calls.result();
    expect(recorded.map((c) => c.argumentsSha256)).toEqual([A1_BX, NESTED, NOT_JSON]);
  });

  it('sorts keys by UTF-16 code units and leaves non-ASCII unescaped (RFC 8785), hashing the UTF-8 bytes', () => {
    // printf '%s' '{"é":"ü","😀":2,"ｚ":1}' | sha256sum: U+1F600 is the surrogate pair D83D DE00, so it sorts
    // before U+FF5A though its code point is greater
    const calls = new ToolCallCollector();
    calls.whole('call_1', 'probe', '{"ｚ": 1, "😀": 2, "é": "\\u00fc"}');
    expect(calls.result().calls[0]!.argumentsSha256).toBe('00ce55389c7f945b1a4a9240116083e8271dfd387951828f9b65fbaf127b49fc');
  });

  it('records at most 128 calls and counts the rest', () => {
    const calls = new ToolCallCollector();
    for (let i = 0; i < MAX_TOOL_CALLS + 5; i++) calls.start(`c${i}`, `call_${i}`, 'probe');
    calls.piece(`c${MAX_TOOL_CALLS + 1}`, '{"a":1}');
    const result = calls.result();
    expect(result.calls).toHaveLength(128);
    expect(result.calls[127]!.id).toBe('call_127');
    expect(result.dropped).toBe(5);
  });

  it('cuts a long name to 256 characters', () => {
    const calls = new ToolCallCollector();
    calls.whole(null, 'n'.repeat(10_000), '{}');
    expect(calls.result().calls[0]!.name).toBe('n'.repeat(MAX_TOOL_NAME_CHARS));
  });

  it('cuts a long id to 256 characters, whole, streamed and completed, so an answer cannot fill a span row with ids', () => {
    const calls = new ToolCallCollector();
    const id = (c: string) => c.repeat(4 * 1024 * 1024);
    calls.whole(id('w'), 'probe', '{}');
    calls.start('c0', id('s'), 'probe');
    calls.start('c1', null, 'probe');
    calls.start('c1', id('t'), '');
    calls.start('r0', null, 'probe');
    calls.complete('r0', id('d'), 'probe', '{}');
    expect(calls.result().calls.map((c) => c.id)).toEqual(['w', 's', 't', 'd'].map((c) => c.repeat(256)));
  });

  it('hashes the raw text of arguments past 1 MiB as they stream, without keeping them', () => {
    const calls = new ToolCallCollector();
    calls.start('c0', 'call_big', 'write_file');
    const piece = `"${'a'.repeat(64 * 1024 - 2)}"`;
    // Spaces a canonical form would drop: the digest shows the text was not canonicalized.
    const text: string[] = ['{ "data": ['];
    calls.piece('c0', '{ "data": [');
    for (let i = 0; i < 20; i++) {
      const next = i === 0 ? piece : `,${piece}`;
      text.push(next);
      calls.piece('c0', next);
    }
    text.push('] }');
    calls.piece('c0', '] }');
    expect(text.join('').length).toBeGreaterThan(MAX_KEPT_ARGUMENT_BYTES);
    // The expected digest is of the text exactly as it came: past the bound it is not canonicalized.
    expect(calls.result().calls[0]!.argumentsSha256).toBe(createHash('sha256').update(text.join('')).digest('hex'));
  });
});
