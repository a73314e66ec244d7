// A local OpenID Connect issuer for the inbound-auth tests: a discovery document, a JWKS with RS256 and ES256
// keys (add, rotate and withdraw them), and the same RSA keys as Google publishes its ID-token keys, a JSON map
// of kid → X.509 certificate PEM with a Cache-Control max-age, which google-auth-library reads when its
// certificate URL points here. Tests mint their own tokens, good and bad, with `mint`.

import 'reflect-metadata'; // @peculiar/x509 resolves its ASN.1 classes through tsyringe, which needs it
import { randomBytes, webcrypto } from 'node:crypto';
import * as x509 from '@peculiar/x509';
import { exportJWK, exportSPKI, generateKeyPair, SignJWT, base64url, type JWK, type JWTPayload } from 'jose';
import { startRecordingServer, type RecordingServer } from './recording-server.ts';

x509.cryptoProvider.set(webcrypto);

type CryptoKey = webcrypto.CryptoKey;

export type SigningAlgorithm = 'RS256' | 'ES256';

export interface SigningKey {
  kid: string;
  alg: SigningAlgorithm;
  privateKey: CryptoKey;
  publicJwk: JWK;
  /** SPKI public key PEM (the form IAP publishes its keys in). */
  publicKeyPem: string;
  /** A self-signed certificate of the key (the form Google publishes its RSA keys in); RS256 only. */
  certificatePem: string | null;
}

export async function createSigningKey(alg: SigningAlgorithm, kid = `${alg.toLowerCase()}-${randomBytes(4).toString('hex')}`): Promise<SigningKey> {
  const { privateKey, publicKey } = await generateKeyPair(alg, { extractable: true });
  const publicJwk = { ...(await exportJWK(publicKey)), kid, alg, use: 'sig' };
  let certificatePem: string | null = null;
  if (alg === 'RS256') {
    const now = Date.now();
    const cert = await x509.X509CertificateGenerator.createSelfSigned({
      serialNumber: randomBytes(8).toString('hex'),
      name: `CN=${kid}`,
      notBefore: new Date(now - 3_600_000),
      notAfter: new Date(now + 86_400_000),
      signingAlgorithm: { name: 'RSASSA-PKCS1-v1_5', hash: 'SHA-256' },
      keys: { privateKey, publicKey },
    });
    certificatePem = cert.toString('pem');
  }
  return { kid, alg, privateKey, publicJwk, publicKeyPem: await exportSPKI(publicKey), certificatePem };
}

export interface MintOptions {
  /** Default: the issuer's current key of `alg` (RS256 unless said). */
  key?: SigningKey;
  alg?: SigningAlgorithm;
  /** Header fields to set or override (a made-up kid, alg: none…). */
  header?: Record<string, unknown>;
  /** Replace the signature with another key's (bad signature under the right kid). */
  signWith?: SigningKey;
  /** An unsigned token (`alg: none`, empty signature). */
  unsigned?: boolean;
}

export interface LocalOidcIssuer {
  /** The issuer identifier (`iss`): http://127.0.0.1:PORT */
  url: string;
  jwksUri: string;
  /** Google-shaped certificates of the RS256 keys (google-auth-library's PEM certificate URL). */
  googleCertsUrl: string;
  server: RecordingServer;
  /** How many times a path was fetched. */
  fetches(path: '/jwks' | '/oauth2/v1/certs' | '/.well-known/openid-configuration'): number;
  /** Generates a key and publishes it; it becomes the current key of its algorithm. */
  rotate(alg: SigningAlgorithm): Promise<SigningKey>;
  /** Stops publishing a key. */
  withdraw(kid: string): void;
  current(alg: SigningAlgorithm): SigningKey;
  /** A signed JWT with these claims. */
  mint(claims: JWTPayload, opts?: MintOptions): Promise<string>;
  /** An ID token for `email` from this issuer: iat now, exp in an hour, email_verified. */
  idToken(email: string, audience: string, extra?: JWTPayload, opts?: MintOptions): Promise<string>;
  close(): Promise<void>;
}

