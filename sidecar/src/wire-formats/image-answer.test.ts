import { describe, expect, it } from 'vitest';
import { ImageAnswerExtractor } from './image-answer.ts';

/** Feeds the body in pieces of `size` bytes, as a socket may deliver it. */
function read(body: string, size: number): ReturnType<ImageAnswerExtractor['end']> {
  const extractor = new ImageAnswerExtractor();
  const bytes = Buffer.from(body);
  let forwarded = 0;
  for (let at = 0; at < bytes.length; at += size) forwarded += extractor.write(bytes.subarray(at, at + size)).length;
  // Every byte passes through unchanged.
  expect(forwarded).toBe(bytes.length);
  return extractor.end();
}

const zero = { inputTokens: 0, outputTokens: 0, cacheReadTokens: 0, cacheWriteTokens: 0, cacheWrite1hTokens: 0, reasoningTokens: 0, totalTokens: 0 };

describe("OpenAI's image answers", () => {
  it('counts the images of a DALL·E answer, which has no usage', () => {
    const body = JSON.stringify({ created: 1, data: [{ url: 'https://x/a.png', revised_prompt: 'a "quoted" {data: [1, 2]}' }, { url: 'https://x/b.png' }] });
    for (const size of [1, 7, body.length]) expect(read(body, size)).toEqual({ usage: { ...zero, units: { images: 2 } } });
  });

  it("reads a GPT image answer's usage, its image input tokens, size and quality, whichever order its fields come in", () => {
    const image = 'iVBORw0KGgo'.repeat(200);
    const body = `{"created":1,"background":"opaque","data":[{"b64_json":"${image}"},{"b64_json":"${image}"},{"b64_json":"${image}"}],"output_format":"png","quality":"high","size":"1024x1536","usage":{"input_tokens":250,"input_tokens_details":{"text_tokens":50,"image_tokens":200},"output_tokens":18720,"total_tokens":18970}}`;
    const expected = {
      usage: { ...zero, inputTokens: 250, outputTokens: 18720, totalTokens: 18970, units: { images: 3, imageSize: '1024x1536', imageQuality: 'high', imageInputTokens: 200 } },
    };
    for (const size of [1, 13, 4096]) expect(read(body, size)).toEqual(expected);
    const first = `{"usage": {"input_tokens": 10, "output_tokens": 272}, "size": "1024x1024", "quality": "low", "data": [ {"b64_json": "${image}"} ]}`;
    expect(read(first, 5).usage).toMatchObject({ inputTokens: 10, outputTokens: 272, units: { images: 1, imageSize: '1024x1024', imageQuality: 'low' } });
  });

  it('counts ten images of several megabytes each without holding them', () => {
    const image = 'A'.repeat(3 * 1024 * 1024);
    const body = JSON.stringify({ created: 1, data: Array.from({ length: 10 }, () => ({ b64_json: image })) });
    expect(read(body, 64 * 1024).usage?.units).toEqual({ images: 10 });
  });

  it('counts only the top-level data: a data list inside another field is not images', () => {
    const body = JSON.stringify({ created: 1, meta: { data: [1, 2, 3] }, data: [], usage: { input_tokens: 5, output_tokens: 0 } });
    expect(read(body, 3).usage?.units).toEqual({ images: 0 });
  });

  it('reads nothing from an empty body', () => {
    expect(new ImageAnswerExtractor().end()).toEqual({ usage: null });
  });
});

describe("Imagen's and Bedrock's image answers (ADR 0915)", () => {
  it("counts Imagen's predictions, each one image", () => {
    const image = 'iVBORw0KGgo'.repeat(100);
    const body = `{"predictions": [{"mimeType": "image/png", "bytesBase64Encoded": "${image}"}, {"bytesBase64Encoded": "${image}", "mimeType": "image/png"}]}`;
    const extractor = new ImageAnswerExtractor('predictions');
    extractor.write(Buffer.from(body));
    expect(extractor.end()).toEqual({ usage: { ...zero, units: { images: 2 } } });
  });

  it("counts a Bedrock image model's images, and nothing for the list another format's answer has", () => {
    const body = JSON.stringify({ images: ['AAAA', 'BBBB', 'CCCC'], error: null });
    const bedrock = new ImageAnswerExtractor('images');
    for (let at = 0; at < body.length; at += 4) bedrock.write(Buffer.from(body.slice(at, at + 4)));
    expect(bedrock.end().usage?.units).toEqual({ images: 3 });
    const openAi = new ImageAnswerExtractor();
    openAi.write(Buffer.from(body));
    expect(openAi.end().usage?.units).toEqual({ images: 0 });
  });
});

describe('an answer of many small strings', () => {
  /** Counts the bytes every indexOf on the chunk looks at: a scan to the end per string is quadratic. */
  function countingChunk(body: string): { chunk: Buffer; scanned: () => number } {
    const chunk = Buffer.from(body);
    let scanned = 0;
    const indexOf = chunk.indexOf.bind(chunk);
    chunk.indexOf = ((value: number, from: number) => {
      const at = indexOf(value, from);
      scanned += (at === -1 ? chunk.length : at + 1) - from;
      return at;
    }) as Buffer['indexOf'];
    return { chunk, scanned: () => scanned };
  }

  it('reads each byte a bounded number of times, with or without escapes', () => {
    // 20,000 strings of one character: 100,005 bytes; one pass for quotes and one for backslashes is ≤ 2 × that.
    const plain = `{"x":[${Array.from({ length: 20_000 }, () => '"a"').join(',')}]}`;
    // One string of 20,000 escapes: each escape must not send a new search for the closing quote to the end.
    const escaped = `{"x":"${'\\n'.repeat(20_000)}","data":[1]}`;
    for (const body of [plain, escaped]) {
      const { chunk, scanned } = countingChunk(body);
      const extractor = new ImageAnswerExtractor();
      extractor.write(chunk);
      expect(scanned()).toBeLessThanOrEqual(2 * chunk.length);
    }
    const extractor = new ImageAnswerExtractor();
    extractor.write(Buffer.from(`{"x":"${'\\n'.repeat(20_000)}","data":[1]}`));
    expect(extractor.end().usage?.units).toEqual({ images: 1 });
  });
});
