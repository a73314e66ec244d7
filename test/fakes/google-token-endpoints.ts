// Fake Google token endpoints, so google-auth-library's real code paths can be exercised on loopback:
// the GCE metadata server, the STS token exchange plus IAM generateAccessToken used by external_account
// (workload identity federation), and the OAuth2 token endpoint that accepts a service account's signed JWT.
// Each checks what it receives the way the real endpoint would and answers in the real wire format.

import type { ServerResponse } from 'node:http';
import { generateKeyPairSync, verify, type KeyObject } from 'node:crypto';
import { gaxios } from 'google-auth-library';
import { startRecordingServer, type RecordedCall, type RecordedCallHandler } from './recording-server.ts';

export type { RecordedCall } from './recording-server.ts';

export interface FakeTokenEndpoint {
  url: string;
  /** Every request received, in order. */
  calls: RecordedCall[];
  /** While failing, token requests get a 500 with an error body. */
  setFailing(failing: boolean): void;
  close(): Promise<void>;
}

function serve(handler: RecordedCallHandler): Promise<FakeTokenEndpoint> {
  // A handler throws on a request the real endpoint would refuse as malformed.
  return startRecordingServer(handler, {
    onHandlerError: (error, res) => sendJson(res, 400, { error: 'invalid_request', error_description: error.message }),
  });
}

function sendJson(res: ServerResponse, status: number, body: unknown, headers: Record<string, string> = {}): void {
  res.writeHead(status, { 'content-type': 'application/json', ...headers });
  res.end(JSON.stringify(body));
}

function expectEqual(name: string, actual: unknown, expected: unknown): void {
  if (actual !== expected) throw new Error(`${name}: expected ${String(expected)}, got ${String(actual)}`);
}

// ---------------------------------------------------------------------------------------------------------
// GCE / GKE metadata server

export interface FakeMetadataServer extends FakeTokenEndpoint {
  /** host:port, the form GCE_METADATA_HOST takes. */
  host: string;
  /** Requests for an access token (as opposed to the library's availability probe). */
  tokenCalls(): RecordedCall[];
}

export interface FakeMetadataOptions {
  /** Lifetime reported for each token, seconds. */
  expiresIn?: number;
  projectId?: string;
}

const METADATA_TOKEN_PATH = '/computeMetadata/v1/instance/service-accounts/default/token';

export async function startFakeMetadataServer(options: FakeMetadataOptions = {}): Promise<FakeMetadataServer> {
  const expiresIn = options.expiresIn ?? 3599;
  let issued = 0;
  const endpoint = await serve((call, res, failing) => {
    const flavor = { 'metadata-flavor': 'Google' };
    if (call.headers['metadata-flavor'] !== 'Google') {
      res.writeHead(403, { 'content-type': 'text/html', ...flavor });
      res.end('Missing Metadata-Flavor:Google header.');
      return;
    }
    const path = new URL(call.path, 'http://metadata').pathname;
    if (path === '/computeMetadata/v1/instance' || path === '/computeMetadata/v1/instance/') {
      res.writeHead(200, { 'content-type': 'application/text', ...flavor });
      res.end('attributes/\nservice-accounts/\n');
    } else if (path === METADATA_TOKEN_PATH) {
      if (failing) {
        // A 403 is what GKE answers when workload identity is not bound; the library does not retry it.
        res.writeHead(403, { 'content-type': 'text/plain', ...flavor });
        res.end('Unable to generate access token; IAM returned 403 Forbidden: Permission denied');
        return;
      }
      issued += 1;
      sendJson(res, 200, { access_token: `metadata-token-${issued}`, expires_in: expiresIn, token_type: 'Bearer' }, flavor);
    } else if (path === '/computeMetadata/v1/project/project-id') {
      res.writeHead(200, { 'content-type': 'application/text', ...flavor });
      res.end(options.projectId ?? 'fake-project');
    } else if (path === '/computeMetadata/v1/universe/universe-domain') {
      res.writeHead(200, { 'content-type': 'application/text', ...flavor });
      res.end('googleapis.com');
    } else {
      res.writeHead(404, { 'content-type': 'text/plain', ...flavor });
      res.end('Not Found');
    }
  });
  return {
    ...endpoint,
    host: endpoint.url.slice('http://'.length),
    tokenCalls: () => endpoint.calls.filter((call) => new URL(call.path, 'http://m').pathname === METADATA_TOKEN_PATH),
  };
}

// ---------------------------------------------------------------------------------------------------------
// STS token exchange + IAM credentials generateAccessToken (external_account)