function json(res: import('node:http').ServerResponse, status: number, body: unknown, headers: Record<string, string> = {}): void {
  res.writeHead(status, { 'content-type': 'application/json; charset=utf-8', ...headers }).end(JSON.stringify(body));
}

export interface OidcIssuerOptions {
  certsMaxAgeSeconds?: number;
  /** Listen on this port (default: any free one). */
  port?: number;
  /** Serve GET /token?email=…&aud=… minting an ID token for anyone: for trying the server out by hand only. */
  mintEndpoint?: boolean;
}

export async function startOidcIssuer(opts: OidcIssuerOptions = {}): Promise<LocalOidcIssuer> {
  const published = new Map<string, SigningKey>();
  const current = new Map<SigningAlgorithm, SigningKey>();
  const counts = new Map<string, number>();
  let url = '';
  const server = await startRecordingServer(
    (call, res) => {
      const path = new URL(call.path, 'http://issuer').pathname;
      counts.set(path, (counts.get(path) ?? 0) + 1);
      if (call.method !== 'GET') return json(res, 405, { error: 'method_not_allowed' });
      if (path === '/.well-known/openid-configuration') {
        return json(res, 200, {
          issuer: url,
          jwks_uri: `${url}/jwks`,
          id_token_signing_alg_values_supported: ['RS256', 'ES256'],
          response_types_supported: ['id_token'],
          subject_types_supported: ['public'],
        });
      }
      if (path === '/jwks') return json(res, 200, { keys: [...published.values()].map((k) => k.publicJwk) }, { 'cache-control': 'public, max-age=300' });
      if (path === '/oauth2/v1/certs') {
        const certs: Record<string, string> = {};
        for (const key of published.values()) if (key.certificatePem) certs[key.kid] = key.certificatePem;
        return json(res, 200, certs, { 'cache-control': `public, max-age=${opts.certsMaxAgeSeconds ?? 300}, must-revalidate, no-transform` });
      }
      if (path === '/token' && opts.mintEndpoint) {
        const query = new URL(call.path, 'http://issuer').searchParams;
        const email = query.get('email');
        if (!email) return json(res, 400, { error: 'email is required' });
        void issuer.idToken(email, query.get('aud') ?? 'tollgate').then((token) => res.writeHead(200, { 'content-type': 'text/plain' }).end(`${token}\n`));
        return;
      }
      return json(res, 404, { error: 'not_found' });
    },
    opts.port !== undefined ? { port: opts.port } : {},
  );
  url = server.url;

  const issuer: LocalOidcIssuer = {
    url,
    jwksUri: `${url}/jwks`,
    googleCertsUrl: `${url}/oauth2/v1/certs`,
    server,
    fetches: (path) => counts.get(path) ?? 0,
    async rotate(alg) {
      const key = await createSigningKey(alg);
      published.set(key.kid, key);
      current.set(alg, key);
      return key;
    },
    withdraw(kid) {
      published.delete(kid);
    },
    current(alg) {
      const key = current.get(alg);
      if (!key) throw new Error(`no ${alg} key yet`);
      return key;
    },
    async mint(claims, mintOpts = {}) {
      const key = mintOpts.key ?? issuer.current(mintOpts.alg ?? 'RS256');
      if (mintOpts.unsigned) {
        const header = base64url.encode(JSON.stringify({ alg: 'none', typ: 'JWT', ...mintOpts.header }));
        return `${header}.${base64url.encode(JSON.stringify(claims))}.`;
      }
      const jwt = await new SignJWT(claims)
        .setProtectedHeader({ alg: key.alg, kid: key.kid, typ: 'JWT', ...mintOpts.header })
        .sign(mintOpts.signWith?.privateKey ?? key.privateKey);
      return jwt;
    },
    idToken(email, audience, extra = {}, mintOpts = {}) {
      const now = Math.floor(Date.now() / 1000);
      return issuer.mint({ iss: url, aud: audience, sub: `sub-${email}`, email, email_verified: true, iat: now, exp: now + 3600, ...extra }, mintOpts);
    },
    close: () => server.close(),
  };
  await issuer.rotate('RS256');
  await issuer.rotate('ES256');
  return issuer;
}
