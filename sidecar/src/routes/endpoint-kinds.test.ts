import { describe, expect, it } from 'vitest';
import {
  anthropicEndpoint,
  bedrockEndpoint,
  claudeVertexEndpoint,
  geminiVertexEndpoint,
  ollamaEndpoint,
  openAiCompatibleEndpoint,
  openAiEndpoint,
  vertexOpenAiEndpoint,
} from './endpoint-kinds.ts';

describe('what a native call is, per API', () => {
  it.each([
    ['POST', '/v1/chat/completions', 'metered'],
    ['POST', '/v1/responses', 'metered'],
    ['POST', '/v1/embeddings', 'metered'],
    ['GET', '/v1/models', 'free'],
    ['HEAD', '/v1/models/gpt-4o-mini', 'free'],
    ['POST', '/v1/moderations', 'free'],
    ['POST', '/v1/responses/input_tokens', 'free'],
    ['GET', '/v1/responses/resp_1/input_items', 'free'],
    ['DELETE', '/v1/files/file-1', 'free'],
    ['POST', '/v1/images/generations', 'metered'],
    ['POST', '/v1/images/edits', 'metered'],
    ['POST', '/v1/images/variations', undefined],
    ['POST', '/v1/audio/transcriptions', 'metered'],
    ['POST', '/v1/audio/translations', 'metered'],
    ['POST', '/v1/audio/speech', 'metered'],
    ['GET', '/v1/audio/speech', undefined],
    ['POST', '/v1/batches', 'metered'],
    ['GET', '/v1/files/file-1/content', 'metered'],
    ['GET', '/v1/batches/batch_1', 'free'],
    ['POST', '/v1/realtime/client_secrets', undefined],
    ['POST', '/v1/threads/thread_1/runs', undefined],
    ['POST', '/v1/fine_tuning/jobs', undefined],
    ['POST', '/v1/files', 'free'],
    ['POST', '/v1/uploads', undefined],
    ['GET', '/v1/chat/completions/x/../../admin', undefined],
  ])('OpenAI: %s %s is %s', (method, path, kind) => {
    expect(openAiEndpoint(method, path)).toBe(kind);
  });

  it('an OpenAI-compatible API under any prefix: chat, completions and embeddings metered, models free, the rest refused', () => {
    expect(openAiCompatibleEndpoint('POST', '/openai/deployments/gpt-4o/chat/completions')).toBe('metered');
    expect(openAiCompatibleEndpoint('POST', '/v1/projects/p/locations/l/endpoints/openapi/chat/completions')).toBe('metered');
    expect(openAiCompatibleEndpoint('GET', '/v1/models')).toBe('free');
    expect(openAiCompatibleEndpoint('POST', '/v1/images/generations')).toBe('metered');
    expect(openAiCompatibleEndpoint('POST', '/v1/images/variations')).toBeUndefined();
  });

  it('Anthropic: Messages and batches (created, results read) metered, token counts and files free', () => {
    expect(anthropicEndpoint('POST', '/v1/messages')).toBe('metered');
    expect(anthropicEndpoint('POST', '/v1/messages/count_tokens')).toBe('free');
    expect(anthropicEndpoint('POST', '/v1/files')).toBe('free');
    expect(anthropicEndpoint('POST', '/v1/messages/batches')).toBe('metered');
    expect(anthropicEndpoint('GET', '/v1/messages/batches/msgbatch_1/results')).toBe('metered');
    expect(anthropicEndpoint('GET', '/v1/messages/batches/msgbatch_1')).toBe('free');
  });

  it("Gemini on Vertex AI: Google's models only; Claude's rawPredict there would be read as no usage, so it is refused", () => {
    const model = '/v1/projects/p/locations/us-central1/publishers/google/models/gemini-2.5-flash';
    expect(geminiVertexEndpoint('POST', `${model}:streamGenerateContent`)).toBe('metered');
    expect(geminiVertexEndpoint('POST', `${model}:countTokens`)).toBe('free');
    expect(geminiVertexEndpoint('POST', '/v1/projects/p/locations/us-east5/publishers/anthropic/models/claude-opus-4-1:rawPredict')).toBeUndefined();
    expect(geminiVertexEndpoint('POST', `${model}:predict`)).toBeUndefined();
    // The text embedding models' :predict answers carry token counts; Imagen's generation models' carry their images (ADR 0915).
    expect(geminiVertexEndpoint('POST', '/v1/projects/p/locations/us-central1/publishers/google/models/gemini-embedding-001:predict')).toBe('metered');
    expect(geminiVertexEndpoint('POST', '/v1/projects/p/locations/us-central1/publishers/google/models/text-embedding-005:predict')).toBe('metered');
    expect(geminiVertexEndpoint('POST', '/v1/projects/p/locations/us-central1/publishers/google/models/imagen-4.0-generate-001:predict')).toBe('metered');
    expect(geminiVertexEndpoint('POST', '/v1/projects/p/locations/us-central1/publishers/google/models/imagen-4.0-fast-generate-001:predict')).toBe('metered');
    // Imagen's editing model is not priced per generated image here: still refused.
    expect(geminiVertexEndpoint('POST', '/v1/projects/p/locations/us-central1/publishers/google/models/imagen-3.0-capability-001:predict')).toBeUndefined();
    expect(geminiVertexEndpoint('POST', '/v1/projects/p/locations/us-central1/publishers/google/models/gemini-embedding-2:embedContent')).toBe('metered');
    expect(geminiVertexEndpoint('POST', '/v1/projects/p/locations/us-central1/publishers/google/models/gemini-2.5-flash:embedContent')).toBeUndefined();
    expect(geminiVertexEndpoint('POST', '/v1/projects/p/locations/us-central1/cachedContents')).toBeUndefined();
  });

  it("Claude's own Vertex AI paths: Anthropic's models only, its token count free", () => {
    expect(claudeVertexEndpoint('POST', '/v1/projects/p/locations/us-east5/publishers/anthropic/models/count-tokens:rawPredict')).toBe('free');
    expect(claudeVertexEndpoint('POST', '/v1/projects/p/locations/us-east5/publishers/anthropic/models/claude-sonnet-4-5@20250929:streamRawPredict')).toBe('metered');
    expect(claudeVertexEndpoint('POST', '/v1/projects/p/locations/us-central1/publishers/google/models/gemini-2.5-flash:generateContent')).toBeUndefined();
  });

  it("Vertex AI's OpenAI-compatible surface: its chat completions metered, audio and images (which Vertex does not offer there) refused", () => {
    expect(vertexOpenAiEndpoint('POST', '/v1/projects/p/locations/us-central1/endpoints/openapi/chat/completions')).toBe('metered');
    expect(vertexOpenAiEndpoint('GET', '/v1/projects/p/locations/us-central1/endpoints/openapi/models')).toBe('free');
    expect(vertexOpenAiEndpoint('POST', '/v1/projects/p/locations/us-central1/endpoints/openapi/audio/speech')).toBeUndefined();
    expect(vertexOpenAiEndpoint('POST', '/v1/projects/p/locations/us-central1/endpoints/openapi/images/generations')).toBeUndefined();
    expect(vertexOpenAiEndpoint('POST', '/v1/projects/p/locations/us-central1/publishers/google/models/gemini-2.5-flash:generateContent')).toBeUndefined();
  });

  it("Ollama's API: its OpenAI-compatible paths metered, its own only the listings", () => {
    expect(ollamaEndpoint('POST', '/v1/chat/completions')).toBe('metered');
    expect(ollamaEndpoint('GET', '/api/tags')).toBe('free');
    expect(ollamaEndpoint('POST', '/api/generate')).toBeUndefined();
    expect(ollamaEndpoint('POST', '/v1/images/generations')).toBeUndefined();
  });

  it('Bedrock: the four invocations metered, CountTokens free, nothing else', () => {
    expect(bedrockEndpoint('POST', '/model/m/converse-stream')).toBe('metered');
    expect(bedrockEndpoint('POST', '/model/m/count-tokens')).toBe('free');
    expect(bedrockEndpoint('GET', '/model/m/count-tokens')).toBeUndefined();
    expect(bedrockEndpoint('POST', '/model/m/count-tokens/x')).toBeUndefined();
    expect(bedrockEndpoint('POST', '/async-invoke')).toBeUndefined();
    expect(bedrockEndpoint('GET', '/model/m/invoke')).toBeUndefined();
  });
});
