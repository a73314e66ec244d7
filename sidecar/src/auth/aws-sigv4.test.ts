import { createHash, createHmac } from 'node:crypto';
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Writable } from 'node:stream';
import { Sha256 } from '@aws-crypto/sha256-js';
import { SignatureV4 } from '@smithy/signature-v4';
import pino from 'pino';
import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import { startFakeAwsSts, startFakeContainerCredentials, type FakeAwsCredentialEndpoint } from '../../../test/fakes/aws-credential-endpoints.ts';
import { encodeAwsPath, createAwsSigV4Provider, resolveAwsRegion, staticAwsCredentialsFromFiles } from './aws-sigv4.ts';
import { CredentialError } from './credential-error.ts';
import type { OutgoingRequest } from './credential-provider.ts';

const MODEL_PATH = '/model/anthropic.claude-sonnet-4-20250514-v1:0/invoke';
const BODY = Buffer.from(JSON.stringify({ anthropic_version: 'bedrock-2023-05-31', max_tokens: 64, messages: [] }));

function bedrockRequest(base = 'http://127.0.0.1:8999'): OutgoingRequest {
  return {
    method: 'POST',
    url: new URL(MODEL_PATH, base),
    headers: {
      'content-type': 'application/json',
      accept: 'application/json',
      // What a caller's own AWS SDK may have left behind; the proxy's signature must replace these.
      'X-Amz-Date': '20200101T000000Z',
      'X-Amz-Security-Token': 'caller-token',
    },
    body: BODY,
  };
}

interface Secret {
  accessKeyId: string;
  secretAccessKey: string;
  sessionToken?: string;
}

const hmac = (key: Buffer | string, data: string) => createHmac('sha256', key).update(data, 'utf8').digest();
const sha256Hex = (data: Buffer | string) => createHash('sha256').update(data).digest('hex');

/**
 * Recomputes the SigV4 signature from the AWS specification, independently of the signing library, from
 * what would go on the wire: method, path, query, the signed headers named in Authorization, and the body.
 */
