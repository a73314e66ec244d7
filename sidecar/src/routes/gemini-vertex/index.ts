// Format gemini-vertex (route alpha): Gemini on Vertex AI, native generateContent API. The body passes through unread (the model
// is in the path); /v1 calls are translated to generateContent and back, a Messages token count to countTokens,
// /v1/embeddings to the text embedding models' :predict, and /v1/images/generations to Imagen's (ADR 0915).

import { geminiVertexEndpoint } from '../endpoint-kinds.ts';
import { GEMINI_CHAT_RESPONSE } from '../../translate/chat-responses.ts';
import { toGeminiRequest } from '../../translate/openai-gemini.ts';
import { notAnEmbeddingModel, readEmbeddingsRequest } from '../../translate/openai-embeddings.ts';
import { IMAGEN_NATIVE_RESERVATION, imagenRequest, isImagenModel } from '../../translate/openai-imagen.ts';
import { ImageRequestError } from '../../translate/image-request-error.ts';
import { readVertexEmbeddings, vertexEmbedder, vertexEmbeddingsBody } from '../../translate/openai-vertex-embeddings.ts';
import { GOOGLE_ERRORS } from '../error-shape.ts';
import { forwardedAsIs, withStoredObjects } from '../native-request.ts';
import { vertexStoredObjects } from '../stored-objects.ts';
import { defineFormat, nativePlan } from '../route-module.ts';
import { geminiModelId, vertexLocationPath, vertexModelSegment, vertexPathModel } from '../vertex-ai.ts';

export const geminiVertex = defineFormat('gemini-vertex', (route) => ({
  body: 'stream',
  endpoint: geminiVertexEndpoint,
  errors: GOOGLE_ERRORS,
  planNative: ({ rest, query }) => {
    const model = vertexPathModel(rest);
    // Imagen's :predict answers with its images, counted as they pass (ADR 0915); its units are its predictions.
    if (rest.endsWith(':predict') && isImagenModel(model)) return { ...forwardedAsIs(rest + query, null, model, 'image_generation'), reservation: IMAGEN_NATIVE_RESERVATION };
    return withStoredObjects(forwardedAsIs(rest + query, null, model, 'generate_content'), vertexStoredObjects(rest));
  },
  v1: {
    modelId: (requested) => geminiModelId(requested),
    plan(call) {
      const model = geminiModelId(call.requested);
      const stream = call.request.stream === true;
      const translated = toGeminiRequest(call.request, call.extensions);
      const method = stream ? 'streamGenerateContent?alt=sse' : 'generateContent';
      return {
        model,
        path: `${vertexLocationPath(route, call.upstream, call.env)}/publishers/google/models/${vertexModelSegment(model)}:${method}`,
        body: Buffer.from(JSON.stringify(translated.body)),
        headers: { accept: stream ? 'text/event-stream' : 'application/json' },
        response: GEMINI_CHAT_RESPONSE,
        includeUsage: translated.includeUsage,
        jsonMode: false,
        stripInjectedUsage: false,
      };
    },
    countTokens(call) {
      const model = geminiModelId(call.requested);
      // countTokens takes the prompt's parts of a generateContent body: its contents, system instruction and tools.
      const { contents, systemInstruction, tools } = toGeminiRequest(call.request, call.extensions).body;
      return nativePlan(model, `${vertexLocationPath(route, call.upstream, call.env)}/publishers/google/models/${vertexModelSegment(model)}:countTokens`, {
        contents,
        ...(systemInstruction !== undefined ? { systemInstruction } : {}),
        ...(tools !== undefined ? { tools } : {}),
      });
    },
    embeddings(call) {
      const model = geminiModelId(call.requested);
      const embedder = vertexEmbedder(model);
      if (embedder === undefined) throw notAnEmbeddingModel(model, route, 'gemini-embedding-001, text-embedding-005 and text-multilingual-embedding-002');
      const request = readEmbeddingsRequest(call.request, model);
      const path = `${vertexLocationPath(route, call.upstream, call.env)}/publishers/google/models/${vertexModelSegment(model)}:predict`;
      return { ...nativePlan(model, path, vertexEmbeddingsBody(model, embedder, request)), embeddings: { read: readVertexEmbeddings, encoding: request.encoding } };
    },
    imageGeneration(call) {
      const model = geminiModelId(call.requested);
      if (!isImagenModel(model))
        throw new ImageRequestError(`model ${model} does not generate images on route ${route}: the Imagen models do (imagen-4.0-generate-001, …)`, 'model');
      const facts = imagenRequest(call.request, model, route);
      const path = `${vertexLocationPath(route, call.upstream, call.env)}/publishers/google/models/${vertexModelSegment(model)}:predict`;
      return { ...nativePlan(model, path, facts.body), units: facts.units, reservation: facts.reservation, readImages: facts.read };
    },
  },
}));
