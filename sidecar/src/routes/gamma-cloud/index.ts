// /proxy/gamma-cloud: Claude on Vertex AI on its native rawPredict / streamRawPredict paths, as the Anthropic
// Vertex SDKs send them. The body passes through unread; /v1 uses gamma for Claude on Vertex AI.

import { ANTHROPIC_ERRORS } from '../error-shape.ts';
import { forwardedAsIs } from '../native-request.ts';
import { defineRoute } from '../route-module.ts';
import { vertexPathModel } from '../vertex-ai.ts';

export const gammaCloud = defineRoute('gamma-cloud', {
  body: 'stream',
  errors: ANTHROPIC_ERRORS,
  planNative: ({ rest, query }) => forwardedAsIs(rest + query, null, vertexPathModel(rest), 'chat'),
});