function expectedSignature(req: OutgoingRequest, secret: Secret, region: string): { signature: string; canonicalRequest: string } {
  const auth = req.headers.authorization ?? '';
  const signedHeaders = /SignedHeaders=([^,]+)/.exec(auth)?.[1]?.split(';') ?? [];
  const amzDate = req.headers['x-amz-date'] ?? '';
  const date = amzDate.slice(0, 8);
  // Non-S3 services: each path segment, as sent, is URI-encoded once more.
  const canonicalUri = req.url.pathname
    .split('/')
    .map((segment) => encodeURIComponent(segment).replace(/[!'()*]/g, (c) => `%${c.charCodeAt(0).toString(16).toUpperCase()}`))
    .join('/');
  const canonicalQuery = [...req.url.searchParams]
    .map(([k, v]) => [encodeURIComponent(k), encodeURIComponent(v)] as const)
    .sort(([a, x], [b, y]) => (a === b ? (x < y ? -1 : 1) : a < b ? -1 : 1))
    .map(([k, v]) => `${k}=${v}`)
    .join('&');
  const canonicalHeaders = signedHeaders.map((name) => `${name}:${(req.headers[name] ?? '').trim()}\n`).join('');
  const canonicalRequest = [req.method, canonicalUri, canonicalQuery, canonicalHeaders, signedHeaders.join(';'), sha256Hex(req.body ?? Buffer.alloc(0))].join('\n');
  const scope = `${date}/${region}/bedrock/aws4_request`;
  const stringToSign = ['AWS4-HMAC-SHA256', amzDate, scope, sha256Hex(canonicalRequest)].join('\n');
  const key = hmac(hmac(hmac(hmac(`AWS4${secret.secretAccessKey}`, date), region), 'bedrock'), 'aws4_request');
  return { signature: createHmac('sha256', key).update(stringToSign).digest('hex'), canonicalRequest };
}

function signatureOf(req: OutgoingRequest): string | undefined {
  return /Signature=([0-9a-f]{64})$/.exec(req.headers.authorization ?? '')?.[1];
}

const servers: FakeAwsCredentialEndpoint[] = [];
let dir: string;

beforeEach(() => {
  dir = mkdtempSync(join(tmpdir(), 'tollgate-aws-'));
  // Isolate the default chain from this machine: no shared config files, no instance metadata.
  vi.stubEnv('AWS_CONFIG_FILE', join(dir, 'config'));
  vi.stubEnv('AWS_SHARED_CREDENTIALS_FILE', join(dir, 'credentials'));
  vi.stubEnv('AWS_EC2_METADATA_DISABLED', 'true');
  for (const name of [
    'AWS_PROFILE',
    'AWS_ACCESS_KEY_ID',
    'AWS_SECRET_ACCESS_KEY',
    'AWS_SESSION_TOKEN',
    'AWS_CREDENTIAL_EXPIRATION',
    'AWS_WEB_IDENTITY_TOKEN_FILE',
    'AWS_ROLE_ARN',
    'AWS_CONTAINER_CREDENTIALS_FULL_URI',
    'AWS_CONTAINER_CREDENTIALS_RELATIVE_URI',
    'AWS_CONTAINER_AUTHORIZATION_TOKEN',
    'AWS_CONTAINER_AUTHORIZATION_TOKEN_FILE',
    'AWS_REGION',
    'AWS_DEFAULT_REGION',
    'AWS_ENDPOINT_URL',
    'AWS_ENDPOINT_URL_STS',
  ]) {
    vi.stubEnv(name, undefined);
  }
});

afterEach(async () => {
  vi.useRealTimers();
  vi.unstubAllEnvs();
  await Promise.all(servers.splice(0).map((server) => server.close()));
});

describe('encodeAwsPath', () => {
  it('sends a model id colon as %3A and leaves unreserved characters alone', () => {
    expect(encodeAwsPath(MODEL_PATH)).toBe('/model/anthropic.claude-sonnet-4-20250514-v1%3A0/invoke');
  });
  it('does not encode an already encoded path twice', () => {
    expect(encodeAwsPath('/model/us.anthropic.claude-3-5-haiku-20241022-v1%3A0/invoke')).toBe('/model/us.anthropic.claude-3-5-haiku-20241022-v1%3A0/invoke');
  });
  it('encodes an ARN model id with slashes encoded inside the segment', () => {
    expect(encodeAwsPath('/model/arn%3Aaws%3Abedrock%3Aus-east-1%3A1%3Ainference-profile%2Fus.x/invoke')).toBe(
      '/model/arn%3Aaws%3Abedrock%3Aus-east-1%3A1%3Ainference-profile%2Fus.x/invoke',
    );
  });
});

describe('resolveAwsRegion', () => {
  it('prefers the upstream setting, then the endpoint host, then the environment', () => {
    const env = { AWS_REGION: 'eu-west-1', AWS_DEFAULT_REGION: 'eu-central-1' };
    expect(resolveAwsRegion({ region: 'us-west-2', baseUrl: 'https://bedrock-runtime.ap-south-1.amazonaws.com' }, env)).toBe('us-west-2');
    expect(resolveAwsRegion({ baseUrl: 'https://bedrock-runtime.ap-south-1.amazonaws.com' }, env)).toBe('ap-south-1');
    expect(resolveAwsRegion({ baseUrl: 'http://127.0.0.1:9000' }, env)).toBe('eu-west-1');
    expect(resolveAwsRegion(undefined, { AWS_DEFAULT_REGION: 'eu-central-1' })).toBe('eu-central-1');
    expect(resolveAwsRegion(undefined, {})).toBeUndefined();
  });
});

describe('signing', () => {
  const secret = {
    accessKeyId: 'AKIAIOSFODNN7EXAMPLE',
    secretAccessKey: 'wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY',
    sessionToken: 'session-token-from-env',
  };

  function envCredentials(): void {
    vi.stubEnv('AWS_ACCESS_KEY_ID', secret.accessKeyId);
    vi.stubEnv('AWS_SECRET_ACCESS_KEY', secret.secretAccessKey);
    vi.stubEnv('AWS_SESSION_TOKEN', secret.sessionToken);
  }

  it('signs host, path, date, payload hash and session token with credentials from the environment', async () => {
    envCredentials();
    vi.useFakeTimers({ toFake: ['Date'] });
    vi.setSystemTime(new Date('2025-06-01T12:34:56Z'));
    const provider = createAwsSigV4Provider({ logger: pino({ level: 'silent' }), env: {}, upstream: () => ({ region: 'us-west-2' }) });
    const req = bedrockRequest();
    await provider.apply(req);

    expect(req.url.pathname).toBe('/model/anthropic.claude-sonnet-4-20250514-v1%3A0/invoke');
    expect(req.headers).toMatchObject({
      host: '127.0.0.1:8999',
      'x-amz-date': '20250601T123456Z',
      'x-amz-security-token': 'session-token-from-env',
      'x-amz-content-sha256': sha256Hex(BODY),
      'content-type': 'application/json',
    });
    expect(req.headers['X-Amz-Date']).toBeUndefined();
    expect(req.headers['X-Amz-Security-Token']).toBeUndefined();
    expect(req.headers.authorization).toMatch(
      /^AWS4-HMAC-SHA256 Credential=AKIAIOSFODNN7EXAMPLE\/20250601\/us-west-2\/bedrock\/aws4_request, SignedHeaders=host;x-amz-content-sha256;x-amz-date;x-amz-security-token, Signature=[0-9a-f]{64}$/,
    );

    // Independent recomputation from the specification; the canonical URI carries the colon encoded twice.
    const expected = expectedSignature(req, secret, 'us-west-2');
    expect(expected.canonicalRequest.split('\n')[1]).toBe('/model/anthropic.claude-sonnet-4-20250514-v1%253A0/invoke');
    expect(signatureOf(req)).toBe(expected.signature);

    // The same request re-signed by the library with its pure-JS hash and the same fixed date.
    const reference = await new SignatureV4({ service: 'bedrock', region: 'us-west-2', credentials: secret, sha256: Sha256 }).sign(
      {
        method: 'POST',
        protocol: 'http:',
        hostname: '127.0.0.1',
        port: 8999,
        path: '/model/anthropic.claude-sonnet-4-20250514-v1%3A0/invoke',
        query: {},
        headers: { host: '127.0.0.1:8999' },
        body: BODY,
      },
      { signingDate: new Date('2025-06-01T12:34:56Z') },
    );
    expect(req.headers.authorization).toBe(reference.headers.authorization);

    // A server that canonicalised the path with a single encoding would compute something else.
    const singleEncoded = await new SignatureV4({
      service: 'bedrock',
      region: 'us-west-2',
      credentials: secret,
      sha256: Sha256,
      uriEscapePath: false,
    }).sign(
      { method: 'POST', protocol: 'http:', hostname: '127.0.0.1', port: 8999, path: req.url.pathname, headers: { host: '127.0.0.1:8999' }, body: BODY },
      { signingDate: new Date('2025-06-01T12:34:56Z') },
    );
    expect(singleEncoded.headers.authorization).not.toBe(req.headers.authorization);
  });

  it('signs the query string and a body-less request', async () => {
    envCredentials();
    vi.stubEnv('AWS_SESSION_TOKEN', undefined);
    const provider = createAwsSigV4Provider({ logger: pino({ level: 'silent' }), env: { AWS_REGION: 'eu-west-1' }, upstream: () => undefined });
    const req: OutgoingRequest = {
      method: 'post',
      url: new URL('https://bedrock-runtime.eu-west-1.amazonaws.com/model/anthropic.claude-3-haiku-20240307-v1%3A0/invoke?trace=ENABLED&nextToken=a%2Fb%20c'),
      headers: {},
      body: null,
    };
    await provider.apply(req);
    expect(req.headers['x-amz-security-token']).toBeUndefined();
    expect(req.headers.authorization).toContain('SignedHeaders=host;x-amz-content-sha256;x-amz-date,');
    expect(req.headers.authorization).toContain('/eu-west-1/bedrock/aws4_request');
    expect(signatureOf(req)).toBe(expectedSignature({ ...req, method: 'POST' }, secret, 'eu-west-1').signature);
  });

  it('signs CountTokens, which Bedrock does not bill (ADR 0912)', async () => {
    envCredentials();
    vi.stubEnv('AWS_SESSION_TOKEN', undefined);
    const provider = createAwsSigV4Provider({ logger: pino({ level: 'silent' }), env: { AWS_REGION: 'eu-west-1' }, upstream: () => undefined });
    const req: OutgoingRequest = {
      method: 'POST',
      url: new URL('https://bedrock-runtime.eu-west-1.amazonaws.com/model/anthropic.claude-3-haiku-20240307-v1%3A0/count-tokens'),
      headers: {},
      body: Buffer.from('{"input":{"invokeModel":{"body":"e30="}}}'),
    };
    await provider.apply(req);
    expect(signatureOf(req)).toBe(expectedSignature(req, secret, 'eu-west-1').signature);
  });

  it.each([
    ['GET', 'https://bedrock-runtime.eu-west-1.amazonaws.com/async-invoke?maxResults=2'],
    ['GET', 'https://bedrock.eu-west-1.amazonaws.com/foundation-models'],
    ['POST', 'https://sts.amazonaws.com/?Action=GetCallerIdentity&Version=2011-06-15'],
    ['GET', 'https://bedrock-runtime.eu-west-1.amazonaws.com/model/anthropic.claude-3-haiku-20240307-v1%3A0/invoke'],
    ['POST', 'https://bedrock-runtime.eu-west-1.amazonaws.com/model/a/b/invoke'],
    ['GET', 'https://bedrock-runtime.eu-west-1.amazonaws.com/model/anthropic.claude-3-haiku-20240307-v1%3A0/count-tokens'],
    ['POST', 'https://bedrock-runtime.eu-west-1.amazonaws.com/model/anthropic.claude-3-haiku-20240307-v1%3A0/count-tokens/x'],
    ['POST', 'https://bedrock.eu-west-1.amazonaws.com/model-invocation-job'],
  ])('never signs %s %s: only POSTs of a Bedrock model invocation or token count', async (method, url) => {
    envCredentials();
    const provider = createAwsSigV4Provider({ logger: pino({ level: 'silent' }), env: { AWS_REGION: 'eu-west-1' }, upstream: () => undefined });
    const req: OutgoingRequest = { method, url: new URL(url), headers: {}, body: null };
    await expect(provider.apply(req)).rejects.toMatchObject({ code: 'unmetered_endpoint', message: expect.stringContaining('is not a Bedrock model invocation') });
    expect(req.headers.authorization).toBeUndefined();
  });

  it('without a region fails with a CredentialError that says where to set one', async () => {
    envCredentials();
    const provider = createAwsSigV4Provider({ logger: pino({ level: 'silent' }), env: {}, upstream: () => ({ baseUrl: 'http://127.0.0.1:1' }) });
    await expect(provider.apply(bedrockRequest())).rejects.toThrow('no AWS region: set upstreams.gamma-cloudb.region or AWS_REGION');
  });
});

describe('credentials from the default chain', () => {
  it('container credentials endpoint (EKS Pod Identity): one fetch for concurrent requests, token checked', async () => {
    const endpoint = await startFakeContainerCredentials({ authorizationToken: 'pod-identity-token' });
    servers.push(endpoint);
    vi.stubEnv('AWS_CONTAINER_CREDENTIALS_FULL_URI', endpoint.url);
    const tokenFile = join(dir, 'eks-pod-identity-token');
    writeFileSync(tokenFile, 'pod-identity-token');
    vi.stubEnv('AWS_CONTAINER_AUTHORIZATION_TOKEN_FILE', tokenFile);

    const provider = createAwsSigV4Provider({ logger: pino({ level: 'silent' }), env: {}, upstream: () => ({ region: 'us-east-1' }) });
    const requests = Array.from({ length: 10 }, () => bedrockRequest());
    await Promise.all(requests.map((req) => provider.apply(req)));

    expect(endpoint.calls).toHaveLength(1);
    expect(endpoint.calls[0]?.headers.authorization).toBe('pod-identity-token');
    const issued = endpoint.issued[0];
    if (!issued) throw new Error('no credentials issued');
    for (const req of requests) {
      expect(req.headers.authorization).toContain(`Credential=${issued.accessKeyId}/`);
      expect(req.headers['x-amz-security-token']).toBe(issued.sessionToken);
      expect(signatureOf(req)).toBe(expectedSignature(req, issued, 'us-east-1').signature);
    }
  });

  it('refreshes container credentials 5 minutes before they expire, not earlier', async () => {
    const endpoint = await startFakeContainerCredentials({ lifetimeMs: 3600_000 });
    servers.push(endpoint);
    vi.stubEnv('AWS_CONTAINER_CREDENTIALS_FULL_URI', endpoint.url);
    vi.useFakeTimers({ toFake: ['Date'] });
    const start = Date.now();
    const provider = createAwsSigV4Provider({ logger: pino({ level: 'silent' }), env: {}, upstream: () => ({ region: 'us-east-1' }) });

    const first = bedrockRequest();
    await provider.apply(first);
    expect(first.headers.authorization).toContain(endpoint.issued[0]?.accessKeyId);

    vi.setSystemTime(start + 50 * 60_000);
    await provider.apply(bedrockRequest());
    expect(endpoint.calls).toHaveLength(1);

    vi.setSystemTime(start + 56 * 60_000);
    const concurrent = Array.from({ length: 5 }, () => bedrockRequest());
    await Promise.all(concurrent.map((req) => provider.apply(req)));
    expect(endpoint.calls).toHaveLength(2);
    const second = endpoint.issued[1];
    if (!second) throw new Error('no refreshed credentials');
    for (const req of concurrent) {
      expect(req.headers.authorization).toContain(`Credential=${second.accessKeyId}/`);
      expect(signatureOf(req)).toBe(expectedSignature(req, second, 'us-east-1').signature);
    }
  });

  it('a refused credential request fails with CredentialError and logs `failed to get AWS credentials`', async () => {
    const endpoint = await startFakeContainerCredentials({ authorizationToken: 'right-token' });
    servers.push(endpoint);
    vi.stubEnv('AWS_CONTAINER_CREDENTIALS_FULL_URI', endpoint.url);
    vi.stubEnv('AWS_CONTAINER_AUTHORIZATION_TOKEN', 'wrong-token');
    const lines: Record<string, unknown>[] = [];
    const raw: string[] = [];
    const logger = pino(
      new Writable({
        write(chunk: Buffer, _encoding, callback) {
          raw.push(chunk.toString());
          lines.push(JSON.parse(chunk.toString()) as Record<string, unknown>);
          callback();
        },
      }),
    );
    const provider = createAwsSigV4Provider({ logger, env: {}, upstream: () => ({ region: 'us-east-1' }) });

    const failure = await provider.apply(bedrockRequest()).then(
      () => undefined,
      (error: unknown) => error,
    );
    expect(failure).toBeInstanceOf(CredentialError);
    expect(failure).toMatchObject({ code: 'credential_unavailable', kind: 'aws-sigv4' });
    expect((failure as Error).message).toMatch(/^failed to get AWS credentials: /);
    expect(lines.some((line) => line.msg === 'failed to get AWS credentials' && line.level === 50)).toBe(true);
    expect(raw.join('')).not.toContain('wrong-token');
    expect(provider.problem()).toMatch(/^failed to get AWS credentials/);
  });

  it('web identity token file (IRSA) through STS AssumeRoleWithWebIdentity', async () => {
    const roleArn = 'arn:aws:iam::123456789012:role/tollgate-bedrock';
    const sts = await startFakeAwsSts({ webIdentityToken: 'projected-sa-jwt', roleArn });
    servers.push(sts);
    const tokenFile = join(dir, 'web-identity-token');
    writeFileSync(tokenFile, 'projected-sa-jwt');
    vi.stubEnv('AWS_WEB_IDENTITY_TOKEN_FILE', tokenFile);
    vi.stubEnv('AWS_ROLE_ARN', roleArn);
    vi.stubEnv('AWS_REGION', 'us-east-1');
    vi.stubEnv('AWS_ENDPOINT_URL_STS', sts.url);

    const provider = createAwsSigV4Provider({ logger: pino({ level: 'silent' }), env: process.env, upstream: () => undefined });
    const req = bedrockRequest();
    await provider.apply(req);

    expect(sts.calls).toHaveLength(1);
    const form = new URLSearchParams(sts.calls[0]?.body);
    expect(form.get('Action')).toBe('AssumeRoleWithWebIdentity');
    expect(form.get('RoleArn')).toBe(roleArn);
    const issued = sts.issued[0];
    if (!issued) throw new Error('no credentials issued');
    expect(req.headers.authorization).toContain(`Credential=${issued.accessKeyId}/`);
    expect(signatureOf(req)).toBe(expectedSignature(req, issued, 'us-east-1').signature);
  });
});

describe('static keys from files (a Secret pushed by the operator)', () => {
  it('signs with the key pair in the files and re-reads them after rotation', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'aws-keys-'));
    writeFileSync(join(dir, 'id'), 'AKIDFROMSECRET\n');
    writeFileSync(join(dir, 'secret'), 'secret-one\n');
    const source = staticAwsCredentialsFromFiles(join(dir, 'id'), join(dir, 'secret'));
    const first = await source();
    expect(first).toMatchObject({ accessKeyId: 'AKIDFROMSECRET', secretAccessKey: 'secret-one' });
    expect(first.expiration!.getTime()).toBeGreaterThan(Date.now());
    writeFileSync(join(dir, 'secret'), 'secret-two');
    expect((await source()).secretAccessKey).toBe('secret-two');
  });
});
