// The door every request to the engine passes first, before routing reads a byte of its body: a Host that
// is not one of the engine's names (DNS rebinding) or a web page that is not allowed (cross-site spending,
// config changes) gets a 403 in the engine's error shape, and nothing else happens: no upstream call, no
// config change, no span (ADR 1000). Pages in server.allowedOrigins get CORS answers, so the list is usable
// from a browser.

import type { IncomingHttpHeaders, ServerResponse } from 'node:http';
import type { FastifyInstance } from 'fastify';
import type { ServerConfig } from '../../../contracts/runtime-config.ts';
import { ProxyError } from '../errors.ts';
import { proxyErrorBody } from '../translate/openai-error.ts';
import { HostAllowList } from '../../../contracts/allowed-hosts.ts';
import { isSameOrigin, OriginPolicy } from '../../../contracts/origin-policy.ts';
import { headerValue } from '../../../contracts/header-value.ts';
import { PROXY_ENV } from '../../../contracts/sidecar-env.ts';

export interface InboundPolicy {
  hosts: HostAllowList;
  origins: OriginPolicy;
}

export type InboundVerdict = { refusal: ProxyError } | { refusal: null; corsOrigin: string | null };

/** The engine's policy: its listen address, its own names, the pod's IP (TOLLGATE_POD_IP) and the config's lists. */
export function inboundPolicy(server: Pick<ServerConfig, 'host' | 'allowedHosts' | 'allowedOrigins'>, env: NodeJS.ProcessEnv): InboundPolicy {
  return {
    hosts: new HostAllowList({ listenHost: server.host, allowedHosts: server.allowedHosts, podIp: env[PROXY_ENV.podIp] }),
    origins: new OriginPolicy(server.allowedOrigins),
  };
}

const SERVE: InboundVerdict = { refusal: null, corsOrigin: null };

/**
 * The name the caller used: Host on HTTP/1.1, `:authority` on HTTP/2 (RFC 9113 §8.3.1). An HTTP/2 request
 * that carries both with different names is malformed; it is judged by the worse of the two (null).
 */
export function requestAuthority(headers: IncomingHttpHeaders): string | undefined | null {
  const authority = headerValue(headers, ':authority');
  const host = headers.host;
  if (authority === undefined) return host;
  if (host !== undefined && host.toLowerCase() !== authority.toLowerCase()) return null;
  return authority;
}

export function judgeInbound(policy: InboundPolicy, headers: IncomingHttpHeaders): InboundVerdict {
  const host = requestAuthority(headers);
  if (host === null) {
    return { refusal: new ProxyError('host_not_allowed', `Host ${JSON.stringify(headers.host)} differs from :authority ${JSON.stringify(headers[':authority'])}`) };
  }
  if (!policy.hosts.allows(host)) {
    return {
      refusal: new ProxyError(
        'host_not_allowed',
        `Host ${JSON.stringify(host)} is not one of this proxy's names: it answers to localhost, its own addresses and the names in server.allowedHosts`,
      ),
    };
  }
  const origin = headerValue(headers, 'origin');
  const site = headerValue(headers, 'sec-fetch-site');
  // The engine's own page (the management UI at /_local/) calling its API: same origin, under one of the
  // engine's own names. Needs no CORS; every other page is judged by server.allowedOrigins.
  if (origin !== undefined && isSameOrigin(origin, host, site) && policy.hosts.namesEngine(host)) return SERVE;
  const verdict = policy.origins.check(origin, site);
  if (!verdict.allowed) return { refusal: new ProxyError('origin_not_allowed', verdict.reason) };
  return verdict.corsOrigin === null ? SERVE : { refusal: null, corsOrigin: verdict.corsOrigin };
}

/** The refusal as JSON: OpenAI's error shape on the /v1 gateway (its SDKs parse it), the engine's own elsewhere. */
export function refusalBody(path: string, error: ProxyError): string {
  return JSON.stringify(path === '/v1' || path.startsWith('/v1/') ? proxyErrorBody(error) : error.toJSON());
}

/** Writes a refusal on a plain Node response (the health-only listener, which has no fastify). */
export function sendRefusal(res: ServerResponse, path: string, error: ProxyError): void {
  const body = refusalBody(path, error);
  res.writeHead(error.statusCode, { 'content-type': 'application/json; charset=utf-8', 'content-length': Buffer.byteLength(body) }).end(body);
}

const EXPOSED_HEADERS = 'x-proxy-span-id, x-proxy-trace-id, x-proxy-request-id';

/** Runs the check on every route of `app`, before routing reads the body. */
export function installRequestGuard(app: FastifyInstance, policy: InboundPolicy): void {
  app.addHook('onRequest', async (request, reply) => {
    const verdict = judgeInbound(policy, request.headers);
    if (verdict.refusal !== null) {
      const path = (request.raw.url ?? '/').split('?')[0]!;
      request.log.warn(
        { code: verdict.refusal.code, host: request.headers.host ?? request.headers[':authority'], origin: request.headers.origin, method: request.method, path },
        `request refused: ${verdict.refusal.code === 'host_not_allowed' ? 'Host' : 'Origin'} not allowed`,
      );
      return reply.code(403).header('content-type', 'application/json; charset=utf-8').send(refusalBody(path, verdict.refusal));
    }
    if (verdict.corsOrigin === null) return;
    // On the raw response, so that routes which write it themselves (the relays) send them too.
    const res = reply.raw;
    res.setHeader('access-control-allow-origin', verdict.corsOrigin);
    res.setHeader('vary', 'Origin');
    const preflightMethod = headerValue(request.headers, 'access-control-request-method');
    if (request.method === 'OPTIONS' && preflightMethod !== undefined) {
      // A preflight is the browser asking the proxy, not a call: it is answered here and never forwarded.
      res.setHeader('access-control-allow-methods', preflightMethod);
      const requestedHeaders = headerValue(request.headers, 'access-control-request-headers');
      if (requestedHeaders !== undefined) res.setHeader('access-control-allow-headers', requestedHeaders);
      res.setHeader('access-control-max-age', '600');
      return reply.code(204).send();
    }
    res.setHeader('access-control-expose-headers', EXPOSED_HEADERS);
  });
}
