import { describe, expect, it } from 'vitest';
import { JsonArrayStreamParser } from './json-array-stream.ts';

function parse(chunks: Buffer[], maxElementBytes?: number): { elements: unknown[]; error: string | undefined; parser: JsonArrayStreamParser } {
  const elements: unknown[] = [];
  const parser = new JsonArrayStreamParser((element) => elements.push(JSON.parse(element.toString('utf8'))), maxElementBytes ? { maxElementBytes } : {});
  for (const chunk of chunks) parser.push(chunk);
  return { elements, error: parser.end(), parser };
}

// The shape Vertex AI writes for streamGenerateContent without alt=sse: elements separated by `,\r\n`,
// with braces, brackets, commas and escaped quotes inside strings.
const ELEMENTS = [
  {
    candidates: [{ content: { role: 'model', parts: [{ text: 'Hello {world}, [1,2] "quoted" \\ back' }] } }],
    usageMetadata: { promptTokenCount: 12, trafficType: 'ON_DEMAND' },
    modelVersion: 'gemini-2.5-flash',
  },
  { candidates: [{ content: { role: 'model', parts: [{ text: ' — ünïcødé 🚀 }]' }] } }], usageMetadata: { promptTokenCount: 12 } },
  {
    candidates: [{ content: { role: 'model', parts: [{ text: '' }] }, finishReason: 'STOP' }],
    usageMetadata: { promptTokenCount: 12, candidatesTokenCount: 9, totalTokenCount: 21 },
  },
];
const BODY = Buffer.from(`[${ELEMENTS.map((e) => JSON.stringify(e, null, 2)).join('\n,\r\n')}]\n`);

describe('JsonArrayStreamParser', () => {
  it('yields every element of a progressively written array', () => {
    const { elements, error } = parse([BODY]);
    expect(elements).toEqual(ELEMENTS);
    expect(error).toBeUndefined();
  });

  it('gives the same elements when split at any byte, and byte by byte', () => {
    for (let i = 0; i <= BODY.length; i += 1) {
      const { elements, error } = parse([BODY.subarray(0, i), BODY.subarray(i)]);
      expect(elements, `split at ${i}`).toEqual(ELEMENTS);
      expect(error).toBeUndefined();
    }
    expect(parse([...BODY].map((b) => Buffer.from([b]))).elements).toEqual(ELEMENTS);
  });

  it('hands over each element as soon as it is complete', () => {
    const seen: number[] = [];
    const parser = new JsonArrayStreamParser(() => seen.push(1));
    const firstEnd = BODY.indexOf('\n,\r\n');
    parser.push(BODY.subarray(0, firstEnd));
    expect(seen).toHaveLength(1);
  });

  it('handles an empty array and scalar elements', () => {
    expect(parse([Buffer.from(' [ ] ')]).elements).toEqual([]);
    expect(parse([Buffer.from('[1, "a,]", true, null, {"x":[]}]')]).elements).toEqual([1, 'a,]', true, null, { x: [] }]);
  });

  it('reports a truncated array and keeps the complete elements before the cut', () => {
    const cut = BODY.subarray(0, BODY.length - 40);
    const { elements, error } = parse([cut]);
    expect(elements).toEqual(ELEMENTS.slice(0, 2));
    expect(error).toBe('JSON array ended before its closing ]');
  });

  it('rejects input that is not an array, naming the byte', () => {
    expect(parse([Buffer.from('{"candidates":[]}')]).error).toBe("expected '[' at byte 0");
    expect(parse([Buffer.from('[{"a":1} {"b":2}]')]).error).toBe("expected ',' or ']' at byte 9");
    expect(parse([Buffer.from('[{"a":1}] x')]).error).toBe("unexpected data after the closing ']' at byte 10");
  });

  it('skips an element larger than the limit, counts it, and continues with the next', () => {
    const body = Buffer.from(`[{"a":"${'x'.repeat(3000)}"},{"b":1}]`);
    for (const at of [0, 5, 1000, 2999, 3010]) {
      const { elements, error, parser } = parse([body.subarray(0, at), body.subarray(at)], 1024);
      expect(elements).toEqual([{ b: 1 }]);
      expect(parser.oversizedElements).toBe(1);
      expect(error).toBeUndefined();
    }
  });
});
