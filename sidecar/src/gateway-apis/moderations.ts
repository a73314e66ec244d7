// POST /v1/moderations, OpenAI's moderation API, on the routes whose upstream serves it (OpenAI, configured
// OpenAI-compatible routes): passed through as sent, with OpenAI's default model when the body names none. OpenAI
// bills nothing for it ("All OpenAI moderation models and endpoints are free of charge"): its moderation models'
// price entries are 0, so the span is priced, costs 0 and charges no budget (ADR 0912). A configured route's call
// costs what its answer's usage and its price entry say, as any other call there; one whose entry prices its
// tokens (Mistral bills its moderation model) is held to the budget like any billed call, not waved through.

import { openAiRequestUser } from '../routes/request-user.ts';
import { nativePlan } from '../routes/route-module.ts';
import { v1Surface } from '../routes/v1-plan.ts';
import { GatewayError } from '../translate/openai-error.ts';
import { OPENAI_API_ERRORS, type GatewayApi, passedThroughAnswer } from './gateway-api.ts';

/** The upstream answers in OpenAI's moderation format itself; only its errors name the route. */
const PASSED_THROUGH = passedThroughAnswer('a moderation answer');

export const moderationsApi: GatewayApi = {
  operation: 'moderation',
  defaultModel: 'omni-moderation-latest',
  errors: OPENAI_API_ERRORS,
  requestUser: openAiRequestUser,
  plan(call) {
    const { target } = call;
    const { route, module, surface } = v1Surface(target, call.config);
    const path = surface.moderationsPath;
    if (path === undefined) {
      throw new GatewayError(
        400,
        `model ${target.requested} (provider ${target.provider}) cannot moderate: its route ${route} has no moderation API; /v1/moderations serves OpenAI's moderation models (omni-moderation-latest) and OpenAI-compatible routes`,
        { param: 'model', code: 'unsupported_operation' },
      );
    }
    const model = surface.modelId(target.requested, target.entry);
    const free = target.entry.input_per_million === 0 && target.entry.output_per_million === 0;
    return { ...nativePlan(model, path, { ...call.request, model }), route, provider: module.provider, stream: false, translation: 'passthrough', answer: PASSED_THROUGH, free };
  },
};
