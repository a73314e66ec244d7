// POST /v1/audio/transcriptions, /v1/audio/translations and /v1/audio/speech: OpenAI's audio API, for the
// routes whose upstream speaks it (OpenAI, configured OpenAI-compatible routes; ADR 0911). An upload is
// forwarded as the bytes it came in (only a `<route>/<model>` id is spliced to the route's id); a speech
// request passes through with the route's model id and its audio answer streams back unread. The usage is
// what the provider reports (a transcription's `usage`) or what the request says (a speech input's length).

import type { FormPart } from '../formats/multipart-form.ts';
import { AudioRequestError, OPENAI_AUDIO_PATHS, readAudioUpload, readSpeechRequest, speechFacts, uploadFacts, type AudioOperation } from '../routes/openai-audio.ts';
import { openAiRequestUser } from '../routes/request-user.ts';
import { nativePlan, type V1RoutePlan } from '../routes/route-module.ts';
import { v1Surface, type GatewayTarget } from '../routes/v1-plan.ts';
import { GatewayError } from '../translate/openai-error.ts';
import type { RuntimeConfig } from '../../../contracts/runtime-config.ts';
import { OPENAI_API_ERRORS, type ApiCall, type ApiPlan, type GatewayApi, passedThroughAnswer } from './gateway-api.ts';

/** The upstream answers in OpenAI's audio API itself: a transcript's JSON, or audio bytes, pass through. */
const PASSED_THROUGH = passedThroughAnswer('an audio answer');

/** The request as a GatewayError in OpenAI's shape (400, the field named). */
function refusal(error: unknown): unknown {
  if (!(error instanceof AudioRequestError)) return error;
  return new GatewayError(400, error.message, { param: error.param, code: error.param === null ? 'invalid_request' : 'invalid_value' });
}

/** The route serving the model on /v1, when its upstream speaks OpenAI's audio API. */
function audioRoute(target: GatewayTarget, config: RuntimeConfig, operation: AudioOperation) {
  const { route, module, surface } = v1Surface(target, config);
  const path = surface.audio?.[operation];
  if (path === undefined) {
    throw new GatewayError(
      400,
      `model ${target.requested} (provider ${target.provider}) is not served on ${OPENAI_AUDIO_PATHS[operation]}: its route ${route} does not speak OpenAI's audio API`,
      {
        param: 'model',
        code: 'model_not_available',
      },
    );
  }
  return { route, module, surface, path };
}

function planUpload(call: ApiCall, operation: AudioOperation): V1RoutePlan {
  const { surface, path } = audioRoute(call.target, call.config, operation);
  const sent = call.body ?? null;
  const upload = readAudioUpload(sent, call.contentType, operation);
  if (upload.unmeteredBecause !== undefined) throw new AudioRequestError(`the gateway meters every call: ${upload.unmeteredBecause}`, upload.unmeteredField ?? null);
  // A WAV file's seconds bill only a per-second model: a token model's tokens are in the answer's usage alone.
  if (!upload.reportsUsage && call.target.entry.audio_per_minute === undefined) {
    throw new AudioRequestError(`model ${call.target.requested} bills tokens, which only a json answer reports: ask for response_format json`, 'response_format');
  }
  const model = surface.modelId(call.target.requested, call.target.entry);
  // The form says `<route>/<model>` for a configured route's model: only that field's bytes change.
  const body = model === upload.model ? sent! : spliced(sent!, upload.modelPart, model);
  return {
    model,
    path,
    body,
    headers: { 'content-type': call.contentType ?? '' },
    response: null,
    includeUsage: false,
    jsonMode: false,
    stripInjectedUsage: false,
    audio: uploadFacts(upload),
  };
}

function spliced(body: Buffer, part: FormPart, value: string): Buffer {
  return Buffer.concat([body.subarray(0, part.start), Buffer.from(value, 'utf8'), body.subarray(part.end)]);
}

function planSpeech(call: ApiCall): V1RoutePlan {
  const { surface, path } = audioRoute(call.target, call.config, 'audio_speech');
  const speech = readSpeechRequest(call.request);
  const model = surface.modelId(call.target.requested, call.target.entry);
  return { ...nativePlan(model, path, { ...call.request, model }), audio: speechFacts(speech) };
}

/** The /v1 audio operation's API: its request read as a form (uploads) or JSON (speech). */
export function audioApi(operation: AudioOperation): GatewayApi {
  const upload = operation !== 'audio_speech';
  return {
    operation,
    errors: OPENAI_API_ERRORS,
    requestUser: openAiRequestUser,
    ...(upload
      ? {
          readForm(body: Buffer, contentType: string | undefined): Record<string, unknown> {
            try {
              return { model: readAudioUpload(body, contentType, operation).model };
            } catch (error) {
              throw refusal(error);
            }
          },
        }
      : {}),
    plan(call): ApiPlan {
      let plan: V1RoutePlan;
      try {
        plan = upload ? planUpload(call, operation) : planSpeech(call);
      } catch (error) {
        throw refusal(error);
      }
      const { route, module } = audioRoute(call.target, call.config, operation);
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
