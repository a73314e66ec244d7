import { mkdtempSync, renameSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Writable } from 'node:stream';
import { gcpMetadata } from 'google-auth-library';
import pino from 'pino';
import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import { startFakeMetadataServer, startFakeOAuthServer, startFakeSts, type FakeTokenEndpoint } from '../../../test/fakes/google-token-endpoints.ts';
import { CredentialError } from './credential-error.ts';
import type { OutgoingRequest } from './credential-provider.ts';
import { createGoogleAdcProvider } from './google-adc.ts';
import { waitFor } from '../../../test/support/wait-for.ts';

function captureLogs() {
  const lines: Record<string, unknown>[] = [];
  const raw: string[] = [];
  const stream = new Writable({
    write(chunk: Buffer, _encoding, callback) {
      raw.push(chunk.toString());
      lines.push(JSON.parse(chunk.toString()) as Record<string, unknown>);
      callback();
    },
  });
  return { logger: pino({ level: 'debug' }, stream), lines, raw };
}

function request(): OutgoingRequest {
  return {
    method: 'POST',
    url: new URL('https://us-central1-aiplatform.googleapis.com/v1/projects/p/locations/us-central1/publishers/google/models/gemini-2.5-flash:generateContent'),
    headers: { 'content-type': 'application/json' },
    body: Buffer.from('{}'),
  };
}

async function authorize(provider: ReturnType<typeof createGoogleAdcProvider>): Promise<string | undefined> {
  const req = request();
  await provider.apply(req);
  return req.headers.authorization;
}

const servers: FakeTokenEndpoint[] = [];
let dir: string;

beforeEach(() => {
  dir = mkdtempSync(join(tmpdir(), 'tollgate-adc-'));
  // Keep the library away from this machine's gcloud setup and from project-id discovery.
  vi.stubEnv('CLOUDSDK_CONFIG', dir);
  vi.stubEnv('GOOGLE_CLOUD_PROJECT', 'fake-project');
  vi.stubEnv('GOOGLE_APPLICATION_CREDENTIALS', '');
});

afterEach(async () => {
  vi.useRealTimers();
  vi.unstubAllEnvs();
  await Promise.all(servers.splice(0).map((server) => server.close()));
});

describe('metadata server (GKE workload identity, GCE)', () => {
  async function metadata(options?: Parameters<typeof startFakeMetadataServer>[0]) {
    const server = await startFakeMetadataServer(options);
    servers.push(server);
    vi.stubEnv('GCE_METADATA_HOST', server.host);
    gcpMetadata.resetIsAvailableCache();
    return server;
  }

  it('fetches one token for many concurrent requests and reuses it', async () => {
    const server = await metadata();
    const provider = createGoogleAdcProvider({ logger: pino({ level: 'silent' }) });

    const headers = await Promise.all(Array.from({ length: 20 }, () => authorize(provider)));
    expect(new Set(headers)).toEqual(new Set(['Bearer metadata-token-1']));
    expect(await authorize(provider)).toBe('Bearer metadata-token-1');

    const tokenCalls = server.tokenCalls();
    expect(tokenCalls).toHaveLength(1);
    expect(tokenCalls[0]?.headers['metadata-flavor']).toBe('Google');
    expect(new URL(tokenCalls[0]?.path ?? '', 'http://m').searchParams.get('scopes')).toBe('https://www.googleapis.com/auth/cloud-platform');
    expect(provider.problem()).toBeNull();
  });

  it('refreshes shortly before expiry, once for concurrent requests, and not earlier', async () => {
    const server = await metadata({ expiresIn: 3600 });
    vi.useFakeTimers({ toFake: ['Date'] });
    const start = Date.now();
    const provider = createGoogleAdcProvider({ logger: pino({ level: 'silent' }) });
    expect(await authorize(provider)).toBe('Bearer metadata-token-1');

    vi.setSystemTime(start + 50 * 60_000);
    expect(await authorize(provider)).toBe('Bearer metadata-token-1');
    expect(server.tokenCalls()).toHaveLength(1);

    vi.setSystemTime(start + 57 * 60_000);
    const headers = await Promise.all(Array.from({ length: 10 }, () => authorize(provider)));
    expect(new Set(headers)).toEqual(new Set(['Bearer metadata-token-2']));
    expect(server.tokenCalls()).toHaveLength(2);

    vi.setSystemTime(start + 3 * 3600_000);
    expect(await authorize(provider)).toBe('Bearer metadata-token-3');
  });

  it('fails with CredentialError and logs `failed to get ADC token` without any token', async () => {
    const server = await metadata();
    const { logger, lines, raw } = captureLogs();
    const provider = createGoogleAdcProvider({ logger });
    expect(await authorize(provider)).toBe('Bearer metadata-token-1');

    server.setFailing(true);
    vi.useFakeTimers({ toFake: ['Date'] });
    vi.setSystemTime(Date.now() + 2 * 3600_000);
    const failure = await provider.apply(request()).then(
      () => undefined,
      (error: unknown) => error,
    );
    expect(failure).toBeInstanceOf(CredentialError);
    expect(failure).toMatchObject({ code: 'credential_unavailable', kind: 'google-adc' });
    expect((failure as Error).message).toMatch(/^failed to get ADC token: .*403/);
    expect(lines.some((line) => line.msg === 'failed to get ADC token' && line.level === 50)).toBe(true);
    expect(raw.join('')).not.toContain('metadata-token-');
    expect(provider.problem()).toMatch(/^failed to get ADC token/);

    server.setFailing(false);
    expect(await authorize(provider)).toBe('Bearer metadata-token-2');
    expect(provider.problem()).toBeNull();
  });

  it('keeps serving a still-valid token when the early refresh fails', async () => {
    const server = await metadata({ expiresIn: 3600 });
    const { logger, lines } = captureLogs();
    vi.useFakeTimers({ toFake: ['Date'] });
    const start = Date.now();
    const provider = createGoogleAdcProvider({ logger });
    expect(await authorize(provider)).toBe('Bearer metadata-token-1');

    server.setFailing(true);
    vi.setSystemTime(start + 57 * 60_000);
    expect(await authorize(provider)).toBe('Bearer metadata-token-1');
    expect(lines.some((line) => line.level === 40 && String(line.msg).startsWith('failed to refresh ADC token'))).toBe(true);
    expect(provider.problem()).toBeNull();

    vi.setSystemTime(start + 61 * 60_000);
    await expect(provider.apply(request())).rejects.toBeInstanceOf(CredentialError);
    expect(provider.problem()).toMatch(/^failed to get ADC token/);
  });
});

