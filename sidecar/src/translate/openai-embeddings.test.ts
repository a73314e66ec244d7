import { describe, expect, it } from 'vitest';
import { bedrockEmbedder } from './openai-bedrock-embeddings.ts';
import { float32Base64, openAiEmbeddingList, readEmbeddingsRequest, type EmbeddingsRequest } from './openai-embeddings.ts';
import { GatewayError } from './openai-error.ts';
import { readVertexEmbeddings, vertexEmbedder, vertexEmbeddingsBody } from './openai-vertex-embeddings.ts';

/** The GatewayError `run` throws, as the caller's SDK reads it. */
function refusal(run: () => unknown): { status: number; param: string | null; message: string } {
  try {
    run();
  } catch (error) {
    expect(error).toBeInstanceOf(GatewayError);
    const refused = error as GatewayError;
    return { status: refused.statusCode, param: refused.param, message: refused.message };
  }
  throw new Error('expected a refusal');
}

const request = (texts: string[], dimensions?: number): EmbeddingsRequest => ({ texts, dimensions, encoding: 'float' });

describe("OpenAI's embeddings request, read for a translated route", () => {
  it('takes a string or an array of strings, dimensions and the encoding', () => {
    expect(readEmbeddingsRequest({ model: 'm', input: 'one' }, 'm')).toEqual({ texts: ['one'], dimensions: undefined, encoding: 'float' });
    expect(readEmbeddingsRequest({ model: 'm', input: ['a', 'b'], dimensions: 256, encoding_format: 'base64', user: 'alice' }, 'm')).toEqual({
      texts: ['a', 'b'],
      dimensions: 256,
      encoding: 'base64',
    });
    // null is the parameter left out, as OpenAI reads it.
    expect(readEmbeddingsRequest({ model: 'm', input: 'x', dimensions: null, encoding_format: null }, 'm').encoding).toBe('float');
  });

  it.each([
    [{ input: [1, 2, 3] }, 'input', 'token ids'],
    [{ input: [[1, 2], [3]] }, 'input', 'token ids'],
    [{}, 'input', "Missing required parameter: 'input'"],
    [{ input: [] }, 'input', 'non-empty array'],
    [{ input: ['ok', ''] }, 'input[1]', 'must not be empty'],
    [{ input: ['ok', { text: 'x' }] }, 'input[1]', 'must be a string'],
    [{ input: 'x', dimensions: 0 }, 'dimensions', 'positive integer'],
    [{ input: 'x', dimensions: 1.5 }, 'dimensions', 'positive integer'],
    [{ input: 'x', encoding_format: 'binary' }, 'encoding_format', "'float' or 'base64'"],
    [{ input: 'x', user: 7 }, 'user', 'string'],
    [{ input: 'x', input_type: 'search_query' }, 'input_type', 'Unrecognized request argument supplied: input_type'],
  ])('refuses %j with a 400 naming %s', (extra, param, words) => {
    const refused = refusal(() => readEmbeddingsRequest({ model: 'm', ...extra }, 'm'));
    expect(refused).toMatchObject({ status: 400, param });
    expect(refused.message).toContain(words);
  });
});

describe("OpenAI's embeddings answer", () => {
  it('encodes base64 as OpenAI does: the float32 values, little-endian', () => {
    // 1.0 = 0x3f800000, -2.0 = 0xc0000000, 0.5 = 0x3f000000; little-endian: 00 00 80 3f | 00 00 00 c0 | 00 00 00 3f.
    expect(Buffer.from(float32Base64([1, -2, 0.5]), 'base64').toString('hex')).toBe('0000803f000000c00000003f');
    expect(float32Base64([1, -2, 0.5])).toBe('AACAPwAAAMAAAAA/');
  });

  it('lists one embedding per text in order, with the prompt tokens as the usage', () => {
    const embeddings = { vectors: [[0.5], [1]], promptTokens: 7 };
    expect(openAiEmbeddingList(embeddings, 'text-embedding-005', 'float')).toEqual({
      object: 'list',
      data: [
        { object: 'embedding', index: 0, embedding: [0.5] },
        { object: 'embedding', index: 1, embedding: [1] },
      ],
      model: 'text-embedding-005',
      usage: { prompt_tokens: 7, total_tokens: 7 },
    });
    // 0.5 = 0x3f000000 → 00 00 00 3f → "AAAAPw=="; 1.0 → 00 00 80 3f → "AACAPw==".
    expect(openAiEmbeddingList(embeddings, 'm', 'base64').data).toEqual([
      { object: 'embedding', index: 0, embedding: 'AAAAPw==' },
      { object: 'embedding', index: 1, embedding: 'AACAPw==' },
    ]);
  });
});

