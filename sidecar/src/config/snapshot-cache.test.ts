import { mkdtempSync, readFileSync, rmSync, statSync, writeFileSync, existsSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import pino from 'pino';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { SnapshotCache, SnapshotRejectedError } from './snapshot-cache.ts';

const logger = pino({ level: 'silent' });
const config = (input: number) => JSON.stringify({ pricing: { models: [{ provider: 'openai', model: 'gpt-4o', input_per_million: input, output_per_million: 10 }] } });

describe('SnapshotCache', () => {
  let dir: string;
  beforeEach(() => {
    dir = mkdtempSync(join(tmpdir(), 'snapshot-cache-'));
  });
  afterEach(() => rmSync(dir, { recursive: true, force: true }));

  it('writes credentials to 0600 files, points the patch at them, and reloads the committed snapshot', async () => {
    const cache = new SnapshotCache(dir, logger);
    const prepared = await cache.prepare({ version: 'v1', source: 'ns/default', configJson: config(1), credentials: { openaiApiKey: Buffer.from('sk-1') } });
    const keyFile = join(dir, 'credentials', 'openai-api-key');
    expect(prepared.patch.credentials).toEqual({ openaiApiKeyFile: keyFile });
    expect(readFileSync(keyFile, 'utf8')).toBe('sk-1');
    expect(statSync(keyFile).mode & 0o777).toBe(0o600);
    expect(existsSync(cache.snapshotFile)).toBe(false); // not last-good until committed
    await cache.commit(prepared);
    expect(statSync(cache.snapshotFile).mode & 0o777).toBe(0o600);
    expect(readFileSync(cache.snapshotFile, 'utf8')).not.toContain('sk-1');

    const loaded = await new SnapshotCache(dir, logger).load();
    expect(loaded).toMatchObject({ version: 'v1', source: 'ns/default', credentialNames: ['openaiApiKey'] });
    expect(loaded?.patch.pricing?.models[0]?.input_per_million).toBe(1);
    expect(loaded?.patch.credentials?.openaiApiKeyFile).toBe(keyFile);
  });

  it('points the Google and AWS credential settings at the files of their pushed Secrets', async () => {
    const cache = new SnapshotCache(dir, logger);
    const prepared = await cache.prepare({
      version: 'v1',
      source: 'ns/default',
      configJson: '{}',
      credentials: { googleServiceAccount: Buffer.from('{"type":"service_account"}'), awsAccessKeyId: Buffer.from('AKID'), awsSecretAccessKey: Buffer.from('s3cr3t') },
    });
    const creds = prepared.patch.credentials!;
    expect(readFileSync(creds.googleCredentialsFile!, 'utf8')).toBe('{"type":"service_account"}');
    expect(readFileSync(creds.awsAccessKeyIdFile!, 'utf8')).toBe('AKID');
    expect(readFileSync(creds.awsSecretAccessKeyFile!, 'utf8')).toBe('s3cr3t');
    expect(creds.awsSessionTokenFile).toBeUndefined();
  });

  it('points the span store at the key file of its pushed Secret', async () => {
    const cache = new SnapshotCache(dir, logger);
    const prepared = await cache.prepare({
      version: 'v1',
      source: 'ns/default',
      configJson: JSON.stringify({ storage: { kind: 'bigquery', bigquery: { dataset: 'llm' } } }),
      credentials: { 'storage.bigquery.credentials': Buffer.from('{"type":"service_account","sa":"warehouse"}') },
    });
    const bigquery = prepared.patch.storage!.bigquery!;
    expect(bigquery.dataset).toBe('llm');
    expect(readFileSync(bigquery.credentialsFile!, 'utf8')).toBe('{"type":"service_account","sa":"warehouse"}');
    expect(prepared.patch.storage!.firestore).toBeUndefined();
  });

  it('treats credential names that are not its own (inherited object keys, paths) as unknown and applies the rest', async () => {
    const cache = new SnapshotCache(dir, logger);
    const prepared = await cache.prepare({
      version: 'v1',
      source: 'ns/default',
      configJson: config(1),
      credentials: { toString: Buffer.from('x'), constructor: Buffer.from('y'), '../escape': Buffer.from('z'), openaiApiKey: Buffer.from('sk-1') },
    });
    expect(prepared.credentialNames).toEqual(['openaiApiKey']);
    expect(cache.credentialFile('toString')).toBeUndefined();
    expect(cache.credentialFile('hasOwnProperty')).toBeUndefined();
    expect(existsSync(join(dir, 'escape'))).toBe(false);
  });

  it('rejects invalid config with the validator message and leaves the last good snapshot alone', async () => {
    const cache = new SnapshotCache(dir, logger);
    await cache.commit(await cache.prepare({ version: 'v1', source: '', configJson: config(1), credentials: {} }));
    await expect(cache.prepare({ version: 'v2', source: '', configJson: config(-1), credentials: {} })).rejects.toThrow(SnapshotRejectedError);
    await expect(cache.prepare({ version: 'v2', source: '', configJson: config(-1), credentials: {} })).rejects.toThrow(/pricing\.models\[0\]/);
    await expect(cache.prepare({ version: 'v3', source: '', configJson: '{not json', credentials: {} })).rejects.toThrow(/config_json is not valid JSON/);
    await expect(cache.prepare({ version: 'v4', source: '', configJson: '{"prices":{}}', credentials: {} })).rejects.toThrow(/prices is not a known field/);
    expect((await cache.load())?.version).toBe('v1');
  });

  it('removes credential files a newer snapshot no longer carries', async () => {
    const cache = new SnapshotCache(dir, logger);
    await cache.commit(await cache.prepare({ version: 'v1', source: '', configJson: '{}', credentials: { anthropicApiKey: Buffer.from('a') } }));
    expect(existsSync(join(dir, 'credentials', 'anthropic-api-key'))).toBe(true);
    const v2 = await cache.prepare({ version: 'v2', source: '', configJson: '{}', credentials: {} });
    expect(v2.patch.credentials).toBeUndefined();
    await cache.commit(v2);
    expect(existsSync(join(dir, 'credentials', 'anthropic-api-key'))).toBe(false);
  });

  it('ignores a cached snapshot whose credential files are gone or whose file is corrupt', async () => {
    const cache = new SnapshotCache(dir, logger);
    await cache.commit(await cache.prepare({ version: 'v1', source: '', configJson: '{}', credentials: { openaiApiKey: Buffer.from('k') } }));
    rmSync(join(dir, 'credentials'), { recursive: true });
    expect(await cache.load()).toBeUndefined();
    writeFileSync(cache.snapshotFile, '{');
    expect(await cache.load()).toBeUndefined();
  });

  it('refuses empty credentials', async () => {
    const cache = new SnapshotCache(dir, logger);
    await expect(cache.prepare({ version: 'v1', source: '', configJson: '{}', credentials: { openaiApiKey: Buffer.alloc(0) } })).rejects.toThrow(
      /credential openaiApiKey must be 1 to/,
    );
  });
});
