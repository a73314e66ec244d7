// Inbound authentication as a fastify hook, right after the Host and Origin checks (request-guard.ts) and
// before routing reads a byte of the body. A refused request gets 401 (503 when the identity provider could
// not be asked, or not now: token_lookups_throttled) and nothing else happens: no upstream call, no span, one
// rate-limited log line.
//   - With server.auth.required, every request needs an identity, except GET /healthz with health: open.
//   - Without it, a request with no credential passes anonymously, but a credential that fails is refused.
//   - GET /healthz with health: required needs an identity (401 without detail otherwise).
//   - /_local/* in server mode (or with required) needs an identity listed in server.auth.admins (403): the
//     management API and the management UI that calls it. So does /metrics on this port: every user's spend is
//     in it (per user with metrics.perUser); Prometheus scrapes the health-only port instead.
// Every one of these is decided on the route the router matched, never on the path as the caller spelled it:
// the router decodes percent-escapes (`/%5Flocal/api/config` reaches /_local/api/config) and ignores
// nothing else, so a check on the raw path could be walked around by a spelling the router still accepts.

import type { FastifyInstance, FastifyReply } from 'fastify';
import type { Logger } from 'pino';
import type { RuntimeConfig } from '../../../../contracts/runtime-config.ts';
import { hasAuthStrategy, type ServerAuthConfig } from '../../../../contracts/server-auth-config.ts';
import { errorType } from '../../translate/openai-error.ts';
import { AuthFailureLog } from './auth-failure-log.ts';
import type { Authenticator, AuthFailure } from './authenticator.ts';
import type { Identity } from './identity.ts';

export interface IdentityGate {
  /** null: no strategy configured, nothing is checked. */
  authenticator: Authenticator | null;
  failures: AuthFailureLog;
}

const MANAGEMENT = '/_local';

function isManagement(path: string): boolean {
  return path === MANAGEMENT || path.startsWith(`${MANAGEMENT}/`);
}

function isGateway(path: string): boolean {
  return path === '/v1' || path.startsWith('/v1/');
}

/**
 * Whether a caller may reach what the provider stores under the proxy's key (stored completions and responses,
 * files, batches): anyone outside server mode, where the key is the caller's own; on a server, whose users all
 * share it, only admins (ADR 1007).
 */
export function mayReachStoredObjects(identity: Identity | null, config: Pick<RuntimeConfig, 'mode' | 'server'>): boolean {
  return config.mode !== 'server' || (identity !== null && isAdmin(identity, config.server.auth.admins));
}

/** An admin is listed in server.auth.admins by e-mail or user id, or through one of its groups. */
export function isAdmin(identity: Identity, admins: readonly string[]): boolean {
  if (admins.length === 0) return false;
  if (identity.email !== null && admins.includes(identity.email)) return true;
  if (admins.includes(identity.userId.toLowerCase())) return true;
  return identity.groups.some((group) => admins.includes(group));
}

interface Refusal {
  statusCode: number;
  code: string;
  message: string;
  extra?: Record<string, string>;
}

function sendError(reply: FastifyReply, path: string, { statusCode, code, message, extra = {} }: Refusal): FastifyReply {
  // OpenAI's shape on /v1, which its SDKs turn into AuthenticationError / PermissionDeniedError.
  const body = isGateway(path) ? { error: { message, type: errorType(statusCode), param: null, code, ...extra } } : { error: { code, ...extra, message } };
  return reply.code(statusCode).header('content-type', 'application/json; charset=utf-8').send(JSON.stringify(body));
}

/**
 * Reasons only a token's own signature can settle. Told apart, they would tell a forger which issuers this
 * server trusts (an unknown issuer is refused before any key is fetched, a known one for its signature), so
 * the caller gets one reason for all three; the log line keeps the precise one for operators.
 */
const UNTRUSTED = new Set(['unknown_issuer', 'unknown_key', 'bad_signature']);
const UNTRUSTED_MESSAGE = "the token's issuer is not one this server trusts, or its signature does not verify with the issuer's keys";

