// The fastify options every engine listener that serves calls shares (the proxy port and the LM Studio-
// compatible port): one log line per call from the call meter, the body limit, header and body deadlines,
// refusals below the routes in the engine's shape, request ids, and connections closed on shutdown.

import { randomUUID } from 'node:crypto';
import { LogController, type FastifyBaseLogger, type FastifyHttpOptions } from 'fastify';
import type { Server } from 'node:http';
import type { ServerConfig } from '../../../contracts/runtime-config.ts';
import { clientErrorHandler, frameworkErrorHandler, type HttpRefusalOptions } from '../inbound/http-refusals.ts';
import { createHttp1AndH2cServer } from './h2c-server.ts';
import { lazySchemaCompilers } from './lazy-schema-compilers.ts';

const REQUEST_ID = /^[A-Za-z0-9._:-]{1,128}$/;
const HEADERS_TIMEOUT_MS = 10_000;
/** fastify's default, kept: an idle keep-alive connection closes after this. */
const KEEP_ALIVE_TIMEOUT_MS = 72_000;

export function listenerOptions(server: ServerConfig, refusals: HttpRefusalOptions): FastifyHttpOptions<Server, FastifyBaseLogger> {
  // Headers come in one go from any real client; a body gets server.requestTimeoutMs once the route reads it
  // (request-body.ts answers 408 with a span). Node's own request timeout is the backstop for routes that
  // leave the body to fastify, set past the routes' deadline so that theirs fires first (ADR 1002).
  const headersTimeout = Math.min(HEADERS_TIMEOUT_MS, server.requestTimeoutMs);
  const httpOptions = { headersTimeout, connectionsCheckingInterval: 1000 };
  const requestTimeout = headersTimeout + server.requestTimeoutMs + 2000;
  // typed as fastify's logger so the app's type (and every plugin's) names FastifyBaseLogger, not pino's
  const loggerInstance: FastifyBaseLogger = refusals.logger;
  return {
    // HTTP/1.1 and h2c (HTTP/2 with prior knowledge) on the one port: the AWS SDK's default Bedrock client speaks the latter.
    serverFactory: (handler) => createHttp1AndH2cServer(handler, { http1: httpOptions, keepAliveTimeout: KEEP_ALIVE_TIMEOUT_MS, requestTimeout, idleTimeoutMs: headersTimeout }),
    loggerInstance,
    // every call gets one richer line from the call meter instead of fastify's request/response lines
    logController: new LogController({ disableRequestLogging: true }),
    bodyLimit: server.bodyLimitBytes,
    http: httpOptions,
    requestTimeout,
    clientErrorHandler: clientErrorHandler(refusals, headersTimeout),
    frameworkErrors: frameworkErrorHandler(refusals),
    genReqId: (req) => {
      const given = req.headers['x-request-id'];
      return typeof given === 'string' && REQUEST_ID.test(given) ? given : randomUUID();
    },
    forceCloseConnections: 'idle',
    // A path parameter may be a budget's user id (up to 256 characters, percent-encoded up to three times
    // longer); find-my-way's default of 100 answered such a user's budget with 414.
    routerOptions: { maxParamLength: 1024 },
    return503OnClosing: true,
    schemaController: { compilersFactory: lazySchemaCompilers },
  };
}
