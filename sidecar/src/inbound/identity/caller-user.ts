// The one place that says who a call is for. `request.identity` is the authenticated caller (null when the
// request carried no credential and none was required); spanUserId() turns it into the span's user_id, which
// is also what budgets key on. With an identity, nothing the caller writes (x-tollgate-user, the body's
// `user`) can change it; in server mode those are never read at all.

import type { FastifyRequest } from 'fastify';
import type { EngineMode } from '../../../../contracts/server-auth-config.ts';
import type { Identity } from './identity.ts';
import { headerValue } from '../../../../contracts/header-value.ts';

declare module 'fastify' {
  interface FastifyRequest {
    /** Set by the identity hook (identity-hook.ts) before any route runs. */
    identity: Identity | null;
  }
}

/**
 * The span's user_id: the identity's user when there is one; else, outside server mode, x-tollgate-user and
 * then the user the request body names (`bodyUser`, when the route read one).
 */
export function spanUserId(request: FastifyRequest, mode: EngineMode, bodyUser: string | null): string | null {
  if (request.identity) return request.identity.userId;
  if (mode === 'server') return null;
  return headerValue(request.headers, 'x-tollgate-user') ?? bodyUser;
}