function callerView(failure: AuthFailure): { reason: string; message: string } {
  return UNTRUSTED.has(failure.reason) ? { reason: 'untrusted_token', message: UNTRUSTED_MESSAGE } : { reason: failure.reason, message: failure.message };
}

function refuse(reply: FastifyReply, path: string, failure: AuthFailure, health: boolean): FastifyReply {
  if (failure.reason === 'token_lookups_throttled') {
    reply.header('retry-after', String(failure.retryAfterSeconds ?? 1));
    return sendError(reply, path, { statusCode: 503, code: 'token_lookups_throttled', message: failure.message });
  }
  if (failure.statusCode === 503) {
    reply.header('retry-after', '5');
    return sendError(reply, path, {
      statusCode: 503,
      code: 'identity_provider_unavailable',
      message: 'the identity provider could not be reached to check the credential; try again',
    });
  }
  // An unauthenticated probe learns nothing about the engine or the token.
  if (health) {
    reply.header('www-authenticate', 'Bearer realm="tollgate", error="invalid_token"');
    return reply.code(401).header('content-type', 'application/json; charset=utf-8').send('{"error":{"code":"invalid_token"}}');
  }
  const { reason, message } = callerView(failure);
  reply.header('www-authenticate', `Bearer realm="tollgate", error="invalid_token", error_description="${reason}"`);
  return sendError(reply, path, { statusCode: 401, code: 'invalid_token', message, extra: { reason } });
}

/**
 * The authenticator server.auth asks for, and the one failure log its refusals share (on every listener). Without
 * a strategy the verifiers and their libraries (jose, google-auth-library) are never loaded: a sidecar does not
 * pay for server mode (ADR 0003).
 */
export async function identityGate(config: Pick<RuntimeConfig, 'server'>, logger: Logger): Promise<IdentityGate> {
  const failures = new AuthFailureLog(logger);
  if (!hasAuthStrategy(config.server.auth)) return { authenticator: null, failures };
  const { createAuthenticator } = await import('./authenticator.ts');
  return { authenticator: createAuthenticator(config.server.auth), failures };
}

/** Checks inbound identity on `app` (a second listener passes the engine's gate, so its refusals are counted once). */
export async function installIdentityHook(app: FastifyInstance, config: Pick<RuntimeConfig, 'mode' | 'server'>, logger: Logger, given?: IdentityGate): Promise<IdentityGate> {
  app.decorateRequest('identity', null);
  const auth: ServerAuthConfig = config.server.auth;
  const gate = given ?? (await identityGate(config, logger));
  const { authenticator, failures } = gate;
  if (authenticator === null) return gate;
  const adminsOnly = config.mode === 'server' || auth.required;

  app.addHook('onRequest', async (request, reply) => {
    const path = (request.raw.url ?? '/').split('?')[0]!;
    // The route's own pattern (undefined when no route matched: the 404 handler serves nothing to protect).
    const routed = request.routeOptions.url ?? path;
    const health = routed === '/healthz';
    if (health && auth.health === 'open') return;
    const management = adminsOnly && (isManagement(routed) || routed === '/metrics');
    const outcome = await authenticator.authenticate(request.headers);
    if (outcome.failure) {
      const mustIdentify = auth.required || health || management;
      if (outcome.failure.reason === 'missing_token' && !mustIdentify) return;
      failures.record({ method: request.method, path, ip: request.ip, failure: outcome.failure });
      return refuse(reply, routed, outcome.failure, health);
    }
    request.identity = outcome.identity;
    if (management && !isAdmin(outcome.identity, auth.admins)) {
      request.log.warn({ user_id: outcome.identity.userId, method: request.method, path }, 'management API refused: not an admin');
      return sendError(reply, routed, {
        statusCode: 403,
        code: 'admin_required',
        message:
          routed === '/metrics'
            ? `${outcome.identity.userId} is not in server.auth.admins: /metrics on this port is for admins in server mode (Prometheus scrapes the health-only port)`
            : `${outcome.identity.userId} is not in server.auth.admins: the management API is for admins in server mode`,
      });
    }
  });
  return gate;
}
