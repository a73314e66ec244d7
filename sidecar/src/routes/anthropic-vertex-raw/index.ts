// Format anthropic-vertex-raw (route gamma-cloud): Claude on Vertex AI on its native rawPredict / streamRawPredict paths, as the Anthropic
// Vertex SDKs send them. The body passes through unread; /v1 uses format anthropic-vertex for Claude on Vertex AI.

import { claudeVertexEndpoint } from '../endpoint-kinds.ts';
import { ANTHROPIC_ERRORS } from '../error-shape.ts';
import { forwardedAsIs, withStoredObjects } from '../native-request.ts';
import { vertexStoredObjects } from '../stored-objects.ts';
import { defineFormat } from '../route-module.ts';
import { vertexPathModel } from '../vertex-ai.ts';

export const anthropicVertexRaw = defineFormat('anthropic-vertex-raw', () => ({
  body: 'stream',
  endpoint: claudeVertexEndpoint,
  errors: ANTHROPIC_ERRORS,
  planNative: ({ rest, query }) => withStoredObjects(forwardedAsIs(rest + query, null, vertexPathModel(rest), 'chat'), vertexStoredObjects(rest)),
}));