describe('Vertex AI text embeddings (:predict)', () => {
  it('knows which models embed and how many texts each takes', () => {
    expect(vertexEmbedder('gemini-embedding-001')).toEqual({ most: 1, dimensions: 3072 });
    expect(vertexEmbedder('text-embedding-005')).toEqual({ most: 250, dimensions: 768 });
    expect(vertexEmbedder('text-multilingual-embedding-002')).toEqual({ most: 250, dimensions: 768 });
    expect(vertexEmbedder('gemini-2.5-flash')).toBeUndefined();
  });

  it('sends each text as an instance, the dimensions as outputDimensionality, and never truncates silently', () => {
    expect(vertexEmbeddingsBody('text-embedding-005', vertexEmbedder('text-embedding-005')!, request(['a', 'b'], 256))).toEqual({
      instances: [{ content: 'a' }, { content: 'b' }],
      parameters: { autoTruncate: false, outputDimensionality: 256 },
    });
    expect(vertexEmbeddingsBody('gemini-embedding-001', vertexEmbedder('gemini-embedding-001')!, request(['a']))).toEqual({
      instances: [{ content: 'a' }],
      parameters: { autoTruncate: false },
    });
  });

  it('refuses more texts or longer vectors than the model gives, naming the parameter (ADR 0903)', () => {
    const gemini = vertexEmbedder('gemini-embedding-001')!;
    expect(refusal(() => vertexEmbeddingsBody('gemini-embedding-001', gemini, request(['a', 'b'])))).toMatchObject({ status: 400, param: 'input' });
    const text = vertexEmbedder('text-embedding-005')!;
    expect(refusal(() => vertexEmbeddingsBody('text-embedding-005', text, request(Array.from({ length: 251 }, () => 'x'))))).toMatchObject({ param: 'input' });
    expect(refusal(() => vertexEmbeddingsBody('text-embedding-005', text, request(['a'], 1024))).message).toBe(
      'dimensions 1024 is not supported for model text-embedding-005: it gives at most 768',
    );
  });

  it('reads the vectors in order and sums the token counts of the predictions', () => {
    const answer = {
      predictions: [
        { embeddings: { statistics: { truncated: false, token_count: 4 }, values: [0.1, 0.2] } },
        { embeddings: { statistics: { truncated: false, token_count: 9 }, values: [0.3, 0.4] } },
      ],
      metadata: { billableCharacterCount: 41 },
    };
    expect(readVertexEmbeddings(answer, {})).toEqual({
      vectors: [
        [0.1, 0.2],
        [0.3, 0.4],
      ],
      promptTokens: 13,
    });
    expect(() => readVertexEmbeddings({ predictions: [{ embeddings: { values: ['x'] } }] }, {})).toThrow('predictions[0].embeddings.values is not an array of numbers');
    expect(() => readVertexEmbeddings({ error: {} }, {})).toThrow('no predictions');
  });
});

describe("Bedrock's embedding models (InvokeModel)", () => {
  it('knows Titan V2 and V1 and Cohere Embed v3 by their ids, and no Claude', () => {
    for (const id of ['amazon.titan-embed-text-v2:0', 'amazon.titan-embed-text-v1', 'cohere.embed-english-v3', 'cohere.embed-multilingual-v3']) {
      expect(bedrockEmbedder(id), id).toBeDefined();
    }
    for (const id of ['anthropic.claude-sonnet-4-20250514-v1:0', 'amazon.titan-embed-image-v1', 'cohere.embed-v4:0', 'titan-embed-text-v2']) {
      expect(bedrockEmbedder(id), id).toBeUndefined();
    }
  });

  it('sends Titan V2 one text with its dimensions, normalised; V1 the text alone', () => {
    expect(bedrockEmbedder('amazon.titan-embed-text-v2:0')!.body('amazon.titan-embed-text-v2:0', request(['hello'], 512))).toEqual({
      inputText: 'hello',
      normalize: true,
      dimensions: 512,
    });
    expect(bedrockEmbedder('amazon.titan-embed-text-v2:0')!.body('amazon.titan-embed-text-v2:0', request(['hello']))).toEqual({ inputText: 'hello', normalize: true });
    expect(bedrockEmbedder('amazon.titan-embed-text-v1')!.body('amazon.titan-embed-text-v1', request(['hello']))).toEqual({ inputText: 'hello' });
  });

  it('refuses what Titan and Cohere cannot take, naming input or dimensions', () => {
    const titan = bedrockEmbedder('amazon.titan-embed-text-v2:0')!;
    const two = refusal(() => titan.body('amazon.titan-embed-text-v2:0', request(['a', 'b'])));
    expect(two).toMatchObject({ status: 400, param: 'input' });
    expect(two.message).toBe('model amazon.titan-embed-text-v2:0 takes one text per request; this input has 2: send them in separate requests');
    expect(refusal(() => titan.body('amazon.titan-embed-text-v2:0', request(['a'], 768))).message).toBe(
      'dimensions 768 is not supported for model amazon.titan-embed-text-v2:0: it gives one of 1024, 512, 256',
    );
    const cohere = bedrockEmbedder('cohere.embed-english-v3')!;
    expect(refusal(() => cohere.body('cohere.embed-english-v3', request(['a'], 512)))).toMatchObject({ param: 'dimensions' });
    // The no-op value is accepted, as the chat translation accepts n: 1.
    expect(cohere.body('cohere.embed-english-v3', request(['a', 'b'], 1024))).toEqual({ texts: ['a', 'b'], input_type: 'search_document' });
    expect(refusal(() => cohere.body('cohere.embed-english-v3', request(Array.from({ length: 97 }, () => 'x'))))).toMatchObject({ param: 'input' });
  });

  it("reads Titan's count from its body and Cohere's from the input-token header", () => {
    const titan = bedrockEmbedder('amazon.titan-embed-text-v2:0')!;
    expect(titan.read({ embedding: [0.25, -0.5], inputTextTokenCount: 6 }, {})).toEqual({ vectors: [[0.25, -0.5]], promptTokens: 6 });
    const cohere = bedrockEmbedder('cohere.embed-multilingual-v3')!;
    const answer = { id: 'x', response_type: 'embeddings_floats', texts: ['a', 'b'], embeddings: [[0.1], [0.2]] };
    expect(cohere.read(answer, { 'x-amzn-bedrock-input-token-count': '11' })).toEqual({ vectors: [[0.1], [0.2]], promptTokens: 11 });
    // With embedding_types the vectors are keyed by type.
    expect(cohere.read({ embeddings: { float: [[0.3]] } }, {}).vectors).toEqual([[0.3]]);
  });
});
