// /proxy/alpha: Gemini on Vertex AI, native generateContent API. The body passes through unread (the model
// is in the path); /v1 calls are translated to generateContent and back.

import { GEMINI_CHAT_RESPONSE } from '../../translate/chat-responses.ts';
import { toGeminiRequest } from '../../translate/openai-gemini.ts';
import { GOOGLE_ERRORS } from '../error-shape.ts';
import { forwardedAsIs } from '../native-request.ts';
import { defineRoute } from '../route-module.ts';
import { geminiModelId, vertexLocationPath, vertexModelSegment, vertexPathModel } from '../vertex-ai.ts';

export const alpha = defineRoute('alpha', {
  body: 'stream',
  errors: GOOGLE_ERRORS,
  planNative: ({ rest, query }) => forwardedAsIs(rest + query, null, vertexPathModel(rest), 'generate_content'),
  v1: {
    modelId: (requested) => geminiModelId(requested),
    plan(call) {
      const model = geminiModelId(call.requested);
      const stream = call.request.stream === true;
      const translated = toGeminiRequest(call.request);
      const method = stream ? 'streamGenerateContent?alt=sse' : 'generateContent';
      return {
        model,
        path: `${vertexLocationPath('alpha', call.upstream, call.env)}/publishers/google/models/${vertexModelSegment(model)}:${method}`,
        body: Buffer.from(JSON.stringify(translated.body)),
        headers: { accept: stream ? 'text/event-stream' : 'application/json' },
        response: GEMINI_CHAT_RESPONSE,
        includeUsage: translated.includeUsage,
        jsonMode: false,
        stripInjectedUsage: false,
      };
    },
  },
});
