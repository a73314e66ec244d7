import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import pino from 'pino';
import { afterEach, describe, expect, it, vi } from 'vitest';
import type { RuntimeConfig } from '../../../contracts/runtime-config.ts';
import { CredentialError, createCredentialProviders, type CredentialProvider, type OutgoingRequest } from './credential-provider.ts';

const logger = pino({ level: 'silent' });
let created: Record<string, CredentialProvider> | undefined;

function track<T extends Record<string, CredentialProvider>>(providers: T): T {
  created = providers;
  return providers;
}

afterEach(() => {
  for (const provider of Object.values(created ?? {})) provider.close();
  created = undefined;
  vi.unstubAllEnvs();
});

function request(path = '/v1/chat/completions'): OutgoingRequest {
  return { method: 'POST', url: new URL(path, 'http://127.0.0.1:9'), headers: {}, body: Buffer.from('{}') };
}

describe('createCredentialProviders', () => {
  it('builds one provider per credential kind without any credential configured', async () => {
    const providers = track(createCredentialProviders({ credentials: {}, upstreams: {}, logger, env: {} }));
    expect(Object.fromEntries(Object.entries(providers).map(([kind, provider]) => [kind, provider.kind]))).toEqual({
      'google-adc': 'google-adc',
      'openai-api-key': 'openai-api-key',
      'anthropic-api-key': 'anthropic-api-key',
      'aws-sigv4': 'aws-sigv4',
      none: 'none',
    });
    // The local runtime's route takes no credential: nothing is added, and the caller's are stripped elsewhere.
    const local = request();
    await providers.none.apply(local);
    expect(local.headers).toEqual(request().headers);
    await expect(providers['openai-api-key'].apply(request())).rejects.toThrow(
      new CredentialError('openai-api-key', 'no OpenAI API key: set OPENAI_API_KEY or credentials.openaiApiKeyFile'),
    );
    for (const provider of Object.values(providers)) expect(provider.problem()).toBeNull();
  });

  it('takes keys from the given environment and key files from the credentials config', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'tollgate-factory-'));
    writeFileSync(join(dir, 'anthropic'), 'sk-ant-file\n');
    const providers = track(
      createCredentialProviders({
        credentials: { anthropicApiKeyFile: join(dir, 'anthropic') },
        upstreams: {},
        logger,
        env: { OPENAI_API_KEY: 'sk-openai-env', ANTHROPIC_API_KEY: 'ignored-when-file-set' },
      }),
    );
    const openai = request();
    await providers['openai-api-key'].apply(openai);
    expect(openai.headers.authorization).toBe('Bearer sk-openai-env');
    const anthropic = request('/v1/messages');
    await providers['anthropic-api-key'].apply(anthropic);
    expect(anthropic.headers['x-api-key']).toBe('sk-ant-file');
  });

  it('reads the Bedrock region from the live upstream config on every call', async () => {
    let upstreams: RuntimeConfig['upstreams'] = {};
    const providers = track(
      createCredentialProviders({
        credentials: {},
        upstreams: () => upstreams,
        logger,
        env: {},
      }),
    );
    await expect(providers['aws-sigv4'].apply(request('/model/m/invoke'))).rejects.toThrow(/^no AWS region/);

    upstreams = { 'gamma-cloudb': { region: 'ap-northeast-1' } };
    // The AWS chain reads its variables from process.env, as the SDK does.
    vi.stubEnv('AWS_PROFILE', undefined);
    vi.stubEnv('AWS_ACCESS_KEY_ID', 'AKIDEXAMPLE');
    vi.stubEnv('AWS_SECRET_ACCESS_KEY', 'secret');
    const req = request('/model/m/invoke');
    await providers['aws-sigv4'].apply(req);
    expect(req.headers.authorization).toContain('Credential=AKIDEXAMPLE/');
    expect(req.headers.authorization).toContain('/ap-northeast-1/bedrock/aws4_request');
  });
});

describe('credential files pushed from Secrets', () => {
  it('googleCredentialsFile is used instead of ambient ADC (an external_account config reaching a fake STS)', async () => {
    const { startFakeSts } = await import('../../../test/fakes/google-token-endpoints.ts');
    const sts = await startFakeSts({ subjectToken: 'pod-oidc-token' });
    try {
      const dir = mkdtempSync(join(tmpdir(), 'gcp-creds-'));
      writeFileSync(join(dir, 'token'), 'pod-oidc-token');
      const file = join(dir, 'google.json');
      writeFileSync(file, JSON.stringify(sts.externalAccount({ subjectTokenFile: join(dir, 'token') })));
      vi.stubEnv('GCE_METADATA_HOST', '127.0.0.1:9'); // ambient ADC would fail here
      const providers = track(createCredentialProviders({ credentials: { googleCredentialsFile: file }, upstreams: {}, logger, env: {} }));
      const req = request();
      await providers['google-adc'].apply(req);
      expect(req.headers.authorization).toBe('Bearer sts-token-1');
    } finally {
      await sts.close();
    }
  });

  it('AWS key files sign Bedrock calls instead of the default chain', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'aws-creds-'));
    writeFileSync(join(dir, 'id'), 'AKIDFROMSECRET');
    writeFileSync(join(dir, 'secret'), 'from-secret');
    const upstreams: RuntimeConfig['upstreams'] = { 'gamma-cloudb': { region: 'eu-west-1' } };
    const providers = track(
      createCredentialProviders({
        credentials: { awsAccessKeyIdFile: join(dir, 'id'), awsSecretAccessKeyFile: join(dir, 'secret') },
        upstreams,
        logger,
        env: {},
      }),
    );
    const req = request('/model/anthropic.claude-sonnet-4-20250514-v1:0/invoke');
    await providers['aws-sigv4'].apply(req);
    expect(req.headers.authorization).toMatch(/^AWS4-HMAC-SHA256 Credential=AKIDFROMSECRET\/\d{8}\/eu-west-1\/bedrock\/aws4_request/);
  });
});
