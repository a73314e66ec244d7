// POST /v1/images/generations and /v1/images/edits: OpenAI's image API, for the routes whose upstream speaks it
// (OpenAI, configured OpenAI-compatible routes; ADR 0910). A generation passes through with the route's model
// id; an edit is forwarded as the bytes it came in (only a `<route>/<model>` id is spliced to the route's id).
// The answer passes through unread but for its usage: the images in `data`, and a GPT image model's tokens.
// A generation on Vertex AI's Imagen or Bedrock's image models is translated into their own APIs and their base64
// images written back as OpenAI's `data` (ADR 0915); edits are OpenAI's and compatible routes' only.

import type { FormPart } from '../formats/multipart-form.ts';
import { OPENAI_IMAGE_PATHS, readImageEdit, readImageGeneration, DEFAULT_IMAGE_MODEL, type ImageOperation, type ImageRequest } from '../routes/openai-images.ts';
import { ImageRequestError } from '../translate/image-request-error.ts';
import { openAiRequestUser } from '../routes/request-user.ts';
import { nativePlan, type V1RoutePlan, type V1Surface } from '../routes/route-module.ts';
import { upstreamOf } from '../routes/upstream-base-url.ts';
import { v1RouteWith, v1Surface, type GatewayTarget } from '../routes/v1-plan.ts';
import { openAiImageAnswer, type ProviderImagesReader } from '../translate/provider-images.ts';
import { GatewayError, upstreamErrorBody } from '../translate/openai-error.ts';
import type { RuntimeConfig } from '../../../contracts/runtime-config.ts';
import { OPENAI_API_ERRORS, type ApiCall, type ApiPlan, type CallerAnswer, type GatewayApi, passedThroughAnswer } from './gateway-api.ts';

/** The upstream answers in OpenAI's image API itself: its JSON passes through. */
const PASSED_THROUGH = passedThroughAnswer('an image answer');

/** A provider's own image answer (Imagen's predictions, Bedrock's images) written as OpenAI's. */
function translatedAnswer(read: ProviderImagesReader): CallerAnswer {
  return {
    json: (document, _translation, shaping) => openAiImageAnswer(read(document), shaping.created),
    encoder: () => {
      throw new Error('an image answer is not streamed');
    },
    upstreamError: upstreamErrorBody,
  };
}

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

/** A generation's route: one that speaks OpenAI's image API, or one that translates into its provider's (ADR 0915). */
const generates = (surface: V1Surface): boolean => surface.images !== undefined || surface.imageGeneration !== undefined;

function planGeneration(call: ApiCall): { plan: V1RoutePlan; route: string; provider: string; read?: ProviderImagesReader } {
  const { module, surface } = v1RouteWith(call.target, call.config, generates, OPENAI_IMAGE_PATHS.image_generation);
  const route = module.name;
  if (surface.images === undefined) {
    const { readImages, ...plan } = surface.imageGeneration!({
      request: call.request,
      requested: call.target.requested,
      entry: call.target.entry,
      upstream: upstreamOf(module, call.config),
      env: call.env,
    });
    return { plan, route, provider: module.provider, read: readImages };
  }
  const model = surface.modelId(call.target.requested, call.target.entry);
  const request = readImageGeneration({ ...call.request, model });
  return { plan: withFacts(nativePlan(model, surface.images.image_generation, { ...call.request, model }), request), route, provider: module.provider };
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
      try {
        if (edit) {
          const plan = planEdit(call);
          const { route, module } = imageRoute(call.target, call.config, operation);
          return { ...plan, route, provider: module.provider, stream: false, translation: 'passthrough', answer: PASSED_THROUGH };
        }
        const { plan, route, provider, read } = planGeneration(call);
        const translated =
          read === undefined ? { translation: 'passthrough' as const, answer: PASSED_THROUGH } : { translation: 'images' as const, answer: translatedAnswer(read) };
        return { ...plan, route, provider, stream: false, ...translated };
      } catch (error) {
        throw refusal(error);
      }
    },
    routeOf(target, config) {
      try {
        return edit ? v1Surface(target, config).route : v1RouteWith(target, config, generates, OPENAI_IMAGE_PATHS.image_generation).module.name;
      } catch {
        return undefined;
      }
    },
  };
}