export interface FakeStsServer extends FakeTokenEndpoint {
  /** The external_account `token_url`. */
  tokenUrl: string;
  /** The external_account `service_account_impersonation_url` for a service account email. */
  impersonationUrl(serviceAccount: string): string;
  /** Write this (e.g. with credential_source.file) as the external_account JSON. */
  externalAccount(options: { subjectTokenFile: string; impersonate?: string }): Record<string, unknown>;
}

export interface FakeStsOptions {
  /** The subject token the workload presents (e.g. a Kubernetes service account token). */
  subjectToken: string;
  audience?: string;
  expiresIn?: number;
}

const TOKEN_EXCHANGE_GRANT = 'urn:ietf:params:oauth:grant-type:token-exchange';
const ACCESS_TOKEN_TYPE = 'urn:ietf:params:oauth:token-type:access_token';
const JWT_TOKEN_TYPE = 'urn:ietf:params:oauth:token-type:jwt';

export async function startFakeSts(options: FakeStsOptions): Promise<FakeStsServer> {
  const audience = options.audience ?? '//iam.googleapis.com/projects/123456/locations/global/workloadIdentityPools/pool/providers/kube';
  const expiresIn = options.expiresIn ?? 3600;
  let issued = 0;
  const stsTokens = new Set<string>();
  const endpoint = await serve((call, res, failing) => {
    const path = new URL(call.path, 'http://sts').pathname;
    if (failing) {
      sendJson(res, 500, { error: 'server_error', error_description: 'fake STS told to fail' });
      return;
    }
    if (call.method === 'POST' && path === '/v1/token') {
      const form = new URLSearchParams(call.body);
      expectEqual('grant_type', form.get('grant_type'), TOKEN_EXCHANGE_GRANT);
      expectEqual('requested_token_type', form.get('requested_token_type'), ACCESS_TOKEN_TYPE);
      expectEqual('subject_token_type', form.get('subject_token_type'), JWT_TOKEN_TYPE);
      expectEqual('audience', form.get('audience'), audience);
      if (form.get('subject_token') !== options.subjectToken) {
        sendJson(res, 400, { error: 'invalid_grant', error_description: 'subject token rejected' });
        return;
      }
      if (!form.get('scope')?.split(' ').includes('https://www.googleapis.com/auth/cloud-platform')) {
        throw new Error('scope must include cloud-platform');
      }
      issued += 1;
      const accessToken = `sts-token-${issued}`;
      stsTokens.add(accessToken);
      sendJson(res, 200, { access_token: accessToken, issued_token_type: ACCESS_TOKEN_TYPE, token_type: 'Bearer', expires_in: expiresIn });
      return;
    }
    const impersonation = /^\/v1\/projects\/-\/serviceAccounts\/([^/:]+):generateAccessToken$/.exec(path);
    if (call.method === 'POST' && impersonation) {
      const bearer = /^Bearer (.+)$/.exec(call.headers.authorization ?? '')?.[1];
      if (!bearer || !stsTokens.has(bearer)) {
        sendJson(res, 401, { error: { code: 401, message: 'Request had invalid authentication credentials.', status: 'UNAUTHENTICATED' } });
        return;
      }
      const body = JSON.parse(call.body) as { scope?: string[]; lifetime?: string };
      if (!body.scope?.includes('https://www.googleapis.com/auth/cloud-platform')) throw new Error('scope must include cloud-platform');
      issued += 1;
      const expireTime = new Date(Date.now() + expiresIn * 1000).toISOString();
      sendJson(res, 200, { accessToken: `impersonated-token-${issued}-${decodeURIComponent(impersonation[1] ?? '')}`, expireTime });
      return;
    }
    sendJson(res, 404, { error: 'not_found' });
  });
  return {
    ...endpoint,
    tokenUrl: `${endpoint.url}/v1/token`,
    impersonationUrl: (serviceAccount) => `${endpoint.url}/v1/projects/-/serviceAccounts/${serviceAccount}:generateAccessToken`,
    externalAccount({ subjectTokenFile, impersonate }) {
      return {
        type: 'external_account',
        audience,
        subject_token_type: JWT_TOKEN_TYPE,
        token_url: `${endpoint.url}/v1/token`,
        credential_source: { file: subjectTokenFile },
        ...(impersonate ? { service_account_impersonation_url: `${endpoint.url}/v1/projects/-/serviceAccounts/${impersonate}:generateAccessToken` } : {}),
      };
    },
  };
}

