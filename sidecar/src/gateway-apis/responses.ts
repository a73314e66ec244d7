// POST /v1/responses, the Responses API, for every provider: OpenAI's own passes through (a conversation this
// Tollgate stored is sent as input items, since OpenAI does not know its id); every other provider is reached
// through the chat pivot, its answer written as a `response` or the Responses event stream, and kept in the
// response store for previous_response_id unless the caller said store: false.

import { randomId } from './gateway-ids.ts';
import type { ResponseStore } from '../responses/response-store.ts';
import { openAiRequestUser } from '../routes/request-user.ts';
import { nativePlan } from '../routes/route-module.ts';
import { v1Surface } from '../routes/v1-plan.ts';
import { OPENAI_CHAT_RESPONSE } from '../translate/chat-responses.ts';
import { GatewayError, invalidParameter, upstreamErrorBody } from '../translate/openai-error.ts';
import { nowSeconds } from '../translate/openai-chat.ts';
import { outputItems, responseEcho, responseObject, responseStatus, responsesUsage, type ResponseEcho } from '../translate/responses-output.ts';
import { includesEncryptedReasoning, inputItems, isTollgateReasoning, responsesToChat, type ResponseItem } from '../translate/responses-request.ts';
import { ResponsesStreamEncoder } from '../translate/responses-stream.ts';
import { OPENAI_API_ERRORS, type ApiCall, type CallerAnswer, type GatewayApi, passedThroughAnswer } from './gateway-api.ts';
import { planThroughChat } from './through-chat.ts';
import { MAX_TRANSLATED_BODY_BYTES } from '../pipeline/answer-bounds.ts';

/** Chat parameter names as a Responses caller knows them. */
const NAMES: Readonly<Record<string, string>> = { max_completion_tokens: 'max_output_tokens', response_format: 'text.format', tools: 'tools', tool_choice: 'tool_choice' };

const newItemId = (prefix: string): string => `${prefix}${randomId(48)}`;

/** OpenAI answers in the Responses API itself: only its errors are rewritten, to name the route. */
const NATIVE_ANSWER = passedThroughAnswer('a native Responses answer');

export function responsesApi(store: ResponseStore): GatewayApi {
  return {
    operation: 'chat',
    errors: OPENAI_API_ERRORS,
    requestUser: openAiRequestUser,
    plan(call) {
      const { route, module, surface } = v1Surface(call.target, call.config);
      const history = storedConversation(store, call, surface.responsesPath !== undefined && call.storedObjects);
      if (call.request.background === true) {
        throw invalidParameter(
          'background',
          'background responses are billed when their result is fetched later, which Tollgate does not meter: send the request without background',
        );
      }
      if (!call.storedObjects && call.request.conversation !== undefined && call.request.conversation !== null) {
        throw invalidParameter(
          'conversation',
          "conversations are stored at OpenAI under this server's key, which its users share: only server.auth.admins may use them; use previous_response_id",
        );
      }
      const stream = call.request.stream === true;
      if (surface.responsesPath !== undefined) {
        const model = surface.modelId(call.target.requested, call.target.entry);
        const body: Record<string, unknown> = { ...call.request, model };
        if (history !== undefined) {
          // OpenAI does not know this Tollgate's ids: the conversation goes as input items, less the thinking
          // only Claude can read and the ids OpenAI would look up.
          body.input = [...history.filter((item) => !isTollgateReasoning(item)).map(({ id: _id, ...item }) => item), ...inputItems(call.request)];
          delete body.previous_response_id;
        }
        return { ...nativePlan(model, surface.responsesPath, body), route, provider: module.provider, stream, translation: 'passthrough', answer: NATIVE_ANSWER };
      }
      const translated = responsesToChat(call.request, history ?? []);
      const answer = new ResponsesAnswer({
        echo: responseEcho(call.request),
        items: translated.items,
        store: call.request.store === false ? null : store,
        user: call.user,
        summaries: translated.extensions.reasoning?.summaries ?? false,
        encrypted: includesEncryptedReasoning(call.request),
      });
      return planThroughChat(call, module, surface, { ...translated, names: NAMES }, answer);
    },
  };
}

/**
 * The stored conversation previous_response_id names. An id this Tollgate did not store may still be one of
 * OpenAI's own, when the call goes to OpenAI and the caller may reach what OpenAI stores under the proxy's key
 * (not a server's non-admins: its users share the key); otherwise it is refused.
 */
function storedConversation(store: ResponseStore, call: ApiCall, openAi: boolean): ResponseItem[] | undefined {
  const previous = call.request.previous_response_id;
  if (previous === undefined || previous === null) return undefined;
  if (typeof previous !== 'string' || previous === '') throw invalidParameter('previous_response_id', 'previous_response_id must be a response id');
  const stored = store.get(previous, call.user);
  if (stored !== undefined || openAi) return stored;
  throw new GatewayError(
    400,
    `Previous response with id '${previous}' not found: Tollgate continues the responses it made itself, for the same user, while they are in its memory store (store: true, the most recent ${store.limits.maxResponses})`,
    { param: 'previous_response_id', code: 'previous_response_not_found' },
  );
}

interface AnswerContext {
  echo: ResponseEcho;
  /** The conversation before this answer (stored with it). */
  items: ResponseItem[];
  /** Null: store: false. */
  store: ResponseStore | null;
  user: string | null;
  summaries: boolean;
  encrypted: boolean;
}

/** One call's answer: the response's id and echo, and the store it is kept in once whole. */
class ResponsesAnswer implements CallerAnswer {
  readonly #context: AnswerContext;
  readonly #id = `resp_${randomId(48)}`;
  readonly #createdAt = nowSeconds();

  constructor(context: AnswerContext) {
    this.#context = context;
  }

  json(document: Record<string, unknown>, translation: Parameters<CallerAnswer['json']>[1], shaping: Parameters<CallerAnswer['json']>[2]): unknown {
    const completion = (translation ?? OPENAI_CHAT_RESPONSE).fromJson(document, shaping);
    const { output, stored } = outputItems(completion, { newId: newItemId, summaries: this.#context.summaries, encrypted: this.#context.encrypted });
    const { status, incomplete } = responseStatus(completion.choices[0]?.finish_reason ?? null);
    const head = { id: this.#id, createdAt: this.#createdAt, model: completion.model, echo: this.#context.echo };
    this.#keep(stored);
    return responseObject(head, status, output, responsesUsage(completion.usage), { incomplete });
  }

  encoder(model: string): ResponsesStreamEncoder {
    return new ResponsesStreamEncoder({
      head: { id: this.#id, createdAt: this.#createdAt, echo: this.#context.echo },
      model,
      newId: newItemId,
      summaries: this.#context.summaries,
      encrypted: this.#context.encrypted,
      maxOutputChars: MAX_TRANSLATED_BODY_BYTES,
      onDone: (_response, stored) => this.#keep(stored),
    });
  }

  upstreamError(route: string, statusCode: number, headers: Record<string, string | string[] | undefined>, body: Buffer): unknown {
    return upstreamErrorBody(route, statusCode, headers, body);
  }

  #keep(output: ResponseItem[]): void {
    this.#context.store?.put(this.#id, this.#context.user, [...this.#context.items, ...output]);
  }
}
