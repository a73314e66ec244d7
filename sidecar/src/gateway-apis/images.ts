// POST /v1/images/generations and /v1/images/edits: OpenAI's image API, for the routes whose upstream speaks it
// (OpenAI, configured OpenAI-compatible routes; ADR 0910). A generation passes through with the route's model
// id; an edit is forwarded as the bytes it came in (only a `<route>/<model>` id is spliced to the route's id).
// The answer passes through unread but for its usage: the images in `data`, and a GPT image model's tokens.
// Vertex AI's Imagen and Bedrock's image models answer in their own APIs and are not served here (the ADR).

import type { FormPart } from '../formats/multipart-form.ts';
import { ImageRequestError, OPENAI_IMAGE_PATHS, readImageEdit, readImageGeneration, DEFAULT_IMAGE_MODEL, type ImageOperation, type ImageRequest } from '../routes/openai-images.ts';
import { openAiRequestUser } from '../routes/request-user.ts';
import { nativePlan, type V1RoutePlan } from '../routes/route-module.ts';
import { v1Surface, type GatewayTarget } from '../routes/v1-plan.ts';
import { GatewayError, upstreamErrorBody } from '../translate/openai-error.ts';
import type { RuntimeConfig } from '../../../contracts/runtime-config.ts';
import { OPENAI_API_ERRORS, type ApiCall, type ApiPlan, type CallerAnswer, type GatewayApi } from './gateway-api.ts';

/** The upstream answers in OpenAI's image API itself: its JSON passes through. */
const PASSED_THROUGH: CallerAnswer = {
  json: () => {
    throw new Error('an image answer passes through');
  },
  encoder: () => {
    throw new Error('an image answer passes through');
  },
  upstreamError: upstreamErrorBody,
};

/** The request as a GatewayError in OpenAI's shape (400, the field named). */
function refusal(error: unknown): unknown {
  if (!(error instanceof ImageRequestError)) return error;
  return new GatewayError(400, error.message, { param: error.param, code: error.param === null ? 'invalid_request' : 'invalid_value' });
}

/** The route serving the model on /v1, when its upstream speaks OpenAI's image API. */
function imageRoute(target: GatewayTarget, config: RuntimeConfig, operation: ImageOperation) {
  const { route, module, surface } = v1Surface(target, config);
  const path = surface.images?.[operation];
  if (path === undefined) {
    throw new GatewayError(
      400,
      `model ${target.requested} (provider ${target.provider}) is not served on ${OPENAI_IMAGE_PATHS[operation]}: its route ${route} does not speak OpenAI's image API`,
      {
        param: 'model',
        code: 'model_not_available',
      },
    );
  }
  return { route, module, surface, path };
}

/** The request's facts the meter and the budget need: n images of a size and quality, and what its reservation holds. */
function withFacts(plan: V1RoutePlan, request: ImageRequest): V1RoutePlan {
  if (request.unmeteredBecause !== undefined) throw new ImageRequestError(`the gateway meters every call: ${request.unmeteredBecause}`, 'stream');
  return { ...plan, units: request.units, reservation: request.reservation };
}

function planEdit(call: ApiCall): V1RoutePlan {
  const { surface, path } = imageRoute(call.target, call.config, 'image_edit');
  const sent = call.body ?? null;
  const model = surface.modelId(call.target.requested, call.target.entry);
  const request = readImageEdit(sent, call.contentType, model);
  // The form says `<route>/<model>` for a configured route's model: only that field's bytes change.
  const part = request.modelPart;
  const body = part === undefined || sent!.toString('utf8', part.start, part.end) === model ? sent! : spliced(sent!, part, model);
  const plan: V1RoutePlan = {
    model,
    path,
    body,
    headers: { 'content-type': call.contentType ?? '' },
    response: null,
    includeUsage: false,
    jsonMode: false,
    stripInjectedUsage: false,
  };
  return withFacts(plan, request);
}

function spliced(body: Buffer, part: FormPart, value: string): Buffer {
  return Buffer.concat([body.subarray(0, part.start), Buffer.from(value, 'utf8'), body.subarray(part.end)]);
}

function planGeneration(call: ApiCall): V1RoutePlan {
  const { surface, path } = imageRoute(call.target, call.config, 'image_generation');
  const model = surface.modelId(call.target.requested, call.target.entry);
  const request = readImageGeneration({ ...call.request, model });
  return withFacts(nativePlan(model, path, { ...call.request, model }), request);
}

/** The /v1 image operation's API: a generation's JSON, an edit's multipart form. */
export function imagesApi(operation: ImageOperation): GatewayApi {
  const edit = operation === 'image_edit';
  return {
    operation,
    // OpenAI's image API makes dall-e-2 images when the request names no model.
    defaultModel: DEFAULT_IMAGE_MODEL,
    errors: OPENAI_API_ERRORS,
    requestUser: openAiRequestUser,
    ...(edit
      ? {
          readForm(body: Buffer, contentType: string | undefined): Record<string, unknown> {
            try {
              const request = readImageEdit(body, contentType);
              return request.modelPart === undefined ? {} : { model: request.model };
            } catch (error) {
              throw refusal(error);
            }
          },
        }
      : {}),
    plan(call): ApiPlan {
      let plan: V1RoutePlan;
      try {
        plan = edit ? planEdit(call) : planGeneration(call);
      } catch (error) {
        throw refusal(error);
      }
      const { route, module } = imageRoute(call.target, call.config, operation);
      return { ...plan, route, provider: module.provider, stream: false, translation: 'passthrough', answer: PASSED_THROUGH };
    },
    routeOf(target, config) {
      try {
        return v1Surface(target, config).route;
      } catch {
        return undefined;
      }
    },
  };
}
