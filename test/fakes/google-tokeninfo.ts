// A fake of Google's tokeninfo endpoint for opaque OAuth 2.0 access tokens. It answers the way
// oauth2.googleapis.com/tokeninfo does: the token in `Authorization: Bearer` of a form POST (how
// google-auth-library's getTokenInfo asks) or in `?access_token=` of a GET; 200 with string-valued exp,
// expires_in and email_verified for a live token, 400 {"error":"invalid_token"} for anything else.

import { randomBytes } from 'node:crypto';
import { startRecordingServer, type RecordedCall, type RecordingServer } from './recording-server.ts';

export interface IssuedAccessToken {
  email: string;
  /** OAuth client the token was issued to. */
  clientId: string;
  /** ms since the epoch */
  expiresAt: number;
  scope: string;
}

export interface FakeTokeninfo {
  url: string;
  server: RecordingServer;
  /** An opaque access token (ya29-style) for `email`, valid for `expiresInSeconds`. */
  issue(email: string, opts?: { expiresInSeconds?: number; clientId?: string }): string;
  revoke(token: string): void;
  /** While on, answer every lookup with 429, as Google does when a project's quota is used up. */
  setThrottled(throttled: boolean): void;
  /** Lookups that reached the endpoint. */
  lookups(): RecordedCall[];
  close(): Promise<void>;
}

function tokenOf(call: RecordedCall): string | undefined {
  const auth = call.headers.authorization;
  if (call.method === 'POST') {
    if (!String(call.headers['content-type'] ?? '').startsWith('application/x-www-form-urlencoded')) throw new Error('tokeninfo POST must be a form');
    return typeof auth === 'string' && auth.startsWith('Bearer ') ? auth.slice(7) : (new URLSearchParams(call.body).get('access_token') ?? undefined);
  }
  return new URL(call.path, 'http://t').searchParams.get('access_token') ?? undefined;
}

export async function startFakeTokeninfo(): Promise<FakeTokeninfo> {
  const issued = new Map<string, IssuedAccessToken>();
  let throttled = false;
  const server = await startRecordingServer(
    (call, res, failing) => {
      if (throttled) {
        res.writeHead(429, { 'content-type': 'application/json; charset=UTF-8' }).end(JSON.stringify({ error: 'rate_limit_exceeded', error_description: 'Quota exceeded' }));
        return;
      }
      if (failing) {
        res.writeHead(503, { 'content-type': 'application/json' }).end('{"error":"backend_error"}');
        return;
      }
      const token = tokenOf(call);
      const entry = token === undefined ? undefined : issued.get(token);
      const now = Date.now();
      if (!entry || entry.expiresAt <= now) {
        res.writeHead(400, { 'content-type': 'application/json; charset=UTF-8' }).end(JSON.stringify({ error: 'invalid_token', error_description: 'Invalid Value' }));
        return;
      }
      const body = {
        azp: entry.clientId,
        aud: entry.clientId,
        sub: `sub-${entry.email}`,
        scope: entry.scope,
        exp: String(Math.floor(entry.expiresAt / 1000)),
        expires_in: String(Math.floor((entry.expiresAt - now) / 1000)),
        email: entry.email,
        email_verified: 'true',
        access_type: 'online',
      };
      res.writeHead(200, { 'content-type': 'application/json; charset=UTF-8' }).end(JSON.stringify(body));
    },
    {
      path: '/tokeninfo',
      onHandlerError: (error, res) =>
        res.writeHead(400, { 'content-type': 'application/json' }).end(JSON.stringify({ error: 'invalid_request', error_description: error.message })),
    },
  );
  return {
    url: server.url,
    server,
    issue(email, opts = {}) {
      const token = `ya29.${randomBytes(24).toString('base64url')}`;
      issued.set(token, {
        email,
        clientId: opts.clientId ?? 'test-cli.apps.googleusercontent.com',
        expiresAt: Date.now() + (opts.expiresInSeconds ?? 3599) * 1000,
        scope: 'openid https://www.googleapis.com/auth/userinfo.email',
      });
      return token;
    },
    revoke(token) {
      issued.delete(token);
    },
    setThrottled(value) {
      throttled = value;
    },
    lookups: () => server.calls,
    close: () => server.close(),
  };
}
