// A fake identity-aware proxy's signing side: it publishes its ES256 public keys the way IAP does
// (www.gstatic.com/iap/verify/public_key: a JSON map of kid → PEM public key) and signs the
// x-goog-iap-jwt-assertion header IAP adds to each request it lets through (iss https://cloud.google.com/iap,
// aud the backend service, email and sub of the principal).

import { SignJWT, type JWTPayload } from 'jose';
import { createSigningKey, type SigningKey } from './oidc-issuer.ts';
import { startRecordingServer, type RecordingServer } from './recording-server.ts';

export interface FakeIap {
  /** The public key URL (server.auth.iap.publicKeysUrl). */
  publicKeysUrl: string;
  server: RecordingServer;
  /** The signed header IAP would send for `email`, for backend `audience`. */
  assertion(email: string, audience: string, extra?: JWTPayload, opts?: { key?: SigningKey }): Promise<string>;
  /** A key IAP does not publish (for forged assertions). */
  foreignKey(): Promise<SigningKey>;
  close(): Promise<void>;
}

export async function startFakeIap(): Promise<FakeIap> {
  const key = await createSigningKey('ES256', 'iap-key-1');
  const server = await startRecordingServer(
    (call, res) => {
      if (new URL(call.path, 'http://iap').pathname !== '/iap/verify/public_key') {
        res.writeHead(404).end();
        return;
      }
      res.writeHead(200, { 'content-type': 'application/json', 'cache-control': 'public, max-age=3600' }).end(JSON.stringify({ [key.kid]: key.publicKeyPem }));
    },
    { path: '/iap/verify/public_key' },
  );
  return {
    publicKeysUrl: server.url,
    server,
    assertion(email, audience, extra = {}, opts = {}) {
      const signer = opts.key ?? key;
      const now = Math.floor(Date.now() / 1000);
      return new SignJWT({ iss: 'https://cloud.google.com/iap', aud: audience, email, sub: `accounts.google.com:${email.length}0042`, iat: now, exp: now + 600, ...extra })
        .setProtectedHeader({ alg: 'ES256', kid: key.kid, typ: 'JWT' })
        .sign(signer.privateKey);
    },
    foreignKey: () => createSigningKey('ES256', key.kid),
    close: () => server.close(),
  };
}