describe('key file named by GOOGLE_APPLICATION_CREDENTIALS', () => {
  it('external_account: exchanges the subject token at STS and impersonates the service account', async () => {
    const sts = await startFakeSts({ subjectToken: 'k8s-projected-sa-token' });
    servers.push(sts);
    const subjectTokenFile = join(dir, 'token');
    writeFileSync(subjectTokenFile, 'k8s-projected-sa-token');
    const credentialsFile = join(dir, 'wif.json');
    writeFileSync(credentialsFile, JSON.stringify(sts.externalAccount({ subjectTokenFile, impersonate: 'llm@fake-project.iam.gserviceaccount.com' })));
    vi.stubEnv('GOOGLE_APPLICATION_CREDENTIALS', credentialsFile);

    const provider = createGoogleAdcProvider({ logger: pino({ level: 'silent' }) });
    const headers = await Promise.all(Array.from({ length: 10 }, () => authorize(provider)));
    expect(new Set(headers)).toEqual(new Set(['Bearer impersonated-token-2-llm@fake-project.iam.gserviceaccount.com']));

    const paths = sts.calls.map((call) => call.path);
    expect(paths).toEqual(['/v1/token', '/v1/projects/-/serviceAccounts/llm@fake-project.iam.gserviceaccount.com:generateAccessToken']);
    expect(sts.calls[1]?.headers.authorization).toBe('Bearer sts-token-1');
  });

  it('external_account without impersonation uses the STS token itself', async () => {
    const sts = await startFakeSts({ subjectToken: 'oidc-token' });
    servers.push(sts);
    const subjectTokenFile = join(dir, 'token');
    writeFileSync(subjectTokenFile, 'oidc-token');
    const credentialsFile = join(dir, 'wif.json');
    writeFileSync(credentialsFile, JSON.stringify(sts.externalAccount({ subjectTokenFile })));
    vi.stubEnv('GOOGLE_APPLICATION_CREDENTIALS', credentialsFile);

    const provider = createGoogleAdcProvider({ logger: pino({ level: 'silent' }) });
    expect(await authorize(provider)).toBe('Bearer sts-token-1');
    expect(await authorize(provider)).toBe('Bearer sts-token-1');
    expect(sts.calls).toHaveLength(1);
  });

  it('external_account with a rejected subject token fails with CredentialError', async () => {
    const sts = await startFakeSts({ subjectToken: 'expected-token' });
    servers.push(sts);
    const subjectTokenFile = join(dir, 'token');
    writeFileSync(subjectTokenFile, 'some-other-token');
    const credentialsFile = join(dir, 'wif.json');
    writeFileSync(credentialsFile, JSON.stringify(sts.externalAccount({ subjectTokenFile })));
    vi.stubEnv('GOOGLE_APPLICATION_CREDENTIALS', credentialsFile);

    const { logger, lines } = captureLogs();
    const provider = createGoogleAdcProvider({ logger });
    await expect(provider.apply(request())).rejects.toThrow(/failed to get ADC token: .*subject token rejected/);
    expect(lines.filter((line) => line.msg === 'failed to get ADC token')).toHaveLength(1);
  });

  it('service_account: signs a JWT assertion with the key and exchanges it for a token', async () => {
    const oauth = await startFakeOAuthServer();
    servers.push(oauth);
    const keyFile = join(dir, 'sa.json');
    writeFileSync(keyFile, JSON.stringify(oauth.keyFile));
    vi.stubEnv('GOOGLE_APPLICATION_CREDENTIALS', keyFile);

    const provider = createGoogleAdcProvider({
      logger: pino({ level: 'silent' }),
      authOptions: { clientOptions: { transporter: oauth.transporter() } },
    });
    const headers = await Promise.all(Array.from({ length: 10 }, () => authorize(provider)));
    expect(new Set(headers)).toEqual(new Set(['Bearer sa-token-1']));
    expect(oauth.calls).toHaveLength(1);
  });

  it('service_account: a key that does not match is refused by the token endpoint', async () => {
    const oauth = await startFakeOAuthServer();
    const other = await startFakeOAuthServer();
    servers.push(oauth, other);
    const keyFile = join(dir, 'sa.json');
    writeFileSync(keyFile, JSON.stringify({ ...oauth.keyFile, private_key: other.keyFile.private_key }));
    vi.stubEnv('GOOGLE_APPLICATION_CREDENTIALS', keyFile);

    const provider = createGoogleAdcProvider({
      logger: pino({ level: 'silent' }),
      authOptions: { clientOptions: { transporter: oauth.transporter() } },
    });
    await expect(provider.apply(request())).rejects.toThrow(/failed to get ADC token: .*Invalid JWT Signature/);
  });
});