// ---------------------------------------------------------------------------------------------------------
// OAuth2 token endpoint for service account key files (JWT bearer grant)

/** The audience google-auth-library puts in the assertion; real Google accepts only this one. */
export const GOOGLE_OAUTH_TOKEN_URL = 'https://oauth2.googleapis.com/token';

export interface FakeOAuthServer extends FakeTokenEndpoint {
  tokenUrl: string;
  /** A service_account key file whose private key is real and whose token_uri points here. */
  keyFile: Record<string, string>;
  /**
   * google-auth-library 11 posts service-account assertions to the fixed Google token URL and ignores the
   * key file's token_uri; this transporter (for GoogleAuth clientOptions) sends that one URL here instead.
   */
  transporter(): InstanceType<typeof gaxios.Gaxios>;
}

export async function startFakeOAuthServer(options: { expiresIn?: number } = {}): Promise<FakeOAuthServer> {
  const { privateKey, publicKey } = generateKeyPairSync('rsa', { modulusLength: 2048 });
  const clientEmail = 'tollgate-test@fake-project.iam.gserviceaccount.com';
  const expiresIn = options.expiresIn ?? 3599;
  let issued = 0;
  const endpoint = await serve((call, res, failing) => {
    if (call.method !== 'POST' || new URL(call.path, 'http://o').pathname !== '/token') {
      sendJson(res, 404, { error: 'not_found' });
      return;
    }
    if (failing) {
      sendJson(res, 500, { error: 'internal_failure', error_description: 'fake OAuth server told to fail' });
      return;
    }
    const form = new URLSearchParams(call.body);
    expectEqual('grant_type', form.get('grant_type'), 'urn:ietf:params:oauth:grant-type:jwt-bearer');
    const problem = checkAssertion(form.get('assertion') ?? '', publicKey, clientEmail);
    if (problem) {
      sendJson(res, 400, { error: 'invalid_grant', error_description: problem });
      return;
    }
    issued += 1;
    sendJson(res, 200, { access_token: `sa-token-${issued}`, expires_in: expiresIn, token_type: 'Bearer' });
  });
  return {
    ...endpoint,
    tokenUrl: `${endpoint.url}/token`,
    keyFile: {
      type: 'service_account',
      project_id: 'fake-project',
      private_key_id: 'fake-key-1',
      private_key: privateKey.export({ type: 'pkcs8', format: 'pem' }).toString(),
      client_email: clientEmail,
      client_id: '100000000000000000001',
      auth_uri: 'https://accounts.google.com/o/oauth2/auth',
      token_uri: `${endpoint.url}/token`,
    },
    transporter() {
      const transporter = new gaxios.Gaxios();
      transporter.interceptors.request.add({
        resolved: async (config) => {
          if (String(config.url) === GOOGLE_OAUTH_TOKEN_URL) config.url = new URL(`${endpoint.url}/token`);
          return config;
        },
      });
      return transporter;
    },
  };
}

/** Verifies the RS256 signature and the claims Google checks; returns what is wrong, or null. */
function checkAssertion(assertion: string, publicKey: KeyObject, clientEmail: string): string | null {
  const parts = assertion.split('.');
  if (parts.length !== 3) return 'assertion is not a JWT';
  const [header, payload, signature] = parts as [string, string, string];
  const valid = verify('RSA-SHA256', Buffer.from(`${header}.${payload}`), publicKey, Buffer.from(signature, 'base64url'));
  if (!valid) return 'Invalid JWT Signature.';
  const head = JSON.parse(Buffer.from(header, 'base64url').toString()) as { alg?: string };
  if (head.alg !== 'RS256') return `unexpected alg ${String(head.alg)}`;
  const claims = JSON.parse(Buffer.from(payload, 'base64url').toString()) as Record<string, unknown>;
  if (claims.iss !== clientEmail) return `unexpected iss ${String(claims.iss)}`;
  if (claims.aud !== GOOGLE_OAUTH_TOKEN_URL) return `unexpected aud ${String(claims.aud)}`;
  if (typeof claims.scope !== 'string' || !claims.scope.split(' ').includes('https://www.googleapis.com/auth/cloud-platform')) {
    return 'scope must include cloud-platform';
  }
  const now = Date.now() / 1000;
  if (typeof claims.exp !== 'number' || claims.exp < now) return 'Invalid JWT: Token must be a short-lived token and in a reasonable timeframe';
  if (typeof claims.iat !== 'number' || claims.iat > now + 60) return 'Invalid JWT: iat in the future';
  return null;
}
