// Fake Vertex AI: one host serving Gemini, its text embeddings (:predict, :embedContent), Imagen (:predict), the
// OpenAI-compatible surface and Claude, behind Google bearer auth.

import { handleClaudeOnVertex } from './llm-anthropic.ts';
import { vertexEmbedContent, vertexEmbeddings } from './llm-embeddings.ts';
import { sendGoogleError } from './llm-errors.ts';
import { isImagenModel, vertexImagen } from './llm-provider-images.ts';
import { handleGemini, handleGeminiCountTokens } from './llm-gemini.ts';
import { chatCompletions } from './llm-openai.ts';
import { bearerToken } from './llm-request.ts';
import type { FakeExchange } from './llm-upstream.ts';

const modelPath = /^\/v1(?:beta1)?\/projects\/[^/]+\/locations\/[^/]+\/publishers\/([^/]+)\/models\/([^/:]+):([A-Za-z]+)$/;
const compatPath = /^\/v1(?:beta1)?\/projects\/[^/]+\/locations\/[^/]+\/endpoints\/openapi\/chat\/completions$/;

export async function handleVertex(x: FakeExchange): Promise<void> {
  const token = bearerToken(x.req);
  if (token === null) {
    return sendGoogleError(x.res, 401, 'Request is missing required authentication credential. Expected OAuth 2 access token.');
  }
  if (x.opts.expectBearer !== undefined && token !== x.opts.expectBearer) {
    return sendGoogleError(x.res, 401, 'Request had invalid authentication credentials. Expected OAuth 2 access token.');
  }
  if (x.req.method === 'POST' && compatPath.test(x.path)) return chatCompletions(x, 'vertex');
  const match = x.req.method === 'POST' ? modelPath.exec(x.path) : null;
  if (match) {
    const [, publisher, rawModel = '', method] = match;
    const model = decodeURIComponent(rawModel);
    if (publisher === 'google' && (method === 'generateContent' || method === 'streamGenerateContent')) {
      return handleGemini(x, model, method);
    }
    if (publisher === 'google' && method === 'countTokens') return handleGeminiCountTokens(x);
    if (publisher === 'google' && method === 'predict') return isImagenModel(model) ? vertexImagen(x, model) : vertexEmbeddings(x, model);
    if (publisher === 'google' && method === 'embedContent') return vertexEmbedContent(x, model);
    if (publisher === 'anthropic' && (method === 'rawPredict' || method === 'streamRawPredict')) {
      if (model !== 'count-tokens' || method === 'rawPredict') return handleClaudeOnVertex(x, model, method);
    }
  }
  return sendGoogleError(x.res, 404, `The requested URL ${x.path} was not found on this server.`);
}
