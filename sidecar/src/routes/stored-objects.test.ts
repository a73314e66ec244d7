import { describe, expect, it } from 'vitest';
import { anthropicStoredObjects, openAiStoredObjects, vertexStoredObjects } from './stored-objects.ts';

describe('calls that reach what a provider stores under the key', () => {
  it.each([
    ['GET', '/v1/chat/completions', null, 'stored chat completions'],
    ['POST', '/v1/chat/completions/chatcmpl-1', null, 'stored chat completions'],
    ['GET', '/v1/chat/completions/chatcmpl-1/messages', null, 'stored chat completions'],
    ['GET', '/v1/responses/resp_1', null, 'a stored response'],
    ['POST', '/v1/responses/resp_1/cancel', null, 'a stored response'],
    ['POST', '/v1/responses', { previous_response_id: 'resp_1' }, 'a stored response (previous_response_id)'],
    ['POST', '/v1/responses', { conversation: { id: 'conv_1' } }, 'a stored conversation'],
    ['POST', '/v1/responses/input_tokens', { previous_response_id: 'resp_1' }, 'a stored response (previous_response_id)'],
    ['POST', '/v1/responses/input_tokens', { conversation: 'conv_1' }, 'a stored conversation'],
    ['GET', '/v1/vector_stores', null, 'vector_stores stored at the provider'],
    ['POST', '/v1/fine_tuning/jobs', null, 'fine_tuning stored at the provider'],
  ])('OpenAI: %s %s reaches %s', (method, path, body, what) => {
    expect(openAiStoredObjects(method, path, body as Record<string, unknown> | null)).toBe(what);
  });

  it.each([
    ['POST', '/v1/chat/completions', { model: 'gpt-4o-mini', store: true }],
    ['POST', '/v1/responses', { model: 'gpt-4o-mini', previous_response_id: null }],
    ['POST', '/v1/responses/input_tokens', { model: 'gpt-4o-mini' }],
    ['POST', '/v1/embeddings', { model: 'text-embedding-3-small' }],
    ['GET', '/v1/models', null],
    ['GET', '/v1/filesystem', null],
  ])('OpenAI: %s %s is an ordinary call', (method, path, body) => {
    expect(openAiStoredObjects(method, path, body as Record<string, unknown> | null)).toBeUndefined();
  });

  it('Anthropic: batches, files and skills, not messages or their token count', () => {
    expect(anthropicStoredObjects('/v1/messages/batches/msgbatch_1/results')).toBe('message batches stored at the provider');
    expect(anthropicStoredObjects('/v1/files')).toBe('files stored at the provider');
    expect(anthropicStoredObjects('/v1/messages')).toBeUndefined();
    expect(anthropicStoredObjects('/v1/messages/count_tokens')).toBeUndefined();
  });

  it('Vertex AI: context caches and jobs of the project, not generateContent', () => {
    expect(vertexStoredObjects('/v1/projects/p/locations/us-central1/cachedContents')).toBe('cachedContents stored in the project');
    expect(vertexStoredObjects('/v1/projects/p/locations/us-central1/batchPredictionJobs/123:cancel')).toBe('batchPredictionJobs stored in the project');
    expect(vertexStoredObjects('/v1/projects/p/locations/us-central1/publishers/google/models/gemini-2.5-flash:generateContent')).toBeUndefined();
  });
});
