// /_local/api/pull, /start, /stop and /runtime/logs: the local model runtime from the management API
// (docs/local-proxy.md). Same door as the rest of /_local/api: Host and Origin checked, admins only in server
// mode. What runs is local.runtime.command from the config file; nothing here can change it (ADR 1401).

import { pipeline } from 'node:stream/promises';
import type { FastifyPluginAsync, FastifyReply } from 'fastify';
import { JSON_MEDIA_TYPE, notJsonMessage } from '../inbound/json-content-type.ts';
import { answerFinished } from '../pipeline/caller-connection.ts';
import type { Lifecycle } from '../lifecycle.ts';
import type { LocalRuntime } from '../local/local-runtime.ts';
import { RuntimeAnswerError } from '../local/ollama-api.ts';
import { RuntimeControlError } from '../local/runtime-supervisor.ts';
import { isRecord } from '../../../contracts/json-record.ts';
import { parseJsonWithUniqueKeys } from '../config/unique-key-json.ts';

export interface LocalRuntimeRoutesOptions {
  /** Null when local.enabled is false: every route answers 409 saying so. */
  runtime: LocalRuntime | null;
  lifecycle: Lifecycle;
}

/** Ollama's model names: `[namespace/]model[:tag]`, letters, digits and `._-`. */
const MODEL_NAME = /^[A-Za-z0-9][A-Za-z0-9._-]*(?:\/[A-Za-z0-9][A-Za-z0-9._-]*){0,2}(?::[A-Za-z0-9][A-Za-z0-9._-]*)?$/;

function sendError(reply: FastifyReply, statusCode: number, code: string, message: string): FastifyReply {
  return reply.code(statusCode).send({ error: { code, message } });
}

export const localRuntimeRoutes: FastifyPluginAsync<LocalRuntimeRoutesOptions> = async (app, opts) => {
  app.setErrorHandler((error: { statusCode?: number; message: string }, request, reply) => {
    const status = error.statusCode !== undefined && error.statusCode >= 400 && error.statusCode < 500 ? error.statusCode : 500;
    if (status === 415) return sendError(reply, 415, 'unsupported_media_type', notJsonMessage(request.headers['content-type']));
    return sendError(reply, status, status === 413 ? 'body_too_large' : status < 500 ? 'invalid_request' : 'internal_error', status < 500 ? error.message : 'internal error');
  });
  // JSON only, as on the config API: no form or text/plain body a page could send without a preflight.
  app.removeAllContentTypeParsers();
  app.addContentTypeParser(JSON_MEDIA_TYPE, { parseAs: 'string' }, (_request, body, done) => {
    try {
      done(null, (body as string).trim() === '' ? {} : parseJsonWithUniqueKeys(body as string));
    } catch (error) {
      done(Object.assign(error as Error, { statusCode: 400 }), undefined);
    }
  });

  const runtimeOr409 = (reply: FastifyReply): LocalRuntime | null => {
    if (opts.runtime === null) {
      void sendError(reply, 409, 'local_runtime_disabled', 'the local runtime is off here (local.enabled is false: the default in a pod and in server mode)');
      return null;
    }
    return opts.runtime;
  };

  app.post('/_local/api/start', async (_request, reply) => {
    const runtime = runtimeOr409(reply);
    if (runtime === null) return reply;
    try {
      return { ...(await runtime.supervisor.start()), baseUrl: runtime.baseUrl() };
    } catch (error) {
      if (error instanceof RuntimeControlError) return sendError(reply, error.statusCode, error.code, error.message);
      throw error;
    }
  });

  app.post('/_local/api/stop', async (_request, reply) => {
    const runtime = runtimeOr409(reply);
    if (runtime === null) return reply;
    try {
      return { ...(await runtime.supervisor.stop()), baseUrl: runtime.baseUrl() };
    } catch (error) {
      if (error instanceof RuntimeControlError) return sendError(reply, error.statusCode, error.code, error.message);
      throw error;
    }
  });

  app.get('/_local/api/runtime/logs', async (_request, reply) => {
    const runtime = runtimeOr409(reply);
    if (runtime === null) return reply;
    return runtime.supervisor.logs();
  });

  app.post('/_local/api/pull', async (request, reply) => {
    const runtime = runtimeOr409(reply);
    if (runtime === null) return reply;
    const body = request.body;
    const model = isRecord(body) ? body.model : undefined;
    if (!isRecord(body) || Object.keys(body).some((key) => key !== 'model')) {
      return sendError(reply, 400, 'invalid_request', 'the body must be {"model": "<name>"}, e.g. {"model": "llama3.2"}');
    }
    if (typeof model !== 'string' || model.length > 200 || !MODEL_NAME.test(model)) {
      return sendError(reply, 400, 'invalid_request', `model must be a model name such as llama3.2 or qwen2.5-coder:7b (got ${JSON.stringify(model)})`);
    }
    const baseUrl = runtime.baseUrl();
    const abort = new AbortController();
    reply.raw.once('close', () => {
      if (!answerFinished(reply.raw)) abort.abort();
    });
    const done = opts.lifecycle.track();
    try {
      let progress;
      try {
        progress = await runtime.api.pull(baseUrl, model, abort.signal);
      } catch (error) {
        if (error instanceof RuntimeAnswerError) {
          return sendError(
            reply,
            error.statusCode >= 500 ? 502 : error.statusCode,
            'local_runtime_error',
            `the local runtime at ${baseUrl} refused to pull ${model}: ${error.message}`,
          );
        }
        if (abort.signal.aborted) return reply;
        return sendError(
          reply,
          502,
          'local_runtime_unreachable',
          `the local runtime at ${baseUrl} did not answer (${(error as Error).message}): start it with POST /_local/api/start`,
        );
      }
      // The runtime's own progress lines, as it writes them (one JSON object a line; a late failure is an
      // {"error": …} line): the caller reads exactly what `ollama pull` would show.
      reply.hijack();
      reply.raw.writeHead(200, { 'content-type': 'application/x-ndjson; charset=utf-8', 'cache-control': 'no-cache' });
      try {
        await pipeline(progress, reply.raw);
      } catch (error) {
        request.log.warn({ model, err: (error as Error).message }, 'local runtime pull stream ended early');
        reply.raw.destroy();
      }
      return reply;
    } finally {
      runtime.models.invalidate();
      done();
    }
  });
};
