import { mkdirSync, mkdtempSync, renameSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import pino from 'pino';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { createApiKeyProvider, type ApiKeyOptions } from './api-key.ts';
import { CredentialError } from './credential-error.ts';
import type { CredentialProvider, OutgoingRequest } from './credential-provider.ts';
import { waitFor } from '../../../test/support/wait-for.ts';

const logger = pino({ level: 'silent' });
let dir: string;
const providers: CredentialProvider[] = [];

beforeEach(() => {
  dir = mkdtempSync(join(tmpdir(), 'tollgate-keys-'));
});

afterEach(() => {
  for (const provider of providers.splice(0)) provider.close();
  rmSync(dir, { recursive: true, force: true });
});

function provider(options: Omit<ApiKeyOptions, 'logger'>): CredentialProvider {
  const created = createApiKeyProvider({ logger, ...options });
  providers.push(created);
  return created;
}

function request(headers: Record<string, string> = {}): OutgoingRequest {
  return { method: 'POST', url: new URL('https://api.example.test/v1/x'), headers: { ...headers }, body: null };
}

async function headersAfterApply(p: CredentialProvider, headers: Record<string, string> = {}): Promise<Record<string, string>> {
  const req = request(headers);
  await p.apply(req);
  return req.headers;
}

describe('OpenAI', () => {
  it('sends the key from OPENAI_API_KEY as a bearer token, replacing any caller value', async () => {
    const p = provider({ kind: 'openai-api-key', env: { OPENAI_API_KEY: 'sk-env-key' } });
    const headers = await headersAfterApply(p, { Authorization: 'Bearer caller-key', 'content-type': 'application/json' });
    expect(headers).toEqual({ authorization: 'Bearer sk-env-key', 'content-type': 'application/json' });
  });

  it('without a key fails with a CredentialError naming both ways to provide one', async () => {
    const p = provider({ kind: 'openai-api-key', env: {} });
    const failure = await p.apply(request()).catch((error: unknown) => error);
    expect(failure).toBeInstanceOf(CredentialError);
    expect(failure).toMatchObject({
      code: 'credential_unavailable',
      kind: 'openai-api-key',
      message: 'no OpenAI API key: set OPENAI_API_KEY or credentials.openaiApiKeyFile',
    });
    // Not configuring a provider is not a health problem: the proxy may never use it.
    expect(p.problem()).toBeNull();
  });

  it('reads a mounted key file, trimmed, in preference to the environment', async () => {
    const file = join(dir, 'openai-key');
    writeFileSync(file, '  sk-from-file\n');
    const p = provider({ kind: 'openai-api-key', env: { OPENAI_API_KEY: 'sk-env-key' }, file });
    expect((await headersAfterApply(p)).authorization).toBe('Bearer sk-from-file');
    expect(p.problem()).toBeNull();
  });

  it('picks up a replaced key file', async () => {
    const file = join(dir, 'openai-key');
    writeFileSync(file, 'sk-first');
    const p = provider({ kind: 'openai-api-key', env: {}, file });
    expect((await headersAfterApply(p)).authorization).toBe('Bearer sk-first');

    writeFileSync(join(dir, 'openai-key.tmp'), 'sk-second\n');
    renameSync(join(dir, 'openai-key.tmp'), file);
    await waitFor('the rotated key', async () => (await headersAfterApply(p)).authorization === 'Bearer sk-second', 10_000);
  });

  it('a configured but missing file is a CredentialError and a health problem, until the file appears', async () => {
    const file = join(dir, 'openai-key');
    const p = provider({ kind: 'openai-api-key', env: { OPENAI_API_KEY: 'sk-env-key' }, file });
    await expect(p.apply(request())).rejects.toThrow(`OpenAI API key file ${file} does not exist`);
    expect(p.problem()).toBe(`OpenAI API key file ${file} does not exist`);

    writeFileSync(file, 'sk-late');
    await waitFor('the key file to be read', async () => p.problem() === null, 10_000);
    expect((await headersAfterApply(p)).authorization).toBe('Bearer sk-late');
  });

  it('an empty key file is reported as empty', async () => {
    const file = join(dir, 'openai-key');
    writeFileSync(file, '\n  \n');
    const p = provider({ kind: 'openai-api-key', env: {}, file });
    await expect(p.apply(request())).rejects.toThrow(`OpenAI API key file ${file} is empty`);
  });

  it('finds a file whose directory is only mounted later, by polling', async () => {
    const mount = join(dir, 'not-yet-mounted');
    const file = join(mount, 'api-key');
    const p = provider({ kind: 'openai-api-key', env: {}, file, pollIntervalMs: 25 });
    await expect(p.apply(request())).rejects.toBeInstanceOf(CredentialError);

    mkdirSync(mount);
    writeFileSync(file, 'sk-mounted');
    await waitFor('the polled key file', async () => p.problem() === null, 10_000);
    expect((await headersAfterApply(p)).authorization).toBe('Bearer sk-mounted');
  });
});

describe('Anthropic', () => {
  it('sends x-api-key and the default anthropic-version', async () => {
    const p = provider({ kind: 'anthropic-api-key', env: { ANTHROPIC_API_KEY: 'sk-ant-env' } });
    const headers = await headersAfterApply(p, { 'X-Api-Key': 'caller-key' });
    expect(headers).toEqual({ 'x-api-key': 'sk-ant-env', 'anthropic-version': '2023-06-01' });
  });

  it("keeps the caller's anthropic-version", async () => {
    const p = provider({ kind: 'anthropic-api-key', env: { ANTHROPIC_API_KEY: 'sk-ant-env' } });
    const headers = await headersAfterApply(p, { 'Anthropic-Version': '2024-01-01', 'anthropic-beta': 'x' });
    expect(headers).toEqual({ 'Anthropic-Version': '2024-01-01', 'anthropic-beta': 'x', 'x-api-key': 'sk-ant-env' });
  });

  it('without a key names ANTHROPIC_API_KEY and credentials.anthropicApiKeyFile', async () => {
    const p = provider({ kind: 'anthropic-api-key', env: {} });
    await expect(p.apply(request())).rejects.toThrow('no Anthropic API key: set ANTHROPIC_API_KEY or credentials.anthropicApiKeyFile');
  });

  it('follows a Kubernetes Secret update (the ..data symlink swapped to a new directory)', async () => {
    // The layout kubelet writes: key -> ..data/key, ..data -> ..<timestamp>/
    const mount = join(dir, 'secret');
    mkdirSync(join(mount, '..2025_01_01_00_00_00.1'), { recursive: true });
    writeFileSync(join(mount, '..2025_01_01_00_00_00.1', 'api-key'), 'sk-ant-old\n');
    symlinkSync('..2025_01_01_00_00_00.1', join(mount, '..data'));
    symlinkSync('..data/api-key', join(mount, 'api-key'));

    const p = provider({ kind: 'anthropic-api-key', env: {}, file: join(mount, 'api-key') });
    expect((await headersAfterApply(p))['x-api-key']).toBe('sk-ant-old');

    mkdirSync(join(mount, '..2025_02_01_00_00_00.2'));
    writeFileSync(join(mount, '..2025_02_01_00_00_00.2', 'api-key'), 'sk-ant-new\n');
    symlinkSync('..2025_02_01_00_00_00.2', join(mount, '..data_tmp'));
    renameSync(join(mount, '..data_tmp'), join(mount, '..data'));
    rmSync(join(mount, '..2025_01_01_00_00_00.1'), { recursive: true });

    await waitFor('the swapped Secret', async () => (await headersAfterApply(p))['x-api-key'] === 'sk-ant-new', 10_000);
    expect(p.problem()).toBeNull();
  });
});