describe('credentials file pushed from a Secret', () => {
  it('a rotated file is used by the next call, without a restart', async () => {
    const first = await startFakeSts({ subjectToken: 'pod-token' });
    const second = await startFakeSts({ subjectToken: 'pod-token' });
    servers.push(first, second);
    const subjectTokenFile = join(dir, 'token');
    writeFileSync(subjectTokenFile, 'pod-token');
    const credentialsFile = join(dir, 'google.json');
    writeFileSync(credentialsFile, JSON.stringify(first.externalAccount({ subjectTokenFile })));
    vi.stubEnv('GOOGLE_APPLICATION_CREDENTIALS', '');

    const provider = createGoogleAdcProvider({ logger: pino({ level: 'silent' }), credentialsFile });
    try {
      expect(await authorize(provider)).toBe('Bearer sts-token-1');
      expect(first.calls).toHaveLength(1);

      // Kubernetes swaps a Secret's files by renaming; a plain rewrite is the same event for the watcher.
      const rotated = join(dir, 'google.json.new');
      writeFileSync(rotated, JSON.stringify(second.externalAccount({ subjectTokenFile })));
      renameSync(rotated, credentialsFile);
      await waitFor('a token from the rotated credentials', async () => (await authorize(provider), second.calls.length > 0), 5_000);
      expect(second.calls).toHaveLength(1);
      expect(await authorize(provider)).toBe('Bearer sts-token-1'); // the second STS's first token, cached
      expect(first.calls).toHaveLength(1);
    } finally {
      provider.close();
    }
  });
});

describe('a credentials file that is not a credentials JSON', () => {
  it('fails the call naming the file, without quoting a byte of it in the error or the log', async () => {
    const credentialsFile = join(dir, 'not-google.json');
    const secret = 'sk-live-THIS-IS-SOMEONE-ELSES-KEY';
    writeFileSync(credentialsFile, `${secret}\nsecond line\n`);
    const { logger, raw } = captureLogs();
    const provider = createGoogleAdcProvider({ logger, credentialsFile });
    try {
      const error = await provider.apply(request()).then(
        () => undefined,
        (e: unknown) => e,
      );
      expect(error).toBeInstanceOf(CredentialError);
      expect((error as Error).message).toBe(
        `failed to get ADC token: Google credentials file ${credentialsFile} is not JSON (45 bytes); it must hold a service account key or an external_account config`,
      );
      expect(provider.problem()).not.toContain('sk-live');
      expect(raw.join('')).toContain('failed to get ADC token');
      expect(raw.join('')).not.toContain('sk-live');
    } finally {
      provider.close();
    }
  });
});
